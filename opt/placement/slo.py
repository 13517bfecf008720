"""Objective and service-level objectives of a P1 instance (problems.md §1.5; DOPS §4.1: the
workload configuration carries an objective and optional TTFT / TPOT / end-to-end limits).

All values in ticks of the instance's ``time_unit``, measured on the validated schedule
(:class:`opt.placement.validator.PlacementMetrics`): ``ttft`` = the latest end of a prefill
task; ``decode_time`` = makespan − ttft; ``mean_tpot`` = decode_time / decode steps; ``e2e`` =
the makespan. The objective is one of :data:`OBJECTIVES` (default ``makespan``); an SLO is a
hard constraint: a schedule that breaks it is not a solution of the instance for an exact
method (``INFEASIBLE`` when none exists) and is reported with ``slo.met = false`` by a
heuristic, which cannot promise one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from opt.common.errors import InputError
from opt.common.units import ticks_ms_text

#: What a placement may minimise.
OBJECTIVES = ("makespan", "decode_time", "ttft")


@dataclass(frozen=True)
class Slo:
    """Upper limits in ticks (None: no limit): ``ttft``, ``mean_tpot`` (may be fractional) and
    ``e2e`` (the makespan)."""

    ttft: int | None = None
    mean_tpot: float | None = None
    e2e: int | None = None

    def __post_init__(self) -> None:
        for name in ("ttft", "mean_tpot", "e2e"):
            v = getattr(self, name)
            if v is None:
                continue
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
                and v > 0 and (name == "mean_tpot" or float(v).is_integer())
            if not ok:
                raise InputError(f"slo.{name} must be a positive {'number' if name == 'mean_tpot' else 'integer'} "
                                 f"of ticks, got {v!r}", field=f"slo.{name}")
        if self.ttft is not None:
            object.__setattr__(self, "ttft", int(self.ttft))
        if self.e2e is not None:
            object.__setattr__(self, "e2e", int(self.e2e))

    @property
    def empty(self) -> bool:
        return self.ttft is None and self.mean_tpot is None and self.e2e is None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("ttft", self.ttft), ("mean_tpot", self.mean_tpot),
                                  ("e2e", self.e2e)) if v is not None}

    @classmethod
    def from_dict(cls, d: Any) -> Slo:
        if not isinstance(d, dict):
            raise InputError(f"slo must be an object, got {d!r}", field="slo")
        unknown = set(d) - {"ttft", "mean_tpot", "e2e"}
        if unknown:
            raise InputError(f"unknown slo field '{sorted(unknown)[0]}'; known: ttft, "
                             f"mean_tpot, e2e", field=f"slo.{sorted(unknown)[0]}")
        return cls(**d)


def check_objective(objective: Any) -> str:
    if objective not in OBJECTIVES:
        raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}",
                         field="objective")
    return str(objective)


def objective_value(objective: str, metrics: Any) -> int | None:
    """The objective's value in ticks on a schedule's metrics (None when it is undefined, e.g.
    ``ttft`` of an instance without prefill tasks)."""
    if objective == "makespan":
        return int(metrics.makespan)
    value = metrics.ttft if objective == "ttft" else metrics.decode_time
    return None if value is None else int(value)


def violations(slo: Slo | None, metrics: Any, time_unit: str | None = None) -> list[str]:
    """One line per broken limit (empty when every limit holds); with ``time_unit`` the
    values are shown in ms, the unit of the CLI's ``--slo-*-ms`` (ticks otherwise)."""
    if slo is None:
        return []

    def shown(v: Any) -> str:
        return str(v) if v is None or time_unit is None else ticks_ms_text(v, time_unit)

    out = []
    for name, value, limit in (("ttft", metrics.ttft, slo.ttft),
                               ("mean_tpot", metrics.mean_tpot, slo.mean_tpot),
                               ("e2e", metrics.makespan, slo.e2e)):
        if limit is not None and (value is None or value > limit):
            out.append(f"{name} {shown(value)} > {shown(limit)}")
    return out


def decode_steps(inst: Any) -> int:
    """Distinct decode steps of the instance (the TPOT denominator of the validator)."""
    import numpy as np

    dec = inst.is_decode()
    if not dec.any() or inst.step is None:
        return 0
    return int(len(np.unique(inst.step[dec])))


def needs_phases(inst: Any) -> None:
    """TTFT and TPOT need the prefill / decode phase of every task; the ``decode_time``
    objective and a TPOT limit need decode tasks (phase 1): without them they are undefined
    (a solver would minimise nothing, a TPOT limit would compare with nothing)."""
    slo = inst.slo
    goal_uses_phase = inst.objective != "makespan" or (
        slo is not None and (slo.ttft is not None or slo.mean_tpot is not None))
    if goal_uses_phase and (inst.phase is None or not (inst.phase == 0).any()):
        raise InputError("the objective or SLO needs prefill tasks (phase 0)", field="slo")
    for needs, field in ((inst.objective == "decode_time", "objective"),
                         (slo is not None and slo.mean_tpot is not None, "slo.mean_tpot")):
        if needs and not (inst.phase == 1).any():
            what = "the decode_time objective" if field == "objective" else "a TPOT limit"
            raise InputError(f"{what} needs decode steps; the instance has none (decode 0)",
                             field=field)


def with_goal(inst: Any, objective: str = "makespan", slo: Slo | None = None) -> Any:
    """``inst`` with this objective and SLO (checked)."""
    out = replace(inst, objective=check_objective(objective),
                  slo=None if slo is None or slo.empty else slo)
    needs_phases(out)
    return out
