"""The instance's load rule (problems.md §1.2 rule 5, ``load_timing``): the worked example, the
validator's rejection of a prefetched load under ``at_use``, the field's round trip, and the
schedulers and exact models following each rule."""

from __future__ import annotations

import dataclasses

import pytest

from opt.common.errors import InputError
from opt.placement.instance import Device, build_instance, make_links
from opt.placement.io import instance_from_dict
from opt.placement.solution import make_solution
from opt.placement.validator import ScheduleError, validate_placement


def worked_example(load_timing: str = "at_use"):
    """problems.md §1.2's example: a (NPU, 10) → v (PIM, 5; block W, load 20 on PIM), a
    transfer of 3 ticks (latency, 0 bytes) between them."""
    devices = [Device("NPU", "npu", None), Device("PIM", "pim", None)]
    links = make_links(devices, "full", True, 3, 1e9)
    return build_instance(
        time_unit="ns", devices=devices, links=links, task_ids=["a", "v"],
        cost=[[10, -1], [-1, 5]], task_block=[-1, 0], edge_src=[0], edge_dst=[1],
        edge_bytes=[0], block_ids=["W"], block_bytes=[100],
        block_load={"linear": [[-1, 20]]}, load_timing=load_timing)


def _solution(inst, load_start: int, v_start: int):
    return make_solution(inst, [0, 1], [0, v_start], {0: 10}, loads=[(0, 1, load_start)])


def test_worked_example_prefetch_is_25():
    inst = worked_example("prefetch")
    assert validate_placement(inst, _solution(inst, 0, 20)).makespan == 25
    assert validate_placement(inst, _solution(inst, 13, 33)).makespan == 38


def test_validator_rejects_a_prefetched_load_under_at_use():
    inst = worked_example("at_use")
    arrive = 13
    with pytest.raises(ScheduleError, match=r"at_use.*starts at 0 before task 'v' it serves "
                                            r"is dispatched at 13"):
        validate_placement(inst, _solution(inst, 0, 20))
    with pytest.raises(ScheduleError, match="dispatched"):  # one tick early
        validate_placement(inst, _solution(inst, arrive - 1, arrive + 19))
    ok = validate_placement(inst, _solution(inst, arrive, arrive + 20))
    assert ok.makespan == 38  # Eq. 1: dispatch 13 + t_reload 20 + p_v 5


def test_at_use_rejects_compute_between_load_and_task():
    """The device is v's from the load's start: a task on σ(v) in between breaks dispatch."""
    devices = [Device("PIM", "pim", None)]
    inst = build_instance(
        time_unit="ns", devices=devices, links=make_links(devices), task_ids=["x", "v"],
        cost=[[4], [5]], task_block=[-1, 0], block_ids=["W"], block_bytes=[1],
        block_load={"linear": [[20]]}, load_timing="at_use")
    bad = make_solution(inst, [0, 0], [0, 20], {}, loads=[(0, 0, 0)])
    with pytest.raises(ScheduleError, match="device free 4"):
        validate_placement(inst, bad)
    good = make_solution(inst, [0, 0], [0, 24], {}, loads=[(0, 0, 4)])
    assert validate_placement(inst, good).makespan == 29
    prefetch = dataclasses.replace(inst, load_timing="prefetch")
    assert validate_placement(prefetch, bad).makespan == 25


def test_at_use_rejects_a_load_serving_no_task():
    inst = worked_example("at_use")
    arrive = 13
    sol = make_solution(inst, [0, 1], [0, arrive + 20], {0: 10},
                        loads=[(0, 1, arrive), (0, 1, arrive + 40)],
                        evictions=[(0, 1, arrive + 30)])
    with pytest.raises(ScheduleError, match="serves no task"):
        validate_placement(inst, sol)


def test_field_round_trip_and_bad_value():
    inst = worked_example("at_use")
    d = inst.to_dict()
    assert d["load_timing"] == "at_use"
    assert instance_from_dict(d).load_timing == "at_use"
    d.pop("load_timing")
    assert instance_from_dict(d).load_timing == "prefetch"
    assert "load_timing" not in worked_example("prefetch").to_dict()
    d["load_timing"] = "early"
    with pytest.raises(InputError, match="load_timing"):
        instance_from_dict(d, source="x.json")
