"""The viewer page of one result on its instance (docs/viewer.md): the result checked against
the instance (:func:`opt.placement.validator.validate_placement` /
:func:`opt.serving.checker.check_plan`), then a P1/P2 schedule's or a P3 plan's page written
(:func:`opt.app.viewer.html.write_page`). ``hetopt view`` and ``opt.api.view`` both write
through :func:`write_view`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opt.app.viewer.html import write_page
from opt.app.viewer.placement import placement_payload
from opt.app.viewer.serving import serving_payload
from opt.common.errors import InputError
from opt.common.fingerprint import fingerprint_error
from opt.common.result import Result
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement
from opt.serving.checker import check_plan
from opt.serving.plan import PlanError

#: periods of a plan's steady state a page draws unless told
DEFAULT_PERIODS = 3


def check_result(inst: Any, res: Result, source: str) -> dict[str, Any]:
    """Validate ``res.solution`` against ``inst`` (InputError naming ``source`` and the rule
    on failure); a schedule's recomputed metrics (``{"metrics": ...}``), ``{}`` for a plan."""
    if res.solution is None:
        raise InputError(f"no solution to view (status {res.status})", source=source)
    serving = getattr(inst, "problem", "placement") == "serving"
    if serving != (res.problem == "serving"):
        raise InputError(f"a {res.problem} result does not fit a {inst.problem} instance",
                         source=source, field="problem")
    mismatch = fingerprint_error(res.instance_fingerprint, inst)
    if mismatch:
        raise InputError(mismatch, source=source, field="instance_fingerprint")
    if serving:
        try:
            check_plan(inst, res.solution)
        except (PlanError, KeyError, TypeError) as exc:
            raise InputError(f"invalid serving plan: {exc}", source=source) from None
        return {}
    try:
        return {"metrics": validate_placement(inst, res.solution)}
    except (ScheduleError, KeyError, TypeError) as exc:
        raise InputError(f"invalid schedule: {exc}", source=source) from None


def write_view(inst: Any, res: Result, output: str | Path, *, title: str | None = None,
               periods: int = DEFAULT_PERIODS, compress: bool = True,
               source: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """Check ``res`` against ``inst`` and write its page to ``output``: (bytes written, the
    page's header). ``title``: the page's title (default: the instance's file name, or the
    model and method of a plan); ``periods``: steady-state periods a plan's page draws;
    ``compress``: gzip the embedded data; ``source``: the instance and result references the
    header records (default: the instance's source)."""
    where = str((source or {}).get("result", "result"))
    extra = check_result(inst, res, where)
    solution = res.solution
    assert solution is not None  # check_result refuses a result without one
    if getattr(inst, "problem", "placement") == "serving":
        header, blob = serving_payload(inst, solution, periods=periods,
                                       title=title or f"{inst.model} · {res.method} plan")
    else:
        name = Path(str(getattr(inst, "source", None) or "instance")).name
        header, blob = placement_payload(inst, solution, title=title or name, **extra)
    header["source"] = {"instance": str(getattr(inst, "source", None)), "result": where,
                        **(source or {}), "method": res.method, "status": res.status}
    return write_page(header, blob, output, compress=compress), header
