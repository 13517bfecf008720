"""The P1 instance reader and writer (opt/placement/io.py, instance.py, problems.md §1.1, §1.2a).

Round trips (dict and .json/.json.gz files) preserve every array and the metadata; bad input
gives one InputError naming the file and the offending field, task, edge, block or device; a
34k-task LLM instance goes through .json.gz in a few seconds.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import instances
from heuristics.placement.list_scheduler import heft
from opt.common.errors import InputError
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import PHASES, PlacementInstance
from opt.placement.io import instance_from_dict, read_instance
from opt.placement.validator import validate_placement

# ---------------------------------------------------------------------------------------------
# comparison

def _opt(a: np.ndarray | None, n: int, fill: int = -1) -> np.ndarray:
    return np.full(n, fill, dtype=np.int64) if a is None else np.asarray(a, dtype=np.int64)


def _loads(inst: PlacementInstance) -> dict[str, np.ndarray]:
    """block_load with formats that load nowhere dropped (the JSON cannot tell them apart)."""
    return {f: a for f, a in inst.block_load.items() if (a >= 0).any()}


def assert_same_instance(a: PlacementInstance, b: PlacementInstance) -> None:
    n = a.n_tasks
    assert a.time_unit == b.time_unit
    assert a.devices == b.devices
    la, lb = a.links, b.links
    assert (la.topology, la.contention, la.default_latency) == \
        (lb.topology, lb.contention, lb.default_latency)
    assert la.default_bandwidth == pytest.approx(lb.default_bandwidth)
    assert [(s, d, int(x), float(w)) for s, d, x, w in la.pairs] == \
        [(s, d, int(x), float(w)) for s, d, x, w in lb.pairs]
    np.testing.assert_array_equal(la.latency, lb.latency)
    np.testing.assert_array_equal(la.bandwidth, lb.bandwidth)
    assert a.task_ids == b.task_ids
    np.testing.assert_array_equal(a.cost, b.cost)
    np.testing.assert_array_equal(a.task_block, b.task_block)
    np.testing.assert_array_equal(a.edge_src, b.edge_src)
    np.testing.assert_array_equal(a.edge_dst, b.edge_dst)
    np.testing.assert_array_equal(a.edge_bytes, b.edge_bytes)
    assert a.block_ids == b.block_ids
    np.testing.assert_array_equal(a.block_bytes, b.block_bytes)
    loads_a, loads_b = _loads(a), _loads(b)
    assert loads_a.keys() == loads_b.keys()
    for fmt in loads_a:
        np.testing.assert_array_equal(loads_a[fmt], loads_b[fmt])
    np.testing.assert_array_equal(a.load_duration, b.load_duration)
    assert a.layout.formats == b.layout.formats
    assert dict(a.layout.fixed) == dict(b.layout.fixed)
    assert a.layout.default == b.layout.default
    assert dict(a.layout.storage_multiplier) == dict(b.layout.storage_multiplier)
    assert a.layout.memory_budget == b.layout.memory_budget
    assert (a.kind or (None,) * n) == (b.kind or (None,) * n)
    for name in ("phase", "step", "layer", "shard"):
        np.testing.assert_array_equal(_opt(getattr(a, name), n), _opt(getattr(b, name), n),
                                      err_msg=name)
    assert json.loads(json.dumps(dict(a.meta))) == json.loads(json.dumps(dict(b.meta)))


# ---------------------------------------------------------------------------------------------
# round trips

@pytest.fixture(scope="module")
def llm_tp2(catalog, cards) -> PlacementInstance:
    return build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(prefill=16, decode=2, batch=1), BuildOptions(layers=1, tp=2))


def _cases(llm_tp2):
    return {"heft": instances.load("heft-topcuoglu-2002"),
            "sinnen": instances.load("sinnen-Nodes_8_Random-p2"),
            "llm-tp2": llm_tp2}


def test_llm_tp2_has_host_and_allreduce(llm_tp2):
    assert "HOST" in llm_tp2.device_index
    assert any(k and k.startswith("allreduce") for k in llm_tp2.kind)
    assert len(llm_tp2.block_ids) > 0
    assert (llm_tp2.shard >= 0).any()


@pytest.mark.parametrize("name", ["heft", "sinnen", "llm-tp2"])
def test_dict_round_trip(name, llm_tp2):
    inst = _cases(llm_tp2)[name]
    back = instance_from_dict(inst.to_dict())
    assert_same_instance(inst, back)
    # and the dict form is a fixed point
    assert back.to_dict() == inst.to_dict()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("name", ["heft", "sinnen", "llm-tp2"])
def test_file_round_trip(name, suffix, llm_tp2, tmp_path):
    inst = _cases(llm_tp2)[name]
    path = tmp_path / f"{name}{suffix}"
    inst.write(path)
    if suffix.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
    else:
        json.loads(path.read_text())
    back = read_instance(path)
    assert back.source == str(path)
    assert_same_instance(inst, back)
    # a schedule of the original is a schedule of the copy, with the same makespan
    sol = heft(inst)
    assert validate_placement(back, sol).makespan == validate_placement(inst, sol).makespan


def test_round_trip_of_hand_written_instance_with_every_field(tmp_path):
    obj = base()
    obj["layout"] = {"formats": ["linear", "npu_opt"], "fixed": {"W0": "npu_opt"},
                     "default": "linear", "storage_multiplier": {"npu_opt": 1.25},
                     "memory_budget": 1000}
    obj["blocks"][0]["load"] = {"D0": {"linear": 3, "npu_opt": 2}, "D1": {"npu_opt": 4}}
    inst = instance_from_dict(obj)
    assert inst.block_format == ("npu_opt",)
    assert inst.load_duration.tolist() == [[2, 4]]
    assert inst.links.latency.tolist() == [[0, 2], [1, 0]]
    assert inst.links.bandwidth[0, 1] == 1.5 and inst.links.bandwidth[1, 0] == 2.0
    assert inst.phase.tolist() == [PHASES.index("prefill"), -1, PHASES.index("decode")]
    assert inst.devices[1].weight_capacity is None
    path = tmp_path / "x.json.gz"
    inst.write(path)
    assert_same_instance(inst, read_instance(path))


def test_defaults_for_missing_optional_fields():
    obj = {"schema": 1, "problem": "placement",
           "devices": [{"name": "P", "class": "cpu"}],
           "tasks": [{"id": "a", "cost": {"P": 1}}, {"id": "b", "cost": {"P": 2}}]}
    inst = instance_from_dict(obj)
    assert inst.time_unit == "ns"
    assert inst.n_edges == 0 and inst.block_ids == ()
    assert inst.links.topology == "full" and inst.links.contention is True
    assert inst.devices[0].weight_capacity is None


# ---------------------------------------------------------------------------------------------
# bad input

def base() -> dict:
    return {
        "schema": 1, "problem": "placement", "time_unit": "unit",
        "devices": [{"name": "D0", "class": "npu", "weight_capacity": 100},
                    {"name": "D1", "class": "pim", "weight_capacity": None}],
        "links": {"topology": "full", "contention": True,
                  "default": {"latency": 1, "bandwidth": 2.0},
                  "pairs": [{"src": "D0", "dst": "D1", "latency": 2, "bandwidth": 1.5}]},
        "tasks": [{"id": "a", "cost": {"D0": 3, "D1": 5}, "block": "W0", "kind": "q_proj",
                   "phase": "prefill", "step": 0, "layer": 0},
                  {"id": "b", "cost": {"D0": 2}, "block": None},
                  {"id": "c", "cost": {"D1": 4}, "block": None, "phase": "decode", "step": 1}],
        "edges": [{"src": "a", "dst": "b", "bytes": 4}, {"src": "b", "dst": "c", "bytes": 0}],
        "blocks": [{"id": "W0", "bytes": 10, "load": {"D0": {"linear": 3}, "D1": {"linear": 4}}}],
        "layout": {"default": "linear"},
        "meta": {"source": "test"},
    }


def test_base_is_valid(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(base()))
    inst = read_instance(path)
    assert inst.n_tasks == 3 and inst.n_edges == 2


def _set(path: str, value):
    """Mutator: set a dotted path (list indices as integers) to ``value``."""
    def f(obj):
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            obj = obj[k]
        obj[keys[-1]] = value
    return f


def _append(key: str, value):
    def f(obj):
        obj[key].append(value)
    return f


def _cycle(obj):
    obj["edges"].append({"src": "c", "dst": "a", "bytes": 1})


BAD = {
    # case: (mutation, substrings that the message must contain)
    "cycle": (_cycle, ["cycle", "edges"]),
    "no-legal-device": (_set("tasks.1.cost", {}), ["'b'", "no legal device", "tasks[1].cost"]),
    "edge-unknown-task": (_set("edges.0.dst", "zz"), ["zz", "edges[0].dst"]),
    "edge-unknown-src": (_set("edges.1.src", "yy"), ["yy", "edges[1].src"]),
    "negative-duration": (_set("tasks.0.cost.D1", -3), ["'a'", "negative", "tasks[0].cost"]),
    "negative-edge-bytes": (_set("edges.0.bytes", -5), ["negative", "edges[0].bytes"]),
    "unknown-device-in-cost": (_set("tasks.1.cost", {"D9": 1}), ["D9", "'b'", "tasks[1].cost"]),
    "unknown-block": (_set("tasks.1.block", "W9"), ["W9", "'b'", "tasks[1].block"]),
    "unknown-schema": (_set("schema", 2), ["schema", "2"]),
    "missing-schema": (lambda o: o.pop("schema"), ["schema"]),
    "wrong-problem": (_set("problem", "serving_plan"), ["problem", "serving_plan"]),
    "duplicate-task": (_append("tasks", {"id": "a", "cost": {"D0": 1}}),
                       ["duplicate task id 'a'", "tasks"]),
    "duplicate-edge": (_append("edges", {"src": "a", "dst": "b", "bytes": 1}),
                       ["duplicate edge a->b", "edges"]),
    "self-loop": (_append("edges", {"src": "b", "dst": "b", "bytes": 1}),
                  ["self-loop", "'b'", "edges[2]"]),
    "unknown-top-level-key": (_set("colour", "blue"), ["colour", "unknown field"]),
    "unknown-task-key": (_set("tasks.1.durations", {}), ["tasks[1].durations", "unknown field"]),
    "unknown-edge-key": (_set("edges.0.weight", 3), ["edges[0].weight", "unknown field"]),
    "missing-cost": (lambda o: o["tasks"][1].pop("cost"), ["tasks[1].cost", "missing"]),
    "unknown-device-in-load": (_set("blocks.0.load.D9", {"linear": 1}), ["D9", "blocks[0].load"]),
    "unknown-device-in-pairs": (_set("links.pairs.0.dst", "D9"), ["D9", "links.pairs[0]"]),
    "unknown-topology": (_set("links.topology", "ring"), ["ring", "links.topology"]),
    "zero-bandwidth": (_set("links.default.bandwidth", 0), ["links.default.bandwidth"]),
    "unknown-class": (_set("devices.1.class", "tpu"), ["tpu", "D1"]),
    "duplicate-device": (_append("devices", {"name": "D0", "class": "cpu"}),
                         ["duplicate device name 'D0'", "devices"]),
    "non-integer-duration": (_set("tasks.0.cost.D0", 2.5), ["2.5", "tasks[0].cost.D0"]),
    "bad-phase": (_set("tasks.2.phase", "warmup"), ["warmup", "tasks[2].phase"]),
    "blocked-task-without-load": (_set("blocks.0.load", {"D0": {"linear": 3}}),
                                  ["'a'", "W0", "D1", "tasks[0].block"]),
    "unknown-time-unit": (_set("time_unit", "fortnight"), ["fortnight", "time_unit"]),
    # an empty task graph is rejected (instance.py docstring, "Limits")
    "no-tasks": (lambda o: o.update(tasks=[], edges=[]), ["tasks", "at least one task"]),
    # item 2: magnitudes beyond the documented limits, before any solver sees them
    "duration-beyond-int64": (_set("tasks.0.cost.D0", 10**30), ["tasks[0].cost", "9007199254740992"]),
    "duration-above-max-ticks": (_set("tasks.1.cost.D0", 2**60),
                                 ["tasks[1].cost.D0", "9007199254740992"]),
    "serial-horizon-above-max": (lambda o: [t["cost"].update(dict.fromkeys(t["cost"], 2**52))
                                            for t in o["tasks"]],
                                 ["field 'tasks'", "serial horizon", "maximum"]),
    "bytes-above-max": (_set("edges.0.bytes", 2**60), ["edges[0].bytes", "9007199254740992"]),
    "capacity-above-max": (_set("devices.0.weight_capacity", 2**60),
                           ["devices[0].weight_capacity", "9007199254740992"]),
    # the bulk reader once took an explicit −1 (or −5) step for "absent"
    "negative-step": (_set("tasks.2.step", -1), ["tasks[2].step", "-1"]),
    "negative-layer": (_set("tasks.0.layer", -5), ["tasks[0].layer", "-5"]),
    "shard-above-max": (_set("tasks.1.shard", 2**62 + 1), ["tasks[1].shard"]),
}


def _write(tmp_path: Path, obj, suffix: str = ".json") -> Path:
    path = tmp_path / f"bad{suffix}"
    data = json.dumps(obj, indent=1).encode()
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    return path


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_names_file_and_field(case, suffix, tmp_path):
    mutate, needles = BAD[case]
    obj = base()
    mutate(obj)
    path = _write(tmp_path, obj, suffix)
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert str(path) in msg
    assert err.value.source == str(path)
    for needle in needles:
        assert needle in msg, (needle, msg)
    # the same dict without a file gives the same kind of error, without a file name
    with pytest.raises(InputError):
        instance_from_dict(copy.deepcopy(obj))


def test_cycle_names_a_task_on_it(tmp_path):
    obj = base()
    _cycle(obj)
    path = _write(tmp_path, obj)
    with pytest.raises(InputError) as err:
        read_instance(path)
    assert any(f"'{t}'" in str(err.value) for t in ("a", "b", "c"))


def _cycle_feeding_an_earlier_task(obj):
    # tasks: d (listed first), a, b, c with the cycle a -> b -> c -> a and a -> d
    obj["tasks"].insert(0, {"id": "d", "cost": {"D0": 1}})
    obj["edges"] += [{"src": "c", "dst": "a", "bytes": 1}, {"src": "a", "dst": "d", "bytes": 1}]


def test_cycle_message_names_a_task_on_the_cycle_not_one_it_feeds(tmp_path):
    obj = base()
    _cycle_feeding_an_earlier_task(obj)
    path = _write(tmp_path, obj)
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert str(path) in msg and "cycle" in msg
    assert any(f"'{t}'" in msg for t in ("a", "b", "c")), msg


@pytest.mark.parametrize("where", ["tasks.0.cost.D0", "edges.0.bytes", "tasks.0.step"])
def test_boolean_where_an_integer_is_required_is_rejected(where, tmp_path):
    obj = base()
    _set(where, True)(obj)
    path = _write(tmp_path, obj)
    with pytest.raises(InputError) as err:
        read_instance(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_malformed_json_names_file_and_line(suffix, tmp_path):
    text = '{"schema": 1,\n "problem": "placement",\n "devices": [,]\n}\n'
    path = tmp_path / f"broken{suffix}"
    data = text.encode()
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert str(path) in msg
    assert "line 3" in msg


def test_unreadable_files_name_the_file(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError) as err:
        read_instance(missing)
    assert str(missing) in str(err.value)
    fake_gz = tmp_path / "plain.json.gz"
    fake_gz.write_text(json.dumps(base()))
    with pytest.raises(InputError) as err:
        read_instance(fake_gz)
    assert str(fake_gz) in str(err.value)
    not_obj = tmp_path / "list.json"
    not_obj.write_text("[1, 2]")
    with pytest.raises(InputError) as err:
        read_instance(not_obj)
    assert str(not_obj) in str(err.value)


# ---------------------------------------------------------------------------------------------
# a large instance

def test_large_instance_round_trip_through_gzip(catalog, cards, tmp_path):
    """(Read and write times per format: benchmarks/instance_formats.py.)"""
    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                           Workload(prefill=128, decode=64, batch=4), BuildOptions())
    assert inst.n_tasks > 30_000
    path = tmp_path / "big.json.gz"
    inst.write(path)
    back = read_instance(path)
    assert_same_instance(inst, back)


def test_limits_hold_for_columnar_construction_too():
    """build_instance (builders, DOT import) applies the same limits as the reader."""
    from opt.placement.instance import MAX_TICKS, Device
    from opt.placement.instance_checks import TaskColumns, build_instance, make_links

    devs = [Device("D0", "cpu")]

    def make(ids, cost):
        return build_instance(
            time_unit="unit", devices=devs, links=make_links(devs),
            tasks=TaskColumns(ids, np.asarray(cost, dtype=object)))

    with pytest.raises(InputError, match="at least one task") as err:
        make([], np.zeros((0, 1)))
    assert err.value.field == "tasks"
    with pytest.raises(InputError, match="exceeds the maximum") as err:
        make(["a"], [[10**30]])
    assert err.value.field == "tasks.cost"
    with pytest.raises(InputError, match="serial horizon"):
        make(["a", "b"], [[MAX_TICKS], [2]])
    assert make(["a"], [[MAX_TICKS]]).cost[0, 0] == MAX_TICKS
