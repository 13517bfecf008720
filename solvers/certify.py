"""One contract for P1, P2 and P3 results: :func:`validate` checks a result against its instance
and returns a :class:`Validation` report; :func:`certify` is what ``solvers.solve`` applies to
every result before returning it.

Placement and layout schedules are checked by the independent validator
(:func:`opt.placement.validator.validate_placement`: precedence, capacities, transfers, the
layout's memory budget, the SLO), serving plans by the plan checker
(:func:`opt.serving.checker.check_plan`, in :mod:`solvers.certify_serving`). The objective is always recomputed: makespan (or the
instance's objective) in ticks of its time unit, or dollars per million output tokens. A report
is *invalid* when the solution breaks the instance, when the result's own numbers — reported
objective, gap, status against its lower bound (:func:`opt.common.result.claims_error`) — do
not agree with the recomputed objective, when its status contradicts what it carries
(:func:`opt.common.result.status_error`: OPTIMAL needs a solution and a lower bound equal to its
objective, FEASIBLE a solution, INFEASIBLE and TIME_LIMIT_NO_SOLUTION none; an ERROR result is
never valid), or when its problem does not fit its method or its schedule (a method the
registry files under another problem; a ``placement`` result that changes a block's format).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from opt.common.errors import InputError
from opt.common.fingerprint import fingerprint_error
from opt.common.result import Result, Status, claims_error, gap_of, status_error
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.slo import objective_value, violations
from opt.placement.utilisation import utilisation
from opt.placement.validator import validate_placement
from solvers.registry import BackendRef, methods

#: Relative tolerance on a reported objective and gap (the serving cost is a float).
REPORT_RTOL = 1e-6

#: The serving-plan checks (:mod:`solvers.certify_serving`), imported on the first serving
#: result through the registry's back-end seam: checking a schedule loads no ``opt.serving``.
CERTIFY_PLAN = BackendRef("solvers.certify_serving:certify_plan")
VALIDATE_PLAN = BackendRef("solvers.certify_serving:validate_plan")


class Invalid(Exception):
    """The result does not hold; the message says why."""


@dataclass(frozen=True)
class Validation:
    """The check of one result. valid: the solution holds and the result's numbers agree;
    problem: ``placement``, ``layout`` or ``serving``; objective: the recomputed objective
    (ticks of the instance's time unit, or $ per million output tokens; None without a
    valid solution); violations: why it is invalid (empty when valid); metrics: the checker's
    figures of a valid solution (JSON-ready); text: one-line summaries of them."""

    valid: bool
    problem: str
    objective: float | None = None
    violations: tuple[str, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    text: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``hetopt validate --json``: valid, problem, error (the first violation), metrics."""
        return {"valid": self.valid, "problem": self.problem,
                "error": self.violations[0] if self.violations else None, **self.metrics}


def problem_of(instance: Any) -> str:
    """``placement``, ``layout`` or ``serving``: the problem ``instance`` states."""
    return getattr(instance, "problem", "placement")


def validate(instance: Any, result: Result) -> Validation:
    """Check ``result`` against ``instance`` (never raises for an invalid result; InputError
    when the result is of another problem or was computed on another instance)."""
    kind = problem_of(instance)
    if _family(result.problem) != _family(kind):
        raise InputError(f"a {result.problem} result cannot be validated against the {kind} "
                         f"instance", field="problem")
    mismatch = fingerprint_error(result.instance_fingerprint, instance)
    if mismatch:
        raise InputError(mismatch, field="instance_fingerprint")
    try:
        _content(result)
        if result.solution is None:
            raise Invalid(f"no solution to validate (status {result.status})")
        if result.problem == "placement":
            _fixed_formats(instance, result.solution)
        objective, metrics, text = (VALIDATE_PLAN.resolve()(instance, result, result.solution)
                                    if kind == "serving"
                                    else _placement(instance, result, result.solution))
    except Invalid as exc:
        return Validation(False, kind, violations=(str(exc),))
    return Validation(True, kind, objective, (), metrics, tuple(text))


def certify(instance: Any, result: Result) -> Result:
    """The one gate every solver result passes (``solvers.solve`` applies it): check the
    solution, recompute the objective and the gap, attach the checker's figures. Never raises
    for an invalid result: a solution that breaks the instance, or a lower bound or status
    that contradicts the recomputed objective, makes the result ``ERROR`` with the reason in
    ``stats["message"]`` (and ``stats["invalid"]`` True). A result without a solution keeps
    its status with objective and gap None. The status becomes a :class:`Status`."""
    result = replace(result, status=Status(result.status))
    wrong = status_error(result.status, result.solution is not None, result.lower_bound) \
        if result.status != Status.ERROR else None
    if wrong:  # a back end's bug: say so rather than pass a result validate refuses
        return replace(result, status=Status.ERROR, objective=None, gap=None,
                       stats={**result.stats, "message": f"invalid result: {wrong}",
                              "invalid": True})
    if result.lower_bound is not None and result.lower_bound < 0:
        # every objective is a duration or a cost ≥ 0, so 0 is the better bound (CP-SAT
        # reported −8.3e7 for decode_time on a model without decode steps)
        result = replace(result, lower_bound=0)
    if result.solution is None:
        return replace(result, objective=None, gap=None)
    serving = problem_of(instance) == "serving"
    try:
        value, stats = (CERTIFY_PLAN.resolve()(instance, result, result.solution) if serving
                        else _certify_placement(instance, result, result.solution))
    except Invalid as exc:
        why = f"invalid {'plan' if serving else 'schedule'}: {exc}"
        extra = {"checker": why} if serving else {}
        return replace(result, status=Status.ERROR, objective=None, gap=None,
                       stats={**result.stats, **extra, "message": why, "invalid": True})
    return replace(result, objective=value, stats=stats,
                   gap=gap_of(value, result.lower_bound) if value is not None else None)


def _certify_placement(inst: PlacementInstance, result: Result, solution: dict[str, Any]
                       ) -> tuple[float | None, dict[str, Any]]:
    """A P1/P2 schedule's objective (ticks) and stats with the validator's metrics and the
    SLO verdict; :class:`Invalid` when it breaks a rule or its bound or status cannot hold."""
    try:
        metrics = validate_placement(inst, solution)
    except ScheduleError as exc:
        raise Invalid(str(exc)) from None
    value = objective_value(inst.objective, metrics)
    lb = result.lower_bound
    if lb is not None and value is not None and lb > value:
        raise Invalid(f"lower bound {lb} exceeds the validated {inst.objective} {value}: the "
                      f"bound or the schedule is wrong")
    claim = claims_error(result.status, value, lb) if value is not None else None
    if claim:
        raise Invalid(f"{claim}: the status, the bound or the schedule is wrong")
    stats = {**result.stats, "metrics": metrics.to_dict()}
    if inst.slo is not None:
        broken = violations(inst.slo, metrics, inst.time_unit)
        stats["slo"] = {"limits": inst.slo.to_dict(), "met": not broken, "violations": broken}
        if broken and result.status == "OPTIMAL":
            raise Invalid(f"an OPTIMAL schedule breaks the SLO: {'; '.join(broken)}")
    return value, stats


def _content(res: Result) -> None:
    """The status against what the result carries (:func:`opt.common.result.status_error`;
    an ERROR result is never valid) and the method against the problem (a method the registry
    knows solves that problem)."""
    if res.status == Status.ERROR:
        raise Invalid(f"status ERROR: {res.stats.get('message') or 'the method failed'}")
    wrong = status_error(res.status, res.solution is not None, res.lower_bound)
    if wrong:
        raise Invalid(wrong)

    known = sorted({m.problem for m in methods() if m.name == res.method})
    if known and res.problem not in known:
        raise Invalid(f"method '{res.method}' solves {' or '.join(known)}, not {res.problem}: "
                      f"the result's problem or method is wrong")


def _fixed_formats(inst: PlacementInstance, solution: dict[str, Any]) -> None:
    """A ``placement`` (P1) result stores every block in its instance format: choosing the
    formats is the layout problem."""
    formats = solution.get("formats") or {}
    if not isinstance(formats, dict):
        return  # the validator names the malformed field
    index = inst.block_index
    for bid, fmt in formats.items():
        if bid in index and fmt != inst.block_format[index[bid]]:
            raise Invalid(f"a placement result keeps each block's format, but block "
                          f"'{bid}' is in {fmt!r} (its format is "
                          f"'{inst.block_format[index[bid]]}'): this is a layout result")


def _family(problem: str) -> str:
    """Placement and layout results share the schedule format (a layout result is checked
    against a placement instance and the other way round)."""
    return "serving" if problem in ("serving", "serving_plan") else "placement"


def check_claims(res: Result, objective: float, what: str, rtol: float) -> None:
    """The reported objective (within relative ``rtol``), gap, status and lower bound agree
    with the recomputed ``objective`` (``what`` names it); :class:`Invalid` otherwise."""
    if res.objective is not None and \
            abs(res.objective - objective) > rtol * max(1.0, abs(objective)):
        raise Invalid(f"result reports objective {res.objective} but {what} is {objective}")
    claim = claims_error(res.status, objective, res.lower_bound)
    if claim:
        raise Invalid(claim)
    gap = gap_of(objective, res.lower_bound)
    if res.gap is not None and (gap is None or abs(res.gap - gap) > REPORT_RTOL):
        raise Invalid(f"result reports gap {res.gap} but its objective and lower bound give "
                      f"{gap}")


def _placement(inst: PlacementInstance, res: Result, solution: dict[str, Any]
               ) -> tuple[float | None, dict[str, Any], list[str]]:
    """Validate a P1/P2 schedule: its objective, JSON figures and text lines."""
    try:
        metrics = validate_placement(inst, solution)
    except ScheduleError as exc:
        raise Invalid(str(exc)) from None
    value = objective_value(inst.objective, metrics)
    if value is not None:  # integer ticks: exact
        check_claims(res, value, f"the schedule's {inst.objective}", 0.0)
    broken = violations(inst.slo, metrics, inst.time_unit)
    if broken:
        raise Invalid(f"the schedule breaks the instance's SLO: {'; '.join(broken)}")
    util = utilisation(inst, solution, metrics)  # DOPS Eq. 5 co-utilisation
    text = [f"valid: makespan {metrics.makespan} {inst.time_unit}"
            + (f", TTFT {metrics.ttft}, decode {metrics.decode_time} over "
               f"{metrics.decode_steps} steps" if metrics.ttft is not None else "")
            + ("; SLO met" if inst.slo is not None else "")]
    if util.co_utilisation is not None:
        text.append(f"co-utilisation (NPU and PIM both computing) {util.co_utilisation:.1%}; "
                    f"NPU only {util.npu_only:.1%}, PIM only {util.pim_only:.1%}, idle "
                    f"{util.idle:.1%}")
    figures = {**metrics.to_dict(), "class_busy": util.class_busy,
               "co_utilisation": util.co_utilisation, "npu_only": util.npu_only,
               "pim_only": util.pim_only, "idle": util.idle,
               **({"slo": inst.slo.to_dict()} if inst.slo is not None else {})}
    return value, figures, text
