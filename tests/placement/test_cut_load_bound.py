"""The ``cut_loads`` component (opt/placement/cut_load_bound.py; docs/lower_bounds.md "Exposed
first loads on the cut chain"): never above a proven optimum on random tiny chain-like
instances under ``at_use`` and ``overlap`` (brute force over every assignment and task order;
no contention, unlimited capacities — capacities only remove schedules, so the optimum with
any capacity is at least this one), 0 under ``prefetch``, and strictly above every other
component on an instance where the first loads cannot be hidden."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.chain_bound import cut_positions
from opt.placement.cut_load_bound import cut_load_bound, cut_load_bounds, exposure_weights
from opt.placement.instance import Device
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.validator import validate_placement
from tests.placement.test_overlap_bounds import brute_force


def chain_instance(seed: int, load_timing: str):
    """3–6 tasks on 2–3 devices: a spine of cut tasks with sometimes two parallel tasks
    between two of them, 1–2 blocks, loads 0–25 against durations 1–9,
    transfers of 0–4 ticks."""
    r = random.Random(seed)
    nd = r.randint(2, 3)
    devices = [Device(f"D{d}", "npu" if d == 0 else "pim", None) for d in range(nd)]
    links = make_links(devices, "full", False, r.randint(0, 4), 1e9)
    n, nb = r.randint(3, 6), r.randint(1, 2)
    cost = [[r.randint(1, 9) if r.random() < 0.8 else -1 for _ in range(nd)] for _ in range(n)]
    for row in cost:
        if max(row) < 0:
            row[r.randrange(nd)] = r.randint(1, 9)
    src, dst = [], []
    spine, j = 0, 1
    while j < n:
        if j + 2 < n and r.random() < 0.4:  # two parallel tasks j, j + 1 between cuts
            src += [spine, spine, j, j + 1]
            dst += [j, j + 1, j + 2, j + 2]
            spine, j = j + 2, j + 3
        else:
            src.append(spine)
            dst.append(j)
            spine, j = j, j + 1
    block = [r.choice([-1] + list(range(nb))) if r.random() < 0.8 else -1 for _ in range(n)]
    block[r.randrange(n)] = 0
    return build_instance(
        time_unit="ns", devices=devices, links=links,
        tasks=TaskColumns([f"t{i}" for i in range(n)], cost),
        edges=EdgeColumns(src, dst, [0] * len(src)),
        blocks=BlockColumns([f"W{b}" for b in range(nb)], [1] * nb,
                            load={"linear": [[r.randint(0, 25) for _ in range(nd)]
                                             for _ in range(nb)]},
                            task_block=block),
        load_timing=load_timing)


@pytest.mark.parametrize("load_timing", ["at_use", "overlap"])
@pytest.mark.parametrize("seed", range(150))
def test_cut_loads_never_exceeds_the_proven_optimum(seed, load_timing):
    inst = chain_instance(seed, load_timing)
    opt, sol = brute_force(inst)
    assert validate_placement(inst, sol).makespan == opt
    for rule in ("spread", "first", "mixed"):
        assert cut_load_bound(inst, rule)[0] <= opt, (rule, opt)
    # each charged task on its cheapest device or elsewhere (the large-segment fallback)
    for cap in (1, 4):
        assert max(v for v, _ in cut_load_bounds(inst, max_assignments=cap).values()) <= opt
    assert certified_lower_bound(inst).value <= opt


def test_suffix_sums_of_the_weights_stay_below_each_users_exposure():
    """The property the proof uses, on the random instances: for every block, device and
    user u_i (cut order), the weights of u_i and later users sum to at most u_i's exposure."""
    checked = first_only = 0
    for seed in range(40):
        inst = chain_instance(seed, "overlap")
        order, cutpos = cut_positions(inst)
        cuts = order[cutpos]
        rank = {int(c): i for i, c in enumerate(cuts)}
        non_cut = [t for t in range(inst.n_tasks) if t not in rank]
        first = exposure_weights(inst, order, cutpos, "first")
        for rule in ("spread", "first", "mixed"):
            mu = exposure_weights(inst, order, cutpos, rule)
            # the one-pass programme shares the non-cut charges between the rules
            assert (mu[non_cut] == first[non_cut]).all()
            for b in range(len(inst.block_ids)):
                us = [t for t in range(inst.n_tasks) if inst.task_block[t] == b]
                if not all(t in rank for t in us):  # only a lone first user is charged
                    first_only += 1
                    for d in range(inst.n_devices):
                        on = [t for t in us if inst.cost[t, d] >= 0]
                        assert not mu[on[1:], d].any()
                    continue
                us.sort(key=rank.__getitem__)
                for d in range(inst.n_devices):
                    on = [t for t in us if inst.cost[t, d] >= 0]
                    t_load = int(inst.load_duration[b, d])
                    for i, u in enumerate(on):
                        e = max(0, t_load - int(inst.cost[u, d]))
                        assert sum(int(mu[w, d]) for w in on[i:]) <= e
                        checked += 1
    assert checked > 50 and first_only > 5


def _exposed_chain(load_timing: str):
    """Three cuts in a chain, each with its own block: on D0 25 ticks (load 5), on D1 1 tick
    (load 20). Every first load is exposed; the optimum runs all on D1: 3 × 20 (overlap)."""
    devices = [Device("D0", "npu", None), Device("D1", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["a", "b", "c"], [[25, 1]] * 3),
        edges=EdgeColumns([0, 1], [1, 2], [0, 0]),
        blocks=BlockColumns(["W0", "W1", "W2"], [1] * 3,
                            load={"linear": [[5, 20]] * 3}, task_block=[0, 1, 2]),
        load_timing=load_timing)


@pytest.mark.parametrize("load_timing,opt", [("overlap", 60), ("at_use", 63)])
def test_cut_loads_is_strictly_the_strongest_component_when_loads_are_exposed(load_timing, opt):
    inst = _exposed_chain(load_timing)
    assert brute_force(inst)[0] == opt
    bound = certified_lower_bound(inst)
    assert bound.best == "cut_loads" and bound.value == opt
    others = [c.value for c in bound.components if c.name != "cut_loads"]
    assert max(others) < opt


def test_cut_loads_is_absent_under_prefetch():
    """Under prefetch loads may run before their task's dispatch, so nothing is exposed."""
    inst = dataclasses.replace(_exposed_chain("overlap"), load_timing="prefetch")
    assert cut_load_bound(inst) == (0, {"cuts": 0})
    assert "cut_loads" not in [c.name for c in certified_lower_bound(inst).components]


def _parallel_first_uses(load_timing: str):
    """c0 → {a, b} → c1; a and b first use blocks W0 and W1 (1 tick on D0, 30 on D1, every
    load 10): on D0 their slots follow one another, so the optimum is 1 + 20 + 1 (overlap)."""
    devices = [Device("D0", "npu", None), Device("D1", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["c0", "a", "b", "c1"], [[1, 1], [1, 30], [1, 30], [1, 1]]),
        edges=EdgeColumns([0, 0, 1, 2], [1, 2, 3, 3], [0, 0, 0, 0]),
        blocks=BlockColumns(["W0", "W1"], [1, 1], load={"linear": [[10, 10], [10, 10]]},
                            task_block=[-1, 0, 1, -1]),
        load_timing=load_timing)


@pytest.mark.parametrize("load_timing,opt", [("overlap", 22), ("at_use", 24)])
def test_parallel_first_uses_on_one_device_add_up(load_timing, opt):
    """The enumeration of the charged tasks' devices: the path alone gives 1 + 10 + 1."""
    inst = _parallel_first_uses(load_timing)
    assert brute_force(inst)[0] == opt
    assert cut_load_bounds(inst)["first"][0] == opt
    assert cut_load_bounds(inst, max_assignments=0)["first"][0] < opt
    bound = certified_lower_bound(inst)
    assert bound.best == "cut_loads" and bound.value == opt


def _shared_block_pair(load_timing: str):
    """c0 → {a, b} → c1, a and b both use W (1 tick and a load of 10 on any device): on
    each device that runs one of them, one of them waits for W."""
    devices = [Device("D0", "npu", None), Device("D1", "pim", None), Device("D2", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["c0", "a", "b", "c1"], [[1, 1, 1]] * 4),
        edges=EdgeColumns([0, 0, 1, 2], [1, 2, 3, 3], [0, 0, 0, 0]),
        blocks=BlockColumns(["W"], [1], load={"linear": [[10, 10, 10]]},
                            task_block=[-1, 0, 0, -1]),
        load_timing=load_timing)


@pytest.mark.parametrize("cap", [4, 256])
def test_first_users_sharing_a_segment_pay_one_exposure_per_device(cap):
    """Both on one device: 1 + (10 + 1) + 1; on two: 1 + 10 + 1. The optimum 12 is reached
    by the group charge, with all 9 assignments enumerated and with each task on its
    cheapest device or elsewhere (4 choices)."""
    inst = _shared_block_pair("overlap")
    assert brute_force(inst)[0] == 12
    assert max(v for v, _ in cut_load_bounds(inst, max_assignments=cap).values()) == 12
    others = [c.value for c in certified_lower_bound(inst).components if c.name != "cut_loads"]
    assert max(others) < 12


def test_cut_loads_can_be_switched_off():
    from opt.placement.bound_options import BoundOptions

    inst = _exposed_chain("overlap")
    names = [c.name for c in certified_lower_bound(inst, BoundOptions(cut_loads=False)).components]
    assert "cut_loads" not in names


@pytest.mark.parametrize("name", ["llm-dops-qwen-1.8b-hp32-p16-d1-b1-l1-overlap",
                                  "llm-dops-qwen-1.8b-hp32-p32-d1-b4-l1-at_use"])
def test_cut_loads_on_library_slices_is_below_a_cp_sat_schedule(name):
    """One-layer DOPS slices of the LLM library (instances/data/llm): the bound stays below
    CP-SAT's schedule (optimal within the limit when measured: 4,387,998 and 4,566,462 ns)
    and `cut_loads` is the strongest component there (docs/lower_bounds.md)."""
    from opt.placement.io import read_instance
    from solvers import solve

    root = Path(__file__).resolve().parents[2]
    inst = read_instance(root / "instances" / "data" / "llm" / f"{name}.json.gz")
    bound = certified_lower_bound(inst)
    res = solve(inst, "cpsat", time_limit=15, deterministic=True, num_workers=1, seed=0)
    assert res.objective is not None and bound.value <= res.objective
    assert bound.best == "cut_loads"
