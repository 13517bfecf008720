"""P3 serving-plan back ends ``(instance, SolveOptions) -> Result`` of ``solvers.solve``
(problems.md §3), registered with their params in :mod:`solvers.registry`.

=========  ==========================================================================
method     what it does
=========  ==========================================================================
``bnb``    regularity-aware branch-and-bound (``heuristics.serving.search``): the
           templates of every sub-block length dividing the block (or one length,
           ``sub_block_layers``) tiled over the block, multi-layer templates with at
           most ``max_stages`` stages (default K, one per owner); params ``frontier`` / ``bounds`` (default true) switch its
           pruning, ``period="formula"`` optimises the old formula instead (ablation)
``enum``   exhaustive enumeration of the full template space (tiny instances only)
``milp``   MILP over the full template space (``models.serving.milp``, HiGHS) on the
           old formula: a lower bound, its plans re-evaluated with the exact period
``col``    colocated baseline: one stage per block, K = 1
``afd``    attention module | FFN/MoE, two owners
``cad``    core attention | the rest, two owners
=========  ==========================================================================

Every plan goes through the plan checker (``opt.serving.checker.check_plan``): the objective
is the recomputed cost in $ per million output tokens, with the exact period T_rtt
(problems.md §3.2). ``OPTIMAL`` is reported only where it is proven for that objective over
the full template space: ``enum``; ``bnb`` when its space is the full space (the whole block
among its sub-block lengths and no stage cap binding); ``milp`` when its formula bound meets
the exact cost of its best plan (the MILP back end is :mod:`solvers.serving.milp`: the
searches load no MILP stack). ``bnb`` on a restricted space and the baselines are optimal
over their own spaces only and report ``FEASIBLE`` with ``stats["optimal_in_space"]``. No plan
meeting the SLO gives ``INFEASIBLE`` with the tightest T_rtt of any plan that fits in memory
(``stats["tightest_t_rtt_ms"]``), or, when nothing fits, a message saying so. A given
``initial_solution`` (a plan solution dict, problems.md §3.2) is the searches' first
incumbent and the MILP's first cutoff; it comes back when nothing is strictly better.

The time limit holds at every size: the owner sequences are enumerated against it and at most
``heuristics.serving.search.MAX_SEQUENCES`` of them (bounded memory); a space cut either way
is searched in part (``stats["space_cut"]`` says why; never ``OPTIMAL``), and a search stopped
before any plan is ``TIME_LIMIT_NO_SOLUTION``, not ``INFEASIBLE``.
"""

from __future__ import annotations

from typing import Any

from heuristics.serving import search as ss
from models.options import SolveOptions
from opt.common.errors import InputError
from opt.common.result import Result
from opt.serving.checker import check_plan, evaluate_plan, plan_solution
from opt.serving.instance import ServingInstance
from opt.serving.plan import PlanError, ServingPlan, plan_from_solution
from solvers.registry import parsed_params
from solvers.serving import outcomes

#: Largest block for exhaustive enumeration (sequences grow like 2^N).
ENUM_MAX_OPS = 16


def initial_plan(inst: ServingInstance, solution: dict[str, Any] | None) -> ServingPlan | None:
    """The plan of a given ``initial_solution`` (a plan solution dict, problems.md §3.2);
    InputError when the plan checker rejects it."""
    if solution is None:
        return None
    try:
        check_plan(inst, solution)
        return plan_from_solution(inst, solution)
    except PlanError as exc:
        raise InputError(f"invalid initial plan: {exc}", field="initial_solution") from None


def search(inst: ServingInstance, options: SolveOptions, *, method: str) -> Result:
    """``bnb``, ``enum`` or a baseline (``col``, ``afd``, ``cad``): the template search of
    ``heuristics.serving.search`` over the method's space, started from the given plan."""
    params = parsed_params(method, "serving", options.params)
    frontier = params.get("frontier", True)
    bounds = params.get("bounds", True)
    mus = params.get("microbatches")
    owners = params.get("owners")
    deadline = outcomes.deadline(options)
    full = False
    cut = None
    try:
        if method == "bnb":
            sub = params.get("sub_block_layers")
            cap = params.get("max_stages")
            got = ss.structured_space(inst, sub, owners, cap, deadline=deadline,
                                      max_sequences=ss.MAX_SEQUENCES)
            sequences, cut = got.sequences, got.cut
            lengths = [sub] if sub is not None else ss.sub_block_lengths(inst)
            full = inst.block_layers in lengths and (
                inst.block_layers == 1 or (cap is not None and cap >= inst.n_ops))
            space = (f"structured (sub-blocks of {', '.join(map(str, lengths))} layer(s) tiled "
                     f"over {inst.block_layers}; multi-layer templates ≤ "
                     f"{cap if cap is not None else 'K'} stages)")
        elif method == "enum":
            if inst.n_ops > ENUM_MAX_OPS:
                raise InputError(f"exhaustive enumeration over a block of {inst.n_ops} ops "
                                 f"is intractable (limit {ENUM_MAX_OPS}); use bnb or milp",
                                 field="method")
            got = ss.full_space(inst, owners, deadline=deadline, max_sequences=ss.MAX_SEQUENCES)
            sequences, cut = got.sequences, got.cut
            full = True
            space = "full template space"
        else:
            sequences = ss.baseline_sequences(inst, method)
            space = f"{method.upper()} fixed boundaries"
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc), field="params.sub_block_layers") from None
    start = initial_plan(inst, options.initial_solution)
    start_cost = None
    if start is not None:
        met = evaluate_plan(inst, start)
        start_cost = met.cost_usd_per_token if met.feasible else None
    period = params.get("period", "exact")
    out = ss.search(inst, sequences, frontier=frontier, bounds=bounds,
                    microbatches=mus, time_limit=outcomes.seconds_left(deadline),
                    incumbent=start_cost, period=period)
    stats: dict[str, Any] = {"space": space, "search": out.stats.to_dict(),
                             "frontier": frontier, "bounds": bounds}
    if cut is not None:
        stats["space_cut"] = cut
    plan = out.plan if out.plan is not None else (start if start_cost is not None else None)
    stopped = out.stats.timed_out or (cut is not None and cut.startswith("the time limit"))
    if plan is None and (stopped or cut is not None):
        why = ("the time limit ran out" if stopped else f"the space was cut ({cut})")
        stats["message"] = f"{why} before any plan meeting the SLO was found"
        # not a proof of infeasibility: only a part of the space was searched
        return Result(problem="serving", method=method, status="TIME_LIMIT_NO_SOLUTION",
                      stats=stats)
    if plan is None:
        return outcomes.infeasible(inst, method, sequences, mus, stats, deadline)
    complete = not out.stats.timed_out and cut is None and period == "exact"
    status = "OPTIMAL" if (full and complete) else "FEASIBLE"
    if complete:
        stats["optimal_in_space"] = space
    res = Result(problem="serving", method=method, status=status,
                 runtime_s=out.stats.runtime_s, solution=plan_solution(inst, plan),
                 stats=stats)
    if status == "OPTIMAL":
        res.lower_bound = res.solution["cost_usd_per_mtok"]
    return res
