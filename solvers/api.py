"""The single entry point: ``solve(instance, method=None, *, time_limit=..., num_workers=...,
seed=..., initial_solution=..., warm_start=..., export_path=..., **params)``.

``solve_with(instance, method, SolveOptions, ...)`` takes the same options as one value. The
method comes from :mod:`solvers.registry` (None: the instance's problem default); every back end
is called as ``backend(instance, SolveOptions)``. Every result passes the
independent checker before it is returned — placement: the validator recomputes the makespan
and the gap comes from the proven (or certified) lower bound; serving plans: the plan checker
recomputes the cost per million output tokens.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import time
from typing import TYPE_CHECKING, Any

from models.options import DEFAULT_NUM_WORKERS, DEFAULT_TIME_LIMIT_S, SolveOptions
from opt.common.errors import InputError, UnknownNameError
from opt.common.result import Result
from opt.placement.bound_process import start_bound
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement
from solvers.certify import certify
from solvers.placement.warm_start import WARM_STARTS, warm_start_schedule
from solvers.registry import (
    FALLBACKS,
    Method,
    choose_default,
    get_method,
    methods,
    size_error,
)

if TYPE_CHECKING:  # imported when a serving instance is solved (start-up time)
    from opt.serving.instance import ServingInstance

#: largest seed: CP-SAT's and HiGHS' random seeds are 31-bit non-negative integers
MAX_SEED = 2**31 - 1
#: most solver threads of one solve: far beyond the cores of any machine the tools run on
#: (CP-SAT refuses some larger counts as MODEL_INVALID; HiGHS caps its own threads)
MAX_WORKERS = 256



def instance_problems(instance: Any) -> tuple[str, ...]:
    """The registry problems whose methods solve ``instance`` (the first is its default's)."""
    if isinstance(instance, PlacementInstance):  # the instance's own problem first
        return ("layout", "placement") if instance.problem == "layout" \
            else ("placement", "layout")
    from opt.serving.instance import ServingInstance

    if isinstance(instance, ServingInstance):
        return ("serving",)
    raise InputError(f"expected a PlacementInstance or ServingInstance, got "
                     f"{type(instance).__name__}", field="instance")


def check_options(time_limit: Any, num_workers: Any, seed: Any) -> None:
    """The common arguments: time_limit a finite number > 0 seconds or None (no limit),
    num_workers an integer in 1..MAX_WORKERS, seed an integer in 0..MAX_SEED (InputError
    naming the argument)."""
    def is_int(v: Any) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if time_limit is not None and (isinstance(time_limit, bool)
                                   or not isinstance(time_limit, numbers.Real)
                                   or not math.isfinite(time_limit) or not time_limit > 0):
        raise InputError(f"time_limit must be a finite number > 0 seconds or None (no "
                         f"limit), got {time_limit!r}", field="time_limit")
    if not is_int(num_workers) or not 1 <= num_workers <= MAX_WORKERS:
        raise InputError(f"num_workers must be an integer in 1..{MAX_WORKERS}, got "
                         f"{num_workers!r}", field="num_workers")
    if not is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}",
                         field="seed")


def _given_start(problem: str, instance: Any, initial_solution: dict[str, Any] | Result | None
                 ) -> dict[str, Any] | None:
    """The solution dict of ``initial_solution`` (a Result's solution), checked: the
    placement validator (P1/P2) or the plan checker (P3); InputError if it is invalid."""
    if isinstance(initial_solution, Result):
        initial_solution = initial_solution.solution
    if initial_solution is None:
        return None
    if problem == "serving":
        from collections.abc import Mapping

        from solvers.serving.methods import initial_plan

        if isinstance(initial_solution, Mapping) and not isinstance(initial_solution, dict):
            initial_solution = dict(initial_solution)  # e.g. a placement result's columns
        initial_plan(instance, initial_solution)
        return initial_solution
    try:
        validate_placement(instance, initial_solution)
    except ScheduleError as exc:
        raise InputError(f"invalid initial solution: {exc}", field="initial_solution") from None
    return initial_solution


def solve(instance: PlacementInstance | ServingInstance, method: str | None = None, *,
          time_limit: float | None = DEFAULT_TIME_LIMIT_S, num_workers: int = DEFAULT_NUM_WORKERS, seed: int = 0,
          initial_solution: dict[str, Any] | Result | None = None,
          warm_start: str | None = "best", export_path: str | None = None,
          deterministic: bool = False, log: bool = False, **params: Any) -> Result:
    """Solve ``instance`` with ``method`` (None: the default method of the instance's problem,
    :data:`solvers.registry.DEFAULTS`: ``portfolio`` for placement, ``cpsat-layout`` for layout,
    ``bnb`` for serving instances; on a placement instance the exact default cannot build a
    model of within ``time_limit``, the best heuristic, :data:`solvers.registry.FALLBACKS`;
    ``stats["method_choice"]`` says which and why) and return a certified :class:`Result`. An
    exact method given by name on such an instance is an InputError
    (:func:`solvers.registry.size_error`).

    time_limit: seconds (default :data:`DEFAULT_TIME_LIMIT_S`; None = no limit);
    num_workers: solver threads; seed: random seed;
    initial_solution: a solution dict (placement schedule or serving plan) or a Result to start
    from (checked first); warm_start: for the placement methods that take one
    (``cpsat``, ``cpsat-blocks``, ``milp``) when no ``initial_solution`` is given, the
    heuristic whose schedule seeds the search: "heft", "bifocal", "best" (the shorter
    eviction-free schedule of the two, milliseconds on small instances), "policy-search"
    (slower, often shorter on large slices) or None / "none" for a cold start;
    export_path: placement MILP only, write the model as .mps/.lp; deterministic: CP-SAT
    methods give the same result on every run (the time limit becomes CP-SAT's deterministic
    time and is not shortened by the warm start; several workers interleave their search);
    log: exact methods stream the solver's progress to stderr; params: the method's knobs,
    passed to the back end untouched after :mod:`solvers.params` checked them (e.g. CP-SAT
    parameter names, HiGHS option names). :func:`solve_with` takes the same options as one
    :class:`~models.options.SolveOptions`.
    """
    if isinstance(initial_solution, Result):
        initial_solution = initial_solution.solution
    options = SolveOptions(time_limit=time_limit, num_workers=num_workers, seed=seed,
                           initial_solution=initial_solution, params=params,
                           export_path=export_path, deterministic=deterministic, log=log)
    return solve_with(instance, method, options, warm_start=warm_start)


def solve_with(instance: PlacementInstance | ServingInstance, method: str | None,
               options: SolveOptions, *, warm_start: str | None = "best",
               bound_worker: Any = None) -> Result:
    """:func:`solve` with its options as one :class:`~models.options.SolveOptions` (its
    ``initial_solution`` is checked here, its ``params`` by :mod:`solvers.params`).
    bound_worker: a :class:`opt.placement.bound_process.BoundWorker` started before the
    instance was read (the CLI does so for a heuristic on a large file): a heuristic's
    certified bound is computed in it."""
    problems = instance_problems(instance)
    given = get_method(method, problems) if method is not None else None
    check_options(options.time_limit, options.num_workers, options.seed)
    spec, choice = _method_for(instance, problems[0], given, options.time_limit)
    for name, value in (("deterministic", options.deterministic), ("log", options.log)):
        if not isinstance(value, bool):
            raise InputError(f"{name} must be true or false, got {value!r}", field=name)
    if warm_start == "none":
        warm_start = None
    if warm_start is not None and warm_start not in WARM_STARTS:
        raise UnknownNameError("warm start", warm_start, WARM_STARTS)
    spec.params.parse(spec.name, options.params)  # InputError naming params.<name>
    initial = _given_start(spec.problem, instance, options.initial_solution)
    if options.export_path is not None and not spec.export:
        raise InputError("export is available for the placement MILP only (--method milp)",
                         field="export")
    options = dataclasses.replace(options, num_workers=int(options.num_workers),
                                  seed=int(options.seed), initial_solution=initial,
                                  params=dict(options.params))
    res = (_solve_serving(instance, spec, options) if spec.problem == "serving"
           else _solve_placement(instance, spec, options, warm_start, time.perf_counter(),
                                 bound_worker))
    res.instance_fingerprint = instance.fingerprint  # opt.common.fingerprint, cached
    if choice is not None:
        res.stats["method_choice"] = choice
    return _with_reason(res)


def _method_for(instance: Any, problem: str, given: Method | None,
                time_limit: float | None) -> tuple[Method, dict[str, str] | None]:
    """The method to run and, when none was given, the choice made and why
    (:func:`solvers.registry.choose_default`: the exact default when the instance is within
    its size cap, else the best heuristic). A given method that cannot start on an instance
    this size within ``time_limit`` (:func:`solvers.registry.size_error`) is an InputError
    naming it and the instance's size."""
    n_tasks = instance.n_tasks if isinstance(instance, PlacementInstance) else None
    if given is None:
        spec, reason = choose_default(problem, n_tasks, time_limit)
        return spec, {"method": spec.name, "reason": reason}
    too_big = None if n_tasks is None else size_error(given.name, n_tasks, time_limit)
    if too_big is not None and given.exact:
        raise InputError(f"{too_big}; use a heuristic ({FALLBACKS[given.problem]}, ...) or "
                         f"a smaller instance", field="method")
    if too_big is not None:
        raise InputError(too_big, field="time_limit")
    return given, None


def _attach_pending_bound(result: Result, pending: Any) -> None:
    """A heuristic's certified bound, computed while it scheduled, and where it ran."""
    lb = pending.result()
    result.lower_bound = float(lb.value)
    result.stats.update({"lower_bound_kind": "certified (opt.placement.certified_bounds)",
                         "lower_bound_computed": pending.where})


def _with_reason(result: Result) -> Result:
    """An ERROR result always says why in ``stats["message"]`` (the back end's own words
    when it gave them under another key)."""
    if result.status == "ERROR" and not result.stats.get("message"):
        why = result.stats.get("error") or result.stats.get("checker")
        result.stats["message"] = why or (f"method '{result.method}' failed without a reason "
                                          f"(termination {result.stats.get('termination')})")
    return result


def _solve_serving(instance: ServingInstance, spec: Method, options: SolveOptions) -> Result:
    """Run a P3 back end and check its plan (objective: $ per million output tokens)."""
    t0 = time.perf_counter()
    res = spec.backend(instance, options)
    res.seed = options.seed
    res.params = dict(options.params)
    res.runtime_s = time.perf_counter() - t0
    return certify(instance, res)


def meets_slo(instance: PlacementInstance, solution: dict[str, Any]) -> bool:
    """Whether a (valid) schedule meets the instance's SLO (always, without one)."""
    from opt.placement.slo import violations

    return instance.slo is None or not violations(instance.slo,
                                                  validate_placement(instance, solution))


def tightest_found(instance: PlacementInstance, solution: dict[str, Any] | None
                   ) -> dict[str, Any] | None:
    """TTFT, mean TPOT and makespan (ticks) of the best schedule found before the exact model
    proved the SLO infeasible (the warm start), or None without one."""
    if solution is None:
        return None
    m = validate_placement(instance, solution)
    return {"ttft": m.ttft, "mean_tpot": m.mean_tpot, "e2e": m.makespan,
            "source": "warm start"}


def _solve_placement(instance: PlacementInstance, spec: Method, options: SolveOptions,
                     warm_start: str | None, started: float, bound_worker: Any = None
                     ) -> Result:
    """Run a P1/P2 back end (seeded with a heuristic schedule when it takes one), attach the
    certified lower bound and validate the schedule. The warm start counts against the time
    limit: the back end gets what is left of it (at least 1 ms). The bound is requested here
    once: for a placement heuristic it runs while the heuristic schedules (in ``bound_worker``
    or a child of its own on a full-size instance, :mod:`opt.placement.bound_process`); one
    computed in process comes first and its time out of the heuristic's limit."""
    from dataclasses import replace

    goal = instance.objective != "makespan" or instance.slo is not None
    if goal and spec.exact and not spec.goals:
        raise InputError(f"method '{spec.name}' does not take an objective or SLO (the "
                         f"instance has objective {instance.objective!r}, slo "
                         f"{instance.slo.to_dict() if instance.slo else None}); use "
                         f"{' or '.join(m.name for m in methods('placement') if m.goals)} "
                         f"or a heuristic", field="method")
    warm_name = "initial_solution" if options.initial_solution is not None else None
    if options.initial_solution is None and spec.warm_start and warm_start is not None:
        start = warm_start_schedule(instance, warm_start)
        if start is not None:
            options = replace(options, initial_solution=start.solution)
            warm_name = start.name
    limit = options.time_limit
    if limit is not None and not options.deterministic:
        options = replace(options, time_limit=max(1e-3, limit - (time.perf_counter() - started)))
    pending = (start_bound(instance, worker=bound_worker)
               if not spec.exact and spec.problem == "placement"
               and instance.objective == "makespan" else None)
    if pending is not None and pending.process is None and options.time_limit is not None \
            and not options.deterministic:
        # computed here, not beside the schedule: first, so that a heuristic which uses its
        # whole limit (local-search) gets what is left and the call ends within the limit
        t0 = time.perf_counter()
        pending.result()
        options = replace(options, time_limit=max(1e-3, options.time_limit
                                                  - (time.perf_counter() - t0)))
    try:  # Ctrl-C (KeyboardInterrupt, models.interrupt) while solving or waiting for the bound
        result = spec.backend(instance, options)
        if pending is not None:
            _attach_pending_bound(result, pending)
    except BaseException:  # no bound child outlives the call
        if pending is not None:
            pending.cancel()
        raise
    if limit is not None and "time_limit" in result.params:
        result.params["time_limit"] = limit  # the caller's limit, not what was left of it
    result.stats["warm_start"] = warm_name
    if result.solution is None and result.status == "TIME_LIMIT_NO_SOLUTION" and \
            options.initial_solution is not None and meets_slo(instance,
                                                              options.initial_solution):
        # the solver stopped before reporting a solution: the warm start is the best known one
        result.solution = options.initial_solution
        result.status = "FEASIBLE"
        result.stats["incumbent"] = "warm start (the solver found none within the limit)"
    if result.status == "INFEASIBLE" and instance.slo is not None:
        result.stats["slo_tightest"] = tightest_found(instance, options.initial_solution)
    if pending is None and result.status not in ("INFEASIBLE", "ERROR") \
            and instance.objective == "makespan":
        # layout methods choose formats: bound the format-relaxed instance (opt.placement.layout)
        if spec.problem == "layout":
            from opt.placement.layout import relaxed_instance

            cert = certified_lower_bound(relaxed_instance(instance))
        else:
            cert = certified_lower_bound(instance)
        if result.lower_bound is None or cert.value > result.lower_bound:
            result.lower_bound = float(cert.value)
            result.stats["lower_bound_source"] = (f"certified ({cert.best}, "
                                                  f"opt.placement.certified_bounds)")
    result.problem = spec.problem  # "layout" for a method that chooses the formats
    return certify(instance, result)

