"""Time-indexed and bucketed P1 MILPs (models.placement.milp_time): agreement with
CP-SAT, the big-M model and exhaustive search; the formulation chooser; refusals; the Pyomo
build of the same model; rejection of broken results."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from models.options import SolveOptions
from models.placement.milp import solve_placement_milp
from models.placement.milp_time import build_time_model, resources, to_pyomo
from opt.common.errors import InputError
from opt.placement.instance import Device, Layout, PlacementInstance
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.slo import Slo, with_goal
from solvers import solve
from solvers.certify import certify
from tests.placement.test_placement_milp import brute_force, random_instance

#: HiGHS has no deterministic limit: a wall-clock one far above what these tiny models take
#: on a loaded machine (a hang guard, never what decides a result); CP-SAT runs deterministic
LIMIT = dict(time_limit=300, num_workers=1, seed=0)


def identical_instance(seed: int, *, n_tasks: int = 6, n_devices: int = 2, comm: bool = False
                       ) -> PlacementInstance:
    """n identical devices, random DAG; with ``comm`` a transfer of 1 + bytes ticks between
    different devices (§1.2 rule 3, no contention), else no communication (P|prec|Cmax)."""
    rng = np.random.default_rng(seed)
    devices = [Device(f"P{d}", "cpu", None) for d in range(n_devices)]
    cost = np.repeat(rng.integers(1, 7, (n_tasks, 1)), n_devices, axis=1)
    links = make_links(devices, "full", False, 1 if comm else 0, 1.0, [])
    src, dst, nbytes = [], [], []
    for i in range(n_tasks):
        for j in range(i + 1, n_tasks):
            if rng.random() < 0.35:
                src.append(i)
                dst.append(j)
                nbytes.append(int(rng.integers(0, 4)) if comm else 0)
    return build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns([f"t{t}" for t in range(n_tasks)], cost),
        edges=EdgeColumns(src, dst, nbytes),
        blocks=BlockColumns([], np.zeros(0, np.int64),
                            load={"linear": np.zeros((0, n_devices), np.int64)},
                            task_block=np.full(n_tasks, -1), layout=Layout()))


def _milp(inst: PlacementInstance, formulation: str, **kw):
    res = solve(inst, "milp", formulation=formulation, **LIMIT, **kw)
    assert res.stats["formulation"] == formulation
    return res


TINY = ([("random", s) for s in range(6)] + [("identical", s) for s in range(4)]
        + [("identical-comm", s) for s in range(4)])


def _tiny(kind: str, seed: int) -> PlacementInstance:
    if kind == "random":  # heterogeneous devices and per-pair transfer delays
        return random_instance(seed, n_tasks=5, n_devices=3)
    return identical_instance(seed, n_devices=3 if seed % 2 else 2,
                              comm=kind == "identical-comm")


@pytest.mark.parametrize("kind,seed", TINY)
def test_time_indexed_equals_cpsat_bigm_and_brute_force(kind, seed):
    inst = _tiny(kind, seed)
    ti = _milp(inst, "time-indexed")
    cp = solve(inst, "cpsat", deterministic=True, **LIMIT)
    bigm = _milp(inst, "bigm")
    assert ti.status == cp.status == bigm.status == "OPTIMAL"
    assert ti.objective == cp.objective == bigm.objective == brute_force(inst)
    assert ti.lower_bound == ti.objective


def test_identical_devices_aggregate_only_without_communication():
    free = identical_instance(3, n_devices=3)
    comm = identical_instance(3, n_devices=3, comm=True)
    from models.placement.milp_data import prepare

    assert resources(free, prepare(free)) == ([[0, 1, 2]], [])
    assert resources(comm, prepare(comm)) == ([[0], [1], [2]], [[0, 1, 2]])


def test_communication_delays_change_the_optimum():
    """Rule 3 is modelled: the same DAG without delays has a shorter optimum, and both match
    exhaustive search."""
    for seed in range(20):
        comm = identical_instance(seed, n_devices=2, comm=True)
        free = identical_instance(seed, n_devices=2)
        a, b = _milp(comm, "time-indexed"), _milp(free, "time-indexed")
        assert a.objective == brute_force(comm) and b.objective == brute_force(free)
        if a.objective > b.objective:
            return
    pytest.fail("no seed where the delays matter")


@pytest.mark.parametrize("seed", range(4))
def test_bucketed_bound_is_valid_and_schedule_certified(seed):
    inst = random_instance(seed, n_tasks=6, n_devices=3)
    opt = brute_force(inst)
    res = _milp(inst, "bucketed")
    assert res.stats["bucket_ticks"] >= 2
    assert res.lower_bound <= opt <= res.objective
    assert certify(inst, res).objective == res.objective


def test_pyomo_build_gives_the_same_optimum():
    from models.highs import highs_solver
    from models.placement.milp_time_solve import prep_of as _prep

    inst = identical_instance(5, n_devices=2, comm=True)
    prep, _ = _prep(inst, True)
    opt = brute_force(inst)
    tm = build_time_model(inst, prep, horizon=opt + 3, lb=0)
    m = to_pyomo(tm)
    solver = highs_solver()
    solver.config.stream_solver = False
    res = solver.solve(m)
    assert round(res.best_feasible_objective) == opt


def test_chooser_picks_by_instance(monkeypatch):
    from models.placement import milp_time

    free = identical_instance(1, n_tasks=8)
    auto = solve(free, "milp", **LIMIT)
    assert auto.stats["formulation"] == "time-indexed"
    assert "z columns" in auto.stats["formulation_reason"]
    comm = solve(identical_instance(1, n_tasks=8, comm=True), "milp", **LIMIT)
    assert comm.stats["formulation"] == "time-indexed"  # delays without contention: modelled
    monkeypatch.setattr(milp_time, "MAX_COLUMNS", 10)
    big = solve(free, "milp", **LIMIT)
    assert big.stats["formulation"] == "bucketed" and big.stats["bucket_ticks"] >= 2
    assert "> 10" in big.stats["formulation_reason"]
    loads = random_instance(300, n_tasks=4, n_devices=3, n_blocks=2, capacities=True)
    res = solve(loads, "milp", **LIMIT)
    assert res.stats["formulation"] == "bigm"
    assert "weight" in res.stats["formulation_reason"]
    contended = random_instance(101, n_tasks=5, n_devices=2, contention=True)
    res = solve(contended, "milp", **LIMIT)
    assert res.stats["formulation"] == "bigm" and "contention" in res.stats["formulation_reason"]
    with pytest.raises(InputError, match="formulation=time-indexed cannot model"):
        solve(loads, "milp", formulation="time-indexed", **LIMIT)
    with pytest.raises(InputError, match="params.formulation"):
        solve(free, "milp", formulation="pulse", **LIMIT)


def test_slo_goes_to_bigm_and_stays_right():
    from tests.placement.test_slo import two_prefills_three_steps

    inst = two_prefills_three_steps()
    bound = with_goal(inst, "makespan", Slo(ttft=6))
    res = solve(bound, "milp", **LIMIT)
    assert res.stats["formulation"] == "bigm" and "SLO" in res.stats["formulation_reason"]
    cp = solve(bound, "cpsat", deterministic=True, **LIMIT)
    assert res.status == cp.status == "OPTIMAL" and res.objective == cp.objective
    impossible = with_goal(inst, "makespan", Slo(e2e=1))
    assert solve(impossible, "milp", **LIMIT).status == "INFEASIBLE"


def test_infeasible_capacity_still_infeasible():
    from tests.placement.test_placement_milp import check_no_schedule_when_block_exceeds_capacity

    check_no_schedule_when_block_exceeds_capacity()  # routed to big-M (capacities)


def test_broken_solution_is_rejected():
    inst = identical_instance(2, n_devices=2, comm=True)
    res = solve_placement_milp(inst, SolveOptions(**LIMIT, params={"formulation":
                                                                   "time-indexed"}))
    assert res.status == "OPTIMAL"
    broken = copy.deepcopy(res)
    for ev in broken.solution["compute"]:  # everything at time 0: overlaps on a device
        ev["start"], ev["end"] = 0, ev["end"] - ev["start"]
    assert certify(inst, broken).status == "ERROR"
    lying = copy.deepcopy(res)
    lying.lower_bound = res.objective + 1
    assert certify(inst, lying).status == "ERROR"


def test_mip_start_is_heft_and_never_better():
    inst = identical_instance(7, n_tasks=8, n_devices=2, comm=True)
    res = _milp(inst, "time-indexed", warm_start="heft")
    ms = res.stats["mip_start"]
    assert ms["used"] is True
    assert ms["accepted_by_highs"] is True or res.stats["termination"].startswith("not run")
    from heuristics.placement.list_scheduler import heft
    from opt.placement.validator import validate_placement

    assert ms["objective"] == validate_placement(inst, heft(inst)).makespan
    assert res.objective <= ms["objective"]


def test_start_meeting_the_bound_skips_the_search():
    """HEFT's schedule at the critical-path bound: OPTIMAL without running HiGHS."""
    inst = identical_instance(0, n_tasks=3, n_devices=3)  # enough devices: HEFT = critical path
    res = _milp(inst, "time-indexed")
    assert res.status == "OPTIMAL" and res.objective == brute_force(inst)
    assert res.stats["termination"].startswith("not run")


def test_descent_alone_proves_the_optimum():
    """From a FEASIBLE result at HEFT's makespan, the destructive descent (horizon U − 1,
    again, until infeasible) reaches and proves the optimum by itself."""
    from heuristics.placement.list_scheduler import heft
    from models.placement.milp_time_solve import _descend, prep_of
    from opt.common.result import Result
    from opt.placement.validator import validate_placement

    for seed in range(30):
        inst = identical_instance(seed, n_tasks=7, n_devices=2, comm=True)
        start = heft(inst)
        ms = validate_placement(inst, start).makespan
        opt = brute_force(inst)
        if ms > opt:
            break
    else:
        pytest.fail("no seed where HEFT is not optimal")
    prep, _ = prep_of(inst, True)
    res = Result(problem="placement", method="milp", status="FEASIBLE", objective=float(ms),
                 lower_bound=0.0, runtime_s=0.0, seed=0, params={}, solution=start, stats={})
    out = _descend(inst, prep, res, {"threads": 1, "mip_rel_gap": 0.0, "mip_abs_gap": 0.99},
                   SolveOptions(**LIMIT), 0, __import__("time").perf_counter())
    assert out.status == "OPTIMAL" and out.objective == opt == out.lower_bound
    assert out.stats["descent"][-1]["termination"] in ("Infeasible", "Optimal")
    assert certify(inst, out).objective == opt


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
def test_export_time_indexed(tmp_path, suffix):
    inst = identical_instance(4, n_devices=2, comm=True)
    path = tmp_path / f"ti{suffix}"
    res = solve_placement_milp(inst, SolveOptions(**LIMIT, export_path=str(path),
                                                  params={"formulation": "time-indexed"}))
    assert res.stats["exported"] == str(path) and path.stat().st_size > 0
    text = path.read_text()
    assert ("COLUMNS" in text) if suffix == ".mps" else ("bin" in text.lower())
