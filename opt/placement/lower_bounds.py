"""Cheap lower bounds on the optimal P1 makespan, valid by construction (problems.md §0: heuristics
report "the strongest lower bound they can cheaply certify").

- critical path: longest DAG path with each task at its cheapest legal duration, communication
  taken as 0 (tasks could share a device) — no schedule is shorter;
- average work: the sum of cheapest durations spread over all devices;
- first weight: a task with a block cannot start before the fastest load of that block onto any
  legal device of the task, so the makespan ≥ that load + the task's tail;
- device-aware heads and tails (``device_heads_tails``): the same longest paths per (task,
  device), where each neighbour takes its best device and pays the edge's transfer when that
  device differs — forced transfers (a task legal only on the NPU feeding one legal only on a
  PIM) then count.
"""

from __future__ import annotations

import itertools

import numpy as np

from opt.placement.bound_options import jit_kernels
from opt.placement.instance import PlacementInstance

BIG = np.int64(2) ** 60  # "infinite" head/tail of an illegal (task, device) pair


def heads_tails(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """head[t]: earliest start of t from the DAG and first-weight availability with cheapest
    durations (excl. t); tail[t]: longest cheapest path from t to a sink (incl. t). The
    first-weight release is the least over t's legal devices of :func:`load_releases`."""
    big = np.iinfo(np.int64).max
    dmin = np.where(inst.cost >= 0, inst.cost, big).min(axis=1)
    release = np.where(inst.cost >= 0, load_releases(inst), big).min(axis=1)
    release[release >= BIG] = big  # the block loads on none of the task's devices
    p_off, p_idx = inst.predecessors
    s_off, s_idx = inst.successors
    jit = jit_kernels(inst.n_tasks)
    if jit is not None and _no_overflow(release, dmin):
        # writable int64 copies: one compiled signature (read-only arrays type differently)
        return jit.longest_paths(np.array(inst.topological_order, dtype=np.int64),
                                 np.array(p_off, dtype=np.int64), inst.edge_src[p_idx],
                                 np.array(s_off, dtype=np.int64), inst.edge_dst[s_idx],
                                 release, dmin)
    order = inst.topological_order.tolist()
    # plain Python lists: the graph is nearly a chain (one task per level), so the passes
    # cannot be batched by level, and list indexing is ~10x cheaper than numpy per element
    head = release.tolist()
    dm = dmin.tolist()
    tail = list(dm)
    po, preds = p_off.tolist(), inst.edge_src[p_idx].tolist()
    so, succs = s_off.tolist(), inst.edge_dst[s_idx].tolist()
    for t in order:
        best = head[t]
        for q in preds[po[t]:po[t + 1]]:
            v = head[q] + dm[q]
            if v > best:
                best = v
        head[t] = best
    for t in reversed(order):
        a, b = so[t], so[t + 1]
        if a < b:
            tail[t] = dm[t] + max(tail[u] for u in succs[a:b])
    return np.array(head, dtype=np.int64), np.array(tail, dtype=np.int64)


def load_releases(inst: PlacementInstance) -> np.ndarray:
    """int64 [n, D]: the earliest start (ticks) of each task on each device that its block's
    load allows: 0 without a block, ``BIG`` where the block cannot be loaded; else the load's
    duration, and under ``load_timing: overlap`` max(0, load − the task's duration there) —
    the task a load serves starts no earlier than the load's end minus its own duration (the
    load ends by the task's end), every other user no earlier than a load's end
    (docs/lower_bounds.md "Bounds under overlap")."""
    out = np.zeros((inst.n_tasks, inst.n_devices), dtype=np.int64)
    has = np.flatnonzero(inst.task_block >= 0)
    if len(has):
        ld = inst.load_duration[inst.task_block[has]]
        if inst.load_timing == "overlap":
            ld = np.where(ld >= 0, np.maximum(ld - np.maximum(inst.cost[has], 0), 0), ld)
        out[has] = np.where(ld >= 0, ld, BIG)
    return out


def _no_overflow(release: np.ndarray, dmin: np.ndarray) -> bool:
    """Every path sum of ``dmin`` after a release fits int64 (the compiled walk's int64 then
    equals the Python walk's integers; a task without a legal device fails here)."""
    return float(release.max(initial=0)) + float(dmin.sum(dtype=np.float64)) < 2.0 ** 61


def device_heads_tails(inst: PlacementInstance, max_assignments: int = 0
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per (task, device) longest-path bounds that ignore resources but not placement.

    ``head[t, d]``: earliest start of t if it runs on d — the load of t's block onto d
    (loads start at 0 or later) and, per incoming edge, the best over the predecessor's legal
    devices d' of its head + duration + the edge's transfer d' → d (0 when d' = d).
    ``tail[t, d]``: least time from t's start on d to the end of the schedule — t's duration
    plus, per outgoing edge, the best over the successor's legal devices of transfer + tail.

    With ``max_assignments`` > 0, a task with several distinct predecessors (successors)
    whose device choices number at most that many also gets the minimum over those choices of
    the neighbours sharing a device running one at a time (a one-machine problem with release
    and delivery times, solved exactly for up to ``_EXACT_JOBS`` jobs): three projections
    fed by one norm serialise if they share a device and pay transfers if they do not.

    Illegal (task, device) pairs hold ``BIG``; every schedule that runs t on d has
    start ≥ head[t, d] and makespan ≥ start + tail[t, d]. Loads enter as releases
    (:func:`load_releases`)."""
    legal = inst.cost >= 0
    cost = np.where(legal, inst.cost, 0)
    head = load_releases(inst)
    head[~legal] = BIG
    tail = np.where(legal, cost, BIG)
    tr = inst.links.transfer_durations(inst.edge_bytes)  # [m, d, d]
    order = inst.topological_order
    p_off, p_idx = inst.predecessors
    s_off, s_idx = inst.successors
    src, dst = inst.edge_src, inst.edge_dst
    devs = [np.flatnonzero(row).tolist() for row in legal]
    for t in order.tolist():
        es = p_idx[p_off[t]:p_off[t + 1]]
        if len(es):
            u = src[es]
            fin = np.where(legal[u], head[u] + cost[u], BIG)  # [k, d']
            arrive = (fin[:, :, None] + tr[es]).min(axis=1)  # [k, d]
            head[t] = np.maximum(head[t], arrive.max(axis=0))
            if max_assignments:
                # jobs: predecessor u on d' — release head, duration, then its transfer to d
                for d in devs[t]:
                    def job(k: int, d1: int, d: int = d) -> tuple[int, int, int]:
                        uu = int(u[k])
                        return int(head[uu, d1]), int(cost[uu, d1]), int(tr[es[k], d1, d])
                    val = _shared_devices(u, devs, job, max_assignments)
                    if val > head[t, d]:
                        head[t, d] = val
            head[t, ~legal[t]] = BIG
    for t in order[::-1].tolist():
        es = s_idx[s_off[t]:s_off[t + 1]]
        if len(es):
            v = dst[es]
            rest = np.where(legal[v], tail[v], BIG)  # [k, d']
            after = (tr[es] + rest[:, None, :]).min(axis=2)  # [k, d]
            tail[t] = np.where(legal[t], cost[t] + after.max(axis=0), BIG)
            if max_assignments:
                # jobs: successor v on d' — released by the transfer d → d', its duration, then
                # the rest of its tail
                for d in devs[t]:
                    def job(k: int, d1: int, d: int = d) -> tuple[int, int, int]:
                        vv = int(v[k])
                        return (int(tr[es[k], d, d1]), int(cost[vv, d1]),
                                int(tail[vv, d1] - cost[vv, d1]))
                    val = int(cost[t, d]) + _shared_devices(v, devs, job, max_assignments)
                    if val > tail[t, d]:
                        tail[t, d] = val
    return head, tail


_EXACT_JOBS = 4  # one-machine problems up to this many jobs are solved by enumeration


def _shared_devices(nbr: np.ndarray, devs: list[list[int]], job, max_assignments: int) -> int:
    """min over device choices of the distinct neighbours ``nbr`` (each among its legal
    devices) of max over devices of the one-machine optimum of the neighbours placed there.

    ``job(k, d')`` gives (release, duration, delivery) of the k-th entry of ``nbr`` on d';
    entries naming the same task (parallel edges) are merged: one job, the latest release
    and the longest delivery. Returns 0 when there are fewer than two distinct neighbours or
    more than ``max_assignments`` choices."""
    groups: dict[int, list[int]] = {}
    for k, x in enumerate(nbr.tolist()):
        groups.setdefault(x, []).append(k)
    if len(groups) < 2:
        return 0
    keys = list(groups)
    n_choices = 1
    for x in keys:
        n_choices *= len(devs[x])
        if n_choices > max_assignments:
            return 0
    options = []
    for x in keys:
        per = []
        for d1 in devs[x]:
            js = [job(k, d1) for k in groups[x]]
            per.append((d1, (max(j[0] for j in js), js[0][1], max(j[2] for j in js))))
        options.append(per)
    best = BIG
    for choice in itertools.product(*options):
        by_dev: dict[int, list[tuple[int, int, int]]] = {}
        for d1, jb in choice:
            by_dev.setdefault(d1, []).append(jb)
        val = max(_one_machine(jobs) for jobs in by_dev.values())
        if val < best:
            best = val
    return int(best)


def _one_machine(jobs: list[tuple[int, int, int]]) -> int:
    """Least max(completion + delivery) of (release, duration, delivery) jobs on one machine:
    exact up to ``_EXACT_JOBS`` jobs, else the classic bounds (each job alone; earliest
    release + all work + least delivery)."""
    if len(jobs) == 1:
        r, p, q = jobs[0]
        return r + p + q
    if len(jobs) <= _EXACT_JOBS:
        best = BIG
        for perm in itertools.permutations(jobs):
            clock = end = 0
            for r, p, q in perm:
                clock = max(clock, r) + p
                end = max(end, clock + q)
            best = min(best, end)
        return int(best)
    return max(max(r + p + q for r, p, q in jobs),
               min(r for r, _, _ in jobs) + sum(p for _, p, _ in jobs) + min(q for _, _, q in jobs))


def placement_lower_bound(inst: PlacementInstance) -> int:
    """max(head + tail over tasks, ceil(total cheapest work / devices))."""
    head, tail = heads_tails(inst)
    dmin = np.where(inst.cost >= 0, inst.cost, np.iinfo(np.int64).max).min(axis=1)
    path = int((head + tail).max()) if inst.n_tasks else 0
    work = -(-int(dmin.sum()) // inst.n_devices)
    return max(path, work)
