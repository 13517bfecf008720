"""Device-aware heads and tails (opt.placement.lower_bounds.device_heads_tails): every valid schedule
respects them, they dominate the device-agnostic ones, and they see forced transfers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_placement_milp import brute_force, random_instance

from instances.generated import LlmCase
from opt.placement.io import instance_from_dict
from opt.placement.lower_bounds import BIG, device_heads_tails, heads_tails
from solvers import solve


def assert_respected(inst, solution) -> None:
    """start(t) ≥ head[t, σ(t)] and makespan ≥ start(t) + tail[t, σ(t)] for every task, with
    and without the shared-device enumeration."""
    makespan = max(ev["end"] for ev in solution["compute"])
    for k in (0, 256):
        head, tail = device_heads_tails(inst, max_assignments=k)
        for ev in solution["compute"]:
            t, d = inst.task_index[ev["task"]], inst.device_index[ev["device"]]
            assert ev["start"] >= head[t, d], (k, ev, int(head[t, d]))
            assert ev["start"] + tail[t, d] <= makespan, (k, ev, int(tail[t, d]), makespan)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_tasks=st.integers(2, 5), n_devices=st.integers(1, 3),
       contention=st.booleans(), n_blocks=st.integers(0, 2))
def test_random_path_bound_below_brute_force_and_schedules_respect_it(seed, n_tasks, n_devices,
                                                                     contention, n_blocks):
    inst = random_instance(seed, n_tasks=n_tasks, n_devices=n_devices, contention=contention,
                           n_blocks=n_blocks)
    opt = brute_force(inst)
    legal = inst.cost >= 0
    h0, t0 = heads_tails(inst)
    plain = device_heads_tails(inst)
    shared = device_heads_tails(inst, max_assignments=256)
    for head, tail in (plain, shared):
        assert int(np.where(legal, head + tail, BIG).min(axis=1).max()) <= opt
        # the device-agnostic bounds are weaker
        assert (np.where(legal, head, BIG).min(axis=1) >= h0).all()
        assert (np.where(legal, tail, BIG).min(axis=1) >= t0).all()
        assert (head[~legal] == BIG).all() and (tail[~legal] == BIG).all()
    # enumerating shared devices only strengthens
    assert (shared[0] >= plain[0]).all() and (shared[1] >= plain[1]).all()
    for method in ("heft", "cpsat"):
        res = solve(inst, method, time_limit=10, num_workers=1, seed=0,
                    **({"deterministic": True} if method == "cpsat" else {}))
        assert_respected(inst, res.solution)


def test_neighbours_sharing_a_device_run_one_at_a_time():
    # a -> {b, c}: b and c legal only on D1, a only on D0; on one device b and c serialise
    inst = instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit",
        "devices": [{"name": "D0", "class": "npu", "weight_capacity": None},
                    {"name": "D1", "class": "npu", "weight_capacity": None}],
        "links": {"topology": "full", "contention": False,
                  "default": {"latency": 0, "bandwidth": 1.0}, "pairs": []},
        "tasks": [{"id": "a", "cost": {"D0": 1}, "block": None},
                  {"id": "b", "cost": {"D1": 5}, "block": None},
                  {"id": "c", "cost": {"D1": 7}, "block": None}],
        "edges": [{"src": "a", "dst": "b", "bytes": 2}, {"src": "a", "dst": "c", "bytes": 3}],
        "blocks": [], "layout": {"default": "linear"}})
    _, plain = device_heads_tails(inst)
    _, shared = device_heads_tails(inst, max_assignments=256)
    assert plain[0, 0] == 1 + 3 + 7          # the slower branch alone
    assert shared[0, 0] == 1 + 2 + 5 + 7     # b then c after b's transfer (or c first: 15)
    assert brute_force(inst) == shared[0, 0]


@pytest.mark.parametrize("case", [
    LlmCase("llama-2-7b", "HP32", 64, 2, 1, layers=1),
    LlmCase("mixtral-8x7b", "HP64", 16, 2, 1, layers=1),
    LlmCase("qwen-1.8b", "HP32", 32, 2, 1, layers=1, tp=2),
], ids=lambda c: f"{c.model}-{c.platform}-tp{c.tp}")
def test_llm_schedules_respect_device_heads_and_tails(case):
    inst = case.build()
    for method in ("heft", "pd", "bifocal"):
        assert_respected(inst, solve(inst, method).solution)


def test_forced_transfers_count():
    # embed runs only on the NPU and kv_write only on the KV-home PIM: every token crosses the
    # link at least twice per step, which the device-agnostic tail (communication 0) ignores
    inst = LlmCase("llama-2-7b", "HP32", 16, 2, 1, layers=1).build()
    _, tail = device_heads_tails(inst)
    _, tail0 = heads_tails(inst)
    embed = inst.task_index["s0.embed"]
    min_link = int(inst.links.latency[inst.links.latency > 0].min())
    assert tail[embed].min() >= tail0[embed] + 2 * min_link
