"""The schedulers' arrays: the partial schedule's state built from an instance for the numba
kernels (:mod:`heuristics.placement.state_kernels`, :mod:`heuristics.placement.bifocal_kernels`;
the named tuples of :mod:`heuristics.placement.kernel_types`), the kernels' return codes turned
into InputErrors, the solution read back, and the calls of the order and set-up kernels
(:mod:`heuristics.placement.order_kernels`, :mod:`heuristics.placement.setup_kernels`). The
kernels are the schedulers' one implementation at every size (numba compiles them once per
machine and caches them on disk, ``cache=True``).

The set-up kernels give their numpy references' values bit for bit and fall back to them where
they cannot: a hash collision (:func:`unique_rows`, :func:`window_types`, the sibling groups)
or 8 or more devices, where numpy sums a row's mean cost pairwise (:data:`SEQUENTIAL_ROWS`;
:func:`rank_inputs` then gives the ranks' inputs, and the rank and order loops stay compiled).

Debugging: ``NUMBA_DISABLE_JIT=1`` (environment) runs the same kernels as plain Python, where
breakpoints and prints work; a kernel's ``py_func`` attribute is its Python function (e.g.
``state_kernels.eft_loop.py_func``), callable with the same arguments (docs/speed.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from heuristics.placement import order_kernels, setup_kernels, state_kernels
from heuristics.placement.kernel_types import Blocks, Candidates, Config, Costs, Graph, State
from opt.common import rows as _rows
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.placement.solution import make_solution

#: Initial capacity of each device's timeline arrays (doubled when full).
_TIMELINE_START = 64
#: the kernels' code of each ``load_timing`` (:class:`Config`'s ``load_rule``)
LOAD_RULES = {"prefetch": state_kernels.PREFETCH, "at_use": state_kernels.AT_USE,
              "overlap": state_kernels.OVERLAP}


def as_int64(a: Any) -> np.ndarray:
    """``a`` as a C-contiguous int64 array (no copy when it is one)."""
    return np.ascontiguousarray(a, dtype=np.int64)


# ---- the schedule state as arrays ---------------------------------------------------------------

@dataclass
class CompiledState:
    """The kernels' arrays of a partial schedule of ``inst`` (named tuples of
    :mod:`heuristics.placement.kernel_types`), built once per instance; times in ns."""

    inst: PlacementInstance
    costs: Costs
    graph: Graph
    blocks: Blocks
    state: State
    cf: Config

    @property
    def counts(self) -> tuple[int, int, int]:
        """(loads, evictions, scheduled tasks) so far."""
        cnt = self.state.cnt
        return int(cnt[0]), int(cnt[1]), int(cnt[2])

    @property
    def device(self) -> np.ndarray:
        """int64 [n]: each task's device (−1 unscheduled)."""
        return self.state.sched[0]


def _pair_channels(inst: PlacementInstance) -> np.ndarray:
    """int64 [nd·nd, 3]: per ordered device pair, its channel count and channel ids."""
    nd = inst.n_devices
    pchan = np.zeros((nd * nd, 3), np.int64)
    for i in range(nd):
        for j in range(nd):
            c = inst.links.channels(i, j)
            pchan[i * nd + j, 0] = len(c)
            pchan[i * nd + j, 1:1 + len(c)] = c
    return pchan


def _graph(inst: PlacementInstance) -> Graph:
    """The task graph with the transfer durations deduplicated by payload size."""
    nd = inst.n_devices
    p_off, p_idx = inst.predecessors
    if inst.n_edges:
        ub, etype = unique_values(inst.edge_bytes)
        etab = as_int64(inst.links.transfer_durations(ub).reshape(len(ub), nd * nd))
    else:
        etab, etype = np.zeros((1, nd * nd), np.int64), np.zeros(0, np.int64)
    return Graph(as_int64(p_off), as_int64(p_idx), as_int64(inst.edge_src), etype, etab,
                 _pair_channels(inst))


def _empty_state(inst: PlacementInstance) -> State:
    """The state of an empty schedule (layout in :mod:`heuristics.placement.state_kernels`)."""
    n, nd, m, nb = inst.n_tasks, inst.n_devices, inst.n_edges, len(inst.block_ids)
    sched = np.zeros((3, n), np.int64)
    sched[0] = -1
    dv = np.zeros((5, nd), np.int64)
    dv[2] = [-1 if d.weight_capacity is None else d.weight_capacity for d in inst.devices]
    nch = inst.links.n_channels
    deg = int(np.diff(inst.predecessors[0]).max()) if n else 0
    tls, tle = state_kernels.new_timelines(nd, _TIMELINE_START)
    return State(sched, np.zeros((2, n, 3), np.int64), np.zeros(3, np.int64), dv,
                 np.full((2, nd, nb), -1, np.int64), np.zeros(nch, np.int64),
                 np.zeros((2, nch + 1), np.int64), np.full(m, -1, np.int64),
                 np.zeros((4, max(deg, 1)), np.int64), np.zeros(max(nb, 1), np.int64), tls, tle)


def compiled_state(inst: PlacementInstance, cost_types: tuple[np.ndarray, np.ndarray], *,
                   insertion: bool, evict: bool) -> CompiledState:
    """The empty schedule state of ``inst`` for the kernels: task durations by cost type
    (``cost_types`` = (distinct cost rows, each task's row)), transfer durations by payload,
    channels, blocks, capacities; ``insertion`` into idle gaps, LRU eviction with ``evict``."""
    nd, nb = inst.n_devices, len(inst.block_ids)
    rows, inv = cost_types
    blocks = Blocks(as_int64(inst.task_block), as_int64(inst.block_bytes),
                    as_int64(inst.load_duration).reshape(nb, nd))
    cf = Config(nd, int(bool(inst.links.contention)), int(insertion), int(evict),
                LOAD_RULES[inst.load_timing])
    costs = Costs(as_int64(inv).reshape(-1), as_int64(rows).reshape(len(rows), nd))
    return CompiledState(inst, costs, _graph(inst), blocks, _empty_state(inst), cf)


def raise_for(state: CompiledState, code: int, t: int, policy_name: str = "") -> None:
    """Raise the InputError of a kernel's return code (0: none) for task t."""
    k = state_kernels
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
    """The policy ``policy_name`` cannot keep task t in its device class (DOPS Table 1): t's
    block is larger than every legal device of the class."""
    b = int(inst.task_block[t])
    return InputError(f"policy '{policy_name}' cannot keep task '{inst.task_ids[t]}' in its "
                      f"device class: block '{inst.block_ids[b]}' ({int(inst.block_bytes[b])} "
                      f"bytes) is larger than every such device", field="policy")


def compiled_solution(state: CompiledState) -> dict:
    """The solution of a complete schedule; the transfer starts go to ``make_solution`` as the
    kernels' per-edge array (−1: no transfer)."""
    n_loads, n_evictions, scheduled = state.counts
    sched, ev = state.state.sched, state.state.ev
    if scheduled != state.inst.n_tasks or (len(sched[0]) and int(sched[0].min()) < 0):
        raise InputError("priority order does not cover every task", field="order")
    return make_solution(state.inst, sched[0], sched[1], state.state.tstart,
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
                 policy_name: str = "", fit_classes: np.ndarray | None = None,
                 least_available: bool = False) -> dict:
    """``list_schedule``'s loop (:func:`heuristics.placement.state_kernels.eft_loop`): each
    task of ``order`` on the candidate device of earliest finish (LRU eviction where a load
    does not fit; with ``fit_classes``, each device's class code, a device that would evict
    only when none of its class can take the task without: ``device_choice``
    ``fit_in_class``; ``least_available``: the candidate whose timeline ends first instead,
    ``device_choice`` ``least_available``); ``classes`` = (each task's class, −1 none: int64
    [n]; class × device membership: uint8 [K, nd]), checked by ``DeviceClasses.arrays`` (the
    kernel does not check bounds), narrows the candidates."""
    cs = compiled_state(inst, cost_types, insertion=insertion, evict=True)
    tcls, cmem = classes if classes is not None else \
        (np.zeros(0, np.int64), np.zeros((1, inst.n_devices), np.uint8))
    fit = np.zeros(0, np.int64) if fit_classes is None else as_int64(fit_classes)
    code, t = state_kernels.eft_loop(order_array(inst, order), cs.costs, cs.graph, cs.blocks,
                                     cs.state, cs.cf, Candidates(tcls, cmem, fit),
                                     int(least_available))
    raise_for(cs, int(code), int(t), policy_name)
    return compiled_solution(cs)


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
    """HEFT's upward rank (float64 [n]): mean legal duration + max over successors of (mean
    transfer time between distinct devices + their rank)."""
    if inst.n_devices < SEQUENTIAL_ROWS:
        return order_kernels.upward_ranks(*_rank_args(inst))
    return rank_loop(inst, *rank_inputs(inst))


def heft_order(inst: PlacementInstance) -> np.ndarray:
    """HEFT's order (the priority order of the upward rank): int64 task indices."""
    if inst.n_devices < SEQUENTIAL_ROWS:
        return order_kernels.heft_order(*_rank_args(inst))
    return priority_array(inst, rank_loop(inst, *rank_inputs(inst)))


def bifocal_order(inst: PlacementInstance) -> tuple[np.ndarray, bool]:
    """(order, exact): HEFT's order with the siblings moved up (``bifocal.sibling_order``),
    in one call; ``exact`` False when the caller must group the siblings itself (a
    hash collision of two predecessor sets, or too many devices for the kernels' row sums)."""
    if inst.n_devices >= SEQUENTIAL_ROWS:
        return heft_order(inst), False
    p_off, p_idx = inst.predecessors
    args = (*_rank_args(inst), as_int64(p_off), as_int64(p_idx), as_int64(inst.edge_src))
    order, exact = order_kernels.bifocal_order(*args)
    return order, bool(exact)


def rank_loop(inst: PlacementInstance, mean_cost: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """The upward rank's loop over the given mean durations and transfer times (float64 [n])."""
    s_off, s_idx = inst.successors
    return order_kernels.upward_rank_loop(as_int64(inst.topological_order), as_int64(s_off), as_int64(s_idx),
                                      as_int64(inst.edge_dst), np.ascontiguousarray(mean_cost,
                                                                                np.float64),
                                      np.ascontiguousarray(comm, np.float64))


def priority_array(inst: PlacementInstance, priority: np.ndarray) -> np.ndarray:
    """Topological order taking the highest ``priority`` among ready tasks first (ties: the
    lowest index): int64 task indices."""
    s_off, s_idx = inst.successors
    indeg = as_int64(np.bincount(inst.edge_dst, minlength=inst.n_tasks))
    neg = -np.ascontiguousarray(priority, dtype=np.float64)
    return order_kernels.priority_loop(indeg, as_int64(s_off), as_int64(s_idx), as_int64(inst.edge_dst), neg)


def sibling_array(order: Any, gid: np.ndarray, pinned: np.ndarray) -> np.ndarray:
    """``bifocal.sibling_order``'s loop: int64 task indices."""
    n_groups = int(gid.max()) + 1 if len(gid) else 0
    return order_kernels.sibling_loop(as_int64(order), as_int64(gid), np.ascontiguousarray(pinned, bool),
                                  max(n_groups, 1))


# ---- the set-up ----------------------------------------------------------------------------------

def unique_rows(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`opt.common.rows.unique_rows` by the kernel: the same rows in the same order and the
    same inverse (the reference itself for an empty matrix or a hash collision)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        return _rows.unique_rows(a)
    first, inv, exact = setup_kernels.unique_rows(a, _rows.row_weights(a.shape[1]))
    if not exact:
        return _rows.unique_rows(a)
    return a[first], inv


def unique_values(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` of an integer vector by the kernel (int64 arrays)."""
    values, _, inv = setup_kernels.unique_inverse(as_int64(a).reshape(-1))
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
    tails, first, inv, hs, finite, exact = setup_kernels.window_types(
        cost, as_int64(dcls), K, H, src, dst, nbytes, as_int64(inst.links.latency), bw, w)
    if not exact or len(cost) == 0:
        return (*_rows.unique_rows(np.concatenate([cost, tails], axis=1)), hs, bool(finite))
    return np.concatenate([cost[first], tails[first]], axis=1), inv, hs, bool(finite)
