"""Utilisation and NPU–PIM co-utilisation of a validated P1 schedule (DOPS Eq. 5).

Definitions (times in the instance's ``time_unit``; T = makespan, the latest compute end; only
compute events count as busy — transfers and weight loads overlap computation by design, problems.md
§1.2 rule 5):

* device utilisation ``u_d = (Σ compute durations on d) / T`` — taken from the validator
  (:func:`opt.placement.validator.validate_placement`, ``PlacementMetrics.utilisation``), not recomputed;
* class busy fraction ``U_C = |∪_{d ∈ C} busy(d)| / T``: the share of [0, T) during which at
  least one device of class C (``npu``, ``pim``, ...) computes;
* **co-utilisation** (our reading of DOPS Eq. 5, the "both busy" share)
  ``U_co = (1/T) ∫_0^T 1[some NPU computes at t] · 1[some PIM computes at t] dt``
  = |∪ busy(NPU) ∩ ∪ busy(PIM)| / T ∈ [0, min(U_npu, U_pim)]; ``U_npu_only``, ``U_pim_only`` and
  ``U_idle`` (neither class computes) complete the partition of [0, T):
  U_co + U_npu_only + U_pim_only + U_idle = 1. U_co is None when the platform lacks either class.

The schedule is validated first (an invalid one raises :class:`opt.placement.schedule_error.ScheduleError`),
so no number here comes from a schedule that breaks a rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.solution_tables import ColumnarSolution
from opt.placement.validator import PlacementMetrics, validate_placement

#: The device classes whose joint activity is measured.
PAIR = ("npu", "pim")


def compute_events(inst: PlacementInstance, solution: dict[str, Any]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(device index, start, end, task index) int64 arrays of the solution's compute events
    (read from the columns of a :class:`ColumnarSolution` whose rows were never built: a
    sweep's records take these shares of every full-size schedule, docs/speed.md "Sweeps")."""
    dindex, tindex = inst.device_index, inst.task_index
    if isinstance(solution, ColumnarSolution) and not solution.rows_built:
        dmap = np.array([dindex[name] for name in solution.devices], dtype=np.int64)
        n = len(solution.task)
        task = np.arange(n, dtype=np.int64) if solution.task is inst.task_ids else \
            np.fromiter(map(tindex.__getitem__, solution.task), dtype=np.int64, count=n)
        return dmap[solution.device], solution.start.copy(), solution.end.copy(), task
    events = solution.get("compute") or ()
    n = len(events)
    dev = np.empty(n, dtype=np.int64)
    start = np.empty(n, dtype=np.int64)
    end = np.empty(n, dtype=np.int64)
    task = np.empty(n, dtype=np.int64)
    for k, ev in enumerate(events):
        dev[k], start[k], end[k] = dindex[ev["device"]], ev["start"], ev["end"]
        task[k] = tindex[ev["task"]]
    return dev, start, end, task


def union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering ∪ [start_i, end_i) (empty intervals dropped;
    touching intervals merged)."""
    keep = end > start
    s, e = np.asarray(start)[keep], np.asarray(end)[keep]
    if len(s) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def intersection(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals of (∪a) ∩ (∪b) for two outputs of :func:`union`."""
    cuts = np.unique(np.concatenate([a[0], a[1], b[0], b[1]]))
    if len(cuts) < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo, hi = cuts[:-1], cuts[1:]
    both = _covers(a, lo) & _covers(b, lo)
    return union(lo[both], hi[both])


def _covers(iv: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Whether each time t lies in one of the disjoint sorted intervals ``iv``."""
    s, e = iv
    if len(s) == 0:
        return np.zeros(len(t), dtype=bool)
    i = np.searchsorted(s, t, side="right") - 1
    return (i >= 0) & (t < e[np.maximum(i, 0)])


def length(iv: tuple[np.ndarray, np.ndarray]) -> int:
    return int((iv[1] - iv[0]).sum())


def covered(iv: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Covered length of ``iv`` in [0, t) for each t (piecewise linear, vectorised)."""
    s, e = iv
    if len(s) == 0:
        return np.zeros(len(np.atleast_1d(t)))
    x = np.ravel(np.column_stack([s, e]))
    y = np.ravel(np.column_stack([np.cumsum(e - s) - (e - s), np.cumsum(e - s)]))
    return np.interp(t, x, y, left=0.0, right=float(y[-1]))


@dataclass(frozen=True)
class Utilisation:
    """Busy fractions of [0, makespan) (module docstring); ``device`` from the validator."""

    makespan: int
    time_unit: str
    device: dict[str, float]
    device_class: dict[str, str]
    class_busy: dict[str, float]
    co_utilisation: float | None
    npu_only: float | None
    pim_only: float | None
    idle: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def class_intervals(inst: PlacementInstance, solution: dict[str, Any]
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Device class → union of its devices' compute intervals."""
    dev, start, end, _ = compute_events(inst, solution)
    klass = np.array([d.device_class for d in inst.devices])
    out = {}
    for c in dict.fromkeys(klass.tolist()):
        mask = klass[dev] == c if len(dev) else np.zeros(0, dtype=bool)
        out[c] = union(start[mask], end[mask])
    return out


def utilisation(inst: PlacementInstance, solution: dict[str, Any],
                metrics: PlacementMetrics | None = None) -> Utilisation:
    """Per-device utilisation (validator), per-class busy fractions and NPU–PIM co-utilisation
    of ``solution``. ``metrics``: the validator's result if already computed (else the schedule
    is validated here)."""
    if metrics is None:
        metrics = validate_placement(inst, solution)
    T = metrics.makespan
    iv = class_intervals(inst, solution)
    frac = (lambda x: x / T) if T else (lambda x: 0.0)
    class_busy = {c: frac(length(v)) for c, v in iv.items()}
    co = npu_only = pim_only = idle = None
    if all(c in iv for c in PAIR):
        a, b = iv[PAIR[0]], iv[PAIR[1]]
        both = length(intersection(a, b))
        co = frac(both)
        npu_only = frac(length(a) - both)
        pim_only = frac(length(b) - both)
        idle = frac(T - length(a) - length(b) + both)
    return Utilisation(makespan=T, time_unit=inst.time_unit, device=dict(metrics.utilisation),
                       device_class={d.name: d.device_class for d in inst.devices},
                       class_busy=class_busy, co_utilisation=co, npu_only=npu_only,
                       pim_only=pim_only, idle=idle)


def class_shares(inst: PlacementInstance, solution: dict[str, Any], makespan: int
                 ) -> dict[str, float | None]:
    """``u_npu``, ``u_pim`` (class busy fractions) and ``u_co`` (co-utilisation) of a schedule
    already validated with this ``makespan`` (ticks), for sweep records; None for a class the
    platform lacks."""
    iv = class_intervals(inst, solution)
    frac = (lambda x: x / makespan) if makespan else (lambda x: 0.0)
    out: dict[str, float | None] = {f"u_{c}": frac(length(iv[c])) if c in iv else None
                                    for c in PAIR}
    out["u_co"] = frac(length(intersection(iv[PAIR[0]], iv[PAIR[1]]))) \
        if all(c in iv for c in PAIR) else None
    return out


def busy_profile(inst: PlacementInstance, solution: dict[str, Any], bins: int = 200,
                 window: tuple[int, int] | None = None) -> dict[str, Any]:
    """Busy fraction per time bin: ``{"edges": [bins+1 times], "<class>": [bins], "co": [bins]
    or None}`` over ``window`` (default [0, makespan)), for the utilisation plot."""
    iv = class_intervals(inst, solution)
    hi = max((int(v[1][-1]) for v in iv.values() if len(v[1])), default=0)
    lo, hi = window if window is not None else (0, hi)
    edges = np.linspace(lo, hi, bins + 1) if hi > lo else np.array([lo, lo + 1.0])
    width = np.diff(edges)
    out: dict[str, Any] = {"edges": edges}
    for c, v in iv.items():
        out[c] = np.diff(covered(v, edges)) / width
    out["co"] = (np.diff(covered(intersection(iv[PAIR[0]], iv[PAIR[1]]), edges)) / width
                 if all(c in iv for c in PAIR) else None)
    return out
