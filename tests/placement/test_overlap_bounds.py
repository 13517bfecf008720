"""Lower bounds under ``load_timing: overlap`` (docs/lower_bounds.md "Bounds under overlap"):
on random tiny instances every certified component, ``placement_lower_bound`` and the heads
and tails the exact models use stay below a proven optimum, found by brute force over every
device assignment and every task order (no channel contention, unlimited capacities: then a
schedule is fixed by its assignment and its order, each task at its dispatch, a miss ending at
dispatch + max(load, duration)); the optimal schedule passes the validator."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest

from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.instance import Device
from opt.placement.instance_checks import (
    BlockColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.lower_bounds import device_heads_tails, heads_tails, placement_lower_bound
from opt.placement.solution import make_solution
from opt.placement.validator import validate_placement
from tests.placement.test_load_timing import random_dag_instance, worked_example


def tiny_overlap(seed: int):
    """2–5 tasks on 2–3 devices, 1–2 blocks whose loads are often longer than the tasks, a
    random DAG, transfers of 0–4 ticks without contention, unlimited capacities."""
    r = random.Random(seed)
    nd = r.randint(2, 3)
    devices = [Device(f"D{d}", "npu" if d == 0 else "pim", None) for d in range(nd)]
    links = make_links(devices, "full", False, r.randint(0, 4), 1e9)
    n, nb = r.randint(2, 5), r.randint(1, 2)
    cost = [[r.randint(1, 9) if r.random() < 0.8 else -1 for _ in range(nd)] for _ in range(n)]
    for row in cost:
        if max(row) < 0:
            row[r.randrange(nd)] = r.randint(1, 9)
    block = [r.choice([-1] + list(range(nb))) for _ in range(n)]
    block[r.randrange(n)] = 0
    return random_dag_instance(r, devices, links, cost, block, nb,
                               lambda: [r.randint(0, 25) for _ in range(nd)], "overlap")


def _schedule(inst, order, dev, tr):
    """(makespan, starts, loads): tasks in ``order`` at their dispatch; the first user of a
    block on a device loads it from its dispatch and ends at dispatch + max(load, p)
    (overlap) or dispatch + load + p (at_use)."""
    n = inst.n_tasks
    end, start = [0] * n, [0] * n
    free = [0] * inst.n_devices
    loaded: set[tuple[int, int]] = set()
    loads = []
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k, (u, v) in enumerate(zip(inst.edge_src.tolist(), inst.edge_dst.tolist())):
        preds[v].append((u, k))
    for t in order:
        d = dev[t]
        disp = max([free[d]] + [end[u] + int(tr[k, dev[u], d]) for u, k in preds[t]])
        p = int(inst.cost[t, d])
        b = int(inst.task_block[t])
        slot = p
        if b >= 0 and (b, d) not in loaded:
            ld = int(inst.load_duration[b, d])
            if ld < 0:
                return None
            loaded.add((b, d))
            loads.append((b, d, disp))
            slot = max(ld, p) if inst.load_timing == "overlap" else ld + p
        end[t] = disp + slot
        start[t] = end[t] - p
        free[d] = end[t]
    return max(end), start, loads


def brute_force(inst):
    """(optimum, an optimal solution) over every assignment and topological order."""
    n, nd = inst.n_tasks, inst.n_devices
    tr = inst.links.transfer_durations(inst.edge_bytes)
    edges = list(zip(inst.edge_src.tolist(), inst.edge_dst.tolist()))
    orders = [o for o in itertools.permutations(range(n))
              if all(o.index(u) < o.index(v) for u, v in edges)]
    legal = [[d for d in range(nd) if inst.cost[t, d] >= 0] for t in range(n)]
    best = None
    for dev in itertools.product(*legal):
        for order in orders:
            got = _schedule(inst, order, dev, tr)
            if got is not None and (best is None or got[0] < best[0]):
                best = (got[0], dev, got[1], got[2])
    assert best is not None
    value, dev, start, loads = best
    transfers = {k: start[u] + int(inst.cost[u, dev[u]]) for k, (u, v) in enumerate(edges)
                 if dev[u] != dev[v]}
    return value, make_solution(inst, list(dev), start, transfers, loads=loads)


def test_brute_force_finds_the_worked_example_optimum():
    value, sol = brute_force(worked_example("overlap"))
    assert value == 33
    assert validate_placement(worked_example("overlap"), sol).makespan == 33


@pytest.mark.parametrize("seed", range(60))
def test_every_bound_is_below_the_proven_optimum_under_overlap(seed):
    inst = tiny_overlap(seed)
    opt, sol = brute_force(inst)
    assert validate_placement(inst, sol).makespan == opt
    bound = certified_lower_bound(inst)
    for c in bound.components:
        assert c.value <= opt, (c.name, c.value, opt)
    assert placement_lower_bound(inst) <= opt
    # the heads and tails the exact models add as constraints hold on the optimal schedule
    dev = np.array([inst.device_index[r["device"]] for r in sol["compute"]])
    start = np.array([r["start"] for r in sol["compute"]])
    head, tail = heads_tails(inst)
    assert (start >= head).all() and (start + tail <= opt).all()
    dh, dt = device_heads_tails(inst, 256)
    idx = np.arange(inst.n_tasks)
    assert (start >= dh[idx, dev]).all() and (start + dt[idx, dev] <= opt).all()


def test_the_prefetch_bound_is_not_valid_under_overlap():
    """Why the relaxation: one PIM task of 5 ticks whose block loads in 20 has optimum 25 under
    prefetch and at_use but 20 under overlap; the bound computed as under prefetch (25) would
    exceed it, the relaxed one is 20."""
    devices = [Device("PIM", "pim", None)]
    inst = build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["v"], [[5]]),
        blocks=BlockColumns(["W"], [1], load={"linear": [[20]]}, task_block=[0]),
        load_timing="overlap")
    assert brute_force(inst)[0] == 20
    assert certified_lower_bound(inst).value == 20
    assert certified_lower_bound(dataclasses.replace(inst, load_timing="prefetch")).value == 25
