"""Column tables of an instance file (opt/placement/columns.py, problems.md §1.2b).

A file written with ``columns=True`` reads back as the same instance as its row form (same
fingerprint, same row dict); the writer chooses columns by itself above ``LARGE_TASKS`` tasks
and rows up to it (``to_dict`` writes rows unless told otherwise), and ``hetopt build
placement --tables`` picks or forces the layout; bad column data gives an InputError naming
the file, the column and the first offending position.
"""

from __future__ import annotations

import copy
import gzip
import json
from importlib import resources

import pytest

import instances
from opt.app.cli import main
from opt.common.errors import InputError
from opt.common.fingerprint import instance_fingerprint
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import LARGE_TASKS
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
    inst.write(rows, columns=False)
    inst.write(cols, columns=True)
    a, b = read_instance(rows), read_instance(cols)
    assert_same_instance(a, b)
    assert instance_fingerprint(a) == instance_fingerprint(b) == instance_fingerprint(inst)
    assert a.to_dict() == b.to_dict() == inst.to_dict()
    assert "columns" not in inst.to_dict()  # to_dict writes rows by default


def _chain(n: int) -> dict:
    """A synthetic instance of ``n`` tasks in a chain on two devices (every optional task
    field present on some task), as its row dict."""
    tasks = [{"id": f"t{i}", "cost": {"D0": 1 + i % 3, **({"D1": 2} if i % 2 else {})},
              "block": "W0" if i == 0 else None, "kind": "k" if i % 5 else None,
              "phase": "prefill" if i < n // 2 else "decode", "step": i // 10, "layer": i % 4}
             for i in range(n)]
    return {"schema": 1, "problem": "placement", "time_unit": "unit",
            "devices": [{"name": "D0", "class": "npu"}, {"name": "D1", "class": "pim"}],
            "links": {"topology": "full", "contention": True,
                      "default": {"latency": 1, "bandwidth": 2.0}},
            "tasks": tasks,
            "edges": [{"src": f"t{i}", "dst": f"t{i + 1}", "bytes": i % 7} for i in range(n - 1)],
            "blocks": [{"id": "W0", "bytes": 10, "load": {"D0": {"linear": 3}}}]}


def _layout(path) -> tuple[str, bool]:
    """(``columns`` or ``rows``, whether the JSON is indented) of an instance file."""
    text = path.read_text()
    return ("columns" if "columns" in json.loads(text) else "rows"), "\n" in text.rstrip()


@pytest.fixture(scope="module")
def at_threshold():
    """Instances of LARGE_TASKS and LARGE_TASKS + 1 tasks."""
    return {n: instance_from_dict(_chain(n)) for n in (LARGE_TASKS, LARGE_TASKS + 1)}


def test_threshold_is_the_documented_one():
    assert LARGE_TASKS == 2000  # problems.md §1.2b, `build placement --tables` help


@pytest.mark.parametrize("extra, layout", [(0, "rows"), (1, "columns")])
def test_automatic_layout_switches_above_the_threshold(at_threshold, extra, layout, tmp_path):
    inst = at_threshold[LARGE_TASKS + extra]
    path = tmp_path / "auto.json"
    inst.write(path)
    # one threshold for both decisions: rows come indented, columns compact
    assert _layout(path) == (layout, layout == "rows")
    assert inst.writes_columns() is (layout == "columns")
    back = read_instance(path)
    assert_same_instance(back, inst)
    assert instance_fingerprint(back) == instance_fingerprint(inst)
    assert "columns" not in inst.to_dict()  # to_dict stays rows whatever the size


@pytest.mark.parametrize("extra", [0, 1])
@pytest.mark.parametrize("columns", [True, False])
def test_forced_layout_whatever_the_size(at_threshold, extra, columns, tmp_path):
    inst = at_threshold[LARGE_TASKS + extra]
    path = tmp_path / "forced.json.gz"
    inst.write(path, columns=columns)
    obj = json.loads(gzip.decompress(path.read_bytes()))
    assert ("columns" in obj) is columns and inst.writes_columns(columns) is columns
    back = read_instance(path)
    assert_same_instance(back, inst)
    assert instance_fingerprint(back) == instance_fingerprint(inst)
    assert back.to_dict() == inst.to_dict()


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


BUILD = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "8",
         "--layers", "1"]


@pytest.mark.parametrize("decode, flags, layout", [
    ("1", [], "rows"), ("1", ["--tables", "auto"], "rows"), ("1", ["--tables", "rows"], "rows"),
    ("1", ["--tables", "columns"], "columns"), ("1", ["--columns"], "columns"),
    ("100", [], "columns"), ("100", ["--tables", "rows"], "rows")])
def test_build_placement_tables(decode, flags, layout, capsys, tmp_path):
    path = tmp_path / "i.json"
    assert main([*BUILD, "--decode", decode, *flags, "-o", str(path)]) == 0
    assert f"written as {layout} in" in capsys.readouterr().out
    inst = read_instance(path)
    assert (inst.n_tasks > LARGE_TASKS) is (decode == "100")  # both sides of the threshold
    assert _layout(path)[0] == layout
    ref = tmp_path / "ref.json"
    assert main([*BUILD, "--decode", decode, "--json", "--tables",
                 "rows" if layout == "columns" else "columns", "-o", str(ref)]) == 0
    assert json.loads(capsys.readouterr().out)["tables"] != layout
    assert instance_fingerprint(read_instance(ref)) == instance_fingerprint(inst)


def test_build_placement_refuses_an_unknown_layout(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main([*BUILD, "--decode", "1", "--tables", "wide", "-o", str(tmp_path / "i.json")])
    assert exc.value.code == 2
    assert "--tables" in capsys.readouterr().err
    assert not (tmp_path / "i.json").exists()


def test_build_placement_help_states_the_threshold(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["build", "placement", "--help"])
    assert exc.value.code == 0
    assert f"{LARGE_TASKS:,} tasks" in " ".join(capsys.readouterr().out.split())


def test_empty_kind_round_trips_as_in_the_row_form(tmp_path):
    obj = base()
    obj["tasks"][1]["kind"] = ""
    inst = instance_from_dict(obj)
    path = tmp_path / "c.json"
    inst.write(path, columns=True)
    assert read_instance(path).kind == inst.kind == ("q_proj", "", None)


def test_bundled_instances_stay_rows():
    """The bundled placement instances are small, so their generator
    (benchmarks/make_placement_instances.py, the default writer) keeps them as rows."""
    for name in instances.names(("placement", "layout")):
        inst = instances.load(name)
        assert inst.n_tasks <= LARGE_TASKS and not inst.writes_columns(), name
        text = resources.files(instances).joinpath(instances.info(name).file).read_text()
        assert "columns" not in json.loads(text), name
