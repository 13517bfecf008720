"""The scheduling engine of the list schedulers: ``python`` (the reference,
:class:`heuristics.placement.list_scheduler.ScheduleState` on plain lists) or ``compiled``
(numba kernels over numpy arrays, :mod:`heuristics.placement.schedule_kernels`), with
byte-identical schedules and statistics. ``auto`` picks the compiled engine when numba is
installed (the ``fast`` extra) and the instance has at least :data:`COMPILED_TASKS` tasks.

The compiled engine's set-up is compiled too (docs/speed.md, "Schedulers (Bifocal, HEFT)"):
the task types (:func:`unique_rows`, :func:`window_types`), the payload types
(:func:`unique_values`) and the task orders (:func:`upward_ranks`, :func:`heft_order`,
:func:`bifocal_order`) give their numpy references' values bit for bit and fall back to them
where they cannot (a hash collision, 8 or more devices).

This module never imports numba itself: :func:`kernels` loads the kernel module on first use
(numba compiles the kernels once per machine and caches them on disk, ``cache=True``).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from opt.common import rows as _rows
from opt.common.errors import InputError
from opt.common.jit import import_numba_arrays
from opt.placement.instance import PlacementInstance

#: The engines a scheduler accepts.
ENGINES = ("auto", "python", "compiled")
#: ``auto`` compiles from this many tasks on: importing numba and loading the cached kernels
#: costs ~0.45 CPU s per process (~1.3 before the set-up was compiled; `git log -p docs/speed.md`),
#: which Bifocal's compiled set-up and loops win back from ~40,000 tasks on, HEFT's above ~60,000
#: (docs/speed.md, "Schedulers (Bifocal, HEFT)", **Engines**).
COMPILED_TASKS = 50_000
#: Initial capacity of each device's timeline arrays (doubled when full).
_TIMELINE_START = 64


def numba_available() -> bool:
    """Whether numba can be imported (checked without importing it)."""
    return importlib.util.find_spec("numba") is not None


def resolve_engine(engine: str, n_tasks: int) -> str:
    """``python`` or ``compiled`` for ``engine`` on an instance of ``n_tasks`` tasks;
    InputError for an unknown engine, or ``compiled`` without numba."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine '{engine}'; known: {', '.join(ENGINES)}",
                         field="params.engine")
    if engine == "python":
        return engine
    if not numba_available():
        if engine == "compiled":
            raise InputError("engine 'compiled' needs numba (pip install 'hetopt[fast]')",
                             field="params.engine")
        return "python"
    if engine == "compiled" or n_tasks >= COMPILED_TASKS:
        return "compiled"
    return "python"


@functools.lru_cache(maxsize=1)
def kernels() -> ModuleType:
    """The numba kernel module (imported, and compiled or loaded from cache, once)."""
    import_numba_arrays()  # without numba's BLAS probe (opt.common.jit)
    from heuristics.placement import schedule_kernels

    return schedule_kernels


def as_int64(a: Any) -> np.ndarray:
    """``a`` as a C-contiguous int64 array (no copy when it is one)."""
    return np.ascontiguousarray(a, dtype=np.int64)


# ---- the schedule state as arrays ---------------------------------------------------------------

@dataclass
class CompiledState:
    """The arrays of a partial schedule for the kernels (``gr``, ``bl``, ``stt`` tuples,
    timelines, configuration ``cf``; layout in :mod:`heuristics.placement.schedule_kernels`),
    built once per instance; times in ns."""

    inst: PlacementInstance
    ttype: np.ndarray
    type_dur: np.ndarray
    gr: tuple
    bl: tuple
    stt: tuple
    tls: Any
    tle: Any
    cf: tuple[int, int, int, int, int]  # nd, contention, insertion, evict, at_use

    @property
    def counts(self) -> tuple[int, int, int]:
        """(loads, evictions, scheduled tasks) so far."""
        cnt = self.stt[2]
        return int(cnt[0]), int(cnt[1]), int(cnt[2])

    @property
    def device(self) -> np.ndarray:
        """int64 [n]: each task's device (−1 unscheduled)."""
        return self.stt[0][0]


def compiled_state(inst: PlacementInstance, cost_types: tuple[np.ndarray, np.ndarray], *,
                   insertion: bool, evict: bool) -> CompiledState:
    """The empty schedule state of ``inst`` for the kernels (``ScheduleState``'s data: task
    durations by cost type, transfer durations by payload, channels, blocks, capacities)."""
    k = kernels()
    n, nd, m = inst.n_tasks, inst.n_devices, inst.n_edges
    rows, inv = cost_types
    p_off, p_idx = inst.predecessors
    links = inst.links
    if m:
        ub, etype = unique_values(inst.edge_bytes)
        etab = as_int64(links.transfer_durations(ub).reshape(len(ub), nd * nd))
    else:
        etab, etype = np.zeros((1, nd * nd), np.int64), np.zeros(0, np.int64)
    pchan = np.zeros((nd * nd, 3), np.int64)
    for i in range(nd):
        for j in range(nd):
            c = links.channels(i, j)
            pchan[i * nd + j, 0] = len(c)
            pchan[i * nd + j, 1:1 + len(c)] = c
    gr = (as_int64(p_off), as_int64(p_idx), as_int64(inst.edge_src), etype, etab, pchan)
    nb = len(inst.block_ids)
    bl = (as_int64(inst.task_block), as_int64(inst.block_bytes), as_int64(inst.load_duration).reshape(nb, nd))
    sched = np.zeros((3, n), np.int64)
    sched[0] = -1
    dv = np.zeros((5, nd), np.int64)
    dv[2] = [-1 if d.weight_capacity is None else d.weight_capacity for d in inst.devices]
    nch = links.n_channels
    deg = int(np.diff(p_off).max()) if n else 0
    stt = (sched, np.zeros((2, n, 3), np.int64), np.zeros(3, np.int64), dv,
           np.full((2, nd, nb), -1, np.int64), np.zeros(nch, np.int64),
           np.zeros((2, nch + 1), np.int64), np.full(m, -1, np.int64),
           np.zeros((4, max(deg, 1)), np.int64), np.zeros(max(nb, 1), np.int64))
    tls, tle = k.new_timelines(nd, _TIMELINE_START)
    cf = (nd, int(bool(links.contention)), int(insertion), int(evict),
          int(inst.load_timing == "at_use"))
    return CompiledState(inst, as_int64(inv).reshape(-1), as_int64(rows).reshape(len(rows), nd), gr, bl,
                         stt, tls, tle, cf)


def raise_for(state: CompiledState, code: int, t: int, policy_name: str = "") -> None:
    """Raise the InputError of the Python engine for a kernel's return code (0: none)."""
    k = kernels()
    inst = state.inst
    if code == k.TWICE:
        raise InputError(f"priority order lists task '{inst.task_ids[t]}' twice", field="order")
    if code == k.NOT_TOPOLOGICAL:
        raise InputError(f"priority order is not topological at task '{inst.task_ids[t]}'",
                         field="order")
    if code == k.NO_DEVICE:
        raise no_device_error(inst, t)
    if code == k.NO_CLASS_DEVICE:
        raise class_error(inst, t, policy_name)


def no_device_error(inst: PlacementInstance, t: int) -> InputError:
    """Task t's block fits on none of its legal devices."""
    b = int(inst.task_block[t])
    return InputError(f"task '{inst.task_ids[t]}' fits on no device: its block "
                      f"'{inst.block_ids[b]}' exceeds every remaining capacity",
                      field="capacity")


def class_error(inst: PlacementInstance, t: int, policy_name: str) -> InputError:
    """The policy ``policy_name`` cannot keep task t in its device class (DOPS Table 1, issue
    35 item 2): t's block is larger than every legal device of the class."""
    b = int(inst.task_block[t])
    return InputError(f"policy '{policy_name}' cannot keep task '{inst.task_ids[t]}' in its "
                      f"device class: block '{inst.block_ids[b]}' ({int(inst.block_bytes[b])} "
                      f"bytes) is larger than every such device", field="policy")


def compiled_solution(state: CompiledState) -> dict:
    """The solution of a complete compiled schedule (``ScheduleState.solution``); the transfer
    starts go to ``make_solution`` as the kernels' per-edge array (−1: no transfer)."""
    from opt.placement.solution import make_solution

    n_loads, n_evictions, scheduled = state.counts
    sched, ev = state.stt[0], state.stt[1]
    if scheduled != state.inst.n_tasks or (len(sched[0]) and int(sched[0].min()) < 0):
        raise InputError("priority order does not cover every task", field="order")
    return make_solution(state.inst, sched[0], sched[1], state.stt[7],
                         ev[0, :n_loads].tolist(), ev[1, :n_evictions].tolist())


def order_array(inst: PlacementInstance, order: Any) -> np.ndarray:
    """``order`` (any iterable of task indices) as int64; InputError for an index out of range
    (the kernels do not check bounds)."""
    a = order if isinstance(order, np.ndarray) else np.fromiter(order, dtype=np.int64)
    a = as_int64(a).reshape(-1)
    if len(a) and (int(a.min()) < 0 or int(a.max()) >= inst.n_tasks):
        raise InputError(f"priority order lists a task index outside 0..{inst.n_tasks - 1}",
                         field="order")
    return a


def eft_schedule(inst: PlacementInstance, order: Any, cost_types: tuple[np.ndarray, np.ndarray],
                 *, insertion: bool, classes: tuple[np.ndarray, np.ndarray] | None = None,
                 policy_name: str = "", fit_classes: np.ndarray | None = None) -> dict:
    """``list_schedule`` compiled: each task of ``order`` on the candidate device of earliest
    finish (LRU eviction where a load does not fit; with ``fit_classes``, each device's class
    code, a device that would evict only when none of its class can take the task without:
    ``device_choice`` ``fit_in_class``); ``classes`` = (each task's class, −1
    none: int64 [n]; class × device membership: uint8 [K, nd]), checked by
    ``DeviceClasses.arrays`` (the kernel does not check bounds), narrows the candidates."""
    state = compiled_state(inst, cost_types, insertion=insertion, evict=True)
    tcls, cmem = classes if classes is not None else \
        (np.zeros(0, np.int64), np.zeros((1, inst.n_devices), np.uint8))
    code, t = kernels().eft_loop(order_array(inst, order), state.ttype, state.type_dur, state.gr, state.bl,
                                 state.stt, state.tls, state.tle, state.cf, tcls, cmem,
                                 np.zeros(0, np.int64) if fit_classes is None
                                 else as_int64(fit_classes))
    raise_for(state, int(code), int(t), policy_name)
    return compiled_solution(state)


# ---- the task order ------------------------------------------------------------------------------

#: numpy sums a row of fewer than 8 values in order (pairwise from 8 on): ``upward_rank``'s mean
#: costs are summed in the kernels only below this many devices, so they stay bit for bit.
SEQUENTIAL_ROWS = 8


def comm_means(inst: PlacementInstance) -> tuple[float, float]:
    """(mean latency, mean inverse bandwidth) over the ordered pairs of distinct devices
    (ticks, ticks per byte; 0, 0 with one device): ``upward_rank``'s mean transfer time of an
    edge is the first plus its bytes times the second."""
    nd = inst.n_devices
    if nd < 2:
        return 0.0, 0.0
    off = ~np.eye(nd, dtype=bool)
    lat = inst.links.latency[off].astype(np.float64)
    return float(lat.mean()), float((1.0 / inst.links.bandwidth[off]).mean())


def rank_inputs(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(mean legal duration per task, mean transfer time per edge), float64, of
    ``upward_rank`` (numpy)."""
    cost = inst.cost.astype(np.float64)
    legal = cost >= 0
    mean_cost = np.where(legal, cost, 0).sum(axis=1) / legal.sum(axis=1)
    lat_mean, inv_bw_mean = comm_means(inst)
    return mean_cost, lat_mean + inst.edge_bytes * inv_bw_mean


def _rank_args(inst: PlacementInstance) -> tuple[Any, ...]:
    """The arguments of the kernels ``upward_ranks`` and ``heft_order``."""
    s_off, s_idx = inst.successors
    return (as_int64(inst.topological_order), as_int64(s_off), as_int64(s_idx),
            as_int64(inst.edge_dst), as_int64(inst.cost), as_int64(inst.edge_bytes),
            *comm_means(inst))


def upward_ranks(inst: PlacementInstance) -> np.ndarray:
    """``upward_rank`` compiled (float64 [n])."""
    if inst.n_devices < SEQUENTIAL_ROWS:
        return kernels().upward_ranks(*_rank_args(inst))
    return rank_loop(inst, *rank_inputs(inst))


def heft_order(inst: PlacementInstance) -> np.ndarray:
    """HEFT's order (``priority_order`` of ``upward_rank``) compiled: int64 task indices."""
    if inst.n_devices < SEQUENTIAL_ROWS:
        return kernels().heft_order(*_rank_args(inst))
    return priority_array(inst, rank_loop(inst, *rank_inputs(inst)))


def bifocal_order(inst: PlacementInstance) -> tuple[np.ndarray, bool]:
    """(order, exact): HEFT's order with the siblings moved up (``bifocal.sibling_order``),
    compiled in one call; ``exact`` False when the caller must group the siblings itself (a
    hash collision of two predecessor sets, or too many devices for the kernels' row sums)."""
    if inst.n_devices >= SEQUENTIAL_ROWS:
        return heft_order(inst), False
    p_off, p_idx = inst.predecessors
    order, exact = kernels().bifocal_order(*_rank_args(inst), as_int64(p_off), as_int64(p_idx),
                                           as_int64(inst.edge_src))
    return order, bool(exact)


def rank_loop(inst: PlacementInstance, mean_cost: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """``upward_rank``'s loop, compiled (float64 [n])."""
    s_off, s_idx = inst.successors
    return kernels().upward_rank_loop(as_int64(inst.topological_order), as_int64(s_off), as_int64(s_idx),
                                      as_int64(inst.edge_dst), np.ascontiguousarray(mean_cost,
                                                                                np.float64),
                                      np.ascontiguousarray(comm, np.float64))


def priority_array(inst: PlacementInstance, priority: np.ndarray) -> np.ndarray:
    """``priority_order`` compiled: int64 task indices."""
    s_off, s_idx = inst.successors
    indeg = as_int64(np.bincount(inst.edge_dst, minlength=inst.n_tasks))
    neg = -np.ascontiguousarray(priority, dtype=np.float64)
    return kernels().priority_loop(indeg, as_int64(s_off), as_int64(s_idx), as_int64(inst.edge_dst), neg)


def sibling_array(order: Any, gid: np.ndarray, pinned: np.ndarray) -> np.ndarray:
    """``sibling_order``'s loop compiled: int64 task indices."""
    n_groups = int(gid.max()) + 1 if len(gid) else 0
    return kernels().sibling_loop(as_int64(order), as_int64(gid), np.ascontiguousarray(pinned, bool),
                                  max(n_groups, 1))


# ---- the set-up ----------------------------------------------------------------------------------

def unique_rows(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`opt.common.rows.unique_rows` compiled: the same rows in the same order and the
    same inverse (the reference itself for an empty matrix or a hash collision)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        return _rows.unique_rows(a)
    first, inv, exact = kernels().unique_rows(a, _rows.row_weights(a.shape[1]))
    if not exact:
        return _rows.unique_rows(a)
    return a[first], inv


def unique_values(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` of an integer vector, compiled (int64 arrays)."""
    values, _, inv = kernels().unique_inverse(as_int64(a).reshape(-1))
    return values, inv


def window_types(inst: PlacementInstance, H: int, dcls: np.ndarray, K: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(distinct rows, each task's row, heaviest successor, all tails finite) of the int64
    rows [n, nd + 2K] of each task's cost row, window tail per class (truncated to int) and
    best pattern per class, as ``bifocal.window_tails`` computes them (depth ``H`` ≥ 1, class
    ``dcls`` per device, ``K`` classes) and ``opt.common.rows.unique_rows`` groups them."""
    src, dst, nbytes = as_int64(inst.edge_src), as_int64(inst.edge_dst), as_int64(inst.edge_bytes)
    bw = np.ascontiguousarray(inst.links.bandwidth, dtype=np.float64)
    w = _rows.row_weights(inst.n_devices + 2 * K)
    cost = as_int64(inst.cost)
    tails, first, inv, hs, finite, exact = kernels().window_types(
        cost, as_int64(dcls), K, H, src, dst, nbytes, as_int64(inst.links.latency), bw, w)
    if not exact or len(cost) == 0:
        return (*_rows.unique_rows(np.concatenate([cost, tails], axis=1)), hs, bool(finite))
    return np.concatenate([cost[first], tails[first]], axis=1), inv, hs, bool(finite)
