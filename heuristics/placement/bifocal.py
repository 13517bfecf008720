"""Bifocal (DOPS §5.1): a list scheduler over the ready set whose device choice looks both
*near* (the task's own earliest finish and a lookahead simulation over its successors) and
*far* (the reuse of weights over phases and tokens). The paper's text is the definition; where
it is silent, the authors' released ``BifocalScheduler`` decides (YIAI-02/TriForm
``src/scheduler/scheduler_bifocal.py`` at d2c679fa9902a42f92f8e7592861322f52d402d3), and
its defaults are their released configuration (:data:`AUTHORS_CONFIG`). docs/problems.md §6
("Bifocal") defines every term, default and extension; this module implements them.

Rules implemented:

- Ready-set order (``ready_set``): ``score`` (default) is DOPS §5.1.2 and Algorithm 1 — each
  iteration scores every ready task on each legal device under the current partial schedule
  and commits the ready task whose best placement scores least (ties: the lower EFT, then
  HEFT's upward-rank order); ``rank`` is HEFT's static order with the ``siblings`` extension
  (:func:`sibling_groups`, :func:`sibling_order`).
- Device score (DOPS Eq. 2–4), lowest wins (ties: the lower EFT, then the lowest index):
  ``(1 − γ)·EFT + γ·T̂_H + B_phase + B_token`` (+ the eviction and copy costs, extensions
  off by default). EFT has every rule of problems.md §1.2 under the instance's load rule and
  starts a task no earlier than its device's free time under the score order (Eq. 1 and 3,
  ``insertion: auto``); T̂_H is the lookahead simulation of the window (the task and its
  heaviest-payload successors) from the partial schedule, with the near-future hints' consistency
  penalty (:mod:`heuristics.placement.bifocal_window`); B_phase the reload penalty against
  the hint map θ and the prefill gain; B_token Eq. 4's amortisation over R_i = L_out − i + 1.
- Decode steps scored (``plan_refresh_stride`` r): 1 (default) scores every decode task, as
  Algorithm 1 does; r > 1 or 0 is the authors' ``decode_plan_refresh_stride``: the decode
  tasks of the steps it does not refresh replay the last refreshed step's devices and order
  through the same list scheduler (:func:`replay_map`;
  :data:`heuristics.placement.bifocal_params.PLAN_REFRESH_DEFAULT`).
- :data:`EFT_ONLY` (every far-focus term and extension off, HEFT's order) is HEFT's list
  schedule where no capacity binds.
- ``stats["flipped_decisions"]`` counts, per term of :data:`FLIP_TERMS`, the tasks whose
  device would differ in the same partial schedule without that term.

The algorithm is deterministic (``seed`` is accepted and reported). This module prepares the
loop's data (θ, the per-class counts, the window's chains (:mod:`heuristics.placement.
bifocal_setup`), the order) and runs the loop, the numba kernel
:func:`heuristics.placement.bifocal_kernels.bifocal_loop`, which commits through the list
scheduler's kernels (:mod:`heuristics.placement.state_kernels`; docs/speed.md, "Schedulers
(Bifocal, HEFT)"; ``NUMBA_DISABLE_JIT=1`` runs it as plain Python).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from heuristics.placement import bifocal_kernels
from heuristics.placement import schedule_arrays as _arrays
from heuristics.placement.bifocal_params import (  # noqa: F401 (re-exported)
    AUTHORS_CONFIG,
    AUTO_PARAMS,
    EFT_ONLY,
    EXTENSIONS_OFF,
    FLIP_TERMS,
    READY_SETS,
    TOKEN_HORIZONS,
    BifocalParams,
)
from heuristics.placement.bifocal_setup import window_arrays
from heuristics.placement.kernel_types import BifocalData, ReadySet, Terms
from heuristics.placement.schedule_arrays import as_int64
from opt.common.errors import InputError
from opt.common.rows import splitmix64
from opt.placement.instance import PlacementInstance

#: Version of Bifocal's schedules, part of its recorded settings (the ``revision`` field of a
#: sweep record, :func:`solvers.placement.backends.bifocal_settings`): a record of another
#: version is recomputed rather than trusted. Raised whenever a change of this module changes a
#: schedule under the same parameters.
BIFOCAL_VERSION = 8


# ---------------------------------------------------------------------------------------------
# per-task durations by class

def legal_durations(cost: np.ndarray) -> np.ndarray:
    """float copy of cost-matrix rows (−1 = illegal) with inf where a device is illegal."""
    c = cost.astype(np.float64)
    c[cost < 0] = np.inf
    return c


def class_durations(cost: np.ndarray, dev_cls: np.ndarray, K: int) -> np.ndarray:
    """[rows, K] each row's shortest duration on a device of each class (inf where the class
    has no legal device); ``cost`` rows of the instance's cost matrix (−1 = illegal)."""
    c = legal_durations(cost)
    return np.stack([c[:, dev_cls == k].min(axis=1) for k in range(K)], axis=1)


def sibling_groups(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: a group id shared by tasks with the same non-empty set of predecessors (the
    q/k/v projections of one normed input) that can run side by side, −1 for every other task.
    Side by side: each member has two or more legal devices, and the members' shortest
    durations summed exceed some member's duration on a device other than its fastest — in
    sequence on their fastest device they would finish later than spread."""
    c = legal_durations(inst.cost)
    gid = _same_predecessors(inst, np.isfinite(c).sum(axis=1) >= 2)
    grouped = np.flatnonzero(gid >= 0)
    if len(grouped) == 0:
        return gid
    two = np.sort(c[grouped], axis=1)[:, :2]  # shortest and second shortest duration
    ng = int(gid.max()) + 1
    size = np.bincount(gid[grouped], minlength=ng)
    total = np.bincount(gid[grouped], weights=two[:, 0], minlength=ng)
    second = np.full(ng, np.inf)
    np.minimum.at(second, gid[grouped], two[:, 1])  # a member away from the others' device
    keep = (size > 1) & (total > second)
    gid[grouped[~keep[gid[grouped]]]] = -1
    return gid


def _same_predecessors(inst: PlacementInstance, eligible: np.ndarray) -> np.ndarray:
    """int64 [n]: a group id per eligible task with predecessors, shared by the eligible tasks
    with the same predecessor set (−1 otherwise; ids need not be consecutive). Sets are hashed
    (a commutative sum of splitmix64 mixes) and then compared exactly, so a hash collision
    cannot merge two sets."""
    n = inst.n_tasks
    gid = np.full(n, -1, dtype=np.int64)
    p_off, p_idx = inst.predecessors
    cnt = np.diff(p_off)
    has = np.flatnonzero((cnt > 0) & eligible)
    if len(has) < 2:
        return gid
    src = inst.edge_src[p_idx]
    h = _set_hash(src, p_off)
    _, inv, counts = np.unique(h[has], return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    multi = counts[inv] > 1
    cand, k = has[multi], inv[multi]
    if len(cand) == 0:
        return gid
    # exact check, vectorised: each candidate's sorted predecessors against those of the
    # first candidate with its hash; a mismatch (a collision) is grouped one by one below
    seg = np.repeat(np.arange(n), cnt)
    ssrc = src[np.lexsort((src, seg))]
    by_k = np.argsort(k, kind="stable")
    first = by_k[np.concatenate([[True], k[by_k][1:] != k[by_k][:-1]])]
    rep = np.full(len(counts), -1, dtype=np.int64)
    rep[k[first]] = cand[first]  # the first candidate of each hash
    c_cnt = cnt[cand]
    pos = np.arange(int(c_cnt.sum())) - np.repeat(np.cumsum(c_cnt) - c_cnt, c_cnt)
    mine = np.repeat(p_off[cand], c_cnt) + pos
    theirs = np.minimum(np.repeat(p_off[rep[k]], c_cnt) + pos, len(ssrc) - 1)
    same = (cnt[rep[k]] == c_cnt) & np.logical_and.reduceat(ssrc[mine] == ssrc[theirs],
                                                           np.cumsum(c_cnt) - c_cnt)
    gid[cand[same]] = k[same]
    exact: dict[tuple[int, ...], int] = {}
    for t in cand[~same].tolist():
        preds = tuple(ssrc[p_off[t]:p_off[t + 1]].tolist())
        gid[t] = exact.setdefault(preds, len(counts) + len(exact))
    return gid


def _set_hash(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """uint64 [len(offsets) − 1]: an order-independent hash of each CSR segment of
    ``values`` (the sum of :func:`splitmix64` mixes, wrapping; 0 for an empty segment)."""
    cnt = np.diff(offsets)
    z = splitmix64(values)
    nonempty = np.flatnonzero(cnt > 0)  # offsets strictly increasing: one sum each
    h = np.zeros(len(cnt), dtype=np.uint64)
    if len(nonempty):
        with np.errstate(over="ignore"):
            h[nonempty] = np.add.reduceat(z, offsets[nonempty])
    return h


def _sibling_data(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(sibling group per task (:func:`sibling_groups`), whether a task is pinned: one legal
    device) — what :func:`sibling_order` reads."""
    return sibling_groups(inst), (inst.cost >= 0).sum(axis=1) == 1


def sibling_order(inst: PlacementInstance, order: Sequence[int]) -> list[int]:
    """``order`` in which a sibling (:func:`sibling_groups`) whose group has begun is moved
    ahead of the pinned tasks (one legal device) listed since the previous unmoved task: a
    pinned successor of the first sibling no longer takes its device before the later
    siblings are scored there. Still topological: a moved sibling's predecessors are its
    group's, all listed before the first sibling, while the pinned tasks it passes come after."""
    return _arrays.sibling_array(order, *_sibling_data(inst)).tolist()


def load_port_prior(inst: PlacementInstance, dev_cls: list[int]) -> list[int]:
    """θ before any commit (switch ``prior``, an extension): blocks assigned to load ports by
    longest-processing-time-first list scheduling — each block, longest cheapest load first,
    goes to the legal device whose port would finish its loads earliest — and θ(b) = that
    device's class. Balances the weight traffic over the ports, which EFT alone cannot see."""
    nb, nd = len(inst.block_ids), inst.n_devices
    users = np.zeros((nb, nd), dtype=bool)
    has = np.flatnonzero(inst.task_block >= 0)
    legal = inst.cost[has] >= 0
    np.logical_or.at(users, inst.task_block[has], legal)
    ld = inst.load_duration.astype(np.float64)
    ld[(ld < 0) | ~users] = np.inf
    order = np.argsort(-np.where(np.isfinite(ld), ld, -np.inf).min(axis=1), kind="stable")
    port = np.zeros(nd)
    theta = [-1] * nb
    for b in order.tolist():
        fin = port + ld[b]
        if not np.isfinite(fin).any():
            continue
        d = int(np.argmin(fin))
        port[d] = fin[d]
        theta[b] = dev_cls[d]
    return theta


# ---------------------------------------------------------------------------------------------

def bifocal_schedule(inst: PlacementInstance, params: dict[str, Any] | BifocalParams | None = None,
                     *, order: list[int] | None = None, stats: dict[str, Any] | None = None,
                     rescore_all: bool = False) -> dict:
    """The Bifocal schedule of ``inst`` (problems.md §1.2a solution dict); see the module docstring.

    params: a dict of :class:`BifocalParams` fields (unknown names raise InputError);
    order: a static task order to commit in (``ready_set`` then does not apply; default: the
    ``ready_set`` parameter's order); stats: filled with counters and timings when given;
    rescore_all: under the ready set by score, re-score every ready task on every device at
    each iteration rather than keep the scores the last commit cannot change (the same
    schedule and statistics, more work: the oracle of tests/placement/test_score_cache.py;
    no method parameter)."""
    p = params if isinstance(params, BifocalParams) else BifocalParams.from_dict(params)
    t0 = time.perf_counter()
    classes: list[str] = []
    for dv in inst.devices:
        if dv.device_class not in classes:
            classes.append(dv.device_class)
    dcls_l = [classes.index(dv.device_class) for dv in inst.devices]
    by_score = order is None and p.ready_set == "score"
    gaps = inserts(p, by_score)
    cs = _arrays.compiled_state(inst, _arrays.unique_rows(inst.cost), insertion=gaps,
                                evict=True)
    t_pre = time.perf_counter()
    heft_pos = _positions(_arrays.heft_order(inst)) if by_score or window_on(p) else None
    order_a = None
    if not by_score:
        order_a = _arrays.order_array(inst, order) if order is not None else \
            _static_order(inst, p)
    t_order = time.perf_counter()
    bias = _biases(inst, p, dcls_l, len(classes))
    ties_by_eft, flips, n_replayed, n_refused = _run(inst, cs, order_a, heft_pos, p, bias,
                                                     dcls_l, len(classes), rescore_all)
    t_loop = time.perf_counter()
    solution = _arrays.compiled_solution(cs)
    t_end = time.perf_counter()
    if stats is not None:
        stats.update(_stats(inst, p, cs, order is not None, gaps, bias, classes, dcls_l))
        stats.update({"ties_broken_by_eft": ties_by_eft, "flipped_decisions": flips,
                      "replayed": n_replayed, "replays_refused": n_refused,
                      "types": int(cs.costs.type_dur.shape[0]),
                      "time_s": {"precompute": t_pre - t0, "order": t_order - t_pre,
                                 "schedule": t_loop - t_order, "solution": t_end - t_loop,
                                 "total": t_end - t0}})
    return solution


def _stats(inst: PlacementInstance, p: BifocalParams, cs: _arrays.CompiledState,
           given_order: bool, gaps: bool, bias: _Biases, classes: list[str], dcls_l: list[int]
           ) -> dict[str, Any]:
    """The statistics of a finished run but the loop's counters and the timings: the settings
    in effect, the loads and evictions, the tasks per device class."""
    n_loads, n_evictions, _ = cs.counts
    per_class = np.bincount(np.asarray(dcls_l, dtype=np.int64)[cs.device], minlength=len(classes))
    out: dict[str, Any] = {}
    # siblings, insertion: the values in effect
    recorded = asdict(p)
    recorded["siblings"] = sibling_moves(p)
    recorded["insertion"] = gaps
    if given_order:
        recorded["ready_set"] = "order"  # the caller's static order
    out.update({"params": recorded, "classes": classes, "l_out": bias.l_out,
                "loads": n_loads, "evictions": n_evictions,
                "tasks_per_class": dict(zip(classes, per_class.tolist()))})
    return out


def sibling_moves(p: BifocalParams) -> bool:
    """Whether siblings move up in the static order (``siblings``; ``auto``: under
    ``ready_set: rank``, the only order it applies to)."""
    return p.ready_set == "rank" if p.siblings == "auto" else bool(p.siblings)


def inserts(p: BifocalParams, by_score: bool) -> bool:
    """Whether a task may start in an idle gap before its device's free time (``insertion``;
    ``auto``: not under the score order, where DOPS Eq. 1 and 3 start it no earlier than
    avail(k); in a static order — ``rank`` or a caller's —, HEFT's insertion)."""
    return not by_score if p.insertion == "auto" else bool(p.insertion)


def _positions(order: np.ndarray) -> np.ndarray:
    """int64 [n]: each task's position in ``order``."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order), dtype=np.int64)
    return pos


def _static_order(inst: PlacementInstance, p: BifocalParams) -> np.ndarray:
    """The static task order of ``ready_set: rank`` (HEFT's, siblings moved up when on)."""
    if not sibling_moves(p):
        return _arrays.heft_order(inst)
    order, exact = _arrays.bifocal_order(inst)
    if exact:
        return order
    return _arrays.sibling_array(_arrays.heft_order(inst), *_sibling_data(inst))


def window_on(p: BifocalParams) -> bool:
    """Whether the DAG window runs: the switch on, a window of H ≥ 2 vertices and γ > 0 (the
    authors' ``use_lookahead``; otherwise T̂_H = EFT and no hint is kept)."""
    return p.window and p.H >= 2 and p.gamma > 0


def _run(inst: PlacementInstance, cs: _arrays.CompiledState, order: np.ndarray | None,
         heft_pos: np.ndarray | None, p: BifocalParams, bias: _Biases, dcls_l: list[int],
         K: int, rescore_all: bool = False) -> tuple[int, dict[str, int], int, int]:
    """Run the loop (:func:`heuristics.placement.bifocal_kernels.bifocal_loop`) in a static
    ``order`` or, when it is None, by the score with ties to the lower EFT, then the earlier
    in HEFT's order (``heft_pos``, also the window chain's ties): per task the device of
    lowest score (1 − γ)·EFT + γ·T̂_H + B_phase + B_token (+ the eviction and copy costs;
    problems.md §6), ties to the lower EFT; ``rescore_all``: every ready task re-scored at
    each iteration (:func:`bifocal_schedule`); the decode tasks of the steps
    ``plan_refresh_stride`` does not score replayed (:func:`replay_map`). Returns (ties broken
    by the EFT, flipped decisions per term of :data:`FLIP_TERMS`, tasks replayed, replays
    refused: scored because the counterpart's device was not eligible)."""
    by_uses = uses_horizon(p)
    track_uses = p.evict_cost > 0 or (bias.use_token and by_uses) or p.copy_cost > 0
    look = window_on(p)
    terms = Terms(int(bias.use_phase), int(bias.use_token), int(p.token_cap), int(look),
                  p.H if look else 0, min(p.hint_max, inst.n_tasks),
                  int(p.window_patterns == "devices"), bias.l_out or 0,
                  int(track_uses), int(by_uses), int(rescore_all), float(p.gamma),
                  float(p.lam), float(p.consist), float(p.eta), float(p.alpha),
                  float(p.evict_cost), float(p.r_min), float(p.p_reuse), float(p.copy_cost))
    data = _bias_arrays(inst, p, bias, dcls_l, K)
    none = _frozen(np.zeros(0, dtype=np.int64))
    if order is not None:
        ready = ReadySet(none, np.zeros(0, dtype=np.int64), none, none, none)
    else:
        assert heft_pos is not None
        s_off, s_idx = inst.successors
        ready = ReadySet(_frozen(heft_pos), np.diff(inst.predecessors[0]).astype(np.int64),
                         _frozen(as_int64(s_off)), _frozen(as_int64(s_idx)),
                         _frozen(as_int64(inst.edge_dst)))
    window = window_arrays(inst, cs.graph.etype, heft_pos if look else None, p.hint_max, p.H)
    replay = replay_map(inst, p.plan_refresh_stride)
    code, t, ties, n_replayed, n_refused = bifocal_kernels.bifocal_loop(
        _frozen(order if order is not None else none), ready, cs.costs, cs.graph, cs.blocks,
        cs.state, cs.cf, data, window, terms, replay)
    _arrays.raise_for(cs, int(code), int(t))
    return int(ties), dict(zip(FLIP_TERMS, data.flips.tolist())), int(n_replayed), \
        int(n_refused)


def refreshed_steps(steps: np.ndarray, r: int) -> np.ndarray:
    """bool per decode step (1 … L_out) in ``steps``: whether Bifocal scores it under
    ``plan_refresh_stride`` r — the authors' token t = step − 1 with t < 2 or (r > 0 and
    t mod r = 0); every step when r = 1 (:data:`heuristics.placement.bifocal_params.
    PLAN_REFRESH_DEFAULT`)."""
    t = np.asarray(steps, dtype=np.int64) - 1
    if r == 1:
        return np.ones(len(t), dtype=bool)
    return (t < 2) | ((t % r == 0) if r > 0 else np.zeros(len(t), dtype=bool))


def replay_map(inst: PlacementInstance, r: int) -> np.ndarray:
    """int64 [n]: per decode task of a step Bifocal does not score (:func:`refreshed_steps`),
    its counterpart — the task at the same position (task index order) among the tasks of the
    last scored step before it —, −1 for every other task (all −1 when r = 1 or the instance
    has no decode steps). InputError when a replayed step's tasks do not match the scored
    step's one to one (count, block, legal devices, predecessors within the step)."""
    n = inst.n_tasks
    out = np.full(n, -1, dtype=np.int64)
    if r == 1 or inst.step is None or inst.phase is None:
        return out
    dec = np.flatnonzero((inst.phase == 1) & (inst.step >= 1))
    if len(dec) == 0:
        return out
    st = inst.step[dec]
    by_step = dec[np.argsort(st, kind="stable")]  # task index order within a step
    steps, starts = np.unique(np.sort(st), return_index=True)
    bounds = np.append(starts, len(by_step))
    scored = refreshed_steps(steps, r)
    legal = inst.cost >= 0
    within = _within_step_indegree(inst)
    ref: np.ndarray | None = None
    for i, s in enumerate(steps.tolist()):
        tasks = by_step[bounds[i]:bounds[i + 1]]
        if scored[i] or ref is None:
            ref = tasks
            continue
        if len(tasks) != len(ref) or not (
                np.array_equal(inst.task_block[tasks], inst.task_block[ref])
                and np.array_equal(legal[tasks], legal[ref])
                and np.array_equal(within[tasks], within[ref])):
            raise InputError(f"plan_refresh_stride {r}: decode step {s} does not match the "
                             f"tasks of the scored step it would replay (count, blocks, "
                             f"legal devices, predecessors within the step)",
                             field="params.plan_refresh_stride")
        out[tasks] = ref
    return out


def _within_step_indegree(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: each task's predecessors of its own step and phase (the step template's
    edges, counted)."""
    assert inst.step is not None and inst.phase is not None
    src, dst = inst.edge_src, inst.edge_dst
    same = (inst.step[src] == inst.step[dst]) & (inst.phase[src] == inst.phase[dst])
    return np.bincount(dst[same], minlength=inst.n_tasks).astype(np.int64)


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``: the kernel's read-only inputs always reach it read-only,
    whether they come from the instance (read-only when read from a file) or were made here,
    so numba compiles one version of the loop, not one per combination of flags."""
    view = a.view()
    view.flags.writeable = False
    return view


def _bias_arrays(inst: PlacementInstance, p: BifocalParams, bias: _Biases, dcls_l: list[int],
                 K: int) -> BifocalData:
    """The loop's per-class and per-block data (:class:`BifocalData`)."""
    i64, n, nd = np.int64, inst.n_tasks, inst.n_devices
    pref, homeless = _homes(inst, bias.uses_left, dcls_l, K, p.copy_cost)
    class_devs = np.full((K, nd), -1, dtype=i64)
    class_n = np.zeros(K, dtype=i64)
    for d, c in enumerate(dcls_l):
        class_devs[c, class_n[c]] = d
        class_n[c] += 1
    return BifocalData(np.asarray(dcls_l, dtype=i64), class_devs, class_n,
            _frozen(as_int64(inst.phase) if inst.phase is not None else np.full(n, -1, dtype=i64)),
            _frozen(as_int64(inst.step) if inst.step is not None else np.full(n, -1, dtype=i64)),
            np.asarray(bias.theta, dtype=i64), np.asarray(bias.holds_all, dtype=i64),
            np.asarray(bias.uses_left, dtype=i64), np.asarray(pref, dtype=i64),
            np.asarray(homeless, dtype=i64), np.zeros((K, len(bias.uses_left)), dtype=i64),
            np.zeros(len(FLIP_TERMS), dtype=i64))


# ---------------------------------------------------------------------------------------------
# state set-up: phase / token / eviction-cost data

@dataclass(frozen=True)
class _Biases:
    """Per-task phase and step, θ (block -> class of its last use, −1 none; updated in place),
    whether each class can hold all blocks, L_out, the switches in effect and, for the
    eviction cost, the uses each block has left (updated in place)."""

    phase: list[int]
    step: list[int]
    theta: list[int]
    holds_all: list[bool]
    l_out: int | None
    use_phase: bool
    use_token: bool
    uses_left: list[int]


def _biases(inst: PlacementInstance, p: BifocalParams, dcls_l: list[int], K: int) -> _Biases:
    n, nb = inst.n_tasks, len(inst.block_ids)
    phase_l = inst.phase.tolist() if inst.phase is not None else [-1] * n
    step_l = inst.step.tolist() if inst.step is not None else [-1] * n
    theta = [-1] * nb
    if p.phase and p.prior and nb:
        theta = load_port_prior(inst, dcls_l)
    total_bytes = int(inst.block_bytes.sum()) if nb else 0
    holds_all = []
    for c in range(K):
        caps = [dv.weight_capacity for d, dv in enumerate(inst.devices) if dcls_l[d] == c]
        holds_all.append(any(x is None for x in caps) or sum(caps) >= total_bytes)
    l_out = None
    wl = inst.meta.get("workload") if isinstance(inst.meta, dict) else None
    if isinstance(wl, dict) and isinstance(wl.get("decode"), int):
        l_out = wl["decode"]
    elif inst.step is not None and inst.phase is not None and (inst.phase == 1).any():
        l_out = int(inst.step[inst.phase == 1].max())
    # eviction cost (extension): victims still needed later are charged their reload time
    uses_left = [0] * nb
    if (p.evict_cost > 0 or p.token or p.copy_cost > 0) and nb:
        used = inst.task_block[inst.task_block >= 0]
        uses_left = np.bincount(used, minlength=nb).tolist()
    return _Biases(phase_l, step_l, theta, holds_all, l_out, p.phase,
                   p.token and l_out is not None, uses_left)


def _homes(inst: PlacementInstance, uses_left: list[int], dcls_l: list[int], K: int,
           rho: float) -> tuple[list[int], list[int]]:
    """(preferred class per block (−1 none, all −1 without the copy cost), per class the
    still-used blocks preferring it that no device of the class holds yet): the copy cost's
    initial counts."""
    nb = len(uses_left)
    pref = preferred_class(inst, dcls_l, K) if rho > 0 else [-1] * nb
    homeless = [sum(1 for b_ in range(nb) if uses_left[b_] > 0 and pref[b_] == c)
                for c in range(K)]
    return pref, homeless


def preferred_class(inst: PlacementInstance, dcls_l: list[int], K: int) -> list[int]:
    """Per weight block, the device class on which its users' summed shortest durations are
    least (−1 for a block without users): the class whose load ports the block's first load
    will need. Decode users, one per step, outweigh the prefill's."""
    nb = len(inst.block_ids)
    has = np.flatnonzero(inst.task_block >= 0)
    if nb == 0 or len(has) == 0:
        return [-1] * nb
    per_class = class_durations(inst.cost[has], np.array(dcls_l), K)
    total = np.zeros((nb, K))
    np.add.at(total, inst.task_block[has], np.where(np.isfinite(per_class), per_class, 1e30))
    pref = np.argmin(total, axis=1)
    used = np.zeros(nb, dtype=bool)
    used[inst.task_block[has]] = True
    return np.where(used, pref, -1).tolist()


def uses_horizon(p: BifocalParams) -> bool:
    """Whether the token term amortises over the block's remaining uses (``token_horizon:
    uses``, an extension) rather than DOPS Eq. 4's remaining steps."""
    return p.token_horizon == "uses"
