"""Exact P1 placement by a portfolio of CP-SAT and the MILP on one worker (``portfolio``).

The two exact models (``models.placement.cpsat``, ``models.placement.milp``) run in turns,
one time slice each, sharing what they proved:

* **incumbent** — the best schedule so far, every one passed through the independent
  validator (``opt.placement.validator``) with its objective recomputed; each slice starts from
  it: CP-SAT as solution hints (devices relabelled into the order its symmetry breaking asks
  for, so the hint is feasible), and — under the makespan objective — the constraint
  Cmax ≤ incumbent; the MILP as its MIP start and horizon (``initial_solution``: the big-M
  model's time windows and the time-indexed model's horizon are the incumbent's makespan);
* **bound** — the best lower bound proven by either back end (the maximum: each is valid for
  every eviction-free schedule), starting from the certified bound of
  ``opt.placement.certified_bounds`` (makespan objective; valid for every schedule); each
  CP-SAT slice starts with Cmax ≥ that bound (makespan objective), and the result's bound is
  that maximum. A warm start that meets the certified bound is proven optimal before either
  back end runs. (The MILP keeps its own bound: the time-indexed model's — the certified and
  the group bound — already equals the optimum on the STG instances where we handed it the
  optimum as a bound, 50-rand0001-p4, 100-rand0000-p4 and 100-rand0007-p4, so handing it the
  shared bound changed nothing there.)

The run stops when the bound meets the incumbent (OPTIMAL), when a back end proves that no
schedule exists (INFEASIBLE, no incumbent), or at the time limit (the best incumbent, FEASIBLE,
with the best bound; none: TIME_LIMIT_NO_SOLUTION). ``stats["slices"]`` records per slice the
back end, its limit, its status, the incumbent and bound it started from and ended with, and
which back end holds them (``stats["incumbent_by"]``, ``stats["bound_by"]``).

**Slice lengths** (the rule, not tuned on outcomes): round r = 0, 1, 2, … gives each back end a
slice of ``first_slice · growth^r`` seconds, CP-SAT first in every round (the stronger of the
two on weight-load-dominated LLM slices, and the one the warm start hints); the last slice is
cut at the time limit. With geometric slices a restarted back end that needs T seconds alone
gets a slice of at least T (one of length < growth·T, beyond the first round) after every
earlier slice of both back ends, a geometric series summing to < 2·growth·T/(growth − 1), and
at most one slice of the other back end in its own round: it ends within
(2·growth/(growth − 1) + growth + 1)·T, 7·T at growth 2 (the doubling argument for restart
strategies), so neither back end's strength is lost by
more than a constant factor, whatever the instance; both back ends get the same share of any
limit up to one slice. Round r runs with seed ``seed + r``: a restart does not repeat the
previous round's search. CP-SAT's model is built once (its build is not part of
its first slice); the MILP is rebuilt each slice (its model depends on the incumbent), so each
MILP slice gets its slice plus its previous build time.

Parameters (``params``): ``first_slice`` (seconds, default 1), ``growth`` (≥ 1, default 2),
``formulation`` (the MILP's, ``models.placement.milp_time``: auto, bigm, time-indexed,
bucketed). Like ``cpsat`` and ``milp`` the portfolio solves problems.md §1 restricted to
schedules without evictions (``stats["no_evictions"]``): a given initial solution with
evictions is no incumbent.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from models.options import Deadline, SolveOptions
from opt.common.errors import InputError
from opt.common.params import Param, ParamSpec, choice, real
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.slo import objective_value, violations
from opt.placement.validator import validate_placement

#: the back ends in the order they take their turns within a round
BACKENDS = ("cpsat", "milp")
#: default length of the first slice (seconds) and the growth of the slices per round
FIRST_SLICE_S = 1.0
GROWTH = 2.0
#: the shortest slice worth starting (seconds): below it the time limit is reached
MIN_SLICE_S = 0.01
#: the longest slice (seconds, a million: about 11.6 days): the growth stops there, so the
#: lengths stay finite floats however many rounds run
MAX_SLICE_S = 1e6


@dataclass(frozen=True)
class PortfolioParams:
    """first_slice: seconds of each back end's slice in round 0; growth: the factor by which
    the slices grow per round (≥ 1); formulation: the MILP's formulation."""

    first_slice: float = FIRST_SLICE_S
    growth: float = GROWTH
    formulation: str = "auto"

    def __post_init__(self) -> None:
        if not (self.first_slice > 0 and math.isfinite(self.first_slice)):
            raise InputError(f"first_slice must be > 0 seconds, got {self.first_slice}",
                             field="params.first_slice")
        if not (self.growth >= 1 and math.isfinite(self.growth)):
            raise InputError(f"growth must be ≥ 1, got {self.growth}", field="params.growth")


#: the portfolio's params (``solvers.registry`` includes them by name)
PORTFOLIO_PARAMS = ParamSpec((
    Param("first_slice", real, "seconds per back end in round 0", default=FIRST_SLICE_S),
    Param("growth", real, "slice growth per round (≥ 1)", default=GROWTH),
    Param("formulation", choice("auto", "bigm", "time-indexed", "bucketed"),
          "the MILP's formulation (models.placement.milp_time)", default="auto")))


def slice_plan(first: float, growth: float) -> Iterator[tuple[str, float]]:
    """(back end, slice seconds) in turn, without end: round r gives every back end of
    :data:`BACKENDS` ``first · growth^r`` seconds (at most :data:`MAX_SLICE_S`)."""
    length = first
    while True:
        for name in BACKENDS:
            yield name, length
        length = min(length * growth, MAX_SLICE_S)


@dataclass
class Shared:
    """What the back ends share: the best validated incumbent (its solution, objective value
    in ticks and who found it) and the best proven lower bound (and who proved it)."""

    inst: PlacementInstance
    solution: dict[str, Any] | None = None
    value: int | None = None
    found_by: dict[str, Any] | None = None
    bound: int | None = None
    proved_by: dict[str, Any] | None = None
    infeasible_by: dict[str, Any] | None = None
    log: list[dict[str, Any]] = field(default_factory=list)

    def check(self, solution: dict[str, Any]) -> tuple[int | None, str | None]:
        """The objective value (ticks) of ``solution`` recomputed by the validator, or None
        and why it cannot be an incumbent (evictions, formats other than the instance's,
        invalid, an SLO broken, no value)."""
        if solution.get("evictions"):
            return None, "it evicts blocks (the back ends model no evictions)"
        given = dict(zip(self.inst.block_ids, self.inst.block_format))
        if any(given.get(b, f) != f for b, f in (solution.get("formats") or {}).items()):
            return None, "it changes block formats (a layout solution, not a placement)"
        try:
            metrics = validate_placement(self.inst, solution)
        except ScheduleError as exc:
            return None, f"invalid schedule: {exc}"
        if violations(self.inst.slo, metrics):
            return None, "it breaks the SLO"
        value = objective_value(self.inst.objective, metrics)
        if value is None:
            return None, f"its {self.inst.objective} is undefined"
        return int(value), None

    def offer_solution(self, solution: dict[str, Any], by: dict[str, Any]) -> str | None:
        """Take ``solution`` as the incumbent when it is valid and better; None, or why it
        was refused."""
        value, why = self.check(solution)
        if value is None:
            return why
        if self.value is None or value < self.value:
            self.solution, self.value, self.found_by = solution, value, by
        return None

    def offer_bound(self, bound: float | None, by: dict[str, Any]) -> None:
        """Take ``bound`` (a proven lower bound) when it is higher."""
        if bound is None or not math.isfinite(bound):
            return
        lb = int(math.ceil(bound - 1e-6))
        if self.bound is None or lb > self.bound:
            self.bound, self.proved_by = lb, by

    @property
    def closed(self) -> bool:
        """The bound meets the incumbent (optimal), or no schedule exists."""
        return self.infeasible_by is not None or (
            self.value is not None and self.bound is not None and self.bound >= self.value)


class CpSatTurns:
    """CP-SAT's turns: one model, built on the first turn, re-solved each turn with the
    incumbent as hints and the shared bounds as constraints on Cmax."""

    def __init__(self, inst: PlacementInstance):
        self.inst = inst
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self.build_s = 0.0

    def build(self) -> None:
        from models.placement.cpsat import CUMULATIVE_EDGE_FINDING, PlacementCpSat

        t0 = time.perf_counter()
        self.model = PlacementCpSat(self.inst)
        if self.model.cumulative_groups:  # as models.placement.cpsat's solve does
            self.params[CUMULATIVE_EDGE_FINDING] = True
        self.build_s = time.perf_counter() - t0

    def run(self, shared: Shared, options: SolveOptions) -> Result:
        """One slice within ``options.time_limit`` (seconds of search; the first turn's model
        build comes before it)."""
        from models.placement.cpsat_run import run_cpsat

        if self.model is None:
            self.build()
        model = self.model
        cp = model.model
        cp.clear_hints()
        if shared.solution is not None:
            model.add_hint(symmetric_hint(self.inst, model.symmetry_groups, shared.solution))
        if self.inst.objective == "makespan":
            if shared.bound is not None:
                cp.add(model.cmax >= shared.bound)
            if shared.value is not None:
                cp.add(model.cmax <= shared.value)
        extra = {"no_evictions": True, "model_build_s": self.build_s}
        return run_cpsat(cp, self.params, options, time.perf_counter(), "portfolio",
                         model.extract, extra)


class MilpTurns:
    """The MILP's turns: ``models.placement.milp`` solved from the incumbent (its MIP start
    and horizon) each turn."""

    def __init__(self, inst: PlacementInstance, formulation: str):
        self.inst = inst
        self.formulation = formulation
        self.build_s = 0.0

    def run(self, shared: Shared, options: SolveOptions) -> Result:
        """One slice: ``options.time_limit`` plus the previous turn's build time (the model is
        rebuilt on the incumbent's horizon)."""
        from models.placement.milp import solve_placement_milp

        opts = dataclasses.replace(options, initial_solution=shared.solution,
                                   params={"formulation": self.formulation})
        res = solve_placement_milp(self.inst, opts)
        self.build_s = float(res.stats.get("build_s") or 0.0)
        return res


def symmetric_hint(inst: PlacementInstance, groups: list[list[int]],
                   solution: dict[str, Any]) -> dict[str, Any]:
    """``solution``'s device choices, start times and loads with the devices of every group of
    interchangeable devices relabelled so that they open in the order of their first task in
    topological order (CP-SAT's symmetry breaking, ``PlacementCpSat.add_symmetry_breaking``):
    the same schedule up to the names of identical devices, so a hint CP-SAT can keep."""
    compute = [dict(ev) for ev in solution.get("compute", ())]
    loads = [dict(ev) for ev in solution.get("loads", ())]
    names = [d.name for d in inst.devices]
    pos = {int(t): i for i, t in enumerate(inst.topological_order.tolist())}
    first: dict[str, int] = {}
    for ev in compute:
        p = pos[inst.task_index[ev["task"]]]
        first[ev["device"]] = min(first.get(ev["device"], p), p)
    rename: dict[str, str] = {}
    for group in groups:
        members = [names[d] for d in group]
        ordered = sorted(members, key=lambda n: (first.get(n, math.inf), members.index(n)))
        rename.update(zip(ordered, members))
    for ev in compute + loads:
        ev["device"] = rename.get(ev["device"], ev["device"])
    return {"compute": compute, "loads": loads, "formats": solution.get("formats")}


def solve_portfolio(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Solve P1 exactly (no evictions) with CP-SAT and the MILP in turns, sharing incumbents
    and bounds (module docstring); ``options.params``: :class:`PortfolioParams`' fields."""
    from solvers.registry import parsed_params

    t0 = time.perf_counter()
    params = PortfolioParams(**parsed_params("portfolio", "placement", options.params))
    deadline = Deadline.after(options.time_limit, t0)
    shared = Shared(inst)
    if options.initial_solution is not None:
        refused = shared.offer_solution(options.initial_solution,
                                        {"backend": "initial_solution", "slice": None})
        if refused:
            shared.log.append({"initial_solution": f"no incumbent: {refused}"})
    if inst.objective == "makespan":  # the certified bound (cached: solve reports it too)
        from opt.placement.certified_bounds import certified_lower_bound

        cert = certified_lower_bound(inst)
        shared.offer_bound(float(cert.value), {"backend": f"certified ({cert.best})",
                                               "slice": None})
    start_value = shared.value
    turns = {"cpsat": CpSatTurns(inst), "milp": MilpTurns(inst, params.formulation)}
    dropped: dict[str, str] = {}
    slices: list[dict[str, Any]] = []
    for k, (name, length) in enumerate(slice_plan(params.first_slice, params.growth)):
        if shared.closed or len(dropped) == len(BACKENDS):
            break
        left = deadline.remaining()
        if k > 0 and left is not None and left < MIN_SLICE_S:
            break
        if name in dropped:
            continue
        slices.append(_slice(k, name, length, left, turns, shared, options, dropped))
    return _result(inst, shared, options, params, slices, dropped, start_value, t0)


def _slice(k: int, name: str, length: float, left: float | None,
           turns: dict[str, Any], shared: Shared, options: SolveOptions,
           dropped: dict[str, str]) -> dict[str, Any]:
    """Run back end ``name`` for one slice of ``length`` seconds (at most ``left``, the time
    left: the MILP's rebuild is added to its slice within it), share what it found and return
    its record."""
    turn = turns[name]
    limit = length + (turn.build_s if name == "milp" else 0.0)
    if left is not None:
        limit = max(1e-3, min(limit, left))
    record: dict[str, Any] = {"slice": k, "backend": name, "limit_s": round(limit, 3),
                              "start_objective": shared.value, "start_bound": shared.bound}
    t1 = time.perf_counter()
    # each round searches with its own seed (seed + round): a restart repeats no search
    seed = options.seed + k // len(BACKENDS)
    res = turn.run(shared, dataclasses.replace(options, time_limit=limit, seed=seed))
    by = {"backend": name, "slice": k}
    record.update({"elapsed_s": round(time.perf_counter() - t1, 3), "status": res.status,
                   "objective": res.objective, "bound": res.lower_bound})
    if name == "milp":
        record["formulation"] = res.stats.get("formulation")
        record["start_used"] = (res.stats.get("mip_start") or {}).get("used")
    if res.status == "ERROR":
        dropped[name] = str(res.stats.get("message") or "ERROR")
        record["dropped"] = dropped[name]
        return record
    if res.status == "INFEASIBLE":
        if shared.value is None:
            shared.infeasible_by = by
        else:  # a model that refutes a validated schedule is wrong: trust it no more
            dropped[name] = (f"it claims INFEASIBLE against the validated incumbent "
                             f"{shared.value}")
            record["dropped"] = dropped[name]
        return record
    refused = None if res.solution is None else shared.offer_solution(res.solution, by)
    if refused:  # a wrong schedule: its bound is not trusted either
        dropped[name] = f"its schedule is no incumbent: {refused}"
        record["dropped"] = dropped[name]
        return record
    shared.offer_bound(res.lower_bound, by)
    record.update({"end_objective": shared.value, "end_bound": shared.bound})
    return record


def _result(inst: PlacementInstance, shared: Shared, options: SolveOptions,
            params: PortfolioParams, slices: list[dict[str, Any]], dropped: dict[str, str],
            start_value: int | None, t0: float) -> Result:
    """The portfolio's Result: the best incumbent with the best bound and its status."""
    if shared.infeasible_by is not None and shared.value is None:
        status, solution, lb = "INFEASIBLE", None, None
    elif shared.value is not None:
        solution, lb = shared.solution, shared.bound
        status = "OPTIMAL" if shared.closed else "FEASIBLE"
    elif dropped and len(dropped) == len(BACKENDS):
        status, solution, lb = "ERROR", None, None
    else:
        status, solution, lb = "TIME_LIMIT_NO_SOLUTION", None, shared.bound
    stats: dict[str, Any] = {
        "no_evictions": True, "slices": slices, "incumbent_by": shared.found_by,
        "bound_by": shared.proved_by, "infeasible_by": shared.infeasible_by,
        "start_objective": start_value,
        "slice_rule": f"round r: {params.first_slice:g} s × {params.growth:g}^r per back end, "
                      f"{' then '.join(BACKENDS)}",
        "deterministic": options.deterministic and not any(s["backend"] == "milp"
                                                           for s in slices)}
    if shared.log:
        stats["notes"] = shared.log
    if dropped:
        stats["dropped"] = dropped
    if status == "ERROR":
        stats["message"] = "; ".join(f"{k}: {v}" for k, v in dropped.items())
    objective = None if solution is None else float(shared.value)  # type: ignore[arg-type]
    return Result(problem="placement", method="portfolio", status=status,
                  objective=objective, lower_bound=None if lb is None else float(lb),
                  runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params={"time_limit": options.time_limit,
                          "num_workers": options.num_workers, **options.params},
                  solution=solution, stats=stats)
