"""Certified lower bounds on the optimal P1 makespan of full-size instances.

The bound is the maximum of several components. Each is a lower bound on the makespan of
*every* valid schedule (problems.md §1.2, rules 1–6, evictions allowed), so their maximum is one too.
All durations are integer ticks of the instance's ``time_unit``.

``critical_path`` and ``work_average`` (from :mod:`opt.placement.lower_bounds`)
    The longest DAG path at cheapest durations with communication 0, each task released no
    earlier than the fastest load of its block onto a legal device; the total cheapest work
    spread evenly over all devices. Their maximum is ``placement_lower_bound``, so the
    certified bound is never weaker than it.

``device_path`` — the critical path with placement (``opt.placement.lower_bounds.device_heads_tails``)
    ``max_t min_d (head[t, d] + tail[t, d])``: per (task, device) longest paths in which every
    neighbour takes its best device and pays the edge's transfer when that device differs, and
    a task with a block is released by the block's load onto that device. Forced transfers
    (``embed`` legal only on the NPU feeding ``kv_write`` pinned to a PIM) and slow-device
    loads then count; neighbours that share a device run one at a time (small fan-ins and
    fan-outs enumerated). Relaxed: the remaining resource conflicts (channels, ports,
    capacities, devices beyond one task's neighbours). One pass over the DAG per direction in
    Python, so only on instances of at most ``max_device_path_tasks`` tasks (the ``chain``
    component covers the larger ones).

``work_lp`` — fractional unrelated-machines relaxation, certified by weak duality
    For any weights ``y_d ≥ 0`` with ``Σ y_d = 1``: ``makespan ≥ max_d busy_d ≥ Σ_d y_d busy_d
    = Σ_v y_σ(v) cost[v, σ(v)] ≥ Σ_v min_{d legal} y_d cost[v, d]``. This holds for every ``y``;
    HiGHS only *chooses* a good ``y`` (the optimal dual of the LP ``min C`` s.t. fractional
    assignment, per-device work ≤ C), and the bound is then recomputed from ``y`` directly, so
    solver tolerances cannot make it invalid. It contains every "tasks legal only on class S
    must share S" argument (e.g. the single NPU's mandatory ``embed``/``lm_head`` work).
    Relaxed: precedence, communication, loads — but under ``load_timing: at_use`` each used
    block also counts as one job of its shortest load on the devices that may run its tasks
    (the load runs in its task's slot, so it occupies that device; ``work_bound.load_rows``).

``load_port`` — weight loads through the load ports
    Every block b used by a task must have a load completing on the device of each user before
    it starts, so the earliest such load, at time ``F_b``, precedes all users:
    ``makespan ≥ F_b + q_b`` with ``q_b`` the largest cheapest tail (own duration included) of
    b's users. Loads on one device are serial (one port) and start at ≥ 0; the first useful
    loads of k distinct blocks are k distinct load events, so some port is busy with them for
    ``≥ ⌈Σ min-load / #ports⌉`` and, for any port weights ``y`` in the simplex (weak duality as
    in ``work_lp``; y from HiGHS, recomputed), ``≥ Σ_b min_d y_d load[b, d]``. Taking the k
    blocks with the largest ``q``: ``makespan ≥ busy(top k) + q_(k)`` for every k. Relaxed:
    capacities, which device a block goes to, computation.

``load_chain`` — the same with chain tails
    ``q_b`` from tails strengthened by the chain decomposition below: for t in the segment
    closed by cut c_k, ``makespan − start(t) ≥ (tail[t] − tail[c_k] + dmin[c_k]) + W_k`` where
    ``W_k`` is the backward min-plus value of the segment tables after c_k.

``chain`` — decomposition at cut tasks along the token chain, with exact device coupling
    A *cut* task c is comparable with every other task (each is an ancestor or a descendant).
    All ancestors end before c starts and all descendants start after c ends, so the cuts
    c_1 < c_2 < … split time into disjoint windows ``(end(c_{k−1}), end(c_k)]`` that each hold
    the computation of one *segment* (the tasks strictly between the two cuts, plus c_k). In
    LLM instances every decode step is chained through ``lm_head → embed`` and each layer has
    several cuts (``attn_norm``, ``qk``, ``softmax``, ``sv``, ``o_proj``, ``add_attn``, …), so
    segments have 1–20 tasks. Then ``makespan ≥ Σ_k span_k`` where
    ``span_k ≥ OPT_k(σ(c_{k−1}), σ(c_k))``: the optimum of the segment alone, given the devices
    of its two cuts. Dynamic programming over the cut devices (min-plus over the chain) gives
    ``min over device sequences Σ_k OPT_k``, a bound for every schedule since each schedule
    picks one sequence. Each ``OPT_k(p, e)`` is itself bounded from below, never overestimated:

    - the segment starts at 0 = end(c_{k−1}); c_{k−1} sits on device p with duration 0 and its
      edges into the segment pay their transfer from p; every device is idle from 0 on (all
      other computation lies outside the window). Edges into the segment from tasks before
      c_{k−1} and edges leaving it are dropped (fewer constraints);
    - channel contention, the load ports and capacities are dropped. Weight loads are kept
      only as release times: loads start at ≥ 0, so a task on device d cannot start before
      the (single) load of its block onto d has had time to finish. While the dynamic
      programme's earliest end ``V(p)`` of the previous cut is below a segment's largest
      release, the segment is re-evaluated with releases ``max(0, load − V(p))`` relative to
      its start (valid because the true start is ≥ V(p), and a later start only shrinks
      relative releases while ``start + span`` cannot decrease); afterwards releases cannot
      bind and are dropped;
    - for each device assignment of the segment's tasks (enumerated, up to permutations of
      interchangeable devices of the whole instance, which map schedules to schedules of equal
      makespan) the value is the maximum of the longest path with the assigned durations and
      (contention-free) transfer durations, and for every device the one-machine bound
      ``min head + Σ durations + min tail`` of the tasks on it. The minimum over assignments
      with the given cut devices bounds ``OPT_k(p, e)``;
    - when a segment has too many assignments (``max_assignments``), only its most
      device-sensitive tasks are enumerated; the others take their cheapest legal duration,
      the cheapest transfer compatible with the enumerated end of each edge, and no device.
      Such a table is then raised by branch and bound (:mod:`opt.placement.segment_branch`):
      tasks are assigned one at a time, partial assignments are valued with the rest relaxed
      as above (never above any completion; the one-machine bound there also takes every
      set S of the tasks on a device whose heads (tails) reach a given task's:
      ``min_S head + Σ_S durations + min_S tail``) and dropped once they reach the value of a
      greedy completion in their cut cell; the entry is the least of the completions' values
      and of the partial assignments left, so it still bounds every complete assignment
      (the head-sharded decode attention, 20 tasks on 5 devices);
    - segments with the same shape (cut flags, legal devices, task kinds, local edges) but
      different durations and bytes (decode steps differ only through T_kv) are evaluated
      once per bucket: the bucket's element-wise minimum of durations,
      release times and edge bytes is a sub-instance that every member dominates, and the
      segment optimum is monotone in them (with fixed assignment and orders, a schedule is a
      longest-path computation with non-negative lengths that shrink), so its bound is a bound
      for every member. Up to ``max_evaluations`` distinct members per shape are evaluated
      exactly; beyond that they are bucketed by total cheapest work and total edge bytes, in
      geometric bins of ratio 1 + eps with the smallest eps giving at most ``max_evaluations`` buckets (so the
      prefill step never shares a bucket with decode steps).

    Without any cut the whole instance is one segment, so the same machinery bounds small
    random instances (enumerating every assignment when there are few).

``cut_loads`` — the cut chain with exposed first loads (``at_use`` and ``overlap`` only)
    Loads cannot be prefetched there, so the first load of a block onto a device lies in the
    slot ``[dispatch(v), end(v))`` of the task v it serves, which is then at least
    ``max(load, p)`` (overlap) or ``load + p`` (at_use). Along the cuts
    ``makespan ≥ Σ_j (dispatch(c_j) − end(c_{j−1})) + (end(c_j) − dispatch(c_j))``; for blocks
    used only by cuts the first load onto d serves the first user on d in cut order, and its
    exposure is shared out as integer weights whose suffix sums stay below the exposure of
    the suffix's first user (``spread``: ⌊prefix-min / users⌋ each; ``first``: all on the first
    user; ``mixed``: ``first`` on the devices where the block's first user is cheapest,
    ``spread`` elsewhere; the largest of the three programmes is kept). In segments with
    first uses the devices of those tasks are enumerated, so first uses on one device add up
    (their slots do not overlap) and several first users of one block share one exposure.
    :mod:`opt.placement.cut_load_bound`.

Under ``load_timing: overlap`` (a load may end as late as its task's end) every component but
``cut_loads`` (proven for the rule itself) is computed on :func:`opt.placement.overlap_bound.bound_instance`, the ``prefetch`` relaxation
with loads shortened by the longest user duration on the device, and ``work_lp`` takes those
shortened loads as its rows (docs/lower_bounds.md "Bounds under overlap").

:func:`certified_lower_bound` returns every component, its value and its compute time; results
are cached per instance object (a sweep solves one instance with several methods).

The components live in :mod:`opt.placement.work_bound` (``work_average``, ``work_lp``),
:mod:`opt.placement.load_ports` (``load_port``, ``load_chain``), :mod:`opt.placement.chain_bound`
:mod:`opt.placement.segment_bound` and :mod:`opt.placement.segment_branch` (``chain``); the options in
:mod:`opt.placement.bound_options`.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from opt.placement.bound_options import BoundOptions
from opt.placement.chain_bound import chain_bound
from opt.placement.cut_load_bound import cut_load_bounds
from opt.placement.instance import PlacementInstance
from opt.placement.load_ports import load_port_bound
from opt.placement.lower_bounds import device_heads_tails, heads_tails
from opt.placement.work_bound import BIG, cheapest, work_lp_bound


@dataclass(frozen=True)
class Component:
    """One component bound: ``value`` in ticks, ``seconds`` of wall time to compute it."""

    name: str
    value: int
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CertifiedBound:
    """The certified bound (max of the components), in ticks of ``time_unit``."""

    value: int
    best: str
    time_unit: str
    components: tuple[Component, ...]
    seconds: float

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"lower_bound": self.value, "best": self.best, "time_unit": self.time_unit,
                "seconds": self.seconds, "components": [asdict(c) for c in self.components]}


_CACHE: weakref.WeakKeyDictionary[PlacementInstance, dict[BoundOptions, CertifiedBound]] = \
    weakref.WeakKeyDictionary()


def cached_bound(inst: PlacementInstance, options: BoundOptions) -> CertifiedBound | None:
    """The bound of ``inst`` under ``options`` if this process computed or received it."""
    return _CACHE.get(inst, {}).get(options)


def remember_bound(inst: PlacementInstance, options: BoundOptions, bound: CertifiedBound
                   ) -> CertifiedBound:
    """Cache ``bound``, computed for ``inst`` under ``options`` by
    :func:`certified_lower_bound` in another process (:mod:`opt.placement.bound_process`)."""
    _CACHE.setdefault(inst, {})[options] = bound
    return bound


def certified_lower_bound(inst: PlacementInstance, options: BoundOptions | None = None
                          ) -> CertifiedBound:
    """Every component bound of the module docstring and their maximum (cached per instance)."""
    opts = options or BoundOptions()
    cached = _CACHE.get(inst, {}).get(opts)
    if cached is not None:
        return cached
    t_all = time.perf_counter()
    comps: list[Component] = []
    if inst.n_tasks == 0:
        res = CertifiedBound(0, "empty", inst.time_unit, (), 0.0)
        _CACHE.setdefault(inst, {})[opts] = res
        return res

    t0 = time.perf_counter()
    head, tail = heads_tails(inst)
    t_ht = time.perf_counter() - t0
    t0 = time.perf_counter()
    comps.append(Component("critical_path", int((head + tail).max()),
                           t_ht + time.perf_counter() - t0,
                           {"note": "cheapest durations, communication 0, first-weight release"}))
    dev_tail = None  # least tail over the devices, forced transfers included
    if inst.n_tasks <= opts.max_device_path_tasks:
        t0 = time.perf_counter()
        dh, dt = device_heads_tails(inst, opts.device_path_assignments)
        legal = inst.cost >= 0
        dev_tail = np.where(legal, dt, BIG).min(axis=1)
        comps.append(Component("device_path",
                               int(np.where(legal, dh + dt, BIG).min(axis=1).max()),
                               time.perf_counter() - t0,
                               {"note": "per-device heads and tails, forced transfers, "
                                        "load releases per device"}))
    t0 = time.perf_counter()
    dmin = cheapest(inst)
    comps.append(Component("work_average", -(-int(dmin.sum()) // inst.n_devices),
                           time.perf_counter() - t0))
    if opts.lp:
        t0 = time.perf_counter()
        value, y = work_lp_bound(inst)
        comps.append(Component("work_lp", value, time.perf_counter() - t0,
                               {"device_weights": {d.name: round(float(w), 6)
                                                   for d, w in zip(inst.devices, y)}}))
    t0 = time.perf_counter()
    value, detail, tails = chain_bound(inst, opts, tail, dmin)
    t_chain = time.perf_counter() - t0
    comps.append(Component("chain", value, t_chain, detail))
    t0 = time.perf_counter()
    value, k = load_port_bound(inst, tail)
    comps.append(Component("load_port", value, t_ht + time.perf_counter() - t0,
                           {"blocks": k}))
    t0 = time.perf_counter()
    if dev_tail is not None:
        tails = np.maximum(tails, dev_tail)
    value, k = load_port_bound(inst, tails)
    comps.append(Component("load_chain", value, t_chain + time.perf_counter() - t0,
                           {"blocks": k, "note": "load ports + chain tails (and device "
                                                 "tails when computed)"}))
    if opts.cut_loads and inst.load_timing in ("at_use", "overlap"):
        t0 = time.perf_counter()
        runs = cut_load_bounds(inst)
        rule = max(runs, key=lambda r: runs[r][0])
        value, info = runs[rule]
        comps.append(Component("cut_loads", value, time.perf_counter() - t0,
                               {**info, "rule": rule, "note": "cut chain with the first "
                                "loads of all-cut blocks in their served task's slot"}))
    best = max(comps, key=lambda c: c.value)
    res = CertifiedBound(best.value, best.name, inst.time_unit, tuple(comps),
                         time.perf_counter() - t_all)
    _CACHE.setdefault(inst, {})[opts] = res
    return res
