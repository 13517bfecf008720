"""``hetopt validate INSTANCE RESULT``: check a result against its instance, for either problem.

Bad input — unreadable files, a result of the other problem kind, a result computed on another
instance (its ``instance_fingerprint``) — is one line and exit 2. A result that reads but does
not hold — a broken schedule or plan, a reported number that is not the recomputed one, a status
or lower bound that contradicts the objective (:func:`opt.common.result.claims_error`) — is
``invalid`` and exit 1. With ``--json`` the verdict is always JSON (``valid``, ``error``).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from opt.app.cli.common import load_instance, print_json
from opt.common.errors import InputError

if TYPE_CHECKING:
    from opt.common.result import Result

#: Relative tolerance on a reported objective and gap (the serving cost is a float).
REPORT_RTOL = 1e-6


class Invalid(Exception):
    """The result does not hold (exit 1); the message says why."""


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate``: check a result against its instance (exit 1 if invalid, 2 if bad input)."""
    from opt.common.fingerprint import fingerprint_error
    from opt.common.result import read_result

    inst = load_instance(args.instance)
    res = read_result(args.result)
    kind = getattr(inst, "problem", "placement")
    if res.problem != kind:
        raise InputError(f"a {res.problem} result cannot be validated against the {kind} "
                         f"instance {args.instance}", source=args.result, field="problem")
    mismatch = fingerprint_error(res.instance_fingerprint, inst)
    if mismatch:
        raise InputError(mismatch, source=args.result, field="instance_fingerprint")
    try:
        if res.solution is None:
            raise Invalid(f"no solution to validate (status {res.status})")
        report = (_serving(inst, res, res.solution) if kind == "serving_plan"
                  else _placement(inst, res, res.solution))
    except Invalid as exc:
        if args.json:
            print_json({"valid": False, "problem": kind, "error": str(exc)})
        else:
            print(f"invalid: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json({"valid": True, "problem": kind, "error": None, **report["json"]})
    else:
        for line in report["text"]:
            print(line)
    return 0


def _claims(res: Result, objective: float, what: str, rtol: float) -> None:
    """The reported objective (within ``rtol``), gap, status and lower bound agree with
    ``objective``."""
    from opt.common.result import claims_error, gap_of

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


def _placement(inst: Any, res: Result, solution: dict[str, Any]) -> dict[str, Any]:
    """Validate a P1/P2 schedule; the JSON fields and text lines of a valid one."""
    from opt.placement.utilisation import utilisation
    from opt.placement.validator import ScheduleError, validate_placement

    try:
        metrics = validate_placement(inst, solution)
    except ScheduleError as exc:
        raise Invalid(str(exc)) from None
    from opt.placement.slo import objective_value, violations

    value = objective_value(inst.objective, metrics)
    if value is not None:  # integer ticks: exact
        _claims(res, value, f"the schedule's {inst.objective}", 0.0)
    broken = violations(inst.slo, metrics)
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
    return {"json": {**metrics.to_dict(), "class_busy": util.class_busy,
                     "co_utilisation": util.co_utilisation, "npu_only": util.npu_only,
                     "pim_only": util.pim_only, "idle": util.idle,
                     **({"slo": inst.slo.to_dict()} if inst.slo is not None else {})},
            "text": text}


def _serving(inst: Any, res: Result, solution: dict[str, Any]) -> dict[str, Any]:
    """Check a P3 plan; the JSON fields and text lines of a valid one."""
    from opt.serving.checker import check_plan
    from opt.serving.plan import PlanError

    try:
        met = check_plan(inst, solution)
    except PlanError as exc:
        raise Invalid(str(exc)) from None
    _claims(res, met.cost_usd_per_mtok, "the plan's cost ($/M tokens)", REPORT_RTOL)
    return {"json": {"cost_usd_per_mtok": met.cost_usd_per_mtok, "t_rtt_s": met.t_rtt_s,
                     "gpus": met.gpus, "memory_bytes": met.memory_bytes},
            "text": [f"valid: {met.cost_usd_per_mtok:.6g} $/M tokens, T_rtt "
                     f"{met.t_rtt_s * 1e3:.4g} ms (SLO {inst.seconds(inst.tpot_slo) * 1e3:.4g} "
                     f"ms), {met.gpus} GPUs"]}
