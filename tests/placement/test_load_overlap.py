"""The ``overlap`` load rule (problems.md §1.2 rule 5, DOPS §6.1): the worked example's three
optima' schedules under the validator, one rejection per violation kind, the field's round trip
and the builder option."""

from __future__ import annotations

import pytest

from opt.placement.build_options import BuildOptions
from opt.placement.instance import Device
from opt.placement.instance_checks import BlockColumns, TaskColumns, build_instance, make_links
from opt.placement.io import instance_from_dict
from opt.placement.schedule_error import ScheduleError
from opt.placement.solution import make_solution
from opt.placement.validator import validate_placement
from tests.placement.test_load_timing import worked_example


def _solution(inst, load_start: int, v_start: int):
    """a on NPU at 0 (its transfer at 10), v on PIM at ``v_start``, W loaded on PIM."""
    return make_solution(inst, [0, 1], [0, v_start], {0: 10}, loads=[(0, 1, load_start)])


def one_pim(load_timing: str = "overlap"):
    """x (4) and v (5; block W, load 20) on one PIM device, no edge."""
    devices = [Device("PIM", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["x", "v"], [[4], [5]]),
        blocks=BlockColumns(["W"], [1], load={"linear": [[20]]}, task_block=[-1, 0]),
        load_timing=load_timing)


def test_worked_example_overlap_schedule_is_33():
    """Dispatch 13 (the transfer's end), W loads [13, 33) while v computes [28, 33)."""
    inst = worked_example("overlap")
    assert validate_placement(inst, _solution(inst, 13, 28)).makespan == 33
    for other in ("at_use", "prefetch"):  # v ends with the load: not loaded by its start
        with pytest.raises(ScheduleError, match="rule 5"):
            validate_placement(worked_example(other), _solution(inst, 13, 28))


def test_an_at_use_schedule_is_an_overlap_schedule():
    """at_use's load ends by v's start ≤ v's end and starts at v's dispatch: valid here too."""
    inst = worked_example("overlap")
    assert validate_placement(inst, _solution(inst, 13, 33)).makespan == 38


def test_prefetched_load_is_rejected():
    inst = worked_example("overlap")
    with pytest.raises(ScheduleError, match=r"overlap.*starts before the inputs of task 'v' it "
                                            r"serves arrive at 13"):
        validate_placement(inst, _solution(inst, 0, 20))
    with pytest.raises(ScheduleError, match="arrive at 13"):  # one tick early
        validate_placement(inst, _solution(inst, 12, 27))


def test_load_during_another_task_on_the_device_is_rejected():
    inst = one_pim()
    bad = make_solution(inst, [0, 0], [0, 15], {}, loads=[(0, 0, 0)])
    with pytest.raises(ScheduleError, match=r"runs while task 'x' computes on 'PIM' "
                                            r"\(until 4\)"):
        validate_placement(inst, bad)
    good = make_solution(inst, [0, 0], [0, 19], {}, loads=[(0, 0, 4)])
    assert validate_placement(inst, good).makespan == 24  # 4 + max(20, 5)


def test_load_ending_after_its_task_ends_is_rejected():
    inst = worked_example("overlap")
    with pytest.raises(ScheduleError, match="serves no task"):
        validate_placement(inst, _solution(inst, 13, 20))  # W until 33, v until 25


def test_served_task_is_the_first_user_ending_after_the_load():
    """Two users of W on PIM: the load [0, 20) serves u (ends 20), not v; v is a hit."""
    devices = [Device("PIM", "pim", None)]
    inst = build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["u", "v"], [[6], [5]]),
        blocks=BlockColumns(["W"], [1], load={"linear": [[20]]}, task_block=[0, 0]),
        load_timing="overlap")
    sol = make_solution(inst, [0, 0], [14, 20], {}, loads=[(0, 0, 0)])
    assert validate_placement(inst, sol).makespan == 25
    late = make_solution(inst, [0, 0], [0, 17], {}, loads=[(0, 0, 2)])  # serves v, u until 6
    with pytest.raises(ScheduleError, match="runs while task 'u' computes"):
        validate_placement(inst, late)


def test_field_round_trip_and_build_option():
    d = worked_example("overlap").to_dict()
    assert d["load_timing"] == "overlap"
    assert instance_from_dict(d).load_timing == "overlap"
    assert BuildOptions(load_timing="overlap").load_timing == "overlap"
    assert BuildOptions().load_timing == "overlap"   # DOPS §6.1, the builder's default


def test_build_cli_takes_overlap(tmp_path, capsys):
    from opt.app.cli import main
    from opt.placement.io import read_instance

    out = tmp_path / "overlap.json"
    assert main(["build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
                 "--prefill", "8", "--decode", "1", "--layers", "1", "--load-timing", "overlap",
                 "-o", str(out)]) == 0
    assert read_instance(out).load_timing == "overlap"
    capsys.readouterr()


@pytest.mark.parametrize("method", ["heft", "bifocal", "pd", "af", "pd+linear", "policy-search"])
def test_heuristics_overlap_the_load_on_the_worked_example(method):
    """Every list scheduler loads W from v's dispatch (13) and ends v with the load: 33, where
    the same scheduler gives 38 under at_use and 25 under prefetch (solve validates each)."""
    from solvers import solve

    got = {lt: solve(worked_example(lt), method).objective
           for lt in ("prefetch", "at_use", "overlap")}
    assert got == {"prefetch": 25, "at_use": 38, "overlap": 33}


def test_heft_runs_the_task_at_the_load_end_minus_its_duration():
    """A task shorter than its load starts at slot end − p_v; a longer one at its dispatch."""
    from heuristics.placement.list_scheduler import heft

    inst = one_pim()
    sol = heft(inst)
    rows = {r["task"]: (r["start"], r["end"]) for r in sol["compute"]}
    load = sol["loads"][0]
    assert rows["v"][1] == load["end"] == load["start"] + 20
    assert rows["v"][0] == rows["v"][1] - 5
    assert validate_placement(inst, sol).makespan == 24


def test_a_hit_needs_the_load_ended_by_its_start():
    """x (0 ticks, index 0) and w (5) use W (load 0) on one PIM, w [15, 20), x at 20, the load
    [20, 20): both end at 20, so the load serves x (the lowest index) and w is a hit that
    starts before the load ends: rejected. Only the served task may start before its load
    ends."""
    devices = [Device("PIM", "pim", None)]
    inst = build_instance(
        time_unit="ns", devices=devices, links=make_links(devices),
        tasks=TaskColumns(["x", "w"], [[0], [5]]),
        blocks=BlockColumns(["W"], [1], load={"linear": [[0]]}, task_block=[0, 0]),
        load_timing="overlap")
    bad = make_solution(inst, [0, 0], [20, 15], {}, loads=[(0, 0, 20)])
    with pytest.raises(ScheduleError, match="task 'w' starts at 15.*not resident"):
        validate_placement(inst, bad)
    ok = make_solution(inst, [0, 0], [25, 15], {}, loads=[(0, 0, 15)])  # serves w; x a hit
    assert validate_placement(inst, ok).makespan == 25


def test_viewer_draws_a_load_beside_its_task():
    """The overlap schedule renders: the load [13, 33) serves v, which computes [28, 33)."""
    from opt.app.viewer.payload import decode, encode
    from opt.app.viewer.placement import placement_payload

    inst = worked_example("overlap")
    head, blob = placement_payload(inst, _solution(inst, 13, 28))
    head, cols = decode(*encode(head, blob))
    assert head["load_timing"] == "overlap"
    assert cols["l.task"].tolist() == [inst.task_index["v"]]
    assert cols["l.start"].tolist() == [13] and cols["l.dur"].tolist() == [20]
    v = cols["c.task"].tolist().index(inst.task_index["v"])
    assert cols["c.start"][v] == 28 and head["metrics"]["makespan"] == 33
