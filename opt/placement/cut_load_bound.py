"""The ``cut_loads`` component of the certified P1 lower bound
(:mod:`opt.placement.certified_bounds`; docs/lower_bounds.md "Exposed first loads on the cut
chain"): under ``load_timing: at_use`` and ``overlap`` a load cannot be prefetched, so the first
load of a block onto a device lies inside the slot of the task it serves. Durations in ticks.

The cuts c_1 < c_2 < … (tasks comparable with every other task, :func:`cut_positions`) run one
after the other: ``dispatch(c_j) ≥ end(c_{j−1})``. So
``makespan ≥ Σ_j (dispatch(c_j) − end(c_{j−1})) + (end(c_j) − dispatch(c_j))``. The first term
is bounded from below per pair of cut devices by a contention-free longest path through the
tasks between the two cuts (each at its duration on its best device); the second is at least
``p(c_j, σ(c_j))`` plus, when c_j is served by a load of its block b onto σ(c_j) of ``t``
ticks, ``max(0, t − p)`` (overlap) or ``t`` (at_use). For a block whose users are all cuts
the first load onto a device d serves the first user on d in cut order; its exposure is
charged to the users as integer weights μ whose suffix sums never exceed the exposure of
the suffix's first user, so the weights the schedule's users on d carry never exceed what the
served one pays. A min-plus programme over the cut devices adds everything up.
Capacities are not used (evictions only add loads), so the bound holds with any.
"""

from __future__ import annotations

import itertools

import numpy as np

from opt.placement.chain_bound import cut_positions
from opt.placement.instance import PlacementInstance

INF = np.int64(1) << np.int64(60)


def min_loads(inst: PlacementInstance) -> np.ndarray:
    """int64 [blocks, devices]: the load of each block onto each device in its format (P1:
    ``load_duration``); for a layout instance (P2, the format is a decision) the shortest
    over every format; −1 where none loads."""
    if inst.problem == "placement":
        return np.asarray(inst.load_duration, dtype=np.int64)
    nb, nd = len(inst.block_ids), inst.n_devices
    out = np.full((nb, nd), -1, dtype=np.int64)
    for a in inst.block_load.values():
        a = np.asarray(a, dtype=np.int64)
        ok = a >= 0
        out = np.where(ok & ((out < 0) | (a < out)), a, out)
    return out


def exposure_weights(inst: PlacementInstance, order: np.ndarray, cutpos: np.ndarray,
                     rule: str = "spread") -> np.ndarray:
    """int64 [tasks, devices] μ, what a task on a device is charged beyond its duration.

    Segment j holds the tasks after cut c_{j−1} up to c_j (in ``order``, the cuts at
    positions ``cutpos``); a user of block b in a later segment is dispatched after every
    task of an earlier one ends. For b, a device d and the users of b legal on d in segment
    order u_1, u_2, … with exposures e_i (``max(0, t − p(u_i, d))`` under ``overlap``, ``t``
    under ``at_use``, t the load of b onto d, :func:`min_loads`):

    - ``first`` (every block): when u_1 is alone in its segment among them, ``μ_1 = e_1``
      (u_1 on d is the first user of b on d, so the first load of b onto d serves it);
    - ``spread`` (blocks whose users are all cuts; others take ``first``):
      ``μ_i = ⌊min_{k ≤ i} e_k / n⌋`` over the n users, so every suffix sum from i is at
      most e_i;
    - ``mixed``: ``first`` where d is a cheapest device of b's first user, ``spread``
      elsewhere."""
    n, nd = inst.n_tasks, inst.n_devices
    mu = np.zeros((n, nd), dtype=np.int64)
    nb = len(inst.block_ids)
    if nb == 0 or inst.load_timing not in ("at_use", "overlap"):
        return mu
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    seg = np.searchsorted(cutpos, pos, side="left")  # a cut closes its own segment
    users = np.flatnonzero(inst.task_block >= 0)
    is_cut = np.zeros(n, dtype=bool)
    is_cut[order[cutpos]] = True
    all_cut = np.ones(nb, dtype=bool)
    np.logical_and.at(all_cut, inst.task_block[users], is_cut[users])
    loads = min_loads(inst)
    cost = np.where(inst.cost >= 0, inst.cost, INF)
    for b in np.unique(inst.task_block[users]).tolist():
        us = users[inst.task_block[users] == b]
        us = us[np.argsort(pos[us], kind="stable")]
        for d in range(nd):
            t = int(loads[b, d])
            u = us[inst.cost[us, d] >= 0]
            if t <= 0 or not len(u):
                continue
            p = inst.cost[u, d]
            e = np.maximum(t - p, 0) if inst.load_timing == "overlap" else np.full(len(u), t)
            first = not all_cut[b] or rule == "first" or (
                rule == "mixed" and inst.cost[us[0], d] == cost[us[0]].min())
            if first:  # the whole exposure on the first user legal on d, alone in its segment
                if len(u) == 1 or seg[u[0]] < seg[u[1]]:
                    mu[u[0], d] = e[0]
            else:  # "spread" (cuts only: one user per segment)
                mu[u, d] = np.minimum.accumulate(e) // len(u)
    return mu


def first_use_groups(inst: PlacementInstance, order: np.ndarray, cutpos: np.ndarray
                     ) -> dict[int, list[tuple[np.ndarray, int, int]]]:
    """Segment → [(users, d, e)]: for a block b and device d whose earliest segment with users
    of b legal on d holds several of them, none a cut, those users and their least exposure e
    on d. If
    the schedule runs any of them on d, the first load of b onto d serves one of them (users
    in later segments are dispatched after they end), whose slot on d is ≥ p + e."""
    out: dict[int, list[tuple[np.ndarray, int, int]]] = {}
    if not len(inst.block_ids) or inst.load_timing not in ("at_use", "overlap"):
        return out
    n = inst.n_tasks
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    seg = np.searchsorted(cutpos, pos, side="left")
    users = np.flatnonzero(inst.task_block >= 0)
    is_cut = np.zeros(n, dtype=bool)
    is_cut[order[cutpos]] = True
    loads = min_loads(inst)
    for b in np.unique(inst.task_block[users]).tolist():
        us = users[inst.task_block[users] == b]
        for d in range(inst.n_devices):
            t = int(loads[b, d])
            u = us[inst.cost[us, d] >= 0]
            if t <= 0 or len(u) < 2:
                continue
            first = u[seg[u] == seg[u].min()]
            if len(first) < 2 or is_cut[first].any():  # a cut's slot is not in the gap
                continue
            p = inst.cost[first, d]
            e = int((np.maximum(t - p, 0) if inst.load_timing == "overlap"
                     else np.full(len(first), t)).min())
            if e > 0:
                out.setdefault(int(seg[first[0]]), []).append((first, d, e))
    return out


RULES = ("spread", "first", "mixed")


def cut_load_bound(inst: PlacementInstance, rule: str = "spread",
                   trace: list[tuple[int, int]] | None = None) -> tuple[int, dict[str, int]]:
    """(bound, detail): the min-plus value of the module docstring; (0, …) when the instance
    has no cut or loads may be prefetched (``load_timing: prefetch``). ``trace``, when given,
    receives (cut task, least value over its devices) for every cut, in order: a lower bound
    on the cut's end (docs/lower_bounds.md, the per-step diagnosis)."""
    return cut_load_bounds(inst, (rule,), trace)[rule]


def cut_load_bounds(inst: PlacementInstance, rules: tuple[str, ...] = RULES,
                    trace: list[tuple[int, int]] | None = None, max_assignments: int = 256
                    ) -> dict[str, tuple[int, dict[str, int]]]:
    """:func:`cut_load_bound` for each rule in one pass (the rules differ only in the
    charges of cut tasks, so the paths between cuts are shared); ``trace`` for the first.

    In a segment whose non-cut tasks carry charges (first uses), the devices of those tasks
    are enumerated (at most ``max_assignments`` assignments): each assignment's value is the
    larger of its longest path and, per device, the sum of the charged tasks' slots there
    (they lie between end(c_{j−1}) and dispatch(c_j) and do not overlap), and the segment
    takes the least value over the assignments when it is above the path bound."""
    if inst.n_tasks == 0 or inst.load_timing not in ("at_use", "overlap"):
        return {r: (0, {"cuts": 0}) for r in rules}
    order, cutpos = cut_positions(inst)
    cuts = order[cutpos]
    if not len(cuts):
        return {r: (0, {"cuts": 0}) for r in rules}
    mus = np.stack([exposure_weights(inst, order, cutpos, r) for r in rules])  # [R, n, d]
    mu = mus[0]  # non-cut tasks carry the same (first-use) charges under every rule
    nd = inst.n_devices
    cost = np.where(inst.cost >= 0, inst.cost, INF).astype(np.int64)
    slot = np.minimum(cost + mu, INF)  # a non-cut task's least time on each device
    tr = inst.links.transfer_durations(inst.edge_bytes).astype(np.int64)  # [m, d, d]
    pstart, pred_e = inst.predecessors
    src = inst.edge_src

    def gap(tasks: list[int], cut: int, prev: int, rows: int, slots: dict[int, np.ndarray]
            ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """([p, e] lower bound on dispatch(cut) − end(prev) with prev on p and cut on e,
        the tasks' earliest ends [p, d]); cut −1: no cut (the tail), prev −1: none."""
        ends: dict[int, np.ndarray] = {}
        out = np.zeros((rows, nd), dtype=np.int64)
        for t in tasks + ([cut] if cut >= 0 else []):
            arr = np.zeros((rows, nd), dtype=np.int64)
            for k in range(int(pstart[t]), int(pstart[t + 1])):
                e = int(pred_e[k])
                u = int(src[e])
                if u == prev:
                    a = tr[e]  # [p, d]
                elif u in ends:
                    a = (ends[u][:, :, None] + tr[e][None, :, :]).min(axis=1)
                else:
                    continue  # before the previous cut: dropped
                np.maximum(arr, a, out=arr)
            if t == cut:
                out = arr
            else:
                ends[t] = np.minimum(arr + slots.get(t, slot[t])[None, :], INF)
        return out, ends

    group_of = first_use_groups(inst, order, cutpos)
    v = np.zeros((len(rules), 1), dtype=np.int64)  # per rule, over the previous cut's devices
    prev = -1
    seg: list[int] = []
    enumerated = 0
    j = 0
    for pos in range(inst.n_tasks):
        t = int(order[pos])
        if j >= len(cutpos) or pos != cutpos[j]:
            seg.append(t)
            continue
        rows = v.shape[1] if prev >= 0 else 1
        arr, _ = gap(seg, t, prev, rows, {})
        groups = group_of.get(j, [])
        charged = sorted({w for w in seg if mu[w].any()}
                         | {int(w) for g in groups for w in g[0]})
        choices: list[list[int]] = [[int(x) for x in np.flatnonzero(cost[w] < INF)]
                                    for w in charged]
        n_assign = int(np.prod([len(x) for x in choices])) if charged else 0
        if n_assign > max_assignments:  # each on its cheapest device, or on another one
            choices = [[int(np.argmin(slot[w])), -1] for w in charged]
            n_assign = 2 ** len(charged)
        if 0 < n_assign <= max_assignments:
            # a group member w on d' is there with the group's served member: ≥ p_w + e
            ge = {w: slot[w].copy() for w in charged}
            for members, d, e in groups:
                for w in members.tolist():
                    ge[w][d] = min(ge[w][d] + e, INF)
            best = np.full((rows, nd), INF, dtype=np.int64)
            for devs in itertools.product(*choices):
                fixed = {}
                busy = np.zeros(nd, dtype=np.int64)
                placed: dict[int, int] = {}
                alone = 0  # least busy time of the device of a task placed "elsewhere"
                for w, d in zip(charged, devs):
                    if d < 0:  # relaxed: the least over the other devices
                        row = slot[w].copy()
                        row[int(np.argmin(slot[w]))] = INF
                        other = ge[w].copy()
                        other[int(np.argmin(slot[w]))] = INF
                        alone = max(alone, int(other.min()))
                    else:
                        row = np.full(nd, INF, dtype=np.int64)
                        row[d] = slot[w, d]
                        busy[d] += slot[w, d]
                        placed[w] = int(d)
                    fixed[w] = row
                for members, d, e in groups:
                    if any(placed.get(int(w)) == d for w in members):
                        busy[d] += e
                a, _ = gap(seg, t, prev, rows, fixed)
                np.minimum(best, np.maximum(a, max(int(busy.max()), alone)), out=best)
            arr = np.maximum(arr, np.minimum(best, INF))
            enumerated += 1
        # cut: V[e] = min_p V[p] + dispatch bound[p, e] + p(c, e) + μ(c, e)
        val = (v[:, :, None] + arr[None, :, :]).min(axis=1) if prev >= 0 else arr[0][None]
        v = np.minimum(val + cost[t][None, :] + mus[:, t, :], INF)
        if trace is not None:
            trace.append((t, int(v[0].min())))
        prev = t
        seg = []
        j += 1
    last = v
    if seg:  # tasks after the last cut, per device of the last cut
        _, ends = gap(seg, -1, prev, v.shape[1], {})
        last = last + np.max([e.min(axis=1) for e in ends.values()], axis=0)[None, :]
    return {r: (int(min(int(last[i].min()), int(INF))),
                {"cuts": len(cuts), "weighted_users": int((mus[i] > 0).any(axis=1).sum()),
                 "enumerated_segments": enumerated})
            for i, r in enumerate(rules)}
