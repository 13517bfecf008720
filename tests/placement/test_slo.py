"""SLO-constrained placement (opt.placement.slo): the objective and TTFT / TPOT / end-to-end limits
of an instance, honoured by CP-SAT (constraints and objective), reported by the heuristics and
checked by the validator; an impossible SLO is INFEASIBLE with the tightest values found."""

from __future__ import annotations

import json
import random

import pytest

from opt.common.errors import InputError
from opt.placement.io import instance_from_dict
from opt.placement.slo import Slo, with_goal
from opt.placement.validator import validate_placement
from solvers.api import solve

NPU = {"name": "NPU0", "class": "npu", "weight_capacity": None}
PIM = {"name": "PIM0", "class": "pim", "weight_capacity": None}
EXACT = {"time_limit": 20, "deterministic": True, "num_workers": 1, "seed": 0}  # CP-SAT


def _task(tid: str, cost: dict[str, int], step: int) -> dict:
    return {"id": tid, "cost": cost, "block": None, "kind": "op",
            "phase": "prefill" if step == 0 else "decode", "step": step}


def two_prefills_three_steps(seed: int = 23, join: bool = False):
    """Prefill p1, p2 (independent; with ``join`` both feed a last prefill task q) feed a chain
    of three decode steps (d_i → e_i), NPU + PIM, latency 0 and 1 byte per tick; random
    durations and payloads of a fixed seed."""
    rng = random.Random(seed)
    tasks = [_task(p, {"NPU0": rng.randint(2, 8), "PIM0": rng.randint(2, 8)}, 0)
             for p in ("p1", "p2")]
    edges, prev = [], ["p1", "p2"]
    if join:
        tasks.append(_task("q", {"NPU0": 1, "PIM0": 2}, 0))
        edges += [{"src": p, "dst": "q", "bytes": rng.randint(0, 4)} for p in prev]
        prev = ["q"]
    for i in range(1, 4):
        for name in (f"d{i}", f"e{i}"):
            tasks.append(_task(name, {"NPU0": rng.randint(2, 8), "PIM0": rng.randint(1, 8)}, i))
        edges += [{"src": q, "dst": f"d{i}", "bytes": rng.randint(0, 4)} for q in prev]
        edges.append({"src": f"d{i}", "dst": f"e{i}", "bytes": rng.randint(0, 4)})
        prev = [f"e{i}"]
    return instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit", "devices": [NPU, PIM],
        "links": {"topology": "full", "contention": True,
                  "default": {"latency": 0, "bandwidth": 1.0}, "pairs": []},
        "tasks": tasks, "edges": edges, "blocks": [],
        "layout": {"formats": ["linear"], "default": "linear"}})


def test_a_ttft_limit_changes_the_exact_optimum():
    inst = two_prefills_three_steps()
    free = solve(inst, "cpsat", **EXACT)
    fastest = solve(with_goal(inst, "ttft"), "cpsat", **EXACT)
    assert free.status == fastest.status == "OPTIMAL"
    assert fastest.objective == 6 < free.stats["metrics"]["ttft"]
    bound = with_goal(inst, "makespan", Slo(ttft=fastest.objective))
    slo = solve(bound, "cpsat", **EXACT)
    assert slo.status == "OPTIMAL" and slo.objective > free.objective == 32
    assert slo.objective == 34 and slo.stats["slo"]["met"]
    metrics = validate_placement(bound, slo.solution)
    assert metrics.ttft <= 6 and metrics.makespan == slo.objective


def test_decode_time_objective_and_tpot_limit():
    inst = two_prefills_three_steps()
    free = solve(inst, "cpsat", **EXACT)
    dec = solve(with_goal(inst, "decode_time"), "cpsat", **EXACT)
    assert dec.status == "OPTIMAL"
    assert dec.objective == dec.stats["metrics"]["decode_time"] <= \
        free.stats["metrics"]["decode_time"]
    tight = with_goal(inst, "makespan", Slo(mean_tpot=dec.objective / 3))
    res = solve(tight, "cpsat", **EXACT)
    assert res.status == "OPTIMAL" and res.stats["metrics"]["mean_tpot"] <= dec.objective / 3
    assert res.objective >= free.objective


def test_an_impossible_slo_is_infeasible_with_the_tightest_values_found():
    inst = with_goal(two_prefills_three_steps(), "makespan", Slo(ttft=5))  # the minimum is 6
    res = solve(inst, "cpsat", **EXACT)
    assert res.status == "INFEASIBLE" and res.solution is None
    tight = res.stats["slo_tightest"]
    assert tight["source"] == "warm start" and tight["ttft"] >= 6


def test_heuristics_report_whether_they_meet_the_slo():
    inst = with_goal(two_prefills_three_steps(), "makespan", Slo(ttft=5, e2e=10_000))
    for method in ("heft", "bifocal", "pd"):
        res = solve(inst, method)
        assert res.status == "FEASIBLE"
        assert res.stats["slo"]["met"] is False
        assert res.stats["slo"]["violations"][0].startswith("ttft ")


def test_goal_round_trips_and_is_checked():
    inst = with_goal(two_prefills_three_steps(), "decode_time", Slo(mean_tpot=2.5, e2e=99))
    back = instance_from_dict(json.loads(json.dumps(inst.to_dict())))
    assert back.objective == "decode_time" and back.slo == inst.slo
    d = inst.to_dict()
    with pytest.raises(InputError) as err:
        instance_from_dict({**d, "slo": {"ttft": -1}}, source="x.json")
    assert err.value.field == "slo.ttft" and "x.json" in str(err.value)
    with pytest.raises(InputError) as err:
        instance_from_dict({**d, "objective": "latency"})
    assert err.value.field == "objective"
    with pytest.raises(InputError) as err:
        solve(inst, "cpsat-blocks", time_limit=5)
    assert err.value.field == "method"


@pytest.mark.parametrize("objective,slo", [
    ("makespan", None), ("ttft", None), ("decode_time", None),
    ("makespan", Slo(ttft=7)), ("makespan", Slo(mean_tpot=8.0)), ("ttft", Slo(e2e=40)),
    ("makespan", Slo(ttft=3))])
def test_cpsat_and_milp_agree_on_every_objective_and_slo(objective, slo):
    """The two exact models on the instance with one last prefill task (the MILP's TTFT is the
    end of that task): the same optimum or both INFEASIBLE."""
    inst = with_goal(two_prefills_three_steps(join=True), objective, slo)
    a = solve(inst, "cpsat", **EXACT)
    b = solve(inst, "milp", time_limit=300)  # (HiGHS: a hang guard, far above its need)
    assert a.status == b.status and a.status in ("OPTIMAL", "INFEASIBLE")
    assert a.objective == b.objective
    if b.solution is not None:
        assert b.stats.get("slo", {"met": True})["met"]


def test_milp_needs_one_last_prefill_task_to_bound_the_decode_time():
    with pytest.raises(InputError) as err:
        solve(with_goal(two_prefills_three_steps(), "decode_time"), "milp", time_limit=5)
    assert err.value.field == "slo" and "use cpsat" in str(err.value)
