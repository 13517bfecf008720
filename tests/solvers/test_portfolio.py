"""The exact portfolio (``solvers.placement.portfolio``): CP-SAT and the MILP in turns on one
worker, sharing the validated incumbent and the best bound.

Real runs on tiny bundled instances prove their recorded optima; the sharing protocol (which
incumbent and bound a turn starts from, which back end is credited, what an invalid schedule
costs its back end) is checked with stand-in back ends that return fixed results, so no
verdict depends on the clock."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest

import instances
import solvers.placement.portfolio as pf
from heuristics.placement.list_scheduler import heft
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.validator import validate_placement
from solvers import solve
from solvers.certify import validate
from solvers.registry import DEFAULTS
from tests.placement.test_placement_exact import _capacity_instance

HEFT = "heft-topcuoglu-2002"  # optimum 73; HEFT's schedule 80
TINY = [HEFT, "sinnen-Nodes_7_OutTree-p2", "sinnen-Nodes_10_Random-p4", "stg-50-rand0000-p4"]


@pytest.mark.parametrize("name", TINY)
def test_the_portfolio_proves_the_recorded_optimum(name):
    inst = instances.load(name)
    opt = instances.info(name).optimum
    # a cold start: the back ends find the optimum (a warm start may meet the bound alone)
    res = solve(inst, "portfolio", time_limit=120, num_workers=1, seed=0, warm_start=None)
    assert res.status == "OPTIMAL" and res.objective == opt and res.lower_bound == opt
    assert validate(inst, res).valid
    slices = res.stats["slices"]
    assert slices and slices[0]["backend"] == "cpsat"
    assert res.stats["incumbent_by"]["backend"] in pf.BACKENDS
    for s in slices:  # every turn's bound ≤ the optimum ≤ its objective
        assert s["bound"] is None or s["bound"] <= opt
        assert s["objective"] is None or s["objective"] >= opt


def test_the_default_placement_method_is_the_portfolio():
    inst = instances.load(HEFT)
    res = solve(inst, time_limit=60)
    assert DEFAULTS["placement"] == "portfolio" and res.method == "portfolio"
    assert res.stats["method_choice"] == {"method": "portfolio",
                                          "reason": "the default for placement instances"}
    assert res.status == "OPTIMAL" and res.objective == 73


def test_an_infeasible_instance_is_infeasible():
    res = solve(_capacity_instance(99), "portfolio", time_limit=30)
    assert res.status == "INFEASIBLE" and res.solution is None and res.objective is None
    assert res.stats["infeasible_by"] == {"backend": "cpsat", "slice": 0}


def test_a_capacity_instance_by_hand():
    res = solve(_capacity_instance(100), "portfolio", time_limit=30)
    assert res.status == "OPTIMAL" and res.objective == 13  # tests/placement: by hand


@pytest.mark.parametrize("warm_start", ["best", None])
def test_a_limit_near_zero_gives_a_valid_schedule_or_none(warm_start):
    inst = instances.load("stg-50-rand0001-p4")
    res = solve(inst, "portfolio", time_limit=1e-3, warm_start=warm_start)
    assert res.status in ("OPTIMAL", "FEASIBLE", "TIME_LIMIT_NO_SOLUTION")
    if res.status == "TIME_LIMIT_NO_SOLUTION":
        assert res.solution is None and res.objective is None
    else:
        assert validate(inst, res).valid
        assert res.objective == validate_placement(inst, res.solution).makespan
    assert res.lower_bound is None or res.lower_bound <= instances.info(
        "stg-50-rand0001-p4").optimum


def test_a_cpsat_turn_starts_from_the_shared_incumbent():
    """CP-SAT handed HEFT's schedule as the incumbent has a solution no worse than it within
    0.01 s of deterministic time, where the same turn without it has none (one worker: the
    deterministic time makes both runs repeatable)."""
    inst = instances.load("stg-100-rand0007-p4")
    options = pf.SolveOptions(time_limit=0.01, deterministic=True, num_workers=1)
    shared = pf.Shared(inst)
    assert shared.offer_solution(heft(inst), {"backend": "test"}) is None
    hinted = pf.CpSatTurns(inst).run(shared, options)
    cold = pf.CpSatTurns(inst).run(pf.Shared(inst), options)
    assert hinted.solution is not None and hinted.objective <= shared.value
    assert cold.solution is None


def test_the_hint_opens_interchangeable_devices_in_order():
    inst = instances.load("stg-50-rand0000-p4")
    sol = heft(inst)
    names = [d.name for d in inst.devices]
    swap = dict(zip(names, reversed(names)))  # P0 <-> P3, P1 <-> P2
    turned = {"compute": [{**ev, "device": swap[ev["device"]]} for ev in sol["compute"]],
              "loads": []}
    groups = [list(range(len(names)))]
    hint = pf.symmetric_hint(inst, groups, turned)
    pos = {int(t): i for i, t in enumerate(inst.topological_order.tolist())}
    first = {}
    for ev in hint["compute"]:
        p = pos[inst.task_index[ev["task"]]]
        first[ev["device"]] = min(first.get(ev["device"], p), p)
    opened = [first[n] for n in names if n in first]
    assert opened == sorted(opened)
    # the same partition of tasks onto devices
    parts = lambda s: sorted(sorted(e["task"] for e in s["compute"] if e["device"] == n)  # noqa
                             for n in names)
    assert parts(hint) == parts(turned)


def test_no_incumbent_evicts_or_changes_formats():
    inst = instances.load("p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5")  # two or more formats
    sol = heft(inst)
    shared = pf.Shared(inst)
    bid = inst.block_ids[0]
    other = next(f for f in inst.layout.formats if f != inst.block_format[0])
    changed = {**{k: sol[k] for k in sol}, "formats": {**sol["formats"], bid: other}}
    assert "formats" in shared.offer_solution(changed, {"backend": "test"})
    evicting = {**{k: sol[k] for k in sol}, "evictions": [{"block": bid, "device": "x",
                                                           "time": 0}]}
    assert "evicts" in shared.offer_solution(evicting, {"backend": "test"})
    assert shared.value is None
    assert shared.offer_solution(sol, {"backend": "test"}) is None and shared.value is not None


# ---- the sharing protocol, with stand-in back ends -------------------------------------------

#: the stand-ins' instance: optimum 94, certified bound 89 (so the stand-ins' bounds decide)
STG = "stg-50-rand0001-p4"


@functools.cache
def _stg() -> tuple[Any, dict[str, Any], dict[str, Any], int]:
    """The instance, an optimal schedule (94), HEFT's schedule and its makespan (> 94)."""
    inst = instances.load(STG)
    res = solve(inst, "cpsat", time_limit=60, deterministic=True)
    assert res.objective == 94
    start = heft(inst)
    return inst, res.solution, start, validate_placement(inst, start).makespan


def _broken(solution: dict[str, Any]) -> dict[str, Any]:
    """``solution`` with its last compute event started at 0 (breaks a precedence)."""
    compute = [dict(ev) for ev in solution["compute"]]
    last = max(compute, key=lambda ev: ev["start"])
    last["end"] -= last["start"]
    last["start"] = 0
    return {**{k: solution[k] for k in solution}, "compute": compute}


class Script:
    """Stand-in back ends: each turn of back end NAME takes its slice and returns the next
    (status, solution, bound) of its script (the last one repeats); the incumbent and bound
    each turn was handed are recorded."""

    def __init__(self, **plays: list[tuple[str, dict[str, Any] | None, float | None]]):
        self.plays = plays
        self.handed: list[tuple[str, int | None, int | None]] = []

    def install(self, monkeypatch) -> None:
        script = self

        class Turn:
            build_s = 0.0

            def __init__(self, name: str):
                self.name, self.k = name, 0

            def run(self, shared: pf.Shared, options) -> Result:
                script.handed.append((self.name, shared.value, shared.bound))
                plays = script.plays[self.name]
                status, solution, bound = plays[min(self.k, len(plays) - 1)]
                self.k += 1
                time.sleep(options.time_limit)
                return Result(problem="placement", method="portfolio", status=status,
                              objective=None, lower_bound=bound, solution=solution,
                              stats={"message": f"{self.name} failed"} if status == "ERROR"
                              else {})

        monkeypatch.setattr(pf, "CpSatTurns", lambda inst: Turn("cpsat"))
        monkeypatch.setattr(pf, "MilpTurns", lambda inst, formulation: Turn("milp"))


def test_the_bound_of_one_back_end_closes_the_incumbent_of_the_other(monkeypatch):
    inst, best, start, start_value = _stg()
    script = Script(cpsat=[("FEASIBLE", best, 90.0)], milp=[("FEASIBLE", start, 94.0)])
    script.install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=60, warm_start=None)
    assert res.status == "OPTIMAL" and res.objective == 94 and res.lower_bound == 94
    assert res.stats["incumbent_by"] == {"backend": "cpsat", "slice": 0}
    assert res.stats["bound_by"] == {"backend": "milp", "slice": 1}
    # CP-SAT started from the certified bound (89), the MILP from CP-SAT's incumbent and bound
    assert script.handed == [("cpsat", None, 89), ("milp", 94, 90)]
    s0, s1 = res.stats["slices"]
    assert (s0["end_objective"], s0["end_bound"]) == (94, 90)
    assert (s1["start_objective"], s1["start_bound"], s1["end_bound"]) == (94, 90, 94)


def test_the_result_carries_the_best_of_both_at_the_limit(monkeypatch):
    inst, best, start, start_value = _stg()
    script = Script(cpsat=[("FEASIBLE", start, 90.0), ("FEASIBLE", None, 91.0)],
                    milp=[("FEASIBLE", start, 92.0), ("TIME_LIMIT_NO_SOLUTION", None, 90.0)])
    script.install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=0.5, warm_start=None, first_slice=0.05,
                growth=1)
    assert res.status == "FEASIBLE" and res.objective == start_value
    assert res.lower_bound == 92 and res.stats["bound_by"] == {"backend": "milp", "slice": 1}
    assert [s["end_bound"] for s in res.stats["slices"][:4]] == [90, 92, 92, 92]


def test_an_invalid_schedule_drops_its_back_end_and_its_bound(monkeypatch):
    inst, best, start, start_value = _stg()
    script = Script(cpsat=[("OPTIMAL", _broken(best), 93.0)], milp=[("OPTIMAL", best, 94.0)])
    script.install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=60, initial_solution=start)
    assert res.status == "OPTIMAL" and res.objective == 94
    assert "invalid schedule" in res.stats["dropped"]["cpsat"]
    s0 = res.stats["slices"][0]
    assert s0["dropped"] and "end_bound" not in s0  # 93 was never the bound
    assert script.handed == [("cpsat", start_value, 89), ("milp", start_value, 89)]


def test_a_back_end_that_refutes_the_incumbent_is_dropped(monkeypatch):
    inst, best, start, start_value = _stg()
    script = Script(cpsat=[("INFEASIBLE", None, None)], milp=[("OPTIMAL", best, 94.0)])
    script.install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=60, initial_solution=start)
    assert res.status == "OPTIMAL" and "INFEASIBLE" in res.stats["dropped"]["cpsat"]


@pytest.mark.parametrize("given", [False, True])
def test_both_back_ends_failing(monkeypatch, given):
    """An ERROR of both: the initial solution, validated, is the result (FEASIBLE); without
    one the result is an ERROR with both reasons."""
    inst, best, start, start_value = _stg()
    Script(cpsat=[("ERROR", None, None)], milp=[("ERROR", None, None)]).install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=60, warm_start=None,
                initial_solution=start if given else None)
    assert set(res.stats["dropped"]) == {"cpsat", "milp"}
    if not given:
        assert res.status == "ERROR" and res.stats["message"] == \
            "cpsat: cpsat failed; milp: milp failed"
    else:
        assert res.status == "FEASIBLE" and res.objective == start_value
        assert validate(inst, res).valid


def test_a_warm_start_at_the_certified_bound_needs_no_back_end(monkeypatch):
    inst = instances.load("sinnen-Nodes_11_OutTree-p4")  # HEFT's 227 = the certified bound
    script = Script(cpsat=[("ERROR", None, None)], milp=[("ERROR", None, None)])
    script.install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=60, initial_solution=heft(inst))
    assert res.status == "OPTIMAL" and res.objective == 227 and res.stats["slices"] == []
    assert script.handed == [] and res.stats["bound_by"]["backend"].startswith("certified")


# ---- the slice rule and its params ------------------------------------------------------------

def test_the_slices_grow_geometrically_cpsat_first():
    plan = pf.slice_plan(0.5, 3.0)
    assert [next(plan) for _ in range(6)] == [("cpsat", 0.5), ("milp", 0.5), ("cpsat", 1.5),
                                              ("milp", 1.5), ("cpsat", 4.5), ("milp", 4.5)]


@pytest.mark.parametrize("params, first, second", [({}, 1.0, 2.0),
                                                   ({"first_slice": 0.5, "growth": 3}, 0.5, 1.5)])
def test_first_slice_and_growth_set_the_turns(monkeypatch, params, first, second):
    """Stand-ins that never prove and take their whole slice: CP-SAT's first turn lasts
    ``first_slice``, its second ``first_slice · growth`` or what the limit leaves of it."""
    inst = instances.load(STG)
    Script(cpsat=[("FEASIBLE", None, 90.0)], milp=[("FEASIBLE", None, 91.0)]).install(monkeypatch)
    res = solve(inst, "portfolio", time_limit=4.0, warm_start=None, **params)
    slices = res.stats["slices"]
    assert [s["backend"] for s in slices[:3]] == ["cpsat", "milp", "cpsat"]
    assert slices[0]["limit_s"] == first and slices[1]["limit_s"] <= first
    assert 0 < slices[2]["limit_s"] <= second
    assert res.status == "TIME_LIMIT_NO_SOLUTION"


@pytest.mark.parametrize("params, field", [({"growth": 0.5}, "params.growth"),
                                           ({"first_slice": 0}, "params.first_slice"),
                                           ({"formulation": "nope"}, "params.formulation")])
def test_bad_params_are_input_errors(params, field):
    with pytest.raises(InputError) as err:
        solve(instances.load(HEFT), "portfolio", time_limit=5, **params)
    assert err.value.field == field
