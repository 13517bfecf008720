"""The columnar solution (opt.placement.solution_tables): it reads as the §1.2a dict, the
validator decides valid schedules on its columns and gives every mutated one the row path's
verdict, and result files hold it as column tables above 2,000 compute events (read back to
the same rows and the same verdict)."""

from __future__ import annotations

import copy
import gzip
import pickle

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opt.common.result as R
import opt.placement.validator as V
from heuristics.placement.bifocal import bifocal_schedule
from heuristics.placement.list_scheduler import heft
from instances import load
from opt.common.errors import InputError
from opt.common.jsonio import json_bytes
from opt.common.result import Result, read_result
from opt.placement.instance import LARGE_TASKS
from opt.placement.schedule_error import ScheduleError, Undecided
from opt.placement.solution import make_solution
from opt.placement.solution_tables import (
    ColumnarSolution,
    ComputeColumns,
    EventRows,
    TransferColumns,
    columnar_from_rows,
    solution_from_tables,
)
from solvers.certify import certify
from tests.placement.solution_forms import as_rows


def _cases():
    out = []
    for name in ("heft-topcuoglu-2002",):
        inst = load(name)
        out += [(inst, heft(inst)), (inst, bifocal_schedule(inst))]
    from tests.placement.test_validator_residency import schedule_identity
    inst = schedule_identity.built(("dops-qwen-1.8b", "HP32", 64, 32, 1, 2, 0.2))
    out.append((inst, bifocal_schedule(inst)))
    inst = schedule_identity.built(("llama-2-13b", "HP64", 128, 16, 4, 2, None, "star"))
    out.append((inst, heft(inst)))
    return out


CASES = _cases()
IDS = [f"{i}-{len(s['compute'])}" for i, (_, s) in enumerate(CASES)]


def _outcome(inst, sol):
    try:
        return "ok", V.validate_placement(inst, sol).to_dict()
    except ScheduleError as exc:
        return "invalid", str(exc)


# ---- the mapping --------------------------------------------------------------------------------

def test_reads_as_the_row_dict_and_builds_rows_lazily():
    inst, sol = CASES[0]
    sol = copy.deepcopy(sol)
    assert isinstance(sol, ColumnarSolution) and not sol.rows_built
    assert list(sol) == ["assignment", "compute", "transfers", "loads", "evictions", "formats"]
    assert len(sol["compute"]) == inst.n_tasks and not sol.rows_built
    rows = sol.rows()
    assert sol.rows_built and isinstance(rows["compute"], list)
    assert sol["compute"] == rows["compute"] and rows["compute"] == list(sol["compute"])
    assert dict(sol["assignment"]) == {ev["task"]: ev["device"] for ev in rows["compute"]}
    assert orjson.loads(json_bytes(sol)) == orjson.loads(json_bytes(rows))
    assert pickle.loads(pickle.dumps(sol)).rows() == rows


def test_transfer_start_as_an_array_gives_the_same_solution():
    inst = load("heft-topcuoglu-2002")
    sol = heft(inst)
    dev = [inst.device_index[ev["device"]] for ev in sol["compute"]]
    start = [ev["start"] for ev in sol["compute"]]
    edge = {(inst.task_index[t["src"]], inst.task_index[t["dst"]]): t["start"]
            for t in sol["transfers"]}
    ts = {e: edge[(int(u), int(v))] for e, (u, v) in enumerate(zip(inst.edge_src, inst.edge_dst))
          if (int(u), int(v)) in edge}
    arr = np.full(inst.n_edges, -1, dtype=np.int64)
    arr[list(ts)] = list(ts.values())
    a = make_solution(inst, dev, start, ts)
    b = make_solution(inst, np.array(dev), np.array(start), arr)
    assert a.rows() == b.rows() and a.rows()["compute"] == as_rows(sol)["compute"]
    with pytest.raises(ValueError, match="one per edge"):
        make_solution(inst, dev, start, arr[:-1])


def test_edited_rows_are_the_solution():
    """Once built, the rows (which a consumer may edit) are validated and written, not the
    columns."""
    inst, sol = CASES[0]
    mut = copy.deepcopy(sol)
    mut["compute"][0]["end"] += 1
    with pytest.raises(ScheduleError, match="rule 1"):
        V.validate_placement(inst, mut)
    assert json_bytes(mut) == json_bytes(as_rows(mut))
    other = copy.deepcopy(sol)
    other["evictions"] = []
    assert not other.rows_built
    other["assignment"] = {}
    assert other.rows_built


# ---- the validator's columnar path -------------------------------------------------------------

@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_valid_schedules_are_decided_on_the_columns(case):
    inst, sol = CASES[case]
    sol = copy.deepcopy(sol)
    fast = V._validate_columns(inst, sol)
    assert not sol.rows_built  # no fallback built the rows
    assert fast == V.validate_placement(inst, as_rows(sol))


def _mutate(sol: ColumnarSolution, kind: str, k: int, delta: int) -> ColumnarSolution:
    """A copy of ``sol`` with one decision changed on its columns."""
    mut = copy.deepcopy(sol)
    n, m = len(mut.task), len(mut.src)
    if kind == "start":
        mut.start[k % n] += delta
    elif kind == "shift":  # a whole event, end too
        mut.start[k % n] += delta
        mut.end[k % n] += delta
    elif kind == "device":
        mut.device[k % n] = (mut.device[k % n] + 1 + delta % 3) % len(mut.devices)
    elif kind == "swap_tasks" and n > 1:
        task = list(mut.task)
        task[k % n], task[(k + 1) % n] = task[(k + 1) % n], task[k % n]
        mut = ColumnarSolution(mut.devices, ComputeColumns(task, mut.device, mut.start, mut.end),
                               mut.transfer_columns(), mut["loads"], mut["evictions"],
                               mut["formats"])
    elif kind in ("t_start", "t_shift", "t_from", "t_drop") and m:
        j = k % m
        if kind == "t_start":
            mut.t_start[j] += delta
        elif kind == "t_shift":
            mut.t_start[j] += delta
            mut.t_end[j] += delta
        elif kind == "t_from":
            mut.from_dev[j] = (mut.from_dev[j] + 1) % len(mut.devices)
        else:
            keep = np.arange(m) != j
            mut = ColumnarSolution(mut.devices, mut.compute_columns(), TransferColumns(
                mut.src[keep], mut.dst[keep], mut.from_dev[keep], mut.to_dev[keep],
                mut.t_start[keep], mut.t_end[keep]), mut["loads"], mut["evictions"],
                mut["formats"])
    elif kind == "load" and mut["loads"]:
        ld = mut["loads"][k % len(mut["loads"])]
        ld["start"] += delta
        ld["end"] += delta
    elif kind == "time_range":
        mut.start[k % n] = 2 ** 62 + 1
    return mut


KINDS = ("start", "shift", "device", "swap_tasks", "t_start", "t_shift", "t_from", "t_drop",
         "load", "time_range")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(CASES) - 1), st.sampled_from(KINDS), st.integers(0, 10 ** 6),
       st.integers(-50, 50).filter(bool))
def test_mutated_columns_get_the_row_verdict(case, kind, k, delta):
    """Every mutated columnar solution gets exactly the row path's outcome (the message of the
    same event), and the columnar path alone never accepts what the row path rejects."""
    inst, sol = CASES[case]
    mut = _mutate(sol, kind, k, delta)
    rows = as_rows(mut)
    expected = _outcome(inst, rows)
    assert _outcome(inst, copy.deepcopy(mut)) == expected
    try:
        fast = ("ok", V._validate_columns(inst, copy.deepcopy(mut)).to_dict())
    except (Undecided, ScheduleError):
        fast = ("rejected", None)
    assert fast == expected or (fast[0] == "rejected" and expected[0] == "invalid")


# ---- result files --------------------------------------------------------------------------------

def test_threshold_is_the_instances():
    assert R.LARGE_EVENTS == LARGE_TASKS


def _result(sol) -> Result:
    return Result(problem="placement", method="heft", status="FEASIBLE", solution=sol,
                  params={"x": 1}, stats={"s": 2})


def test_small_results_stay_rows_byte_identical(tmp_path):
    inst, sol = CASES[0]
    for name in ("a.json", "a.json.gz"):
        _result(sol).write(tmp_path / name)
        _result(as_rows(sol)).write(tmp_path / f"rows-{name}")
        assert (tmp_path / name).read_bytes() == (tmp_path / f"rows-{name}").read_bytes()
    assert not isinstance(read_result(tmp_path / "a.json").solution, ColumnarSolution)


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
@pytest.mark.parametrize("form", ["columns", "rows", "edited"])
def test_large_results_round_trip_as_column_tables(case, form, tmp_path, monkeypatch):
    monkeypatch.setattr(R, "LARGE_EVENTS", 3)
    inst, sol = CASES[case]
    sol = copy.deepcopy(sol)
    if form == "rows":
        sol = as_rows(sol)
    elif form == "edited":
        sol["compute"][0]["start"] += 0  # builds the rows
    path = tmp_path / "r.json.gz"
    _result(sol).write(path)
    raw = orjson.loads(gzip.decompress(path.read_bytes()))
    assert raw["solution"]["columns"] == 1 and isinstance(raw["solution"]["compute"], dict)
    back = read_result(path)
    assert isinstance(back.solution, ColumnarSolution)
    assert back.solution.rows() == as_rows(sol)
    assert _outcome(inst, back.solution) == _outcome(inst, as_rows(sol))
    assert certify(inst, back).objective == certify(
        inst, _result(sol)).objective


def test_rows_that_columns_cannot_hold_stay_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "LARGE_EVENTS", 3)
    inst, sol = CASES[0]
    rows = as_rows(sol)
    rows["assignment"].pop(next(iter(rows["assignment"])))
    assert columnar_from_rows(rows) is None
    _result(rows).write(tmp_path / "r.json")
    assert read_result(tmp_path / "r.json").solution == rows
    odd = as_rows(sol)
    odd["compute"][0]["note"] = "x"
    assert columnar_from_rows(odd) is None


def _tables() -> dict:
    _, sol = CASES[0]
    return orjson.loads(json_bytes(copy.deepcopy(sol).tables()))


@pytest.mark.parametrize("edit, field, text", [
    (lambda t: t.update(columns=2), "solution.columns", "unsupported column layout 2"),
    (lambda t: t.update(extra=1), "solution.extra", "unknown field"),
    (lambda t: t["devices"].__setitem__(0, 3), "solution.devices[0]", "non-empty string"),
    (lambda t: t["compute"]["task"].__setitem__(2, ""), "solution.compute.task[2]",
     "non-empty string"),
    (lambda t: t["compute"]["device"].__setitem__(4, 99), "solution.compute.device[4]",
     "device position 99 is outside"),
    (lambda t: t["compute"]["start"].__setitem__(1, 1.5), "solution.compute.start[1]",
     "expected an integer, got 1.5"),
    (lambda t: t["compute"]["end"].pop(), "solution.compute.end", "expected 10 entries"),
    (lambda t: t["compute"].pop("end"), "solution.compute.end", "missing required field"),
    (lambda t: t["transfers"]["src"].__setitem__(0, 10), "solution.transfers.src[0]",
     "compute row 10 is outside 0..9"),
    (lambda t: t["transfers"]["to"].__setitem__(0, -1), "solution.transfers.to[0]",
     "device position -1 is outside"),
    (lambda t: t["transfers"]["start"].__setitem__(0, 2 ** 63), "solution.transfers.start[0]",
     "is outside"),
    (lambda t: t.update(transfers=[]), "solution.transfers", "expected an object of columns"),
    (lambda t: t.update(loads={}), "solution.loads", "expected a list"),
    (lambda t: t.update(formats=[]), "solution.formats", "expected an object"),
])
def test_bad_column_tables_name_file_field_and_value(edit, field, text, tmp_path):
    tables = _tables()
    edit(tables)
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps({"schema": 1, "problem": "placement", "method": "heft",
                                   "status": "FEASIBLE", "solution": tables}))
    with pytest.raises(InputError) as err:
        read_result(path)
    msg = str(err.value)
    assert str(path) in msg and f"field '{field}'" in msg and text in msg, msg
    assert "\n" not in msg


def test_cli_validate_reads_column_tables_and_exits_2_on_bad_ones(tmp_path, monkeypatch):
    from opt.app.cli.parser import main

    monkeypatch.setattr(R, "LARGE_EVENTS", 3)
    inst, sol = CASES[0]
    ipath, rpath = tmp_path / "i.json", tmp_path / "r.json.gz"
    inst.write(ipath)
    _result(sol).write(rpath)
    assert main(["validate", str(ipath), str(rpath)]) == 0
    tables = _tables()
    tables["compute"]["device"][0] = 7
    bad = tmp_path / "bad.json"
    bad.write_bytes(orjson.dumps({"schema": 1, "problem": "placement", "method": "heft",
                                  "status": "FEASIBLE", "solution": tables}))
    assert main(["validate", str(ipath), str(bad)]) == 2


def test_solution_from_tables_of_an_empty_schedule():
    sol = solution_from_tables({"columns": 1, "devices": [], "compute": {
        "task": [], "device": [], "start": [], "end": []}, "transfers": {
        "src": [], "dst": [], "from": [], "to": [], "start": [], "end": []}}, "x.json")
    assert sol.rows() == {"assignment": {}, "compute": [], "transfers": [], "loads": [],
                          "evictions": [], "formats": {}}
    assert isinstance(sol["compute"], EventRows)


def test_a_dict_made_from_a_columnar_solution_validates_as_its_rows():
    """``{**sol, "formats": …}`` keeps the lazy event lists: the validator reads them as the
    lists they stand for."""
    inst, sol = CASES[0]
    made = {**copy.deepcopy(sol)}
    assert isinstance(made["compute"], EventRows)
    assert V.validate_placement(inst, made) == V.validate_placement(inst, as_rows(sol))
    made["formats"] = {"no-such-block": "linear"}
    with pytest.raises(ScheduleError, match="unknown block"):
        V.validate_placement(inst, made)


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_compute_end_is_the_validated_makespan(case):
    """``compute_end`` reads the columns of an untouched columnar solution and the rows of an
    edited one; both equal the validator's makespan, and the columns path builds no rows."""
    from opt.placement.solution import compute_end

    inst, sol = CASES[case]
    sol = copy.deepcopy(sol)
    makespan = V.validate_placement(inst, as_rows(sol)).makespan
    if isinstance(sol, ColumnarSolution) and not sol.rows_built:
        assert compute_end(sol) == makespan and not sol.rows_built
    assert compute_end(as_rows(sol)) == makespan
