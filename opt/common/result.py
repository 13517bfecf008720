"""Solver results (problems.md §0): one JSON object per run, whatever the method.

``objective`` is always recomputed from ``solution`` by the validator (never copied from a
solver); ``lower_bound`` is a proven bound or None; ``gap = (objective − lower_bound)/objective``;
``instance_fingerprint`` (:mod:`opt.common.fingerprint`) names the instance the result was
computed on. :func:`claims_error` is the one status/bound consistency rule every reader applies;
:func:`status_error` the rule of a status against the result's content.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opt.common.enums import TextEnum
from opt.common.errors import InputError
from opt.common.jsonio import Fields, read_json, write_json
from opt.common.problem import PROBLEMS
from opt.placement.schedule import LayoutSolution, Schedule
from opt.placement.solution_tables import ColumnarSolution, solution_from_tables, solution_tables

if TYPE_CHECKING:
    from opt.serving.checker import PlanMetrics
    from opt.serving.instance import ServingInstance
    from opt.serving.plan import ServingPlan

SCHEMA = 1


class Status(TextEnum):
    """A result's status; a ``str``, so it equals its name (``Status.OPTIMAL == "OPTIMAL"``)
    and is written to JSON as that string."""

    OPTIMAL = "OPTIMAL"                              # proven optimal
    FEASIBLE = "FEASIBLE"                            # a valid solution, optimality not proven
    INFEASIBLE = "INFEASIBLE"                        # proven: no solution exists
    TIME_LIMIT_NO_SOLUTION = "TIME_LIMIT_NO_SOLUTION"  # the limit ran out before any solution
    ERROR = "ERROR"                                  # the method failed; stats["message"] says why


STATUSES = tuple(s.value for s in Status)
#: A lower bound may exceed the objective by this relative amount (float noise), no more.
BOUND_RTOL = 1e-9
#: An OPTIMAL result's lower bound is within this relative gap of its objective (HiGHS'
#: default MIP gap).
OPTIMAL_RTOL = 1e-4


#: A result's solution as it is held: a placement or layout one as columns (every P1/P2
#: method) or rows (a §1.2a dict read from a small file), a serving plan as its §3.2 dict.
Solution = ColumnarSolution | dict[str, Any]


@dataclass
class Result:
    """The outcome of one solve. ``solution`` is the problem's solution object (or None): a
    placement or layout one a :class:`~opt.placement.solution_tables.ColumnarSolution` or
    its §1.2a dict, a serving plan its §3.2 dict. The typed views read it: :meth:`schedule`
    (placement, layout), :meth:`layout` (layout), :meth:`plan` and :meth:`plan_metrics`
    (serving)."""

    problem: str
    method: str
    status: str
    objective: float | None = None
    lower_bound: float | None = None
    gap: float | None = None
    runtime_s: float = 0.0
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    solution: Solution | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    instance_fingerprint: str | None = None

    @property
    def has_solution(self) -> bool:
        return self.solution is not None

    def schedule(self) -> Schedule:
        """The schedule of a placement or layout result, a read-only typed view
        (:class:`~opt.placement.schedule.Schedule`); InputError for a serving result or a
        result without a solution."""
        return Schedule.from_solution(self._solution_of(("placement", "layout"), "schedule()"))

    def layout(self) -> LayoutSolution:
        """The formats and schedule of a layout result
        (:class:`~opt.placement.schedule.LayoutSolution`); InputError for another problem or
        a result without a solution."""
        return LayoutSolution.from_solution(self._solution_of(("layout",), "layout()"))

    def plan(self, instance: ServingInstance) -> ServingPlan:
        """The plan of a serving result on ``instance`` (the one it was solved on):
        :class:`~opt.serving.plan.ServingPlan`, owners by configuration id; InputError for
        another problem, a result without a solution or a malformed plan."""
        # opt.serving loads for a serving result only: no placement solve imports it
        from opt.serving.plan import PlanError, plan_from_solution

        solution = self._solution_of(("serving",), "plan(instance)")
        try:
            return plan_from_solution(instance, solution)
        except PlanError as exc:
            raise InputError(f"malformed serving plan: {exc}", field="solution") from None

    def plan_metrics(self, instance: ServingInstance) -> PlanMetrics:
        """The plan checker's figures of a serving result's plan on ``instance``
        (:class:`~opt.serving.checker.PlanMetrics`: period ``t_rtt`` in ticks and
        ``t_rtt_s`` in seconds, ``cost_usd_per_mtok``, replicas and GPUs per owner, memory,
        violations), recomputed by :func:`opt.serving.checker.evaluate_plan`."""
        from opt.serving.checker import evaluate_plan  # as in plan()

        return evaluate_plan(instance, self.plan(instance))

    def _solution_of(self, problems: tuple[str, ...], accessor: str) -> Solution:
        """The solution, when this result is of one of ``problems`` and has one; InputError
        (naming ``problem`` or ``solution``) otherwise."""
        if self.problem not in problems:
            other = "plan(instance)" if self.problem == "serving" else "schedule()"
            raise InputError(f"result.{accessor} reads a {' or '.join(problems)} result; this "
                             f"one is {self.problem}: use result.{other}", field="problem")
        if self.solution is None:
            raise InputError(f"the result has no solution (status {self.status})",
                             field="solution")
        return self.solution

    def to_dict(self) -> dict[str, Any]:
        """The JSON form as plain dicts and lists (deep-copied; a columnar solution in
        rows)."""
        if self.solution is None or isinstance(self.solution, dict):
            return {"schema": SCHEMA, **asdict(self)}
        out = {"schema": SCHEMA, **asdict(replace(self, solution=None))}
        out["solution"] = _plain(self.solution)
        return out

    def body(self, solution: bool = True) -> dict[str, Any]:
        """:meth:`to_dict`'s keys with the fields as they are, for the JSON encoder (which
        reads nested dataclasses as asdict does) without asdict's deep copy of the solution
        (seconds at full size); ``solution`` False leaves the solution out."""
        return {"schema": SCHEMA, **{f.name: getattr(self, f.name) for f in fields(self)
                                     if solution or f.name != "solution"}}

    def write(self, path: str | Path) -> None:
        """The :meth:`to_dict` JSON (encoded from :meth:`body`). A solution with more than
        :data:`LARGE_EVENTS` compute events is written compact, and a placement one as column
        tables (problems.md §1.2a) when columns hold it
        (:func:`~opt.placement.solution_tables.solution_tables`); smaller ones as indented
        rows. The name must end in ``.json`` or ``.json.gz`` (InputError naming it)."""
        from opt.common.outpath import JSON_SUFFIXES, check_suffix

        check_suffix(path, JSON_SUFFIXES, "a result")
        body = self.body()
        big = _big(self.solution)
        if big and self.problem in ("placement", "layout"):
            tables = solution_tables(self.solution)
            if tables is not None:
                body["solution"] = tables
        write_json(body, path, indent=None if big else 1)


#: Above this many compute events a solution is written compact (and columnar ones as column
#: tables): ``opt.placement.instance.LARGE_TASKS``, the instances' threshold (a test keeps
#: them equal; not imported, to keep this module's import light).
LARGE_EVENTS = 2000


def _big(solution: Mapping[str, Any] | None) -> bool:
    return solution is not None and len(solution.get("compute", ())) > LARGE_EVENTS


def _plain(value: Any) -> Any:
    """``value`` with every mapping a new dict and every other list-like a new list (deep)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(v) for v in value]
    return value


def gap_of(objective: float | None, lower_bound: float | None) -> float | None:
    """(objective − lower_bound) / objective, or None when either is missing."""
    if objective is None or lower_bound is None:
        return None
    if objective == 0:
        return 0.0
    return max(0.0, (objective - lower_bound) / objective)


def claims_error(status: str, objective: float | None, lower_bound: float | None
                 ) -> str | None:
    """Why a result's status, objective and lower bound contradict each other (None when they
    agree): a bound must be finite and not above the objective, and OPTIMAL means the bound
    (when given) equals the objective within :data:`OPTIMAL_RTOL`."""
    for name, value in (("objective", objective), ("lower bound", lower_bound)):
        if value is not None and not math.isfinite(value):
            return f"{name} {value!r} is not a finite number"
    if status in ("OPTIMAL", "FEASIBLE") and objective is None:
        return f"status {status} but no objective"
    if objective is None or lower_bound is None:
        return None
    scale = max(1.0, abs(objective))
    if lower_bound > objective + BOUND_RTOL * scale:
        return f"lower bound {lower_bound:g} exceeds the objective {objective:g}"
    if status == "OPTIMAL" and objective - lower_bound > OPTIMAL_RTOL * scale:
        return (f"status OPTIMAL but the lower bound {lower_bound:g} is below the objective "
                f"{objective:g} (gap {gap_of(objective, lower_bound):.3g})")
    return None


#: What each status says about a result's content (problems.md §0); :func:`status_error`
#: applies it. ``OPTIMAL``: a solution and a lower bound equal to its objective;
#: ``FEASIBLE``: a solution; ``INFEASIBLE`` / ``TIME_LIMIT_NO_SOLUTION``: no solution;
#: ``ERROR``: the method failed, nothing it carries holds.
WITH_SOLUTION = ("OPTIMAL", "FEASIBLE")
WITHOUT_SOLUTION = ("INFEASIBLE", "TIME_LIMIT_NO_SOLUTION")


def status_error(status: str, has_solution: bool, lower_bound: float | None) -> str | None:
    """Why a result's status contradicts what it carries (None when they agree): OPTIMAL and
    FEASIBLE need a solution, INFEASIBLE and TIME_LIMIT_NO_SOLUTION must carry none, OPTIMAL
    needs a lower bound (:func:`claims_error` then checks it equals the objective)."""
    if status in WITH_SOLUTION and not has_solution:
        return f"status {status} but no solution"
    if status in WITHOUT_SOLUTION and has_solution:
        return (f"status {status} but the result carries a solution (a result with one is "
                f"FEASIBLE or OPTIMAL)")
    if status == "OPTIMAL" and lower_bound is None:
        return ("status OPTIMAL but no lower bound: optimality is a proven lower bound equal "
                "to the objective")
    return None


def result_from_dict(obj: Any, source: str | None = None) -> Result:
    """Validate and build a :class:`Result` from its JSON form (errors name file and field)."""
    f = Fields(obj, source, "")
    f.check_keys({"schema"} | set(Result.__dataclass_fields__))
    if f.get("schema", SCHEMA) != SCHEMA:
        raise f.error("schema", f"unsupported schema {obj.get('schema')!r}; this version reads "
                                f"{SCHEMA}")
    status = f.str("status")
    if status not in STATUSES:
        raise f.error("status", f"unknown status '{status}'; known: {', '.join(STATUSES)}")
    problem = f.str("problem")
    problem = "serving" if problem == "serving_plan" else problem
    if problem not in PROBLEMS:
        raise f.error("problem", f"unknown problem '{problem}'; known: {', '.join(PROBLEMS)}")
    sol = f.get("solution", None)
    if sol is not None and not isinstance(sol, dict):
        raise f.error("solution", "expected an object or null")
    if problem != "serving" and sol is not None and "columns" in sol:
        sol = solution_from_tables(sol, source)
    for key in ("params", "stats"):
        if not isinstance(f.get(key, None) or {}, dict):
            raise f.error(key, f"expected an object, got {type(obj[key]).__name__}")
    fp = f.get("instance_fingerprint", None)
    if fp is not None and (not isinstance(fp, str) or not fp.startswith("sha256:")):
        raise f.error("instance_fingerprint", f"expected 'sha256:<hex>' or null, got {fp!r}")
    return Result(problem=problem, method=f.str("method"), status=status,
                  objective=f.num("objective", None, minimum=None),
                  lower_bound=f.num("lower_bound", None, minimum=None),
                  gap=f.num("gap", None, minimum=None), runtime_s=f.num("runtime_s", 0.0),
                  seed=f.int("seed", None, minimum=None), params=f.get("params", {}) or {},
                  solution=sol, stats=f.get("stats", {}) or {}, instance_fingerprint=fp)


def read_result(path: str | Path) -> Result:
    """The result file at ``path`` (``.json`` or ``.json.gz``), validated."""
    return result_from_dict(read_json(path), source=str(path))



def reads_as_result(path: str | Path) -> bool:
    """Whether the file at ``path`` is a readable result file (to tell a user who passed a
    result where an instance belongs that the arguments look swapped)."""
    try:
        read_result(path)
    except (InputError, OSError):
        return False
    return True


def swapped_error(instance_ref: str, cause: InputError) -> InputError:
    """``cause`` (an instance that does not read), or, when ``instance_ref`` is a result file,
    an InputError saying that the arguments look swapped (the order is INSTANCE RESULT)."""
    if Path(instance_ref).is_file() and reads_as_result(instance_ref):
        return InputError("this is a result file, not an instance: the arguments look "
                          "swapped (the order is INSTANCE RESULT)", source=instance_ref)
    return cause
