"""Exact P1 solving through ``solvers.solve``: known optima, statuses, warm starts, bad input."""

import numpy as np
import pytest

import instances
from heuristics.placement.list_scheduler import heft
from opt.common.errors import InputError, UnknownNameError
from opt.placement.instance import Device
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.validator import validate_placement
from solvers import solve


def test_heft_paper_example_cpsat_proves_73():
    inst = instances.load("heft-topcuoglu-2002")
    res = solve(inst, "cpsat", time_limit=30, deterministic=True, num_workers=1, seed=1)
    assert res.status == "OPTIMAL" and res.objective == 73 and res.lower_bound == 73
    assert res.gap == 0.0 and res.stats["metrics"]["makespan"] == 73


@pytest.mark.parametrize("name", [n for n in instances.names() if n.startswith("sinnen")])
def test_reference_optima_cpsat(name):
    inst = instances.load(name)
    res = solve(inst, "cpsat", time_limit=30, deterministic=True, num_workers=1, seed=0)
    assert res.status == "OPTIMAL"
    assert res.objective == instances.info(name).optimum
    # symmetry breaking is active on identical processors and never cuts the optimum
    assert res.stats["symmetry_groups"]


@pytest.mark.parametrize("name", instances.names("placement"))
def test_heft_never_below_optimum(name):
    inst = instances.load(name)
    rec = instances.info(name)
    res = solve(inst, "heft")
    assert res.status == "FEASIBLE"
    if rec.optimum is None:  # medium instance: its proven bound
        assert res.objective >= rec.lower_bound
        return
    assert res.objective >= rec.optimum
    if len(inst.layout.formats) == 1:  # a P2 optimum may undercut the linear-format P1 bound
        assert res.lower_bound <= rec.optimum


def test_heft_gives_80_on_paper_example():
    assert solve(instances.load("heft-topcuoglu-2002"), "heft").objective == 80


def test_symmetry_breaking_does_not_change_optimum():
    inst = instances.load("sinnen-Nodes_10_Random-p4")
    a = solve(inst, "cpsat", time_limit=30, deterministic=True, symmetry_breaking=True,
              warm_start=None)
    b = solve(inst, "cpsat", time_limit=30, deterministic=True, symmetry_breaking=False,
              redundant=False, warm_start=None)
    assert a.status == b.status == "OPTIMAL" and a.objective == b.objective == 50


def _capacity_instance(capacity):
    devs = [Device("A", "npu", capacity), Device("B", "pim", capacity)]
    return build_instance(
        time_unit="unit", devices=devs, links=make_links(devs, "full", True, 1, 1.0),
        tasks=TaskColumns(["t0", "t1"], np.array([[3, 5], [4, 2]])),
        edges=EdgeColumns([0], [1], [2]),
        blocks=BlockColumns(["w"], [100], load={"linear": np.array([[6, 9]])},
                            task_block=np.array([0, -1])))


def test_capacity_infeasible_instance():
    res = solve(_capacity_instance(99), "cpsat", time_limit=10, deterministic=True)
    assert res.status == "INFEASIBLE" and res.objective is None and res.solution is None


def test_small_capacity_instance_optimum_by_hand():
    # t0 must run on A (its block fits nowhere else... both fit; on A: load 6 + 3 = 9, on B:
    # load 9 + 5 = 14); then t1 on A: 9 + 4 = 13, on B: 9 + (1 + 2 transfer) + 2 = 14
    res = solve(_capacity_instance(100), "cpsat", time_limit=10, deterministic=True)
    assert res.status == "OPTIMAL" and res.objective == 13


def test_warm_start_and_cold_start_agree():
    inst = instances.load("heft-topcuoglu-2002")
    warm = solve(inst, "cpsat", time_limit=30, deterministic=True, initial_solution=heft(inst))
    cold = solve(inst, "cpsat", time_limit=30, deterministic=True, warm_start=None)
    assert warm.objective == cold.objective == 73
    assert warm.stats["warm_start"] == "initial_solution" and cold.stats["warm_start"] is None


def test_default_warm_start_is_the_shorter_heuristic_schedule(catalog, cards):
    from heuristics.placement.bifocal import bifocal_schedule
    from heuristics.placement.policy_search import policy_search
    from opt.common.errors import InputError
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.builder import build_placement

    # 4 layers: Bifocal's schedule is ~12 % shorter than HEFT's, and CP-SAT starts from it
    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(64, 1, 1), BuildOptions(layers=4))
    spans = {"heft": validate_placement(inst, heft(inst)).makespan,
             "bifocal": validate_placement(inst, bifocal_schedule(inst)).makespan,
             "bifocal (ready_set rank)": validate_placement(
                 inst, bifocal_schedule(inst, {"ready_set": "rank"})).makespan}
    res = solve(inst, "cpsat", time_limit=1.0, num_workers=1)
    assert res.stats["warm_start"] == min(spans, key=spans.get)
    assert res.objective <= min(spans.values())
    assert solve(inst, "cpsat", time_limit=1.0, warm_start="heft").stats["warm_start"] == "heft"
    ps = solve(inst, "cpsat", time_limit=1.0, warm_start="policy-search")
    assert ps.stats["warm_start"] == "policy-search"
    assert ps.objective <= validate_placement(inst, policy_search(inst)).makespan
    assert solve(inst, "cpsat", time_limit=1.0, warm_start="none").stats["warm_start"] is None
    with pytest.raises(InputError, match="warm start"):
        solve(inst, "cpsat", time_limit=1.0, warm_start="lpt")


def test_time_limit_returns_best_solution_with_bound(catalog, cards):
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.builder import build_placement

    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(64, 3, 1), BuildOptions(layers=2))
    res = solve(inst, "cpsat", time_limit=1.0, num_workers=1)
    assert res.status in ("FEASIBLE", "OPTIMAL")
    validate_placement(inst, res.solution)
    assert res.lower_bound is not None and res.lower_bound <= res.objective
    assert res.gap == pytest.approx((res.objective - res.lower_bound) / res.objective)


def test_solve_bad_input():
    inst = instances.load("heft-topcuoglu-2002")
    with pytest.raises(UnknownNameError, match="cpsat"):
        solve(inst, "gurobi")
    with pytest.raises(InputError, match="num_workers"):
        solve(inst, "cpsat", num_workers=0)
    bad = heft(inst)
    bad["compute"][0]["end"] += 1
    with pytest.raises(InputError, match="initial solution"):
        solve(inst, "cpsat", initial_solution=bad)


# ---- the load rules (problems.md §1.2 rule 5) in the CP-SAT model ----------------------------
# the model is called directly: every schedule goes through the validator here

def rule_example(load_timing: str):
    """problems.md §1.2's worked example: a (NPU, 10) → v (PIM, 5; block W, load 20 on PIM),
    a transfer of 3 ticks (latency, 0 bytes) between them."""
    devices = [Device("NPU", "npu", None), Device("PIM", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices, "full", True, 3, 1e9),
        tasks=TaskColumns(["a", "v"], [[10, -1], [-1, 5]]),
        edges=EdgeColumns([0], [1], [0]),
        blocks=BlockColumns(["W"], [100], load={"linear": [[-1, 20]]}, task_block=[-1, 0]),
        load_timing=load_timing)


def positive_durations(inst, load_timing: str):
    """``inst`` under ``load_timing`` with every zero duration made 1 (the brute force's
    at_use and overlap need positive durations)."""
    import dataclasses

    return dataclasses.replace(inst, cost=np.where(inst.cost == 0, 1, inst.cost),
                               load_timing=load_timing)


def _cpsat_validated(inst, **params):
    from models.options import SolveOptions
    from models.placement.cpsat import solve_placement_cpsat

    res = solve_placement_cpsat(inst, SolveOptions(time_limit=20, deterministic=True,
                                                   num_workers=1, seed=0, params=params))
    assert res.status == "OPTIMAL" and res.lower_bound == res.objective
    assert validate_placement(inst, res.solution).makespan == res.objective
    return res


@pytest.mark.parametrize("rule,optimum", [("prefetch", 25), ("at_use", 38), ("overlap", 33)])
def test_worked_example_optimum_under_each_rule(rule, optimum):
    """overlap: v is dispatched at 13 and completes at 13 + max(20, 5) = 33."""
    res = _cpsat_validated(rule_example(rule))
    assert res.objective == optimum
    if rule == "overlap":
        load = res.solution["loads"][0]
        assert (load["start"], load["end"]) == (13, 33)


OVERLAP_CASES = [dict(seed=s, n_blocks=2) for s in range(4)] + \
    [dict(seed=s, n_blocks=2, contention=True) for s in (0, 5)] + \
    [dict(seed=s, n_blocks=3, capacities=True, topology="star", contention=True)
     for s in (1, 3, 4)]


@pytest.mark.parametrize("case", OVERLAP_CASES,
                         ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_overlap_matches_brute_force(case):
    """Under overlap the proven optimum is the enumerated one, with and without the
    redundant constraints (their bounds come from the prefetch relaxation)."""
    from test_placement_milp import brute_force, random_instance

    inst = positive_durations(random_instance(**case), "overlap")
    expected = brute_force(inst)
    assert _cpsat_validated(inst).objective == expected
    assert _cpsat_validated(inst, redundant=False, group_energy=False).objective == expected


def test_overlap_changes_the_optimum():
    """The rules give three different optima on one instance, overlap below prefetch here
    (a load may end after its task starts)."""
    from test_placement_milp import brute_force, random_instance

    got = {}
    for rule in ("prefetch", "at_use", "overlap"):
        inst = positive_durations(random_instance(5, n_blocks=2), rule)
        got[rule] = _cpsat_validated(inst).objective
        assert got[rule] == brute_force(inst)
    assert got == {"prefetch": 23, "at_use": 27, "overlap": 21}
