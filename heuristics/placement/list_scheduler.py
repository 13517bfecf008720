"""A list scheduler that respects every rule of problems.md §1.2 and the HEFT heuristic built on it.

Tasks are taken in a given priority order (which must be topological); each goes to the device
chosen by a policy (default: earliest finish time, EFT), starting at the earliest moment its
inputs have arrived, its block is resident and the device is idle (insertion into idle gaps
when ``insertion`` is true, HEFT-style). Transfers are booked on their channel (``full``: the
ordered device pair; ``star``: the source's uplink and the destination's downlink) when links
have contention; weight loads are booked on the device's load port the first time a block is
needed there (under ``load_timing: at_use``, problems.md §1.2 rule 5, in the task's own slot
on the device from its dispatch on: load, then compute); a load that does not fit evicts the
device's least-recently-used blocks (DOPS §6.1: "Loaded weight blocks remain resident while
capacity permits; otherwise, they are evicted according to an LRU policy" — a platform rule,
so every policy follows it); only a block larger than the device makes it ineligible. The
result is a problems.md §1.2a solution dict.

The bookkeeping lives in :class:`ScheduleState` (evaluate a candidate device, commit a choice,
optionally evict least-recently-used blocks), shared by HEFT, the static policies and Bifocal
(``heuristics.placement.bifocal``). It works on plain Python lists precomputed once per instance (task
durations deduplicated by cost row, transfer durations deduplicated by payload size), so a
full-size DOPS instance (~half a million tasks) is scheduled in tens of seconds.

Engines: ``heft``, ``list_schedule`` (with or without device classes),
``upward_rank`` and ``priority_order`` take ``engine``: ``python`` runs the code below (the
reference), ``compiled`` the numba kernels of :mod:`heuristics.placement.schedule_kernels`
(the same state as arrays; byte-identical schedules), ``auto`` (default) the compiled one when
numba is installed and the instance has at least
:data:`heuristics.placement.engine.COMPILED_TASKS` tasks (:mod:`heuristics.placement.engine`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from heuristics.placement import engine as _engine
from opt.common.errors import InputError
from opt.common.rows import unique_rows
from opt.placement.instance import PlacementInstance
from opt.placement.solution import make_solution

_FIRST = itemgetter(0)
#: How a list schedule picks among the devices able to run a task (problems.md §6, "Device
#: choice under capacity"): ``fit_in_class`` passes over a device whose load would evict when
#: a device of the same class runs the task without evicting, then takes the earliest finish
#: (the default); ``eft`` takes the earliest finish whatever it evicts
DEVICE_CHOICES = ("fit_in_class", "eft")


class _Timeline:
    """Busy intervals of one resource; earliest start ≥ ``ready`` for a job of length ``dur``."""

    __slots__ = ("starts", "ends", "insertion", "last")

    def __init__(self, insertion: bool):
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.insertion = insertion
        self.last = 0

    def earliest(self, ready: int, dur: int) -> int:
        if ready >= self.last:
            return ready
        if not self.insertion:
            return self.last
        starts = self.starts
        i = bisect.bisect_right(self.ends, ready)
        t = ready
        n = len(starts)
        ends = self.ends
        while i < n:
            if t + dur <= starts[i]:
                return t
            e = ends[i]
            if e > t:
                t = e
            i += 1
        return t

    def book(self, start: int, dur: int) -> None:
        if dur <= 0:
            return
        end = start + dur
        if not self.insertion:
            if end > self.last:
                self.last = end
            return
        if start >= self.last:
            self.starts.append(start)
            self.ends.append(end)
            self.last = end
            return
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        if end > self.last:
            self.last = end


class ScheduleState:
    """Partial schedule of a list scheduler: device timelines (with insertion), channel
    bookings (contention: ``full`` one channel per ordered pair, ``star`` uplink + downlink),
    one load port per device, resident blocks and their capacity.

    Per task: ``ready(t, d, info)`` gives the data-ready time on d (inputs and transfers),
    ``evaluate(t, d, dur, info)`` the start/finish on d, ``commit(t, d, info)`` books the
    choice; ``info = pred_info(t)`` is computed once per task. With ``evict=True`` a load that
    does not fit evicts least-recently-used blocks of the device at the load's start (only
    blocks whose last scheduled use there started strictly before it; the load is delayed
    when needed); otherwise such a device is not eligible.
    """

    def __init__(self, inst: PlacementInstance, *, insertion: bool = True, evict: bool = False,
                 cost_types: tuple[np.ndarray, np.ndarray] | None = None):
        self.inst = inst
        n, nd = inst.n_tasks, inst.n_devices
        self.n, self.nd = n, nd
        self.insertion, self.evict = insertion, evict
        # problems.md §1.2 rule 5: under at_use a load runs in its task's slot on the device
        # (from the task's dispatch on), port_free is then the last load's *start* (loads of a
        # device stay in time order, so the resident bytes are those at every later time)
        self.at_use = inst.load_timing == "at_use"
        # task durations, deduplicated by cost row
        rows, inv = cost_types if cost_types is not None else unique_rows(inst.cost)
        self.ttype: list[int] = inv.tolist()
        self.type_dur: list[list[int]] = rows.tolist()
        self.type_legal: list[list[int]] = [[d for d in range(nd) if r[d] >= 0]
                                            for r in self.type_dur]
        # predecessors (CSR by destination, edge order) and transfer durations by payload
        p_off, p_idx = inst.predecessors
        self.p_off: list[int] = p_off.tolist()
        self.p_edge: list[int] = p_idx.tolist()
        self.esrc: list[int] = inst.edge_src.tolist()
        if inst.n_edges:
            ub, binv = np.unique(inst.edge_bytes, return_inverse=True)
            table = [r.ravel().tolist() for r in inst.links.transfer_durations(ub)]
            self.etr: list[list[int]] = [table[k] for k in binv.reshape(-1).tolist()]
        else:
            self.etr = []
        links = inst.links
        self.contention = bool(links.contention)
        # channel ids of each ordered device pair (src·nd + dst), from Links.channels
        self.pair_chan: list[tuple[int, ...]] = [links.channels(i, j) for i in range(nd)
                                                 for j in range(nd)]
        # every transfer on one channel (full topology): ready()'s fast path reads its id here
        self.one_channel = all(len(c) == 1 for c in self.pair_chan)
        self.pair_chan1: list[int] = [c[0] for c in self.pair_chan] if self.one_channel else []
        self.chan = [0] * links.n_channels  # channel id -> time it is free
        # blocks
        self.block: list[int] = inst.task_block.tolist()
        self.bbytes: list[int] = inst.block_bytes.tolist()
        self.loadd: list[list[int]] = inst.load_duration.tolist()
        self.cap: list[int | None] = [d.weight_capacity for d in inst.devices]
        # dynamic state
        self.dev = [-1] * n
        self.start = [0] * n
        self.end = [0] * n
        self.tl = [_Timeline(insertion) for _ in range(nd)]
        self.port_free = [0] * nd
        self.resident = [0] * nd
        self.res_ready: list[dict[int, int]] = [{} for _ in range(nd)]  # block -> load end
        self.last_use: list[dict[int, int]] = [{} for _ in range(nd)]  # block -> last start
        self.transfer_start: dict[int, int] = {}
        self.load_events: list[tuple[int, int, int]] = []
        self.evictions: list[tuple[int, int, int]] = []
        self.scheduled = 0

    # ---- evaluation ---------------------------------------------------------------------------
    def pred_info(self, t: int) -> list[tuple[int, int, list[int], int]]:
        """(end, device, transfer row, edge) of t's predecessors, by end time (stable)."""
        dev, end, esrc, etr = self.dev, self.end, self.esrc, self.etr
        out = []
        for e in self.p_edge[self.p_off[t]:self.p_off[t + 1]]:
            u = esrc[e]
            du = dev[u]
            if du < 0:
                raise InputError(f"priority order is not topological at task "
                                 f"'{self.inst.task_ids[t]}'", field="order")
            out.append((end[u], du, etr[e], e))
        if len(out) > 1:
            out.sort(key=_FIRST)
        return out

    def ready(self, d: int, info) -> int:
        """Time all inputs of the task are on d (transfers planned against booked channels)."""
        nd = self.nd
        if len(info) == 1:  # fast path: one input (the common case of operator chains)
            eu, du, row, _ = info[0]
            if du == d:
                return eu
            dur = row[du * nd + d]
            if dur <= 0:
                return eu
            if not self.contention:
                return eu + dur
            if self.one_channel:
                c = self.chan[self.pair_chan1[du * nd + d]]
            else:
                c = max([self.chan[ch] for ch in self.pair_chan[du * nd + d]], default=0)
            return (c if c > eu else eu) + dur
        ready = 0
        if not self.contention:
            for eu, du, row, _ in info:
                if du != d:
                    eu += row[du * nd + d]
                if eu > ready:
                    ready = eu
            return ready
        chan = self.chan
        one = self.one_channel
        pair_chan = self.pair_chan1 if one else self.pair_chan
        loc = None  # channel id -> free time after this task's earlier (planned) transfers
        for eu, du, row, _ in info:
            if du == d:
                if eu > ready:
                    ready = eu
                continue
            k = du * nd + d
            dur = row[k]
            ts = eu
            if dur > 0:
                if one:  # fast path: one channel per transfer
                    ch = pair_chan[k]
                    if loc is None:
                        loc = {}
                        c = chan[ch]
                    else:
                        c = loc.get(ch, chan[ch])
                    if c > ts:
                        ts = c
                    loc[ch] = ts + dur
                else:
                    ks = pair_chan[k]
                    if loc is None:
                        loc = {}
                    for ch in ks:
                        c = loc.get(ch, chan[ch])
                        if c > ts:
                            ts = c
                    for ch in ks:
                        loc[ch] = ts + dur
            ts += dur
            if ts > ready:
                ready = ts
        return ready

    def load_plan(self, b: int, d: int):
        """None when block b is resident on d; else (load start, victims) or False when it
        cannot be loaded (capacity; victims are evicted at the load start)."""
        if b in self.res_ready[d]:
            return None
        ls = self.port_free[d]
        cap = self.cap[d]
        size = self.bbytes[b]
        if cap is None or self.resident[d] + size <= cap:
            return ls, ()
        if not self.evict or size > cap:
            return False
        need = self.resident[d] + size - cap
        lu = self.last_use[d]
        victims = []
        freed = 0
        latest = -1
        for blk, used in sorted(lu.items(), key=lambda kv: (kv[1], kv[0])):
            victims.append(blk)
            freed += self.bbytes[blk]
            if used > latest:
                latest = used
            if freed >= need:
                break
        if freed < need:
            return False
        return max(ls, latest + 1), victims

    def evicts(self, t: int, d: int) -> bool:
        """Whether running t on d evicts: t's block is not resident on d and does not fit
        beside d's resident blocks."""
        b = self.block[t]
        if b < 0 or b in self.res_ready[d]:
            return False
        cap = self.cap[d]
        return cap is not None and self.resident[d] + self.bbytes[b] > cap

    def evaluate(self, t: int, d: int, dur: int, info):
        """(start, finish, data_ready, ready) of t on d, or None if d is not eligible (its
        block does not fit). ``ready`` includes the block's load, ``data_ready`` only inputs."""
        ready = data = self.ready(d, info)
        b = self.block[t]
        if b >= 0:
            r = self.res_ready[d].get(b)
            if r is None:  # not resident: (re)loaded on d's port, evicting if need be
                lp = self.load_plan(b, d)
                if lp is False:
                    return None
                if self.at_use:  # Eq. 1: load then compute, one slot from the dispatch on
                    ld = self.loadd[b][d]
                    s0 = self.tl[d].earliest(lp[0] if lp[0] > data else data, ld + dur)
                    return s0 + ld, s0 + ld + dur, data, s0 + ld
                r = lp[0] + self.loadd[b][d]
            if r > ready:
                ready = r
        s = self.tl[d].earliest(ready, dur)
        return s, s + dur, data, ready

    # ---- commit -------------------------------------------------------------------------------
    def commit(self, t: int, d: int, info) -> int:
        """Book t on d (transfers, load and evictions, compute); returns the start."""
        nd = self.nd
        dur = self.type_dur[self.ttype[t]][d]
        ready = 0
        chan = self.chan
        contention, pair_chan = self.contention, self.pair_chan
        tstart = self.transfer_start
        for eu, du, row, e in info:
            if du == d:
                if eu > ready:
                    ready = eu
                continue
            k = du * nd + d
            tdur = row[k]
            ts = eu
            if contention and tdur > 0:
                ks = pair_chan[k]
                for ch in ks:
                    if chan[ch] > ts:
                        ts = chan[ch]
                for ch in ks:
                    chan[ch] = ts + tdur
            tstart[e] = ts
            if ts + tdur > ready:
                ready = ts + tdur
        b = self.block[t]
        tl = self.tl[d]
        slot = 0  # at_use: the load's length, booked with the compute as one slot
        if b >= 0:
            lp = self.load_plan(b, d)
            if lp is False:
                raise self.no_device_error(t)
            if lp is None:
                r = self.res_ready[d][b]
            else:
                ls, victims = lp
                if self.at_use:
                    slot = self.loadd[b][d]
                    ls = tl.earliest(ls if ls > ready else ready, slot + dur)
                for v in victims:
                    del self.res_ready[d][v]
                    del self.last_use[d][v]
                    self.resident[d] -= self.bbytes[v]
                    self.evictions.append((v, d, ls))
                r = ls + self.loadd[b][d]
                self.res_ready[d][b] = r
                self.port_free[d] = ls if self.at_use else r
                self.resident[d] += self.bbytes[b]
                self.load_events.append((b, d, ls))
            if r > ready:
                ready = r
        if slot:
            s = ready
            tl.book(s - slot, slot + dur)
        else:
            s = tl.earliest(ready, dur)
            tl.book(s, dur)
        self.dev[t] = d
        self.start[t] = s
        self.end[t] = s + dur
        if b >= 0:
            lu = self.last_use[d]
            if lu.get(b, -1) < s:
                lu[b] = s
        self.scheduled += 1
        return s

    def solution(self) -> dict:
        if self.scheduled != self.n or min(self.dev, default=0) < 0:
            raise InputError("priority order does not cover every task", field="order")
        return make_solution(self.inst, self.dev, self.start, self.transfer_start,
                             self.load_events, self.evictions)

    def no_device_error(self, t: int) -> InputError:
        return _engine.no_device_error(self.inst, t)


def upward_rank(inst: PlacementInstance, *, engine: str = "auto") -> np.ndarray:
    """HEFT's upward rank: mean legal duration + max over successors of (mean transfer time
    between distinct devices + their rank). Mean transfer uses all ordered device pairs.
    ``engine``: module docstring."""
    if _engine.resolve_engine(engine, inst.n_tasks) == "compiled":
        return _engine.upward_ranks(inst)
    mean_cost, mean_comm = _engine.rank_inputs(inst)
    mc = mean_cost.tolist()
    comm = mean_comm.tolist()
    rank = list(mc)
    s_off, s_idx = inst.successors
    s_off_l, s_idx_l = s_off.tolist(), s_idx.tolist()
    dst = inst.edge_dst.tolist()
    for t in inst.topological_order[::-1].tolist():
        lo, hi = s_off_l[t], s_off_l[t + 1]
        if lo == hi:
            continue
        best = None
        for j in range(lo, hi):
            e = s_idx_l[j]
            v = comm[e] + rank[dst[e]]
            if best is None or v > best:
                best = v
        rank[t] = mc[t] + best
    return np.array(rank, dtype=np.float64)


def priority_order(inst: PlacementInstance, priority: np.ndarray, *, engine: str = "auto"
                   ) -> list[int]:
    """Topological order taking the highest ``priority`` among ready tasks first (ties: the
    lowest index). ``engine``: module docstring."""
    import heapq

    if _engine.resolve_engine(engine, inst.n_tasks) == "compiled":
        return _engine.priority_array(inst, priority).tolist()
    n = inst.n_tasks
    indeg = np.bincount(inst.edge_dst, minlength=n).tolist()
    s_off, s_idx = inst.successors
    dst = inst.edge_dst.tolist()
    s_idx_l, s_off_l = s_idx.tolist(), s_off.tolist()
    neg = [-float(x) for x in np.asarray(priority, dtype=np.float64).tolist()]
    heap = [(neg[t], t) for t in range(n) if indeg[t] == 0]
    heapq.heapify(heap)
    out = []
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        _, t = pop(heap)
        out.append(t)
        for j in range(s_off_l[t], s_off_l[t + 1]):
            v = dst[s_idx_l[j]]
            indeg[v] -= 1
            if indeg[v] == 0:
                push(heap, (neg[v], v))
    return out


@dataclass(frozen=True)
class DeviceClasses:
    """A candidates policy as data (the static policies, policy search), the same for both
    engines: ``task_class`` int64 [n], each task's class (−1: every legal device);
    ``members`` bool [K, nd], the devices of each class; ``name``, the policy's, for its
    refusal. A task's candidates are its legal devices in its class, or every legal device
    when the class holds none of them (kv_write pinned to its KV home, router on the NPU, …)."""

    task_class: np.ndarray
    members: np.ndarray
    name: str = ""

    def arrays(self, inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
        """(task_class int64 [n], members uint8 [K, nd]) checked against ``inst``."""
        tcls = np.ascontiguousarray(self.task_class, dtype=np.int64).reshape(-1)
        mem = np.ascontiguousarray(self.members, dtype=np.uint8)
        if len(tcls) != inst.n_tasks or mem.ndim != 2 or mem.shape[1] != inst.n_devices or \
                (len(tcls) and int(tcls.max()) >= len(mem)):
            raise InputError(f"device classes of policy '{self.name}' do not match the "
                             f"instance ({len(tcls)} tasks, members {mem.shape})",
                             field="classes")
        return tcls, mem


def check_device_choice(device_choice: str) -> bool:
    """Whether ``device_choice`` (one of :data:`DEVICE_CHOICES`) is ``fit_in_class``."""
    if device_choice not in DEVICE_CHOICES:
        raise InputError(f"device_choice must be one of {', '.join(DEVICE_CHOICES)}, "
                         f"not {device_choice!r}", field="device_choice")
    return device_choice == "fit_in_class"


def device_class_codes(inst: PlacementInstance) -> np.ndarray:
    """int64 [nd]: each device's class (``Device.device_class``) as a code < nd."""
    names = [d.device_class for d in inst.devices]
    code = {c: i for i, c in enumerate(dict.fromkeys(names))}
    return np.array([code[c] for c in names], dtype=np.int64)


def _eft_choice(cands: list[int], finish, fit) -> int | None:
    """The candidate of earliest finish (``finish(d)``: ``ScheduleState.evaluate``'s tuple or
    None when d is not eligible; lowest index on ties); ``fit`` = (each device's class code,
    ``evicts(d)``) or None: a device that would evict is passed over when a candidate of its
    class would not."""
    got = [(d, r[1]) for d in cands if (r := finish(d)) is not None]
    if fit is not None:
        codes, evicts = fit
        ev = {d: evicts(d) for d, _ in got}
        fits = {codes[d] for d, _ in got if not ev[d]}
        got = [(d, f) for d, f in got if not (ev[d] and codes[d] in fits)]
    best_d = best_f = None
    for d, f in got:
        if best_f is None or f < best_f:
            best_d, best_f = d, f
    return best_d


def list_schedule(inst: PlacementInstance, order: Iterable[int], *, insertion: bool = True,
                  classes: DeviceClasses | None = None, engine: str = "auto",
                  device_choice: str = "fit_in_class") -> dict:
    """Schedule tasks in ``order`` (topological), each on the candidate device with the earliest
    finish time, evicting LRU blocks where a load does not fit. ``device_choice``
    (:data:`DEVICE_CHOICES`, problems.md §6 "Device choice under capacity"): ``fit_in_class``
    passes over a device whose load would evict when a candidate of the same device class
    runs the task without evicting; ``eft`` takes the earliest finish whatever it evicts. ``classes`` narrows each
    task's candidates to its class (:class:`DeviceClasses`); when some are in the class but
    none is eligible (the block is larger than each), the policy cannot keep the task in its
    class: InputError. ``engine``: module docstring."""
    fit_cls = device_class_codes(inst) if check_device_choice(device_choice) else None
    arrays = classes.arrays(inst) if classes is not None else None
    name = classes.name if classes is not None else ""
    if _engine.resolve_engine(engine, inst.n_tasks) == "compiled":
        return _engine.eft_schedule(inst, order, _engine.unique_rows(inst.cost),
                                    insertion=insertion, classes=arrays, policy_name=name,
                                    fit_classes=fit_cls)
    st = ScheduleState(inst, insertion=insertion, evict=True)
    ttype, type_dur, type_legal = st.ttype, st.type_dur, st.type_legal
    evaluate, commit, pred_info, evicts = st.evaluate, st.commit, st.pred_info, st.evicts
    fit_cls = fit_cls.tolist() if fit_cls is not None else None
    tcls = arrays[0].tolist() if arrays is not None else [-1] * inst.n_tasks
    mem = arrays[1].tolist() if arrays is not None else []
    narrowed: dict[tuple[int, int], list[int]] = {}  # (task type, class) -> candidates
    seen = [False] * inst.n_tasks
    for t in order:
        t = int(t)
        if seen[t]:
            raise InputError(f"priority order lists task '{inst.task_ids[t]}' twice",
                             field="order")
        info = pred_info(t)
        ty = ttype[t]
        durs = type_dur[ty]
        cands = legal = type_legal[ty]
        c = tcls[t]
        if c >= 0:
            got = narrowed.get((ty, c))
            if got is None:
                got = narrowed[ty, c] = [d for d in legal if mem[c][d]] or legal
            cands = got
        best_d = _eft_choice(cands, lambda d: evaluate(t, d, durs[d], info),
                             None if fit_cls is None else (fit_cls, lambda d: evicts(t, d)))
        if best_d is None:
            if cands is not legal:
                raise _engine.class_error(inst, t, name)
            raise st.no_device_error(t)
        commit(t, best_d, info)
        seen[t] = True
    return st.solution()


def heft_priority_order(inst: PlacementInstance, *,
                        engine: str = "auto") -> Sequence[int] | np.ndarray:
    """HEFT's task order: ``priority_order`` of ``upward_rank`` (int64 array from the compiled
    engine, list from the Python one; the same indices). ``engine``: module docstring."""
    eng = _engine.resolve_engine(engine, inst.n_tasks)
    if eng == "compiled":
        return _engine.heft_order(inst)
    return priority_order(inst, upward_rank(inst, engine=eng), engine=eng)


def heft(inst: PlacementInstance, *, engine: str = "auto",
         device_choice: str = "fit_in_class") -> dict:
    """HEFT (Topcuoglu et al. 2002): upward-rank order, insertion-based EFT device choice
    (``device_choice``: :func:`list_schedule`). ``engine``: module docstring."""
    eng = _engine.resolve_engine(engine, inst.n_tasks)
    return list_schedule(inst, heft_priority_order(inst, engine=eng), insertion=True,
                         engine=eng, device_choice=device_choice)
