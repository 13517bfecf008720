"""Identical-device structure: the group energy bounds of
``opt.placement.group_bound`` and the CP-SAT/MILP switches ``group_cumulative`` /
``group_energy``: valid (never above an optimum, same optima with and without them, also with
communication, loads and capacities) and effective (switching them off proves less)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from instances import stg
from opt.placement.group_bound import (
    energetic_feasible,
    group_bounds,
    identical_groups,
    trivial_bound,
)
from opt.placement.instance import Device
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.lower_bounds import heads_tails
from solvers import solve

OFF = {"group_cumulative": False, "group_energy": False}
#: a wall-clock limit for HiGHS (it has no deterministic one) far above what these tiny
#: models take on a loaded machine: a guard against a hang, never what decides a result
HANG_GUARD_S = 300


def _bound(inst):
    head, tail = heads_tails(inst)
    pmin = np.where(inst.cost >= 0, inst.cost, 10**12).min(axis=1)
    return group_bounds(inst, head, tail - pmin)


def _identical(n, p, costs, edges):
    devs = [Device(f"P{i}", "cpu", None) for i in range(p)]
    return build_instance(
        time_unit="unit", devices=devs, links=make_links(devs, "full", contention=False),
        tasks=TaskColumns([f"t{i}" for i in range(n)],
                          np.repeat(np.asarray(costs)[:, None], p, axis=1)),
        edges=EdgeColumns([u for u, _ in edges], [v for _, v in edges], [0] * len(edges)))


def _p1(rng):
    """Two identical NPUs and a PIM device, NPU-only tasks (group members), blocks with
    loads, a capacity and contended transfers."""
    n = int(rng.integers(5, 8))
    devs = [Device("N0", "npu", 300), Device("N1", "npu", 300), Device("P0", "pim", 200)]
    npu = rng.integers(1, 7, n)
    pim = np.where(rng.random(n) < 0.4, -1, rng.integers(1, 9, n))
    pim[0] = -1  # at least one member of the NPU group
    cost = np.stack([npu, npu, pim], axis=1)
    edges = [(u, v) for v in range(1, n) for u in range(v) if rng.random() < 0.3]
    block = np.where(rng.random(n) < 0.5, rng.integers(0, 2, n), -1)
    loads = rng.integers(1, 5, (2, 1))
    return build_instance(
        time_unit="unit", devices=devs, links=make_links(devs, "full", True, 1, 2.0),
        tasks=TaskColumns([f"t{i}" for i in range(n)], cost),
        edges=EdgeColumns([u for u, _ in edges], [v for _, v in edges],
                          rng.integers(0, 6, len(edges)).tolist()),
        blocks=BlockColumns(["w0", "w1"], [150, 150],
                            load={"linear": np.concatenate([loads, loads, loads + 2], axis=1)},
                            task_block=block))


def test_three_parallel_tasks_energetic_bound_beats_trivial():
    # 3 tasks of 2 on 2 machines: trivial max(2, ⌈6/2⌉) = 3, but each must cover [1, 2)
    # when C = 3, 3 > 2·1: the optimum 4 is the bound
    inst = _identical(3, 2, [2, 2, 2], [])
    assert trivial_bound(inst) == 3
    assert not energetic_feasible(np.zeros(3), np.zeros(3), np.full(3, 2), 2, 3)
    assert _bound(inst).cmax_lb == 4
    assert identical_groups(inst.cost) == [[0, 1]]


@pytest.mark.parametrize("graph,p", [("50/rand0001", 4), ("50/rand0162", 2),
                                     ("50/rand0028", 4), ("100/rand0037", 8)])
def test_stg_bound_reaches_published_optimum_above_trivial(graph, p):
    inst, rec = stg.load(graph, p), stg.record(graph, p)
    assert trivial_bound(inst) < rec["optimum"] == _bound(inst).cmax_lb


def test_stg_bound_never_above_published_upper_bound():
    for rec in (r for r in stg.records() if r["graph"].startswith("50/")):
        inst = stg.load(rec["graph"], rec["processors"])
        assert _bound(inst).cmax_lb <= rec["upper_bound"], rec["name"]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 8), p=st.integers(2, 3), data=st.data())
def test_bound_and_cuts_keep_the_optimum_identical(n, p, data):
    costs = data.draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    pairs = [(u, v) for v in range(n) for u in range(v)]
    edges = [e for e in pairs if data.draw(st.booleans())] if pairs else []
    inst = _identical(n, p, costs, edges)
    off = solve(inst, "cpsat", time_limit=10, deterministic=True, num_workers=1,
                warm_start=None, **OFF)
    on = solve(inst, "cpsat", time_limit=10, deterministic=True, num_workers=1, warm_start=None)
    assert off.status == on.status == "OPTIMAL" and on.objective == off.objective
    assert _bound(inst).cmax_lb <= off.objective


@pytest.mark.parametrize("seed", range(6))
def test_cuts_keep_the_optimum_with_communication_loads_capacity(seed):
    inst = _p1(np.random.default_rng(seed))
    off = solve(inst, "cpsat", time_limit=20, deterministic=True, num_workers=1,
                warm_start=None, **OFF)
    on = solve(inst, "cpsat", time_limit=20, deterministic=True, num_workers=1, warm_start=None)
    assert off.status == on.status == "OPTIMAL" and on.objective == off.objective
    assert on.stats["cumulative_groups"] == [["N0", "N1"]]
    gb = _bound(inst)
    assert gb is None or gb.cmax_lb <= off.objective


def test_milp_cuts_keep_the_optimum_with_communication_loads_capacity():
    inst = _p1(np.random.default_rng(3))
    ref = solve(inst, "cpsat", time_limit=20, deterministic=True, num_workers=1,
                warm_start=None, **OFF)
    on = solve(inst, "milp", time_limit=HANG_GUARD_S, num_workers=1, warm_start=None)
    assert on.status == "OPTIMAL" and on.objective == ref.objective


# ---- switching a mechanism off proves less (STG 50/rand0001 on 4 processors: optimum 94,
# trivial bound 89; the model's own heads/tails give 90) -------------------------------------

def _cpsat(**switches):
    inst = stg.load("50/rand0001", 4)
    return solve(inst, "cpsat", time_limit=0.1, deterministic=True, num_workers=1, seed=0,
                 warm_start="heft", **switches)


def test_group_energy_switch_raises_the_bound():
    on = _cpsat(group_cumulative=False)
    off = _cpsat(**OFF)
    assert on.status == "OPTIMAL" and on.lower_bound == 94 and on.stats["group_bound"] == 94
    assert off.lower_bound < 94 and off.stats["group_bound"] is None


def test_group_cumulative_switch_raises_the_bound():
    on = _cpsat(group_energy=False)
    off = _cpsat(**OFF)
    assert on.status == "OPTIMAL" and on.lower_bound == 94
    assert off.lower_bound < 94


def test_milp_group_energy_switch_raises_the_dual_bound():
    """The group energy cut raises the big-M MILP's dual bound: its LP relaxation (HiGHS'
    ``solve_relaxation``, deterministic) gives 94 with the cut and the trivial 89 without."""
    inst = stg.load("50/rand0001", 4)
    relaxed = dict(time_limit=HANG_GUARD_S, num_workers=1, seed=0, warm_start="heft",
                   formulation="bigm", solve_relaxation=True)  # (the time-indexed LP proves 94)
    on = solve(inst, "milp", **relaxed)
    off = solve(inst, "milp", group_energy=False, **relaxed)
    assert on.lower_bound == 94 and on.stats["group_bound"] == 94
    assert off.lower_bound is None or off.lower_bound < 94
