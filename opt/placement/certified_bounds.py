"""Certified lower bounds on the optimal P1 makespan of full-size instances (issue 8).

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
    Relaxed: precedence, communication, loads.

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
      the cheapest transfer compatible with the enumerated end of each edge, and no device;
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

:func:`certified_lower_bound` returns every component, its value and its compute time; results
are cached per instance object (a sweep solves one instance with several methods).
"""

from __future__ import annotations

import math
import time
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance, interchangeable_devices
from opt.placement.lower_bounds import device_heads_tails, heads_tails

BIG = np.iinfo(np.int64).max // 4


@dataclass(frozen=True)
class BoundOptions:
    """max_assignments: device assignments enumerated per segment evaluation; max_evaluations:
    distinct segments of one shape evaluated exactly before bucketing;
    max_release_evaluations: segment re-evaluations with weight-load release times; lp: compute
    ``work_lp`` (needs scipy's HiGHS); max_device_path_tasks: largest instance (tasks) that
    gets the ``device_path`` component; device_path_assignments: neighbour device choices
    enumerated per (task, device) there (``device_heads_tails``' ``max_assignments``)."""

    max_assignments: int = 20_000
    max_evaluations: int = 128
    max_release_evaluations: int = 4096
    lp: bool = True
    max_device_path_tasks: int = 5_000
    device_path_assignments: int = 256


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


_CACHE: "weakref.WeakKeyDictionary[PlacementInstance, dict[BoundOptions, CertifiedBound]]" = \
    weakref.WeakKeyDictionary()


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
    dmin = _cheapest(inst)
    comps.append(Component("work_average", -(-int(dmin.sum()) // inst.n_devices),
                           time.perf_counter() - t0))
    if opts.lp:
        t0 = time.perf_counter()
        value, y = work_lp_bound(inst)
        comps.append(Component("work_lp", value, time.perf_counter() - t0,
                               {"device_weights": {d.name: round(float(w), 6)
                                                   for d, w in zip(inst.devices, y)}}))
    t0 = time.perf_counter()
    value, detail, tails = chain_bound(inst, opts, tail)
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
    best = max(comps, key=lambda c: c.value)
    res = CertifiedBound(best.value, best.name, inst.time_unit, tuple(comps),
                         time.perf_counter() - t_all)
    _CACHE.setdefault(inst, {})[opts] = res
    return res


def _cheapest(inst: PlacementInstance) -> np.ndarray:
    return np.where(inst.cost >= 0, inst.cost, BIG).min(axis=1)


# ---- work LP (weak duality) -------------------------------------------------------------------

def work_lp_bound(inst: PlacementInstance) -> tuple[int, np.ndarray]:
    """(bound, y): ``Σ_v min_{d legal} y_d cost[v, d]`` for the LP-optimal device weights y."""
    rows, counts = np.unique(inst.cost, axis=0, return_counts=True)
    nd = inst.n_devices
    y = np.full(nd, 1.0 / nd)
    try:
        y = _lp_weights(rows, counts.astype(np.float64))
    except (ImportError, ValueError, RuntimeError):
        pass  # any y in the simplex gives a valid bound; the uniform one is the fallback
    return _dual_value(rows, counts, y), y


def _dual_value(rows: np.ndarray, counts: np.ndarray, y: np.ndarray) -> int:
    """The weak-duality bound for weights y (clipped, renormalised; safe rounding)."""
    y = np.clip(np.asarray(y, dtype=np.float64), 0.0, None)
    y = y / y.sum() if y.sum() > 0 else np.full(len(y), 1.0 / len(y))
    per = np.where(rows >= 0, rows * y[None, :], np.inf).min(axis=1)
    value = float(np.dot(per, counts))
    return max(0, math.ceil(value - 1e-9 * max(1.0, value)))


def _lp_weights(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Dual LP: max Σ_g n_g u_g s.t. u_g ≤ c_gd y_d (legal), Σ y = 1, y ≥ 0 (HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    g, nd = rows.shape
    scale = float(rows.max()) if rows.max() > 0 else 1.0
    gi, di = np.nonzero(rows >= 0)
    m = len(gi)
    # variables: u_0..u_{g-1}, y_0..y_{nd-1};  u_g - c_gd y_d <= 0
    data = np.concatenate([np.ones(m), -rows[gi, di] / scale])
    r = np.concatenate([np.arange(m), np.arange(m)])
    c = np.concatenate([gi, g + di])
    a_ub = coo_matrix((data, (r, c)), shape=(m, g + nd)).tocsr()
    a_eq = np.concatenate([np.zeros(g), np.ones(nd)])[None, :]
    obj = -np.concatenate([counts, np.zeros(nd)])
    bounds = [(None, None)] * g + [(0, None)] * nd
    res = linprog(obj, A_ub=a_ub, b_ub=np.zeros(m), A_eq=a_eq, b_eq=[1.0], bounds=bounds,
                  method="highs")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS status {res.status}")
    return np.asarray(res.x[g:])


# ---- load ports -------------------------------------------------------------------------------

def load_port_bound(inst: PlacementInstance, tail: np.ndarray) -> tuple[int, int]:
    """(bound, k): max over k of ⌈Σ top-k min loads / ports⌉ + k-th largest user tail."""
    users = np.flatnonzero(inst.task_block >= 0)
    if not len(users):
        return 0, 0
    nb = len(inst.block_ids)
    blk = inst.task_block[users]
    q = np.full(nb, -1, dtype=np.int64)
    np.maximum.at(q, blk, tail[users])
    # devices where some user of b may run
    usable = np.zeros((nb, inst.n_devices), dtype=bool)
    np.logical_or.at(usable, blk, inst.legal[users])
    ld = inst.load_duration
    ok = usable & (ld >= 0)
    used = np.flatnonzero((q >= 0) & ok.any(axis=1))
    if not len(used):
        return 0, 0
    minload = np.where(ok[used], ld[used], BIG).min(axis=1)
    rows = np.where(ok[used], ld[used], -1)
    # weighted ports (weak duality as in work_lp): Σ_b min_d y_d load[b, d] ≤ max port busy
    y = np.full(inst.n_devices, 1.0 / inst.n_devices)
    try:
        y = _lp_weights(rows, np.ones(len(used)))
    except (ImportError, ValueError, RuntimeError):
        pass
    y = np.clip(y, 0.0, None)
    y = y / y.sum() if y.sum() > 0 else np.full(inst.n_devices, 1.0 / inst.n_devices)
    weighted = np.where(rows >= 0, rows * y[None, :], np.inf).min(axis=1)
    order = np.argsort(-q[used], kind="stable")
    best, best_k = 0, 0
    csum = 0
    wsum = 0.0
    ports = np.zeros(inst.n_devices, dtype=bool)
    for k, i in enumerate(order.tolist(), start=1):
        csum += int(minload[i])
        wsum += float(weighted[i])
        ports |= ok[used[i]]
        busy = max(-(-csum // int(ports.sum())), math.ceil(wsum - 1e-9 * max(1.0, wsum)))
        val = busy + int(q[used[i]])
        if val > best:
            best, best_k = val, k
    return best, best_k


# ---- chain of cut tasks -----------------------------------------------------------------------

def cut_positions(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(topological order, positions in it of the cut tasks).

    Task π[p] is a cut iff every earlier task has a successor at position ≤ p (then each reaches
    π[p]) and every later task has a predecessor at position ≥ p (then π[p] reaches each)."""
    n = inst.n_tasks
    order = np.asarray(inst.topological_order)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    min_succ = np.full(n, n + 1, dtype=np.int64)
    np.minimum.at(min_succ, inst.edge_src, pos[inst.edge_dst])
    max_pred = np.full(n, -1, dtype=np.int64)
    np.maximum.at(max_pred, inst.edge_dst, pos[inst.edge_src])
    a = min_succ[order]
    before = np.maximum.accumulate(np.concatenate([[-1], a[:-1]]))
    b = max_pred[order]
    after = np.minimum.accumulate(np.concatenate([b[1:], [n + 1]])[::-1])[::-1]
    p = np.arange(n)
    return order, np.flatnonzero((before <= p) & (after >= p))


@dataclass
class _Segment:
    """A segment sub-problem: local column 0 is the previous cut when ``has_prev`` (duration 0);
    the last column is the closing cut when ``has_end``. cost/release [n, D] (-1 illegal);
    edges (local src, local dst) with bytes."""

    cost: np.ndarray
    release: np.ndarray | None
    esrc: np.ndarray
    edst: np.ndarray
    ebytes: np.ndarray
    has_prev: bool
    has_end: bool


def chain_bound(inst: PlacementInstance, opts: BoundOptions, tail: np.ndarray | None = None
                ) -> tuple[int, dict[str, Any], np.ndarray | None]:
    """The ``chain`` component (module docstring), a summary of the decomposition and, when the
    cheapest tails ``tail`` are given, chain-strengthened tails (``makespan − start(t)`` bound
    for every task t; see :func:`_chain_tails`)."""
    n, nd = inst.n_tasks, inst.n_devices
    order, cuts = cut_positions(inst)
    starts = np.concatenate([[0], cuts + 1])
    ends = np.concatenate([cuts, [n - 1]])
    keep = starts <= ends  # drop an empty tail segment (last cut is the last task)
    starts, ends = starts[keep], ends[keep]
    n_seg = len(starts)
    has_prev = np.arange(n_seg) > 0
    has_end = np.zeros(n_seg, dtype=bool)
    has_end[:len(cuts)] = True

    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    seg_of = np.searchsorted(starts, np.arange(n), side="right") - 1
    sp, dp = pos[inst.edge_src], pos[inst.edge_dst]
    ks = seg_of[dp]
    prev_pos = np.where(has_prev, starts - 1, -5)
    mask = (seg_of[sp] == ks) | (sp == prev_pos[ks])
    sp, dp, ks, eb = sp[mask], dp[mask], ks[mask], inst.edge_bytes[mask]
    off = has_prev.astype(np.int64)
    lu = sp - starts[ks] + off[ks]
    lv = dp - starts[ks] + off[ks]
    e_ord = np.lexsort((lu, lv, ks))
    lu, lv, ks, eb = lu[e_ord], lv[e_ord], ks[e_ord], eb[e_ord]
    e_off = np.searchsorted(ks, np.arange(n_seg + 1))

    cost_pos = np.ascontiguousarray(inst.cost[order])
    legal_pos = cost_pos >= 0
    rel_pos = _first_releases(inst, order)
    rmax_pos = np.where(legal_pos & (rel_pos < BIG), rel_pos, 0).max(axis=1)
    seg_rmax = np.maximum.reduceat(rmax_pos, starts)

    # group segments: shape (structure and task kinds) -> distinct data -> member segments
    kind_codes: dict[str | None, int] = {}
    kinds = inst.kind or (None,) * n
    kind_pos = np.array([kind_codes.setdefault(kinds[t], len(kind_codes))
                         for t in order.tolist()], dtype=np.int64)
    shapes: dict[bytes, dict[bytes, list[int]]] = {}
    for k in range(n_seg):
        lo = int(starts[k]) - int(has_prev[k])
        hi = int(ends[k]) + 1
        e0, e1 = int(e_off[k]), int(e_off[k + 1])
        skey = b"".join((bytes([int(has_prev[k]), int(has_end[k])]),
                         np.int64(hi - lo).tobytes(), legal_pos[lo:hi].tobytes(),
                         kind_pos[lo:hi].tobytes(), lu[e0:e1].tobytes(), lv[e0:e1].tobytes()))
        vkey = cost_pos[lo:hi].tobytes() + eb[e0:e1].tobytes()
        shapes.setdefault(skey, {}).setdefault(vkey, []).append(k)

    groups = interchangeable_devices(inst)
    tables: list[np.ndarray | None] = [None] * n_seg
    n_eval = 0
    t_eval = 0.0
    exact_shapes = 0
    max_cols = 0
    for skey, members in shapes.items():
        reps = [ks_[0] for ks_ in members.values()]
        buckets: list[list[int]]
        if len(reps) <= opts.max_evaluations:
            buckets = [[i] for i in range(len(reps))]
            exact_shapes += 1
        else:
            work, nbytes = [], []
            for k in reps:
                lo = int(starts[k]) - int(has_prev[k])
                c = cost_pos[lo:int(ends[k]) + 1]
                work.append(int(np.where(c >= 0, c, BIG).min(axis=1).sum()))
                nbytes.append(int(eb[int(e_off[k]):int(e_off[k + 1])].sum()))
            buckets = _log_buckets(np.array([work, nbytes], dtype=np.float64).T,
                                   opts.max_evaluations)
        keys = list(members)
        for bucket in buckets:
            segs = [_segment(k, starts, ends, has_prev, has_end, cost_pos, e_off, lu, lv, eb)
                    for k in (reps[i] for i in bucket)]
            seg = _elementwise_min(segs)
            t0 = time.perf_counter()
            table, cols = _evaluate(inst, seg, groups, opts.max_assignments)
            t_eval += time.perf_counter() - t0
            max_cols = max(max_cols, cols)
            n_eval += 1
            for i in bucket:
                for k in members[keys[i]]:
                    tables[k] = table
    # min-plus dynamic programme along the chain; V[d] bounds end(c_k) given σ(c_k) = d. While
    # V is below a segment's weight-load releases (absolute times: loads start at ≥ 0), the
    # segment is re-evaluated with the releases shifted by its earliest start V[p].
    n_special = 0
    v = np.zeros(1)
    for k in range(n_seg):
        t = tables[k]
        if seg_rmax[k] > 0 and n_special < opts.max_release_evaluations:
            starts_k = np.unique(v[np.isfinite(v) & (v < seg_rmax[k])])
            if len(starts_k):
                seg = _segment(k, starts, ends, has_prev, has_end, cost_pos, e_off, lu, lv, eb)
                lo = int(starts[k])
                t = t.copy()
                for s0 in starts_k.tolist():
                    rel = np.maximum(rel_pos[lo:int(ends[k]) + 1] - int(s0), 0)
                    if seg.has_prev:
                        rel = np.vstack([np.zeros((1, nd), dtype=np.int64), rel])
                    seg.release = rel
                    tab, _ = _evaluate(inst, seg, groups, opts.max_assignments)
                    rows = v == s0
                    t[rows] = np.maximum(t[rows], tab[rows])
                    n_special += 1
        v = (v[:, None] + t).min(axis=0)
    value = float(v.min())
    if not math.isfinite(value):
        raise RuntimeError("chain bound: no legal device sequence (instance has no schedule)")
    detail = {"cuts": int(len(cuts)), "segments": n_seg, "shapes": len(shapes),
              "shapes_exact": exact_shapes, "evaluations": n_eval,
              "max_segment_tasks": int((ends - starts + 1).max()),
              "release_evaluations": n_special, "evaluate_s": round(t_eval, 3)}
    tails = None
    if tail is not None:
        tails = _chain_tails(inst, tail, order, starts, ends, has_end, tables)
    return int(value), detail, tails


def _chain_tails(inst: PlacementInstance, tail: np.ndarray, order: np.ndarray,
                 starts: np.ndarray, ends: np.ndarray, has_end: np.ndarray,
                 tables: list) -> np.ndarray:
    """tail'(t) ≥ makespan − start(t). Backward min-plus over the segment tables gives
    ``W_k`` ≥ makespan − end(c_k) (the windows after c_k); for t in segment k,
    ``end(c_k) − start(t)`` ≥ the cheapest path t → c_k ≥ ``tail[t] − tail[c_k] + dmin[c_k]``
    (a longest cheapest path from t to a sink either passes c_k or jumps from an ancestor of
    c_k to a descendant of it, and both pieces are bounded through c_k)."""
    n_seg = len(starts)
    min_w = np.zeros(n_seg)
    w = np.zeros(tables[-1].shape[1])
    for k in range(n_seg - 1, -1, -1):
        min_w[k] = w.min()
        w = (tables[k] + w[None, :]).min(axis=1)
    dmin = _cheapest(inst)
    out = tail.copy()
    seg_of = np.searchsorted(starts, np.arange(inst.n_tasks), side="right") - 1
    ks = seg_of
    ok = has_end[ks]
    cut_task = order[ends[ks]]
    w_int = np.where(np.isfinite(min_w), min_w, 0).astype(np.int64)
    cand = tail[order] - tail[cut_task] + dmin[cut_task] + w_int[ks]
    out[order[ok]] = np.maximum(tail[order[ok]], cand[ok])
    return out


def _log_buckets(keys: np.ndarray, max_buckets: int) -> list[list[int]]:
    """Rows of ``keys`` [m, f] (non-negative sizes, e.g. work and edge bytes) grouped so that
    each size varies by at most a factor (1 + eps) within a group, with the smallest eps
    (doubling from 1e-4) that needs at most ``max_buckets`` groups. Outliers (e.g. the prefill
    step among decode steps) keep a group of their own."""
    logk = np.log(np.maximum(keys, 1.0))
    eps = 1e-4
    while True:
        code = np.floor(logk / math.log1p(eps)).astype(np.int64)
        uniq, inv = np.unique(code, axis=0, return_inverse=True)
        if len(uniq) <= max_buckets:
            inv = inv.reshape(-1)
            return [list(np.flatnonzero(inv == i)) for i in range(len(uniq))]
        eps *= 2


def _first_releases(inst: PlacementInstance, tasks: np.ndarray) -> np.ndarray:
    """[len(tasks), D]: a task on d cannot start before its block's load onto d ends."""
    rel = np.zeros((len(tasks), inst.n_devices), dtype=np.int64)
    blk = inst.task_block[tasks]
    has = blk >= 0
    if has.any():
        ld = inst.load_duration[blk[has]]
        rel[has] = np.where(ld >= 0, ld, BIG)  # not loadable there: the task cannot run there
    return rel


def _segment(k: int, starts, ends, has_prev, has_end, cost_pos, e_off, lu, lv, eb
             ) -> _Segment:
    lo = int(starts[k]) - int(has_prev[k])
    hi = int(ends[k]) + 1
    e0, e1 = int(e_off[k]), int(e_off[k + 1])
    return _Segment(cost_pos[lo:hi], None, lu[e0:e1], lv[e0:e1], eb[e0:e1],
                    bool(has_prev[k]), bool(has_end[k]))


def _elementwise_min(segs: list[_Segment]) -> _Segment:
    """A sub-instance every member dominates (same shape; legal patterns are equal)."""
    if len(segs) == 1:
        return segs[0]
    s0 = segs[0]
    cost = np.stack([s.cost for s in segs]).min(axis=0)
    ebytes = np.stack([s.ebytes for s in segs]).min(axis=0)
    release = None
    if s0.release is not None:
        release = np.stack([s.release for s in segs]).min(axis=0)
    return _Segment(cost, release, s0.esrc, s0.edst, ebytes, s0.has_prev, s0.has_end)


def _assignments(choices: list[np.ndarray], groups: list[list[int]], nd: int) -> np.ndarray:
    """Every assignment (rows) of the columns' choices, one per orbit of the permutations of
    interchangeable devices: within a group, members are first used in increasing order."""
    grp = np.full(nd, -1)
    rank = np.zeros(nd, dtype=np.int64)
    for g, members in enumerate(groups):
        for r, d in enumerate(sorted(members)):
            grp[d], rank[d] = g, r
    a = np.zeros((1, 0), dtype=np.int16)
    used = np.zeros((1, max(len(groups), 1)), dtype=np.int64)
    for ch in choices:
        parts, uparts = [], []
        for x in ch.tolist():
            if grp[x] < 0:
                ok = np.ones(len(a), dtype=bool)
            else:
                ok = used[:, grp[x]] >= rank[x]
            if not ok.any():
                continue
            col = np.full((int(ok.sum()), 1), x, dtype=np.int16)
            parts.append(np.hstack([a[ok], col]))
            u = used[ok].copy()
            if grp[x] >= 0:
                u[:, grp[x]] = np.maximum(u[:, grp[x]], rank[x] + 1)
            uparts.append(u)
        a = np.vstack(parts)
        used = np.vstack(uparts)
    return a


def _orbit_expand(table_can: np.ndarray, groups: list[list[int]], nd: int) -> np.ndarray:
    """table[p, e] = min over canonical (a, b) whose orbit under the device permutations
    contains (p, e). ``table_can`` is [D, D]."""
    gmembers = {d: sorted(g) for g in groups for d in g}
    out = np.full((nd, nd), np.inf)
    for a, b in zip(*np.nonzero(np.isfinite(table_can))):
        val = table_can[a, b]
        ga = gmembers.get(int(a), [int(a)])
        for a2 in ga:
            if int(b) == int(a):
                opts = [a2]
            elif int(b) in ga:
                opts = [x for x in ga if x != a2]
            else:
                opts = gmembers.get(int(b), [int(b)])
            for b2 in opts:
                if val < out[a2, b2]:
                    out[a2, b2] = val
    return out


def _orbit_expand_1d(vec_can: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """out[d] = min over canonical devices c whose orbit contains d of vec_can[c]."""
    out = vec_can.copy()
    for g in groups:
        out[g] = vec_can[g].min()
    return out


def _evaluate(inst: PlacementInstance, seg: _Segment, groups: list[list[int]],
              max_assignments: int) -> tuple[np.ndarray, int]:
    """Table [P, E] of lower bounds on the segment's span given the previous cut's device (rows;
    one row without a previous cut) and the closing cut's device (columns; one without)."""
    nd = inst.n_devices
    n = seg.cost.shape[0]
    legal = seg.cost >= 0
    cost = seg.cost.copy()
    first = 1 if seg.has_prev else 0
    if seg.has_prev:
        cost[0] = np.where(legal[0], 0, -1)  # the previous cut ended at 0
    # release times relative to the segment's start (the previous cut's row is zeros)
    rel = np.zeros((n, nd), dtype=np.int64) if seg.release is None else seg.release
    rel_cost = np.where(legal, cost, BIG)
    tt = inst.links.transfer_durations(seg.ebytes) if len(seg.ebytes) else \
        np.zeros((0, nd, nd), dtype=np.int64)

    # which columns to enumerate
    n_legal = legal.sum(axis=1)
    must = np.zeros(n, dtype=bool)
    must |= n_legal == 1
    if seg.has_prev:
        must[0] = True
    if seg.has_end:
        must[n - 1] = True
    spread = np.where(legal, cost, 0).max(axis=1) - np.where(legal, cost, BIG).min(axis=1)
    for e in range(len(seg.esrc)):
        u, v = int(seg.esrc[e]), int(seg.edst[e])
        span = int(tt[e][np.ix_(legal[u], legal[v])].max())
        spread[u] += span
        spread[v] += span
    enum = must.copy()
    size = float(np.prod(n_legal[must].astype(np.float64)))
    for j in np.argsort(-spread, kind="stable").tolist():
        if enum[j]:
            continue
        if size * n_legal[j] <= max_assignments:
            enum[j] = True
            size *= n_legal[j]
    cols = np.flatnonzero(enum)
    a = _assignments([np.flatnonzero(legal[j]) for j in cols], groups, nd)
    m = len(a)
    dev = np.full((m, n), -1, dtype=np.int64)
    dev[:, cols] = a
    c = np.empty((m, n), dtype=np.int64)
    r = np.empty((m, n), dtype=np.int64)
    for j in range(n):
        if enum[j]:
            c[:, j] = cost[j][dev[:, j]]
            r[:, j] = rel[j][dev[:, j]]
        else:  # relaxed: cheapest duration and earliest release, each on its own
            c[:, j] = rel_cost[j].min()
            r[:, j] = np.where(legal[j], rel[j], BIG).min()
    edur = np.empty((m, len(seg.esrc)), dtype=np.int64)
    for e in range(len(seg.esrc)):
        u, v = int(seg.esrc[e]), int(seg.edst[e])
        te = np.where(legal[u][:, None] & legal[v][None, :], tt[e], BIG)
        if enum[u] and enum[v]:
            edur[:, e] = te[dev[:, u], dev[:, v]]
        elif enum[u]:
            edur[:, e] = te.min(axis=1)[dev[:, u]]
        elif enum[v]:
            edur[:, e] = te.min(axis=0)[dev[:, v]]
        else:
            edur[:, e] = te.min()
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    for e in range(len(seg.esrc)):
        ins[int(seg.edst[e])].append(e)
        outs[int(seg.esrc[e])].append(e)
    head = np.zeros((m, n), dtype=np.int64)
    for j in range(n):
        h = r[:, j].copy()
        for e in ins[j]:
            u = int(seg.esrc[e])
            np.maximum(h, head[:, u] + c[:, u] + edur[:, e], out=h)
        head[:, j] = h
    tl = np.zeros((m, n), dtype=np.int64)  # after j ends, excluding j
    for j in range(n - 1, -1, -1):
        t = np.zeros(m, dtype=np.int64)
        for e in outs[j]:
            v = int(seg.edst[e])
            np.maximum(t, edur[:, e] + c[:, v] + tl[:, v], out=t)
        tl[:, j] = t
    val = (head + c).max(axis=1)
    body = slice(first, n)
    dv, hd, cc, tq = dev[:, body], head[:, body], c[:, body], tl[:, body]
    for d in range(nd):
        on = dv == d
        any_on = on.any(axis=1)
        if not any_on.any():
            continue
        mh = np.where(on, hd, BIG).min(axis=1)
        sc = np.where(on, cc, 0).sum(axis=1)
        mq = np.where(on, tq, BIG).min(axis=1)
        np.maximum(val, np.where(any_on, mh + sc + mq, 0), out=val)
    val = np.minimum(val, BIG).astype(np.float64)
    val[val >= BIG] = np.inf
    pa = dev[:, 0] if seg.has_prev else np.zeros(m, dtype=np.int64)
    pe = dev[:, n - 1] if seg.has_end else np.zeros(m, dtype=np.int64)
    can = np.full((nd, nd), np.inf)
    np.minimum.at(can, (pa, pe), val)
    if seg.has_prev and seg.has_end:
        table = _orbit_expand(can, groups, nd)
    elif seg.has_prev:
        table = _orbit_expand_1d(can[:, 0], groups)[:, None]
    elif seg.has_end:
        table = _orbit_expand_1d(can[0, :], groups)[None, :]
    else:
        table = np.array([[can.min()]])
    return table, int(enum.sum())
