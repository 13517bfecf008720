"""Column tables of an instance file (opt/placement/columns.py, problems.md §1.2b).

A file written with ``columns=True`` reads back as the same instance as its row form (same
fingerprint, same row dict); the row writer is unchanged by default; bad column data gives an
InputError naming the file, the column and the first offending position.
"""

from __future__ import annotations

import copy
import json

import pytest

import instances
from opt.cli import main
from opt.common.errors import InputError
from opt.common.fingerprint import instance_fingerprint
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.io import instance_from_dict, read_instance
from tests.placement.test_instance_format import assert_same_instance, base


@pytest.fixture(scope="module")
def llm(catalog, cards):
    return build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(prefill=16, decode=2, batch=1), BuildOptions(layers=1, tp=2))


def _cases(llm):
    return [instances.load("heft-topcuoglu-2002"), instances.load("sinnen-Nodes_8_Random-p2"),
            llm, instance_from_dict(base())]


@pytest.mark.parametrize("k", range(4))
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_column_file_reads_as_the_row_file(k, suffix, llm, tmp_path):
    inst = _cases(llm)[k]
    rows, cols = tmp_path / f"r{suffix}", tmp_path / f"c{suffix}"
    inst.write(rows)
    inst.write(cols, columns=True)
    a, b = read_instance(rows), read_instance(cols)
    assert_same_instance(a, b)
    assert instance_fingerprint(a) == instance_fingerprint(b) == instance_fingerprint(inst)
    assert a.to_dict() == b.to_dict() == inst.to_dict()
    assert "columns" not in inst.to_dict()  # the default writer writes rows


def _cols() -> dict:
    return json.loads(json.dumps(instance_from_dict(base()).to_dict(columns=True),
                                 default=lambda a: a.tolist()))


def _set(path: str, value):
    def f(obj):
        keys = path.split(".")
        for key in keys[:-1]:
            obj = obj[key]
        if isinstance(value, tuple):  # (position, value): one entry of a column
            obj[keys[-1]][value[0]] = value[1]
        else:
            obj[keys[-1]] = value
    return f


BAD = {
    "bad-version": (_set("columns", 2), ["columns", "2"]),
    "bool-version": (_set("columns", True), ["columns"]),
    "tasks-as-rows": (_set("tasks", base()["tasks"]), ["tasks", "object of columns"]),
    "unknown-column": (_set("tasks.colour", [1, 2, 3]), ["tasks.colour", "unknown field"]),
    "unknown-edge-column": (_set("edges.weight", [1, 2]), ["edges.weight", "unknown field"]),
    "missing-id": (lambda o: o["tasks"].pop("id"), ["tasks.id", "missing"]),
    "missing-cost": (lambda o: o["tasks"].pop("cost"), ["tasks.cost", "missing"]),
    "missing-src": (lambda o: o["edges"].pop("src"), ["edges.src", "missing"]),
    "empty-id": (_set("tasks.id", (1, "")), ["tasks.id[1]", "non-empty string"]),
    "int-id": (_set("tasks.id", (2, 7)), ["tasks.id[2]", "7"]),
    "short-column": (_set("tasks.step", [0, -1]), ["tasks.step", "expected 3 entries"]),
    "not-a-list": (_set("tasks.layer", 3), ["tasks.layer", "expected a list"]),
    "unknown-device": (_set("tasks.cost.D9", [1, 1, 1]), ["D9", "tasks.cost"]),
    "cost-not-object": (_set("tasks.cost", [1, 2, 3]), ["tasks.cost", "expected an object"]),
    "edges-as-rows": (_set("edges", [{"src": "a", "dst": "b"}]), ["edges", "object of columns"]),
    "float-duration": (_set("tasks.cost.D0", (0, 2.5)), ["tasks.cost.D0[0]", "2.5"]),
    "bool-duration": (_set("tasks.cost.D0", (0, True)), ["tasks.cost.D0[0]", "True"]),
    "negative-duration": (_set("tasks.cost.D1", (0, -3)), ["tasks.cost.D1[0]", "-3"]),
    "duration-beyond-uint64": (_set("tasks.cost.D0", (0, 10**30)),  # orjson: a float
                               ["tasks.cost.D0[0]", "expected an integer"]),
    "duration-beyond-int64": (_set("tasks.cost.D0", (0, 2**63 + 5)),
                              ["tasks.cost.D0[0]", "9007199254740992"]),
    "duration-above-max-ticks": (_set("tasks.cost.D0", (1, 2**60)), ["tasks.cost.D0[1]"]),
    "no-legal-device": (_set("tasks.cost.D0", (1, -1)), ["'b'", "no legal device"]),
    "unknown-block": (_set("tasks.block", (1, 5)), ["tasks.block[1]", "5"]),
    "bad-phase": (_set("tasks.phase", (2, 2)), ["tasks.phase[2]"]),
    "negative-step": (_set("tasks.step", (2, -2)), ["tasks.step[2]", "-2"]),
    "null-kind-ok-but-int-kind": (_set("tasks.kind", (0, 3)), ["tasks.kind[0]", "3"]),
    "edge-out-of-range": (_set("edges.dst", (0, 3)), ["edges.dst[0]", "task position"]),
    "edge-negative": (_set("edges.src", (1, -1)), ["edges.src[1]"]),
    "negative-bytes": (_set("edges.bytes", (0, -5)), ["edges.bytes[0]", "-5"]),
    "edge-lengths-differ": (_set("edges.dst", [1]), ["edges.dst", "expected 2 entries"]),
    "self-loop": (_set("edges.dst", (0, 0)), ["self-loop", "'a'"]),
    "duplicate-edge": (lambda o: o["edges"].update(src=[0, 0], dst=[1, 1], bytes=[1, 1]),
                       ["duplicate edge a->b"]),
    "duplicate-task": (_set("tasks.id", (2, "a")), ["duplicate task id 'a'"]),
    "cycle": (lambda o: o["edges"].update(src=[0, 1, 2], dst=[1, 2, 0], bytes=[1, 1, 1]),
              ["cycle", "edges"]),
    "no-tasks": (lambda o: o.update(tasks={"id": [], "cost": {}}, edges={"src": [], "dst": []}),
                 ["tasks", "at least one task"]),
}


def test_columns_base_is_valid(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_cols()))
    assert_same_instance(read_instance(path), instance_from_dict(base()))


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_columns_name_file_and_field(case, tmp_path):
    mutate, needles = BAD[case]
    obj = _cols()
    mutate(obj)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert str(path) in msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    with pytest.raises(InputError):
        instance_from_dict(copy.deepcopy(obj))


def test_build_placement_writes_columns_on_request(tmp_path):
    args = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill",
            "8", "--decode", "1", "--layers", "1"]
    rows, cols = tmp_path / "r.json", tmp_path / "c.json"
    assert main([*args, "-o", str(rows)]) == 0
    assert main([*args, "--columns", "-o", str(cols)]) == 0
    assert "columns" not in json.loads(rows.read_text())
    assert json.loads(cols.read_text())["columns"] == 1
    assert instance_fingerprint(read_instance(rows)) == instance_fingerprint(read_instance(cols))


def test_empty_kind_round_trips_as_in_the_row_form(tmp_path):
    obj = base()
    obj["tasks"][1]["kind"] = ""
    inst = instance_from_dict(obj)
    path = tmp_path / "c.json"
    inst.write(path, columns=True)
    assert read_instance(path).kind == inst.kind == ("q_proj", "", None)
