"""The typed solution views (opt.placement.schedule, Result.schedule/layout/plan): they agree
with the validator's and the plan checker's recomputation on bundled instances of all three
problems, read the columns without copying them, and refuse a result of another problem."""

from __future__ import annotations

import numpy as np
import pytest

import opt.api as hetopt
from opt.common.result import Result
from opt.placement.schedule import LayoutSolution, Schedule, ScheduledTask
from opt.placement.solution_tables import ColumnarSolution
from opt.serving.checker import check_plan

P1 = "p1-llama-2-7b-hp32-p64-d2-l2"
P2 = "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5"
P3 = "p3-tiny-gemma-a100-l40s"


@pytest.fixture(scope="module")
def solved() -> dict[str, tuple[object, Result]]:
    """A result of each problem on a bundled instance (P1 twice: a DAG and the LLM one)."""
    out = {}
    for name, method in (("heft-topcuoglu-2002", "heft"), (P1, "bifocal"), (P2, "bifocal/wla"),
                         (P3, "bnb")):
        inst = hetopt.load_instance(name)
        out[name] = inst, hetopt.solve(inst, method, time_limit=30)
    return out


@pytest.mark.parametrize("name", ["heft-topcuoglu-2002", P1, P2])
def test_a_schedule_agrees_with_the_validator(solved, name):
    inst, res = solved[name]
    schedule = res.schedule()
    check = hetopt.validate(inst, res)
    assert check.valid
    assert schedule.makespan == check.objective == check.metrics["makespan"]
    assert schedule.makespan == max(e.end for e in schedule.compute)
    assert sorted(e.task for e in schedule.compute) == sorted(inst.task_ids)  # each task once
    assert len(schedule) == inst.n_tasks
    for e in schedule.compute:
        assert isinstance(e, ScheduledTask) and e.end - e.start == int(
            inst.cost[inst.task_ids.index(e.task), [d.name for d in inst.devices].index(
                e.device)])
    assert schedule.to_dict() == dict(res.solution.rows() if isinstance(
        res.solution, ColumnarSolution) else res.solution)


def test_per_device_sequences_partition_the_tasks_by_start(solved):
    _, res = solved[P1]
    schedule = res.schedule()
    seqs = schedule.sequences()
    assert sorted(t for seq in seqs.values() for t in seq) == sorted(
        e.task for e in schedule.compute)
    for device, seq in seqs.items():
        starts = [schedule.task(t).start for t in seq]
        assert starts == sorted(starts)
        assert all(schedule.device_of(t) == device for t in seq)


def test_typed_rows_are_the_solution_rows(solved):
    _, res = solved[P1]
    schedule, rows = res.schedule(), res.solution
    assert [t._asdict() for t in schedule.loads] == list(rows["loads"])
    assert [(t.src, t.dst, t.from_device, t.to_device, t.start, t.end)
            for t in schedule.transfers] == [
        (t["src"], t["dst"], t["from"], t["to"], t["start"], t["end"])
        for t in rows["transfers"]]
    assert dict(schedule.formats) == rows["formats"]


def test_a_schedule_shares_the_columns_and_is_read_only():
    res = hetopt.solve(hetopt.load_instance(P1), "bifocal")
    sol = res.solution
    assert isinstance(sol, ColumnarSolution) and not sol.rows_built
    schedule = res.schedule()
    assert not sol.rows_built  # nothing built the event dicts
    assert np.shares_memory(schedule._c.start, sol.start)
    with pytest.raises(ValueError):
        schedule._c.start[0] = 0
    with pytest.raises(TypeError):
        schedule.formats["x"] = "linear"  # type: ignore[index]


def test_a_schedule_from_rows_equals_the_one_from_columns(solved):
    _, res = solved[P1]
    from_rows = Schedule.from_solution(res.schedule().to_dict())
    assert from_rows.compute == res.schedule().compute
    assert from_rows.transfers == res.schedule().transfers
    assert from_rows.makespan == res.schedule().makespan


def test_a_layout_solution_holds_the_formats_and_the_schedule(solved):
    inst, res = solved[P2]
    layout = res.layout()
    assert isinstance(layout, LayoutSolution)
    assert set(layout.formats) == set(inst.block_ids)
    assert layout.format_of(inst.block_ids[0]) == res.solution["formats"][inst.block_ids[0]]
    assert layout.makespan == hetopt.validate(inst, res).objective


def test_a_plan_and_its_metrics_are_the_checkers(solved):
    inst, res = solved[P3]
    plan = res.plan(inst)
    met = res.plan_metrics(inst)
    checked = check_plan(inst, res.solution)
    assert met.cost_usd_per_mtok == checked.cost_usd_per_mtok == hetopt.validate(
        inst, res).objective == res.objective
    assert met.t_rtt == checked.t_rtt and met.replicas == checked.replicas
    assert plan.template == tuple(res.solution["template"])
    assert [o.config for o in plan.owners] == [o["config"] for o in res.solution["owners"]]
    assert plan.microbatches == res.solution["microbatches"]


@pytest.mark.parametrize("name, accessor, hint", [
    (P3, lambda r, i: r.schedule(), "plan(instance)"),
    (P3, lambda r, i: r.layout(), "plan(instance)"),
    (P1, lambda r, i: r.layout(), "schedule()"),
    (P1, lambda r, i: r.plan(i), "schedule()"),
])
def test_the_wrong_problems_accessor_is_an_input_error(solved, name, accessor, hint):
    inst, res = solved[name]
    with pytest.raises(hetopt.InputError) as err:
        accessor(res, inst)
    assert err.value.field == "problem" and hint in str(err.value)


def test_a_result_without_a_solution_has_no_schedule():
    res = Result("placement", "heft", "TIME_LIMIT_NO_SOLUTION")
    with pytest.raises(hetopt.InputError) as err:
        res.schedule()
    assert err.value.field == "solution" and "TIME_LIMIT_NO_SOLUTION" in str(err.value)


def test_an_unknown_task_or_device_is_an_input_error(solved):
    schedule = solved[P1][1].schedule()
    for call, field in ((lambda: schedule.device_of("nope"), "task"),
                        (lambda: schedule.sequence("GPU9"), "device")):
        with pytest.raises(hetopt.InputError) as err:
            call()
        assert err.value.field == field
