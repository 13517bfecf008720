"""A list scheduler that respects every rule of SPEC §1.2 and the HEFT heuristic built on it.

Tasks are taken in a given priority order (which must be topological); each goes to the device
chosen by a policy (default: earliest finish time, EFT), starting at the earliest moment its
inputs have arrived, its block is resident and the device is idle (insertion into idle gaps
when ``insertion`` is true, HEFT-style). Transfers are booked on their channel (``full``: the
ordered device pair; ``star``: the source's uplink and the destination's downlink) when links
have contention; weight loads are booked on the device's load port the first time a block is
needed there; a device whose capacity the load would exceed is not eligible (this scheduler
never evicts). The result is a SPEC §1.2a solution dict.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from opt.errors import InputError
from opt.instance import PlacementInstance
from opt.schedule import make_solution


class _Timeline:
    """Busy intervals of one resource; earliest start ≥ ``ready`` for a job of length ``dur``."""

    __slots__ = ("starts", "ends", "insertion", "last")

    def __init__(self, insertion: bool):
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.insertion = insertion
        self.last = 0

    def earliest(self, ready: int, dur: int) -> int:
        if not self.insertion or not self.starts:
            return max(ready, self.last)
        i = bisect.bisect_right(self.ends, ready)
        t = ready
        while i < len(self.starts):
            if t + dur <= self.starts[i]:
                return t
            t = max(t, self.ends[i])
            i += 1
        return t

    def book(self, start: int, dur: int) -> None:
        if dur <= 0:
            return
        end = start + dur
        if not self.insertion:
            self.last = max(self.last, end)
            return
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        self.last = max(self.last, end)


def upward_rank(inst: PlacementInstance) -> np.ndarray:
    """HEFT's upward rank: mean legal duration + max over successors of (mean transfer time
    between distinct devices + their rank). Mean transfer uses all ordered device pairs."""
    cost = inst.cost.astype(np.float64)
    legal = cost >= 0
    mean_cost = np.where(legal, cost, 0).sum(axis=1) / legal.sum(axis=1)
    nd = inst.n_devices
    if nd > 1:
        off = ~np.eye(nd, dtype=bool)
        lat = inst.links.latency[off].astype(np.float64)
        inv_bw = 1.0 / inst.links.bandwidth[off]
        mean_comm = lat.mean() + inst.edge_bytes * inv_bw.mean()
    else:
        mean_comm = np.zeros(inst.n_edges)
    rank = mean_cost.copy()
    s_off, s_idx = inst.successors
    dst = inst.edge_dst
    for t in inst.topological_order[::-1].tolist():
        es = s_idx[s_off[t]:s_off[t + 1]]
        if len(es):
            rank[t] = mean_cost[t] + float(np.max(mean_comm[es] + rank[dst[es]]))
    return rank


def priority_order(inst: PlacementInstance, priority: np.ndarray) -> list[int]:
    """Topological order taking the highest ``priority`` among ready tasks first."""
    import heapq

    n = inst.n_tasks
    indeg = np.bincount(inst.edge_dst, minlength=n).tolist()
    s_off, s_idx = inst.successors
    dst = inst.edge_dst.tolist()
    s_idx_l, s_off_l = s_idx.tolist(), s_off.tolist()
    heap = [(-float(priority[t]), t) for t in range(n) if indeg[t] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, t = heapq.heappop(heap)
        out.append(t)
        for j in range(s_off_l[t], s_off_l[t + 1]):
            v = dst[s_idx_l[j]]
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (-float(priority[v]), v))
    return out


DevicePolicy = Callable[[int, list[int]], list[int]]


def list_schedule(inst: PlacementInstance, order: Sequence[int], *, insertion: bool = True,
                  candidates: DevicePolicy | None = None) -> dict:
    """Schedule tasks in ``order`` (topological), each on the candidate device with the earliest
    finish time. ``candidates(t, legal)`` may narrow the legal devices (static policies); when
    it leaves no eligible device, all legal ones are tried."""
    n, nd = inst.n_tasks, inst.n_devices
    cost = inst.cost
    links = inst.links
    loads = inst.load_duration
    cap = [d.weight_capacity for d in inst.devices]
    contention = links.contention
    star = links.topology == "star"
    dev_tl = [_Timeline(insertion) for _ in range(nd)]
    port_free = [0] * nd
    resident = [0] * nd
    chan: dict[tuple, int] = {}
    loaded: dict[tuple[int, int], int] = {}  # (block, device) -> ready time
    dev = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    transfer_start: dict[int, int] = {}
    load_events: list[tuple[int, int, int]] = []
    p_off, p_idx = inst.predecessors
    src = inst.edge_src
    nbytes = inst.edge_bytes
    block = inst.task_block
    seen = np.zeros(n, dtype=bool)

    def chan_keys(a: int, b: int) -> tuple:
        return (("up", a), ("down", b)) if star else ((a, b),)

    for t in order:
        t = int(t)
        es = p_idx[p_off[t]:p_off[t + 1]].tolist()
        if any(not seen[src[e]] for e in es):
            raise InputError(f"priority order is not topological at task '{inst.task_ids[t]}'",
                             field="order")
        legal = np.flatnonzero(cost[t] >= 0).tolist()
        cands = candidates(t, legal) if candidates else legal
        b = int(block[t])
        best = None
        for attempt in (cands, legal):
            for d in attempt:
                if b >= 0 and (b, d) not in loaded and cap[d] is not None and \
                        resident[d] + int(inst.block_bytes[b]) > cap[d]:
                    continue
                ready = 0
                local: dict[tuple, int] = {}
                tr_plan = []
                for e in sorted(es, key=lambda e: end[src[e]]):
                    u = int(src[e])
                    if dev[u] == d:
                        ready = max(ready, int(end[u]))
                        continue
                    dur = links.transfer(int(dev[u]), d, int(nbytes[e]))
                    ts = int(end[u])
                    keys = chan_keys(int(dev[u]), d)
                    if contention and dur > 0:
                        for k in keys:
                            ts = max(ts, local.get(k, chan.get(k, 0)))
                        for k in keys:
                            local[k] = ts + dur
                    tr_plan.append((e, ts, dur, keys))
                    ready = max(ready, ts + dur)
                load_plan = None
                if b >= 0:
                    if (b, d) in loaded:
                        ready = max(ready, loaded[(b, d)])
                    else:
                        ls = port_free[d]
                        load_plan = ls
                        ready = max(ready, ls + int(loads[b, d]))
                s = dev_tl[d].earliest(ready, int(cost[t, d]))
                f = s + int(cost[t, d])
                if best is None or f < best[0]:
                    best = (f, d, s, tr_plan, load_plan)
            if best is not None:
                break
        if best is None:
            raise InputError(f"task '{inst.task_ids[t]}' fits on no device: its block "
                             f"'{inst.block_ids[b]}' exceeds every remaining capacity",
                             field="capacity")
        f, d, s, tr_plan, load_plan = best
        dev[t], start[t], end[t] = d, s, f
        seen[t] = True
        dev_tl[d].book(s, int(cost[t, d]))
        for e, ts, dur, keys in tr_plan:
            transfer_start[e] = ts
            if contention and dur > 0:
                for k in keys:
                    chan[k] = max(chan.get(k, 0), ts + dur)
        if load_plan is not None:
            dur = int(loads[b, d])
            loaded[(b, d)] = load_plan + dur
            port_free[d] = load_plan + dur
            resident[d] += int(inst.block_bytes[b])
            load_events.append((b, d, load_plan))
    if not seen.all():
        raise InputError("priority order does not cover every task", field="order")
    return make_solution(inst, dev, start, transfer_start, load_events)


def heft(inst: PlacementInstance) -> dict:
    """HEFT (Topcuoglu et al. 2002): upward-rank order, insertion-based EFT device choice."""
    return list_schedule(inst, priority_order(inst, upward_rank(inst)), insertion=True)
