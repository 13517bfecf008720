"""Time-indexed P1 MILP in step form (problems.md §1.2 without loads, capacities or channel
contention), built as arrays for HiGHS; the bucketed variant is its relaxation.

Formulation (``Δ`` ticks per bucket; ``Δ = 1`` is the exact *time-indexed* model, ``Δ > 1`` the
*bucketed* relaxation). Starts are mapped to buckets by ``s' = ⌊S/Δ⌋``.

- Resources ``r``: one per device, except that a group of interchangeable devices
  (``interchangeable_devices``) that no positive transfer touches becomes one resource of
  capacity ``m_r = |group|`` (for P|prec|Cmax the aggregated capacity is exact: any schedule
  with at most m tasks at a time is m-colourable, the intervals forming an interval graph).
  With communication, device identity matters, so such groups stay one resource per device and
  get lexicographic symmetry breaking instead.
- Binary ``z[v,r,t]`` = 1 iff task v has started on resource r by bucket t ("by" / step
  variables: Pritsker, Watters & Wolfe 1969; Sousa & Wolsey 1992; the aggregated precedence
  form of Christofides, Alvarez-Valdés & Tamarit 1987; Artigues 2017), for t in the start
  window [lo, hi]: lo from the device-aware head, hi from the horizon ``H`` (the warm start's
  makespan or a serial schedule's) minus the device-aware tail. ``z[v,r,hi]`` is the
  assignment ``y[v,r]``; ``z[v,r,t]`` = 0 below lo.
- ``z[v,r,t−1] ≤ z[v,r,t]``; ``Σ_r y[v,r] = 1``.
- Precedence and transfers (§1.2 rule 3), for every edge (u, v), resource r of v and bucket t:
  ``z[v,r,t] ≤ Σ_{r'} z[u, r', t − ⌊(p_u(r') + c_uv(r', r))/Δ⌋]`` with ``c_uv(r, r) = 0``:
  "if v has started on r by t, u has started on some r' early enough to end and send its data".
  For Δ = 1 this is exactly start_v ≥ start_u + p_u + c_uv·[different device] for any delays
  (identical or per pair), and it is the strongest (disaggregated) precedence form.
- Capacity: ``Σ_v z[v,r,t] − z[v,r,t−⌊p_v(r)/Δ⌋] ≤ m_r`` per bucket (tasks running at t).
- Makespan: continuous ``E[t]`` = 1 iff Cmax' ≤ t, monotone in t, ``E[t] ≤ Σ_r z[v,r,
  t − ⌊tail_v(r)/Δ⌋]`` for every task (tail incl. v), ``Cmax' = U − Σ_t E[t]`` with
  ``U = ⌊H/Δ⌋`` and E = 0 below ``⌊lb/Δ⌋`` (lb: critical path, work, group bound); per resource
  the work cut ``Σ_v ⌊p_v/Δ⌋ y[v,r] ≤ m_r · Cmax'``.

Why the bucketed model is a relaxation: ⌊(S+a)/Δ⌋ ≥ ⌊S/Δ⌋ + ⌊a/Δ⌋ for integers, so every valid
schedule maps to a feasible bucket schedule with Cmax' ≤ ⌊Cmax/Δ⌋; its bound times Δ bounds
the makespan. Its decisions (resource, order of bucket starts) are retimed into a real schedule
(``models.placement.milp_data.retime``) and validated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.placement.milp_data import Decisions, MilpPrep
from opt.common.errors import InputError
from opt.placement.device_symmetry import interchangeable_devices
from opt.placement.instance import PlacementInstance

#: z columns of the exact (Δ = 1) model above which the chooser buckets time
MAX_COLUMNS = 60_000
FORMULATIONS = ("bigm", "time-indexed", "bucketed")


def refusal(inst: PlacementInstance) -> str | None:
    """Why the time-indexed models cannot represent ``inst`` (None: they can); numpy only, so
    the chooser pays nothing on the instances that go to the big-M model."""
    if inst.objective != "makespan" or inst.slo is not None:
        return "the instance has an objective other than the makespan or an SLO"
    legal = inst.cost >= 0
    has = inst.task_block >= 0
    if has.any():
        ld = inst.load_duration[inst.task_block[has]]
        if (ld[legal[has]] > 0).any():
            return "the instance has weight loads (load port and residency not modelled)"
        caps = [d for d, dev in enumerate(inst.devices) if dev.weight_capacity is not None]
        if caps and legal[has][:, caps].any():
            return "the instance has weight capacities that blocks may fill"
    if inst.links.contention and has_communication(inst):
        return "the instance has link contention with positive transfers (channels not " \
               "modelled)"
    return None


def has_communication(inst: PlacementInstance) -> bool:
    """Some edge has a positive transfer between two legal devices (§1.2 rule 3)."""
    if not inst.n_edges:
        return False
    legal = inst.cost >= 0
    tr = inst.links.transfer_durations(inst.edge_bytes)
    pair = legal[inst.edge_src][:, :, None] & legal[inst.edge_dst][:, None, :]
    return bool((tr[pair] > 0).any())


@dataclass(frozen=True)
class Choice:
    """The formulation chosen for an instance, its bucket size (ticks) and why."""

    formulation: str
    delta: int
    reason: str


def choose_formulation(inst: PlacementInstance, requested: str, prep: Callable[[], MilpPrep],
                       horizon: Callable[[MilpPrep], int]) -> Choice:
    """``requested`` ∈ {auto, bigm, time-indexed, bucketed}: auto takes the time-indexed model
    when the instance fits it and its z columns are at most :data:`MAX_COLUMNS`, the bucketed
    one (smallest Δ that fits) when they are more, the big-M model when the instance has
    loads, capacities, contention or another objective. ``prep``/``horizon`` are called only
    when needed. InputError when a requested time-indexed formulation cannot model it."""
    if requested == "bigm":
        return Choice("bigm", 1, "requested (formulation=bigm)")
    why = refusal(inst)
    if why is not None:
        if requested != "auto":
            raise InputError(f"milp formulation={requested} cannot model this instance: {why}; "
                             f"use formulation=bigm (or auto)", field="params.formulation")
        return Choice("bigm", 1, f"big-M: {why}")
    p = prep()
    res, _ = resources(inst, p)
    h = horizon(p)
    cols = estimate_columns(p, res, h, 1)
    if requested == "time-indexed":
        return Choice("time-indexed", 1, f"requested ({cols} z columns over {h} ticks)")
    if requested == "auto" and cols <= MAX_COLUMNS:
        return Choice("time-indexed", 1, f"{cols} z columns over horizon {h} ticks "
                                         f"≤ {MAX_COLUMNS}")
    delta = max(2, math.ceil(cols / MAX_COLUMNS))
    while delta < h and estimate_columns(p, res, h, delta) > MAX_COLUMNS:
        delta = math.ceil(delta * 1.5)
    what = "requested" if requested == "bucketed" else \
        f"{cols} z columns over horizon {h} ticks > {MAX_COLUMNS}"
    return Choice("bucketed", delta, f"{what}: buckets of {delta} ticks")


def resources(inst: PlacementInstance, prep: MilpPrep) -> tuple[list[list[int]], list[list[int]]]:
    """(resources as device lists, symmetry groups as lists of single-device resource ids)."""
    groups = interchangeable_devices(inst)
    in_group = {d: g for g in groups for d in g}
    res: list[list[int]] = []
    sym: list[list[int]] = []
    seen: set[int] = set()
    for d in range(inst.n_devices):
        if d in seen:
            continue
        g = in_group.get(d)
        if g is None:
            res.append([d])
            continue
        seen.update(g)
        touched = any(tr > 0 and a != b and (a in g or b in g)
                      for trs in prep.trans for (a, b), tr in trs.items())
        if touched:
            sym.append(list(range(len(res), len(res) + len(g))))
            res.extend([x] for x in g)
        else:
            res.append(list(g))
    return res, sym


@dataclass
class TimeModel:
    """The model as arrays (HiGHS' row-wise LP) and the index maps to read it back."""

    delta: int
    horizon: int                                  # H (ticks)
    lb: int                                       # makespan lower bound given to the model
    res: list[list[int]]
    sym: list[list[int]]
    task_res: list[list[int]]
    lo: dict[tuple[int, int], int]                # (task, resource) -> first bucket
    hi: dict[tuple[int, int], int]                # (task, resource) -> last bucket
    base: dict[tuple[int, int], int]              # (task, resource) -> column of z[., ., lo]
    e_lo: int
    top: int                                      # U = ⌊H/Δ⌋
    col_lower: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    col_upper: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    integrality: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    cost: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    starts: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    index: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    value: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    row_lower: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    row_upper: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    @property
    def num_col(self) -> int:
        return len(self.cost)

    @property
    def num_row(self) -> int:
        return len(self.row_lower)

    @property
    def e_base(self) -> int:
        """Column of E[e_lo] (E[t] for t in [e_lo, top − 1] follow)."""
        return self.num_col - (self.top - self.e_lo)

    def zcols(self, v: int, r: int, t: np.ndarray) -> np.ndarray:
        """Columns of z[v,r,t] (−1 where t < lo: the variable is 0; t ≥ hi: y[v,r])."""
        lo, hi, b = self.lo[(v, r)], self.hi[(v, r)], self.base[(v, r)]
        return np.where(t < lo, -1, b + np.minimum(t, hi) - lo)


class _Rows:
    """Rows assembled in batches: k rows at a time, each term one column per row (−1: none)."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.n = 0

    def add(self, terms: list[tuple[np.ndarray, float]], lower: float, upper: float) -> None:
        k = len(terms[0][0])
        if k == 0:
            return
        ids = np.arange(self.n, self.n + k)
        for cols, coef in terms:
            keep = cols >= 0
            self.rows.append(ids[keep])
            self.cols.append(cols[keep])
            self.vals.append(np.full(int(keep.sum()), coef))
        self.lower.append(np.full(k, lower))
        self.upper.append(np.full(k, upper))
        self.n += k

    def csr(self) -> tuple[np.ndarray, ...]:
        """(starts, index, value, lower, upper): the rows in the order added, each row's
        columns ascending, duplicate (row, col) entries summed and zeros dropped."""
        import scipy.sparse  # here: importing this module (the registry) stays cheap

        if not self.n:
            z = np.zeros(0)
            return np.zeros(1, np.int64), z.astype(np.int64), z, z, z
        cols = np.concatenate(self.cols)
        coo = scipy.sparse.coo_array((np.concatenate(self.vals), (np.concatenate(self.rows), cols)),
                                     shape=(self.n, int(cols.max(initial=0)) + 1))
        m = coo.tocsr()  # sums duplicates, sorts each row's columns
        m.eliminate_zeros()
        return (m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data,
                np.concatenate(self.lower), np.concatenate(self.upper))


def windows(prep: MilpPrep, res: list[list[int]], horizon: int, delta: int
            ) -> tuple[list[list[int]], dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """Legal resources per task and the start windows [lo, hi] in buckets (heads and tails
    from ``prep``: critical path and device-aware ones, group-lifted when given)."""
    n = len(prep.legal)
    task_res: list[list[int]] = []
    lo: dict[tuple[int, int], int] = {}
    hi: dict[tuple[int, int], int] = {}
    for v in range(n):
        rs = []
        for r, devs in enumerate(res):
            ds = [d for d in devs if prep.dur[v][d] >= 0]
            if not ds:
                continue
            head = min(max(prep.head[v], prep.dev_head[v][d]) for d in ds)
            tail = min(max(prep.tail[v] + prep.dur[v][d], prep.dev_tail[v][d]) for d in ds)
            a, b = head // delta, max(head, horizon - tail) // delta
            rs.append(r)
            lo[(v, r)], hi[(v, r)] = a, max(a, b)
        task_res.append(rs)
    return task_res, lo, hi


def estimate_columns(prep: MilpPrep, res: list[list[int]], horizon: int, delta: int = 1) -> int:
    """z columns of the model with buckets of ``delta`` ticks."""
    _, lo, hi = windows(prep, res, horizon, delta)
    return sum(hi[k] - lo[k] + 1 for k in lo)


def build_time_model(inst: PlacementInstance, prep: MilpPrep, horizon: int, lb: int,
                     delta: int = 1) -> TimeModel:
    """The step-form model (module docstring) with buckets of ``delta`` ticks, horizon and
    makespan lower bound in ticks."""
    res, sym = resources(inst, prep)
    task_res, lo, hi = windows(prep, res, horizon, delta)
    n = inst.n_tasks
    base: dict[tuple[int, int], int] = {}
    ncol = 0
    for v in range(n):
        for r in task_res[v]:
            base[(v, r)] = ncol
            ncol += hi[(v, r)] - lo[(v, r)] + 1
    top = horizon // delta
    e_lo = min(top, lb // delta)
    tm = TimeModel(delta, horizon, lb, res, sym, task_res, lo, hi, base, e_lo, top)
    n_e = top - e_lo
    rows = _Rows()
    _step_rows(tm, rows, n)
    _precedence_rows(tm, prep, rows)
    _capacity_rows(tm, prep, rows, n)
    _makespan_rows(tm, prep, rows, n, ncol)
    _symmetry_rows(tm, rows, n)
    tm.col_lower = np.zeros(ncol + n_e)
    tm.col_upper = np.ones(ncol + n_e)
    tm.integrality = np.concatenate([np.ones(ncol, np.int32), np.zeros(n_e, np.int32)])
    tm.cost = np.concatenate([np.zeros(ncol), -np.ones(n_e)])
    tm.starts, tm.index, tm.value, tm.row_lower, tm.row_upper = rows.csr()
    return tm


def _step_rows(tm: TimeModel, rows: _Rows, n: int) -> None:
    """z[v,r,t−1] ≤ z[v,r,t]; Σ_r y[v,r] = 1."""
    for (v, r), b in tm.base.items():
        w = tm.hi[(v, r)] - tm.lo[(v, r)]
        cols = np.arange(b, b + w)
        rows.add([(cols, 1.0), (cols + 1, -1.0)], -np.inf, 0.0)
    for v in range(n):
        ys = [np.array([tm.base[(v, r)] + tm.hi[(v, r)] - tm.lo[(v, r)]]) for r in tm.task_res[v]]
        rows.add([(c, 1.0) for c in ys], 1.0, 1.0)


def _dur(prep: MilpPrep, v: int, devs: list[int]) -> int:
    return prep.dur[v][devs[0]]  # equal over a resource's devices (identical columns)


def _precedence_rows(tm: TimeModel, prep: MilpPrep, rows: _Rows) -> None:
    """z[v,r,t] ≤ Σ_r' z[u,r',t − ⌊(p_u(r') + c(r',r))/Δ⌋] per edge, resource of v, bucket."""
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        tr = prep.trans[e]
        for r in tm.task_res[v]:
            t = np.arange(tm.lo[(v, r)], tm.hi[(v, r)] + 1)
            terms = [(tm.zcols(v, r, t), 1.0)]
            live = np.zeros(len(t), dtype=bool)
            for r2 in tm.task_res[u]:
                a, b = tm.res[r2][0], tm.res[r][0]
                c = 0 if r2 == r else tr[(a, b)]
                shift = (_dur(prep, u, tm.res[r2]) + c) // tm.delta
                tu = t - shift
                terms.append((tm.zcols(u, r2, tu), -1.0))
                live |= tu < tm.hi[(u, r2)]
            if live.any():
                rows.add([(cols[live], coef) for cols, coef in terms], -np.inf, 0.0)


def _capacity_rows(tm: TimeModel, prep: MilpPrep, rows: _Rows, n: int) -> None:
    """Σ_v z[v,r,t] − z[v,r,t − ⌊p/Δ⌋] ≤ m_r where more than m_r tasks may run at t."""
    for r, devs in enumerate(tm.res):
        tasks = [(v, _dur(prep, v, devs) // tm.delta) for v in range(n) if r in tm.task_res[v]]
        tasks = [(v, q) for v, q in tasks if q > 0]
        if len(tasks) <= len(devs):
            continue
        first = min(tm.lo[(v, r)] for v, _ in tasks)
        last = max(tm.hi[(v, r)] + q - 1 for v, q in tasks)
        t = np.arange(first, last + 1)
        count = np.zeros(len(t), np.int64)
        for v, q in tasks:
            count += (t >= tm.lo[(v, r)]) & (t <= tm.hi[(v, r)] + q - 1)
        keep = count > len(devs)
        if not keep.any():
            continue
        t = t[keep]
        terms = []
        for v, q in tasks:
            terms.append((tm.zcols(v, r, t), 1.0))
            terms.append((tm.zcols(v, r, t - q), -1.0))
        rows.add(terms, -np.inf, float(len(devs)))


def _makespan_rows(tm: TimeModel, prep: MilpPrep, rows: _Rows, n: int, ncol: int) -> None:
    """E monotone; E[t] ≤ Σ_r z[v,r,t − ⌊tail_v(r)/Δ⌋]; per resource the work cut."""
    n_e = tm.top - tm.e_lo
    if n_e <= 0:
        return
    ecols = np.arange(ncol, ncol + n_e)
    t = np.arange(tm.e_lo, tm.top)
    rows.add([(ecols[:-1], 1.0), (ecols[1:], -1.0)], -np.inf, 0.0)
    for v in range(n):
        terms = [(ecols, 1.0)]
        live = np.zeros(n_e, dtype=bool)
        for r in tm.task_res[v]:
            d = tm.res[r][0]
            tail = max(prep.tail[v] + prep.dur[v][d], prep.dev_tail[v][d])
            tv = t - tail // tm.delta
            terms.append((tm.zcols(v, r, tv), -1.0))
            live |= tv < tm.hi[(v, r)]
        if live.any():
            rows.add([(cols[live], coef) for cols, coef in terms], -np.inf, 0.0)
    for r, devs in enumerate(tm.res):
        tasks = [v for v in range(n) if r in tm.task_res[v]]
        ys = [(np.array([tm.base[(v, r)] + tm.hi[(v, r)] - tm.lo[(v, r)]]),
               float(_dur(prep, v, devs) // tm.delta)) for v in tasks]
        ys = [(c, q) for c, q in ys if q > 0]
        if ys:
            m = float(len(devs))
            rows.add(ys + [(np.array([c]), m) for c in ecols], -np.inf, m * tm.top)


def _symmetry_rows(tm: TimeModel, rows: _Rows, n: int) -> None:
    """Interchangeable single-device resources open in order of their lowest task index:
    y[v,b] ≤ Σ_{v'<v} y[v',a] for consecutive a, b of a group."""
    for g in tm.sym:
        for a, b in zip(g, g[1:]):
            for v in range(n):
                if b not in tm.task_res[v]:
                    continue
                terms = [(np.array([tm.zcols(v, b, np.array([tm.hi[(v, b)]]))[0]]), 1.0)]
                terms += [(np.array([tm.zcols(w, a, np.array([tm.hi[(w, a)]]))[0]]), -1.0)
                          for w in range(v) if a in tm.task_res[w]]
                rows.add(terms, -np.inf, 0.0)


# ---------------------------------------------------------------------------------------------
# schedules in and out

def resource_of(tm: TimeModel) -> dict[int, int]:
    """Device -> resource."""
    return {d: r for r, devs in enumerate(tm.res) for d in devs}


def start_values(tm: TimeModel, dec: Decisions, makespan: int) -> np.ndarray:
    """Column values of a schedule (devices canonical for the symmetry groups): z by the
    bucket of each start, E by the bucket of the makespan."""
    x = np.zeros(tm.num_col)
    rof = resource_of(tm)
    for v, d in enumerate(dec.device):
        r = rof[d]
        b, lo, hi = tm.base[(v, r)], tm.lo[(v, r)], tm.hi[(v, r)]
        s = dec.start[v] // tm.delta
        x[b + max(0, min(s, hi) - lo): b + hi - lo + 1] = 1.0
    cm = makespan // tm.delta
    e0 = tm.e_base
    for t in range(max(cm, tm.e_lo), tm.top):
        x[e0 + t - tm.e_lo] = 1.0
    return x


def decisions(tm: TimeModel, values: np.ndarray, prep: MilpPrep) -> tuple[list[int], list[int]]:
    """(device, start in ticks ordering key) per task from column values: the resource with
    y = 1, the first bucket with z = 1 (× Δ); devices of an aggregated resource assigned by
    interval colouring in start order."""
    n = len(tm.task_res)
    res_of = [0] * n
    start = [0] * n
    for v in range(n):
        for r in tm.task_res[v]:
            b, lo, hi = tm.base[(v, r)], tm.lo[(v, r)], tm.hi[(v, r)]
            zs = values[b: b + hi - lo + 1]
            if zs[-1] > 0.5:
                res_of[v] = r
                start[v] = (lo + int(np.argmax(zs > 0.5))) * tm.delta
                break
    device = [0] * n
    free: dict[int, dict[int, int]] = {r: {d: -1 for d in devs} for r, devs in enumerate(tm.res)}
    for v in sorted(range(n), key=lambda v: (start[v], prep.topo_pos[v])):
        r = res_of[v]
        end = start[v] + (_dur(prep, v, tm.res[r]) // tm.delta) * tm.delta
        devs = free[r]
        d = min(devs, key=lambda d: (devs[d] > start[v], devs[d], d))
        device[v] = d
        devs[d] = max(devs[d], end) if _dur(prep, v, tm.res[r]) > 0 else devs[d]
    return device, start


def to_pyomo(tm: TimeModel) -> Any:
    """The same model as a Pyomo ConcreteModel (columns ``z[k]``, rows ``rows[i]``), for the
    Pyomo + HiGHS route and any Pyomo solver; slower to build than the arrays."""
    import pyomo.environ as pyo
    from pyomo.core.expr.numeric_expr import LinearExpression

    m = pyo.ConcreteModel(name="placement_time_indexed")
    m.z = pyo.Var(range(tm.num_col))
    for k in range(tm.num_col):
        m.z[k].setlb(float(tm.col_lower[k]))
        m.z[k].setub(float(tm.col_upper[k]))
        if tm.integrality[k]:
            m.z[k].domain = pyo.Binary
    m.rows = pyo.ConstraintList()
    for i in range(tm.num_row):
        a, b = tm.starts[i], tm.starts[i + 1]
        expr = LinearExpression(constant=0.0, linear_coefs=tm.value[a:b].tolist(),
                                linear_vars=[m.z[int(j)] for j in tm.index[a:b]])
        lo = None if not np.isfinite(tm.row_lower[i]) else float(tm.row_lower[i])
        up = None if not np.isfinite(tm.row_upper[i]) else float(tm.row_upper[i])
        m.rows.add((lo, expr, up))
    m.obj = pyo.Objective(expr=float(tm.top) + sum(
        float(c) * m.z[k] for k, c in enumerate(tm.cost) if c), sense=pyo.minimize)
    return m
