"""The single entry point: ``solve(instance, solver=..., time_limit=..., num_workers=...,
seed=..., initial_solution=..., **params)``.

Every result passes the independent validator before it is returned: the objective is the
validator's recomputed makespan and the gap is computed from the proven lower bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from models.options import SolveOptions
from opt.placement.certified_bounds import certified_lower_bound
from opt.common.errors import InputError, UnknownNameError
from opt.placement.instance import PlacementInstance
from opt.placement.layout import relaxed_instance
from opt.common.result import Result
from opt.placement.validator import ScheduleError, certify_placement, validate_placement
from solvers.layout.strategies import LAYOUT_EXACT, LAYOUT_METHODS


def _cpsat(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.placement.cpsat import solve_placement_cpsat

    return solve_placement_cpsat(inst, options)


def _cpsat_blocks(inst: PlacementInstance, options: SolveOptions) -> Result:
    from solvers.placement.block_branching import solve_placement_blocks

    return solve_placement_blocks(inst, options)


def _milp(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.placement.milp import solve_placement_milp

    return solve_placement_milp(inst, options)


def _heuristic_result(inst: PlacementInstance, method: str, options: SolveOptions,
                      schedule: Callable[[], dict[str, Any]], **stats: Any) -> Result:
    """Run a heuristic ``schedule()`` and wrap it: FEASIBLE with the cheap certified bound."""
    import time

    t0 = time.perf_counter()
    solution = schedule()
    runtime_s = time.perf_counter() - t0
    return Result(problem="placement", method=method, status="FEASIBLE",
                  lower_bound=float(certified_lower_bound(inst).value),
                  runtime_s=runtime_s, seed=options.seed,
                  params=dict(options.params), solution=solution,
                  stats={"lower_bound_kind": "certified (opt.placement.certified_bounds)",
                         **stats})


def _heft(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.list_scheduler import heft

    return _heuristic_result(inst, "heft", options, lambda: heft(inst))


def _bifocal(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.bifocal import BifocalParams, bifocal_schedule

    params = BifocalParams.from_dict(options.params)  # unknown names → InputError
    stats: dict[str, Any] = {}
    result = _heuristic_result(inst, "bifocal", options,
                               lambda: bifocal_schedule(inst, params, stats=stats))
    result.stats.update(stats)
    return result


def _policy_search(inst: PlacementInstance, options: SolveOptions) -> Result:
    from heuristics.placement.policy_search import PolicySearchParams, policy_search

    params = PolicySearchParams.from_dict(options.params)  # unknown names → InputError
    stats: dict[str, Any] = {}
    result = _heuristic_result(inst, "policy-search", options,
                               lambda: policy_search(inst, params,
                                                     time_limit=options.time_limit,
                                                     stats=stats))
    result.stats.update(stats)
    return result


def _static(policy: str) -> Callable[[PlacementInstance, SolveOptions], Result]:
    """The back end of static policy ``policy`` (DOPS Table 1, heuristics.placement.static_policies)."""

    def backend(inst: PlacementInstance, options: SolveOptions) -> Result:
        from heuristics.placement.static_policies import POLICIES, static_schedule

        return _heuristic_result(inst, policy, options, lambda: static_schedule(inst, policy),
                                 policy=POLICIES[policy].description)

    backend.__name__ = backend.__qualname__ = f"_static_{policy.replace('+', '_')}"
    return backend


#: Placement back ends by method name (exact models; heuristics register here too).
PLACEMENT_METHODS: dict[str, Callable[[PlacementInstance, SolveOptions], Result]] = {
    "cpsat": _cpsat,
    "cpsat-blocks": _cpsat_blocks,
    "milp": _milp,
    "heft": _heft,
    "bifocal": _bifocal,
    "pd": _static("pd"),
    "af": _static("af"),
    "pd+linear": _static("pd+linear"),
    "pd+attn": _static("pd+attn"),
    "pd+ffn": _static("pd+ffn"),
    "policy-search": _policy_search,
}
#: Methods that take a warm start (the others ignore ``initial_solution``).
EXACT_METHODS = frozenset({"cpsat", "cpsat-blocks", "milp"}) | LAYOUT_EXACT
PLACEMENT_METHODS.update(LAYOUT_METHODS)  # P2 strategies (solvers.layout.strategies): formats are decided


#: heuristics an exact solve may start from ("best": the shorter of heft and bifocal;
#: "policy-search" is slower — up to 200 schedules — and often shorter on large slices)
WARM_STARTS = ("heft", "bifocal", "best", "policy-search")


def warm_start_schedule(inst: PlacementInstance, name: str
                        ) -> tuple[dict[str, Any] | None, str | None]:
    """The schedule of heuristic ``name`` ("best": the shortest of them) that the exact
    models can take: valid and without evictions (they model none). (None, None) if none is."""
    from heuristics.placement.bifocal import BifocalParams, bifocal_schedule
    from heuristics.placement.list_scheduler import heft
    from heuristics.placement.policy_search import policy_search

    runs = {"heft": lambda: heft(inst),
            "bifocal": lambda: bifocal_schedule(inst, BifocalParams()),
            "policy-search": lambda: policy_search(inst)}
    best: tuple[int, dict[str, Any], str] | None = None
    for key in (("heft", "bifocal") if name == "best" else (name,)):
        try:
            sol = runs[key]()
            if sol.get("evictions"):
                continue
            span = validate_placement(inst, sol).makespan
        except (InputError, ScheduleError):
            continue  # e.g. capacities a heuristic cannot meet without evictions
        if best is None or span < best[0]:
            best = (span, sol, key)
    return (None, None) if best is None else (best[1], best[2])


def solve(instance: PlacementInstance, solver: str = "cpsat", *, time_limit: float | None = 60.0,
          num_workers: int = 1, seed: int = 0, initial_solution: dict[str, Any] | Result | None = None,
          warm_start: str | None = "best", export_path: str | None = None,
          **params: Any) -> Result:
    """Solve ``instance`` with method ``solver`` and return a certified :class:`Result`.

    time_limit: seconds (None = no limit); num_workers: threads; seed: random seed;
    initial_solution: a solution dict or a Result to warm-start from (validated first);
    warm_start: for exact methods without ``initial_solution``, the heuristic whose schedule
    seeds the search: "heft", "bifocal", "best" (the shorter eviction-free schedule of the two,
    milliseconds on small instances), "policy-search" (slower, often shorter on large slices)
    or None / "none" for a cold start;
    export_path: MILP only, write the model as .mps/.lp; params: passed to the back end
    untouched (e.g. CP-SAT parameter names, HiGHS option names).
    """
    from opt.serving.instance import ServingInstance

    if isinstance(instance, ServingInstance):  # P3: solvers.serving.methods (bnb, milp, col, ...)
        from solvers.serving.methods import solve_serving

        if export_path is not None:
            raise InputError("export is available for the placement MILP only", field="export")
        return solve_serving(instance, solver, time_limit=time_limit, num_workers=num_workers,
                             seed=seed, initial_solution=initial_solution, **params)
    if not isinstance(instance, PlacementInstance):
        raise InputError(f"expected a PlacementInstance or ServingInstance, got "
                         f"{type(instance).__name__}", field="instance")
    if solver not in PLACEMENT_METHODS:
        raise UnknownNameError("method", solver, PLACEMENT_METHODS)
    if num_workers < 1:
        raise InputError(f"num_workers must be ≥ 1, got {num_workers}", field="num_workers")
    if time_limit is not None and time_limit <= 0:
        raise InputError(f"time_limit must be > 0 seconds, got {time_limit}", field="time_limit")
    if isinstance(initial_solution, Result):
        initial_solution = initial_solution.solution
    if initial_solution is not None:
        try:
            validate_placement(instance, initial_solution)
        except ScheduleError as exc:
            raise InputError(f"invalid initial solution: {exc}", field="initial_solution") from None
    if export_path is not None and solver != "milp":
        raise InputError("export is available for the MILP only (--method milp)",
                         field="export")
    warm_name = "initial_solution" if initial_solution is not None else None
    if warm_start == "none":
        warm_start = None
    if warm_start is not None and warm_start not in WARM_STARTS:
        raise UnknownNameError("warm start", warm_start, WARM_STARTS)
    if initial_solution is None and solver in EXACT_METHODS and warm_start is not None:
        initial_solution, warm_name = warm_start_schedule(instance, warm_start)
    options = SolveOptions(time_limit=time_limit, num_workers=num_workers, seed=seed,
                           initial_solution=initial_solution, params=dict(params),
                           export_path=export_path)
    result = PLACEMENT_METHODS[solver](instance, options)
    result.stats["warm_start"] = warm_name
    if result.solution is None and result.status == "TIME_LIMIT_NO_SOLUTION" and \
            initial_solution is not None:
        # the solver stopped before reporting a solution: the warm start is the best known one
        result.solution = initial_solution
        result.status = "FEASIBLE"
        result.stats["incumbent"] = "warm start (the solver found none within the limit)"
    if result.status not in ("INFEASIBLE", "ERROR"):
        # layout methods choose formats: bound the format-relaxed instance (opt.placement.layout)
        cert = certified_lower_bound(relaxed_instance(instance)
                                     if solver in LAYOUT_METHODS else instance)
        if result.lower_bound is None or cert.value > result.lower_bound:
            result.lower_bound = float(cert.value)
            result.stats["lower_bound_source"] = f"certified ({cert.best}, opt.placement.certified_bounds)"
    return certify_placement(instance, result)
