"""P1 placement back ends of ``solvers.solve`` (problems.md §1): ``(instance, SolveOptions) ->
Result`` for the exact models and the heuristics (registered in :mod:`solvers.registry`).

The exact models come from :mod:`models` and :mod:`solvers.placement.block_branching`; each
heuristic schedule is wrapped as FEASIBLE; ``solve`` attaches the certified lower bound (computed
while the heuristic schedules) and validates every result afterwards. Models and heuristics are imported on first use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from models.options import SolveOptions
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from solvers.registry import parsed_params


def cpsat(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.placement.cpsat import solve_placement_cpsat

    return solve_placement_cpsat(inst, options)


def cpsat_blocks(inst: PlacementInstance, options: SolveOptions) -> Result:
    from solvers.placement.block_branching import solve_placement_blocks

    return solve_placement_blocks(inst, options)


def milp(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.placement.milp import solve_placement_milp

    return solve_placement_milp(inst, options)


def heuristic_result(inst: PlacementInstance, method: str, options: SolveOptions,
                     schedule: Callable[[], dict[str, Any]], **stats: Any) -> Result:
    """Run a heuristic ``schedule()`` and wrap it as FEASIBLE (``solvers.solve`` attaches the
    certified bound, :func:`solvers.api._solve_placement`); runtime in seconds, the schedule's
    alone."""
    t0 = time.perf_counter()
    solution = schedule()
    runtime_s = time.perf_counter() - t0
    return Result(problem="placement", method=method, status="FEASIBLE", lower_bound=None,
                  runtime_s=runtime_s, seed=options.seed,
                  params=dict(options.params), solution=solution, stats=dict(stats))


def heuristic_with_stats(inst: PlacementInstance, method: str, options: SolveOptions,
                         schedule: Callable[[dict[str, Any]], dict[str, Any]]) -> Result:
    """:func:`heuristic_result` for a heuristic that fills a stats dict as it runs:
    ``schedule(stats)`` returns the solution; the stats it filled go into the Result's."""
    stats: dict[str, Any] = {}
    result = heuristic_result(inst, method, options, lambda: schedule(stats))
    result.stats.update(stats)
    return result


def heft(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.list_scheduler import heft as heft_schedule

    given = parsed_params("heft", "placement", options.params)
    typed = list_settings(given)
    return heuristic_result(inst, "heft", options, lambda: heft_schedule(inst, **typed))


def bifocal(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.bifocal import BifocalParams, bifocal_schedule

    typed = parsed_params("bifocal", "placement", options.params)
    params = BifocalParams(**typed)
    return heuristic_with_stats(inst, "bifocal", options,
                                lambda stats: bifocal_schedule(inst, params, stats=stats))


def list_settings(params: dict[str, Any]) -> dict[str, Any]:
    """HEFT's effective settings for ``params`` (typed): the list scheduler's
    ``device_choice`` (default ``fit_in_class``)."""
    return {"device_choice": params.get("device_choice", "fit_in_class")}


def static_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The static policies' effective settings for ``params`` (typed): the device inside the
    class, ``device_choice`` (default ``least_available``, problems.md §6)."""
    return {"device_choice": params.get("device_choice", "least_available")}


def bifocal_settings(params: dict[str, Any]) -> dict[str, Any]:
    """Bifocal's effective settings for ``params`` (typed): every field of BifocalParams and
    :data:`heuristics.placement.bifocal.BIFOCAL_VERSION` under the record field ``revision``."""
    from dataclasses import asdict

    from heuristics.placement.bifocal import BIFOCAL_VERSION, BifocalParams

    return {**asdict(BifocalParams(**params)), "revision": BIFOCAL_VERSION}


def policy_search_settings(params: dict[str, Any]) -> dict[str, Any]:
    """Policy search's effective settings for ``params`` (typed): every field of
    :class:`heuristics.placement.policy_search.PolicySearchParams` but its time limit (the
    solve's own, ``--time-limit``, replaces it)."""
    from dataclasses import asdict

    from heuristics.placement.policy_search import PolicySearchParams

    fields = asdict(PolicySearchParams(**params))
    del fields["time_limit"]
    return fields


def policy_search(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.policy_search import PolicySearchParams
    from heuristics.placement.policy_search import policy_search as search

    typed = parsed_params("policy-search", "placement", options.params)
    params = PolicySearchParams(**typed)
    return heuristic_with_stats(inst, "policy-search", options,
                                lambda stats: search(inst, params, time_limit=options.time_limit,
                                                     stats=stats))


def static(inst: PlacementInstance, options: SolveOptions, *, policy: str) -> Result:
    """Static policy ``policy`` (DOPS Table 1, heuristics.placement.static_policies)."""
    from heuristics.placement.static_policies import POLICIES, static_schedule

    given = parsed_params(policy, "placement", options.params)
    typed = static_settings(given)
    return heuristic_result(inst, policy, options,
                            lambda: static_schedule(inst, policy, **typed),
                            policy=POLICIES[policy].description)
