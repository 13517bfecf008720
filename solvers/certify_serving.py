"""The serving-plan side of :mod:`solvers.certify`: a P3 plan checked by the plan checker
(:func:`opt.serving.checker.check_plan`), its cost recomputed in $ per million output tokens.
:mod:`solvers.certify` imports it on the first serving result (its ``CERTIFY_PLAN`` and
``VALIDATE_PLAN``), so checking a placement schedule loads no ``opt.serving``."""

from __future__ import annotations

from typing import Any

from opt.common.result import Result
from opt.serving.checker import check_plan
from opt.serving.instance import ServingInstance
from opt.serving.plan import PlanError
from solvers.certify import REPORT_RTOL, Invalid, check_claims


def certify_plan(inst: ServingInstance, result: Result, solution: dict[str, Any]
                 ) -> tuple[float, dict[str, Any]]:
    """A P3 plan's cost ($ per million output tokens) and stats with the plan checker's
    figures; :class:`~solvers.certify.Invalid` when it breaks a rule or its lower bound is
    above the cost."""
    try:
        met = check_plan(inst, solution)
    except PlanError as exc:
        raise Invalid(str(exc)) from None
    value = met.cost_usd_per_mtok
    if result.lower_bound is not None and result.lower_bound > value * (1 + 1e-9):
        raise Invalid(f"lower bound {result.lower_bound} above the recomputed objective {value}")
    return value, {**result.stats, "t_rtt_ms": met.t_rtt_s * 1e3, "bottleneck": met.bottleneck,
                   "gpus": met.gpus, "stages_per_token": met.stages_per_token,
                   "checker": "valid"}


def validate_plan(inst: ServingInstance, res: Result, solution: dict[str, Any]
                  ) -> tuple[float, dict[str, Any], list[str]]:
    """Check a P3 plan: its cost ($ per million output tokens), JSON figures (seconds, bytes)
    and text lines; :class:`~solvers.certify.Invalid` when it or the result's claims fail."""
    try:
        met = check_plan(inst, solution)
    except PlanError as exc:
        raise Invalid(str(exc)) from None
    check_claims(res, met.cost_usd_per_mtok, "the plan's cost ($/M tokens)", REPORT_RTOL)
    figures = {"cost_usd_per_mtok": met.cost_usd_per_mtok, "t_rtt_s": met.t_rtt_s,
               "gpus": met.gpus, "memory_bytes": met.memory_bytes}
    text = [f"valid: {met.cost_usd_per_mtok:.6g} $/M tokens, T_rtt "
            f"{met.t_rtt_s * 1e3:.4g} ms (SLO {inst.seconds(inst.tpot_slo) * 1e3:.4g} "
            f"ms), {met.gpus} GPUs"]
    return met.cost_usd_per_mtok, figures, text
