"""The scheduling kernels' schedules: valid under every rule (the validator) on random small
instances — contention ``full``/``star``/none, tight capacities that force eviction,
insertion, every load rule — for Bifocal with several switches, HEFT, the list scheduler with
and without device classes; statistics that agree with the solution; the same schedule from a
list or an iterator; bad orders refused with one line. (The byte-identity of the schedules on
fixed cases is tests/placement/test_schedule_identity.py.)"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_schedule_identity import CASES

from heuristics.placement.bifocal import EFT_ONLY, bifocal_schedule, sibling_order
from heuristics.placement.list_scheduler import (
    DeviceClasses,
    heft,
    list_schedule,
    priority_order,
    upward_rank,
)
from heuristics.placement.static_policies import class_members
from opt.common.errors import InputError
from opt.placement.instance import LOAD_TIMINGS
from opt.placement.io import instance_from_dict
from opt.placement.validator import validate_placement


def random_instance(seed: int, load_timing: str = "prefetch") -> Any:
    """A random DAG of 3–30 tasks on 2–4 devices of two classes, weight blocks with loads,
    prefill and decode steps; links ``full`` or ``star``, with or without contention;
    capacities unlimited or tight (between the largest block and all blocks); the given load
    rule (problems.md §1.2 rule 5)."""
    r = random.Random(seed)
    nd = r.randint(2, 4)
    nb = r.randint(0, 4)
    decode = r.randint(1, 4)
    blocks = [{"id": f"b{i}", "bytes": r.randint(10, 100)} for i in range(nb)]
    largest = max((b["bytes"] for b in blocks), default=0)
    total = sum(b["bytes"] for b in blocks)
    tight = r.random() < 0.6
    devices = [{"name": f"D{d}", "class": "npu" if d == 0 or r.random() < 0.3 else "pim",
                "weight_capacity": r.randint(largest, max(largest, total // 2))
                if tight and nb else None} for d in range(nd)]
    names = [d["name"] for d in devices]
    for b in blocks:
        b["load"] = {nm: {"linear": r.randint(1, 15)} for nm in names}
    tasks, edges = [], []
    n = r.randint(3, 30)
    for j in range(n):
        legal = [nm for nm in names if r.random() < 0.7] or [r.choice(names)]
        step = r.randint(0, decode)
        tasks.append({"id": f"t{j}", "cost": {nm: r.randint(1, 20) for nm in legal},
                      "block": r.choice(blocks)["id"] if nb and r.random() < 0.7 else None,
                      "kind": "op", "phase": "prefill" if step == 0 else "decode",
                      "step": step})
        for i in r.sample(range(j), min(j, r.randint(0, 3))):
            edges.append({"src": f"t{i}", "dst": f"t{j}", "bytes": r.randint(0, 60)})
    pairs = [{"src": a, "dst": b, "latency": r.randint(0, 4), "bandwidth": r.choice([0.5, 2.0])}
             for a in names for b in names if a != b and r.random() < 0.3]
    return instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit", "devices": devices,
        "links": {"topology": r.choice(["full", "star"]), "contention": r.random() < 0.7,
                  "default": {"latency": r.randint(0, 3), "bandwidth": r.choice([1.0, 3.0])},
                  "pairs": pairs},
        "tasks": tasks, "edges": edges, "blocks": blocks,
        "layout": {"formats": ["linear"], "default": "linear"},
        "meta": {"workload": {"prefill": 4, "decode": decode, "batch": 1}},
        "load_timing": load_timing})


def outcome(run) -> tuple[str, Any]:
    """("ok", result) or ("error", message) of ``run()``."""
    try:
        return "ok", run()
    except InputError as exc:
        return "error", str(exc)


VARIANTS = [{}, EFT_ONLY, {"copy_cost": 0.0}, {"evict_cost": 1.0}, {"prior": True}, {"H": 1},
            {"token_cap": False, "eta": 0.5}, {"window": False}, {"ready_set": "rank"},
            {"copy_cost": 1.0, "evict_cost": 0.5}, {"insertion": True},
            {"ready_set": "rank", "insertion": False}]


def check_bifocal(inst, params: dict[str, Any]) -> None:
    """Bifocal's schedule validates (or it refuses with one line), its load and eviction
    counts are the solution's, and a second run gives the same schedule and statistics."""
    stats: dict[str, Any] = {}
    got = outcome(lambda: bifocal_schedule(inst, params, stats=stats))
    if got[0] == "error":
        assert "\n" not in got[1]
        return
    sol = got[1]
    validate_placement(inst, sol)
    assert stats["loads"] == len(sol["loads"]) and stats["evictions"] == len(sol["evictions"])
    again: dict[str, Any] = {}
    assert bifocal_schedule(inst, params, stats=again) == sol
    stats.pop("time_s"), again.pop("time_s")
    assert again == stats


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(range(len(VARIANTS))),
       load_timing=st.sampled_from(LOAD_TIMINGS))
def test_bifocal_schedules_validate(seed, variant, load_timing):
    check_bifocal(random_instance(seed, load_timing), VARIANTS[variant])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), insertion=st.booleans(),
       load_timing=st.sampled_from(LOAD_TIMINGS))
def test_heft_and_list_schedules_validate(seed, insertion, load_timing):
    """HEFT and the list scheduler in HEFT's order (with or without insertion) validate; HEFT
    is the list schedule of its order with insertion."""
    inst = random_instance(seed, load_timing)
    order = priority_order(inst, upward_rank(inst))
    ls = outcome(lambda: list_schedule(inst, order, insertion=insertion))
    if ls[0] == "ok":
        validate_placement(inst, ls[1])
    hf = outcome(lambda: heft(inst))
    assert hf == outcome(lambda: list_schedule(inst, order, insertion=True))
    if hf[0] == "ok":
        validate_placement(inst, hf[1])


def random_classes(inst, seed: int) -> DeviceClasses:
    """Random device classes: each task in class npu, pim or none (−1); members by device class."""
    r = np.random.default_rng(seed)
    return DeviceClasses(r.integers(-1, 2, inst.n_tasks), class_members(inst), "random")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), insertion=st.booleans(),
       load_timing=st.sampled_from(LOAD_TIMINGS))
def test_list_schedule_with_classes_keeps_each_task_in_its_class(seed, insertion, load_timing):
    """Each task runs on a device of its class when the class holds a legal device of it
    (else on any legal device), and the schedule validates; or the policy refuses."""
    inst = random_instance(seed, load_timing)
    classes = random_classes(inst, seed)
    order = priority_order(inst, upward_rank(inst))
    got = outcome(lambda: list_schedule(inst, order, insertion=insertion, classes=classes))
    if got[0] == "error":
        assert "\n" not in got[1]
        return
    sol = got[1]
    validate_placement(inst, sol)
    idx = {d.name: i for i, d in enumerate(inst.devices)}
    for t, c in enumerate(classes.task_class.tolist()):
        legal_in = (inst.cost[t] >= 0) & classes.members[c] if c >= 0 else None
        if legal_in is not None and legal_in.any():
            assert classes.members[c][idx[sol["assignment"][inst.task_ids[t]]]]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_orders_are_topological_permutations(seed):
    """HEFT's order and the sibling order list every task once, predecessors first; the
    priority order is non-increasing in rank among tasks ready together (ties by index)."""
    inst = random_instance(seed)
    order = priority_order(inst, upward_rank(inst))
    for o in (order, sibling_order(inst, order)):
        assert sorted(o) == list(range(inst.n_tasks))
        pos = np.empty(inst.n_tasks, np.int64)
        pos[np.asarray(o)] = np.arange(inst.n_tasks)
        assert (pos[inst.edge_src] < pos[inst.edge_dst]).all()


def test_bad_orders_raise_one_line():
    inst = CASES["heft-topcuoglu-2002"]()
    order = priority_order(inst, upward_rank(inst))
    for bad in (order[::-1], order + order[:1]):
        for run in (lambda: list_schedule(inst, bad), lambda: bifocal_schedule(inst, order=bad)):
            kind, message = outcome(run)
            assert kind == "error" and "\n" not in message
    with pytest.raises(InputError, match="outside"):
        list_schedule(inst, [0, inst.n_tasks])
    assert list_schedule(inst, iter(order)) == list_schedule(inst, order)
