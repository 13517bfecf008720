"""The binary column container of an instance (opt/placement/npz.py, problems.md §1.2c).

A ``.npz`` file reads back as the instance that was written: the same row dict and the same
fingerprint as its JSON form (bundled and built instances; non-ASCII ids, ids with a newline,
null and empty kinds, missing optional columns, no edges, an objective and SLO). Bad files —
not an archive, pickled object arrays, unknown or missing members, wrong dtypes or shapes,
values out of range, bad ids, a bad header, a bad graph — give one InputError naming the
file, the member and the first bad position, and the command line exits 2 on them.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import instances
from opt.app.cli import main
from opt.common.errors import InputError
from opt.common.fingerprint import instance_fingerprint
from opt.placement.instance import LARGE_TASKS, MAX_BYTES, MAX_LABEL, MAX_TICKS
from opt.placement.io import instance_from_dict, read_instance
from opt.placement.npz import REQUIRED
from opt.placement.npz_writer import smallest_int
from opt.problems import read_problem_instance
from tests.placement.test_instance_columns import _chain, llm  # noqa: F401  (a fixture)
from tests.placement.test_instance_format import assert_same_instance, base

ARRAYS = ("cost", "task_block", "edge_src", "edge_dst", "edge_bytes", "block_bytes", "phase",
          "step", "layer", "shard")


def _rich(ids: tuple[str, str, str] = ("ä-投影", "b", "c")) -> dict:
    """The base instance with ids ``ids``, kinds null and "", a shard label, an objective
    and an SLO."""
    obj = base()
    rename = dict(zip("abc", ids))
    for t in obj["tasks"]:
        t["id"] = rename[t["id"]]
    for e in obj["edges"]:
        e["src"], e["dst"] = rename[e["src"]], rename[e["dst"]]
    obj["tasks"][1]["kind"] = ""
    obj["tasks"][2]["shard"] = 3
    obj["objective"] = "decode_time"
    obj["slo"] = {"ttft": 100, "e2e": 1000}
    return obj


def _single() -> dict:
    """One task, no edges, no optional task field."""
    obj = base()
    obj["tasks"] = [{"id": "only", "cost": {"D0": 2}}]
    obj["edges"] = []
    return obj


CASES = {"rich": lambda: instance_from_dict(_rich()),
         "newline-id": lambda: instance_from_dict(_rich(("a\nb", "ü", "c"))),
         "ascii": lambda: instance_from_dict(base()),
         "single-no-edges": lambda: instance_from_dict(_single()),
         "chain-above-threshold": lambda: instance_from_dict(_chain(LARGE_TASKS + 1)),
         **{f"bundled:{n}": (lambda n=n: instances.load(n)) for n in instances.names(("placement", "layout"))}}


def assert_round_trip(inst, tmp_path: Path) -> None:
    """``inst`` through .npz: the same row dict as ``inst`` and the same fingerprint, arrays
    and dtypes as its JSON form read back."""
    npz, js = tmp_path / "i.npz", tmp_path / "i.json"
    inst.write(npz)
    inst.write(js)
    back, ref = read_instance(npz), read_instance(js)
    assert back.source == str(npz)
    assert back.to_dict() == inst.to_dict() == ref.to_dict()
    assert instance_fingerprint(back) == instance_fingerprint(ref) == instance_fingerprint(inst)
    assert_same_instance(back, ref)
    assert back.kind == ref.kind and back.task_ids == ref.task_ids
    for name in ARRAYS:
        a, b = getattr(back, name), getattr(ref, name)
        assert (a is None) == (b is None), name
        assert a is None or (a.dtype == b.dtype and a.flags.c_contiguous), name
    assert read_problem_instance(npz).to_dict() == inst.to_dict()


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case, tmp_path):
    assert_round_trip(CASES[case](), tmp_path)


def test_round_trip_of_built_instances(llm, catalog, cards, tmp_path):  # noqa: F811
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.builder import build_placement

    assert_round_trip(llm, tmp_path)
    p2 = build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                         Workload(prefill=8, decode=3, batch=2), BuildOptions(layers=1))
    assert_round_trip(p2, tmp_path)


def test_members_of_the_rich_case():
    inst = instance_from_dict(_rich())
    m = inst.npz_members()
    header = orjson.loads(m["header"].tobytes())
    assert header["container"] == 1 and header["kind_names"] == ["q_proj", ""]
    assert {"tasks", "edges", "columns"}.isdisjoint(header)
    assert header["objective"] == "decode_time" and header["slo"]["ttft"] == 100
    assert m["tasks.id"].tobytes().decode() == "ä-投影bc"
    assert m["tasks.id_end"].tolist() == [len("ä-投影".encode()), len("ä-投影".encode()) + 1,
                                          len("ä-投影".encode()) + 2]
    assert m["tasks.kind"].tolist() == [0, 1, -1] and m["tasks.kind"].dtype == np.int8
    assert m["tasks.cost"].dtype == np.int8 and m["edges.src"].dtype == np.uint8


def test_missing_optional_columns_are_left_out():
    m = instance_from_dict(_single()).npz_members()
    assert set(m) == set(REQUIRED)
    assert m["edges.src"].shape == (0,)


@pytest.mark.parametrize("values, dtype", [([0, 255], np.uint8), ([-1, 127], np.int8),
                                           ([-1, 128], np.int16), ([0, 2**16], np.uint32),
                                           ([-1, 2**53], np.int64), ([], np.uint8)])
def test_smallest_dtype(values, dtype):
    assert smallest_int(np.array(values, dtype=np.int64)).dtype == dtype


# ---- bad files ------------------------------------------------------------------------------

def _save(path: Path, members: dict) -> Path:
    np.savez_compressed(path, **members)
    return path


def _good() -> dict:
    """The members of the rich case, as int64 arrays where they are integer columns."""
    return dict(instance_from_dict(_rich(("a", "b", "c"))).npz_members())


def _header(**changes) -> np.ndarray:
    header = orjson.loads(_good()["header"].tobytes())
    header.update(changes)
    return np.frombuffer(orjson.dumps(header), dtype=np.uint8)


def _put(name: str, value):
    def f(m):
        m[name] = value
    return f


def _entry(name: str, index, value):
    def f(m):
        arr = m[name].astype(np.int64)
        arr[index] = value
        m[name] = arr
    return f


def _drop_header_key(key: str):
    def f(m):
        header = orjson.loads(m["header"].tobytes())
        header.pop(key)
        m["header"] = np.frombuffer(orjson.dumps(header), dtype=np.uint8)
    return f


BAD = {
    "unknown-member": (_put("tasks.colour", np.zeros(3, np.int8)),
                       ["tasks.colour", "unknown member"]),
    "header-int16": (_put("header", np.zeros(3, np.int16)), ["header", "uint8"]),
    "header-not-json": (_put("header", np.frombuffer(b"{oops", np.uint8)),
                        ["header", "malformed JSON"]),
    "header-a-list": (_put("header", np.frombuffer(b"[1]", np.uint8)),
                      ["header", "expected an object"]),
    "no-container": (_drop_header_key("container"), ["header.container", "missing"]),
    "container-2": (_put("header", _header(container=2)), ["header.container", "2"]),
    "container-true": (_put("header", _header(container=True)), ["header.container"]),
    "header-tasks": (_put("header", _header(tasks=[])), ["header.tasks", "unknown field"]),
    "schema-2": (_put("header", _header(schema=2)), ["header.schema", "unsupported schema"]),
    "serving-problem": (_put("header", _header(problem="serving_plan")), ["header.problem"]),
    "device-no-name": (_put("header", _header(devices=[{"name": "", "class": "npu"},
                                                       {"name": "D1", "class": "pim"}])),
                       ["header.devices[0].name"]),
    "bad-slo": (_put("header", _header(slo={"ttft": -5})), ["header.slo"]),
    "kind-name-int": (_put("header", _header(kind_names=["q_proj", 3])),
                      ["header.kind_names[1]", "3"]),
    "kind-names-repeat": (_put("header", _header(kind_names=["x", "x"])),
                          ["header.kind_names", "repeat"]),
    "float-cost": (_put("tasks.cost", np.ones((3, 2))), ["tasks.cost", "float64"]),
    "bool-cost": (_put("tasks.cost", np.ones((3, 2), bool)), ["tasks.cost", "bool"]),
    "str-step": (_put("tasks.step", np.array(["0", "1", "1"])), ["tasks.step", "<U1"]),
    "cost-too-wide": (_put("tasks.cost", np.ones((3, 3), np.int8)),
                      ["tasks.cost", "expected shape (3, 2)"]),
    "step-2d": (_put("tasks.step", np.zeros((3, 1), np.int8)), ["tasks.step", "shape"]),
    "src-2d": (_put("edges.src", np.zeros((2, 1), np.int8)), ["edges.src", "1-D"]),
    "dst-short": (_put("edges.dst", np.array([1], np.int8)), ["edges.dst", "expected shape (2,)"]),
    "bytes-short": (_put("edges.bytes", np.array([1], np.int8)), ["edges.bytes", "(2,)"]),
    "id-int16": (_put("tasks.id", np.frombuffer(b"abc", np.uint8).astype(np.int16)),
                 ["tasks.id", "uint8"]),
    "id-end-2d": (_put("tasks.id_end", np.array([[1, 2, 3]])), ["tasks.id_end", "1-D"]),
    "id-end-zero": (_entry("tasks.id_end", 0, 0), ["tasks.id_end[0]", "byte offset 0"]),
    "id-end-repeats": (_put("tasks.id_end", np.array([1, 1, 3])),
                       ["tasks.id_end[1]", "increase strictly"]),
    "id-end-decreases": (_put("tasks.id_end", np.array([2, 1, 3])), ["tasks.id_end[1]"]),
    "id-end-short-of-blob": (_put("tasks.id", np.frombuffer(b"abcd", np.uint8)),
                             ["tasks.id_end[2]", "not the length of tasks.id (4 bytes)"]),
    "no-id-ends": (_put("tasks.id_end", np.zeros(0, np.int8)), ["tasks.id_end", "no offsets"]),
    "id-not-utf8": (_put("tasks.id", np.frombuffer(b"a\xffc", np.uint8)),
                    ["tasks.id[1]", "not valid UTF-8"]),
    "id-end-inside-a-character": (
        lambda m: m.update({"tasks.id": np.frombuffer("äbc".encode(), np.uint8),
                            "tasks.id_end": np.array([1, 3, 4])}),
        ["tasks.id_end[0]", "inside a UTF-8 character"]),
    "duplicate-id": (_put("tasks.id", np.frombuffer(b"aba", np.uint8)),
                     ["duplicate task id 'a'"]),
    "cost-beyond-int64": (_put("tasks.cost", np.array([[2**63 + 5, 1], [1, 1], [1, 1]],
                                                      np.uint64)),
                          ["tasks.cost[0, D0]", "duration 9223372036854775813"]),
    "no-legal-device": (_entry("tasks.cost", 1, -1), ["'b'", "no legal device"]),
    "kind-index": (_entry("tasks.kind", 2, 2), ["tasks.kind[2]", "kind index 2", "-1..1"]),
    "self-loop": (_entry("edges.dst", 0, 0), ["self-loop", "'a'"]),
    "duplicate-edge": (lambda m: m.update({"edges.src": np.array([0, 0]),
                                           "edges.dst": np.array([1, 1])}),
                       ["duplicate edge a->b"]),
    "cycle": (lambda m: m.update({"edges.src": np.array([0, 1, 2]),
                                  "edges.dst": np.array([1, 2, 0]),
                                  "edges.bytes": np.array([1, 1, 1])}), ["cycle", "edges"]),
    "no-tasks": (lambda m: m.update({"tasks.id": np.zeros(0, np.uint8),
                                     "tasks.id_end": np.zeros(0, np.int8),
                                     "tasks.cost": np.zeros((0, 2), np.int8),
                                     "edges.src": np.zeros(0, np.int8),
                                     "edges.dst": np.zeros(0, np.int8),
                                     **{k: np.zeros(0, np.int8) for k in m
                                        if k.startswith("tasks.") and k not in
                                        ("tasks.id", "tasks.id_end", "tasks.cost")},
                                     "edges.bytes": np.zeros(0, np.int8)}),
                 ["tasks", "at least one task"]),
    **{f"missing-{name}": ((lambda name: lambda m: m.pop(name))(name), [name, "missing"])
       for name in REQUIRED},
}


def test_good_members_read(tmp_path):
    inst = read_instance(_save(tmp_path / "ok.npz", _good()))
    assert inst.task_ids == ("a", "b", "c") and inst.kind == ("q_proj", "", None)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_file_names_file_member_and_position(case, tmp_path):
    mutate, needles = BAD[case]
    members = _good()
    mutate(members)
    path = _save(tmp_path / "bad.npz", members)
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def _columns(m: dict, n_blocks: int, n_kinds: int) -> dict[str, tuple[int, int]]:
    """Each integer column of the members ``m`` and its legal range."""
    n, blob = len(m["tasks.id_end"]), len(m["tasks.id"])
    ranges = {"tasks.cost": (-1, MAX_TICKS), "tasks.id_end": (1, blob),
              "tasks.block": (-1, n_blocks - 1), "tasks.phase": (-1, 1),
              "tasks.step": (-1, MAX_LABEL), "tasks.layer": (-1, MAX_LABEL),
              "tasks.shard": (-1, MAX_LABEL), "tasks.kind": (-1, n_kinds - 1),
              "edges.src": (0, n - 1), "edges.dst": (0, n - 1), "edges.bytes": (0, MAX_BYTES)}
    return {k: r for k, r in ranges.items() if k in m}


CHAIN = instance_from_dict(_chain(40))
CHAIN_MEMBERS = CHAIN.npz_members()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_entry_out_of_range_is_named(data, tmp_path_factory):
    """One entry of one column moved just outside its range: the error names the member and
    the entry (``tasks.cost[i, D1]``, ``edges.src[k]``)."""
    cols = _columns(CHAIN_MEMBERS, len(CHAIN.block_ids), 1)
    name = data.draw(st.sampled_from(sorted(cols)))
    lo, hi = cols[name]
    arr = CHAIN_MEMBERS[name].astype(np.int64)
    at = tuple(data.draw(st.integers(0, s - 1)) for s in arr.shape)
    arr[at] = data.draw(st.sampled_from([lo - 1, lo - 7, hi + 1, hi + 1000]))
    path = tmp_path_factory.mktemp("oor") / "bad.npz"
    _save(path, {**CHAIN_MEMBERS, name: arr})
    with pytest.raises(InputError) as err:
        read_instance(path)
    where = (f"[{at[0]}, {CHAIN.devices[at[1]].name}]" if name == "tasks.cost"
             else f"[{at[0]}]")
    assert f"field '{name}{where}'" in str(err.value)
    assert f"{arr[at]} is outside {lo}..{hi}" in str(err.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1,
                      max_size=4))
@example(flips=[(31658, 61)])
@example(flips=[(2882, 1)])
def test_damaged_bytes_give_an_input_error_or_the_instance(flips, tmp_path_factory):
    """Bytes of a good file changed: an InputError naming the file, or (a byte the archive
    does not check) the same instance — never another exception. The example is one hypothesis
    found: a byte of the zip directory that drops its last entry (``edges.bytes``, an
    optional member), which read as an instance without edge payloads until the reader
    checked that the members fill the file up to the directory; the second, a damaged member
    offset (negative), made that check seek before the file's start."""
    folder = tmp_path_factory.mktemp("flip")
    good = _save(folder / "good.npz", CHAIN_MEMBERS).read_bytes()
    data = bytearray(good)
    for pos, x in flips:
        data[pos % len(data)] ^= x
    path = folder / "bad.npz"
    path.write_bytes(bytes(data))
    try:
        inst = read_instance(path)
    except InputError as exc:
        assert str(exc).startswith(f"{path}: ")
    else:
        assert instance_fingerprint(inst) == instance_fingerprint(CHAIN)


class _Touch:
    """Unpickled, it creates the file ``path``: the proof that something was unpickled."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


@pytest.mark.parametrize("member", ["tasks.kind", "header", "tasks.colour"])
def test_pickled_object_arrays_are_refused_unread(member, tmp_path):
    flag = tmp_path / "unpickled"
    path = tmp_path / "pickled.npz"
    members = _good()
    members[member] = np.array([_Touch(flag)] * 3, dtype=object)
    _save(path, members)
    with pytest.raises(InputError) as err:
        read_instance(path)
    assert str(path) in str(err.value) and member in str(err.value)
    assert not flag.exists()
    with np.load(path, allow_pickle=True) as z:  # the file does hold a live pickle
        z[member]
    assert flag.exists()


def _zip_with_raw_member(path: Path) -> Path:
    _save(path, {k: v for k, v in _good().items() if k != "tasks.kind"})
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("tasks.kind", b"not an array")
    return path


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.write_bytes(b"not a zip at all"), "cannot read: not a zip archive"),
    (lambda p: p.write_bytes(_save(p, _good()).read_bytes()[:300]), "cannot read: not a zip"),
    (lambda p: p.write_bytes(b""), "cannot read: not a zip"),
    (lambda p: p.write_text('{"schema": 1}'), "cannot read: not a zip"),
    (lambda p: np.save(open(p, "wb"), np.arange(3)), "cannot read: not a zip"),
    (lambda p: p.write_bytes(b"junk" + _save(p, _good()).read_bytes()),
     "cannot read: not a NumPy .npz archive"),
    (_zip_with_raw_member, "field 'tasks.kind': cannot read: not a NumPy array"),
])
def test_unreadable_files_are_one_input_error(make, needle, tmp_path):
    path = tmp_path / "x.npz"
    make(path)
    with pytest.raises(InputError) as err:
        read_instance(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and needle in msg and "\n" not in msg


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_problem_instance(tmp_path / "none.npz")


# ---- command line ---------------------------------------------------------------------------

BUILD = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "8",
         "--decode", "2", "--layers", "1"]


def test_cli_builds_solves_and_validates_npz(capsys, tmp_path):
    npz, js, res = tmp_path / "i.npz", tmp_path / "i.json", tmp_path / "r.json"
    assert main([*BUILD, "-o", str(npz)]) == 0
    assert "written as npz in" in capsys.readouterr().out
    assert main([*BUILD, "-o", str(js)]) == 0
    assert instance_fingerprint(read_instance(npz)) == instance_fingerprint(read_instance(js))
    assert main(["solve", str(npz), "--method", "heft", "-o", str(res)]) == 0
    assert main(["validate", str(npz), str(res)]) == 0
    assert main(["lower-bound", str(npz)]) == 0


def test_cli_refuses_rows_in_npz(capsys, tmp_path):
    assert main([*BUILD, "--tables", "rows", "-o", str(tmp_path / "i.npz")]) == 2
    err = capsys.readouterr().err
    assert "tables" in err and ".npz" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "i.npz").exists()


def test_cli_bad_npz_exits_2_with_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 truncated")
    assert main(["solve", str(bad), "--method", "heft"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "cannot read" in err
    members = _good()
    members["edges.src"] = np.array([0, 7])
    _save(bad, members)
    assert main(["solve", str(bad), "--method", "heft"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{bad}: field 'edges.src[1]'" in err


def test_cli_refuses_a_serving_plan_npz(capsys, tmp_path):
    out = tmp_path / "s.npz"
    assert main(["build", "serving-plan", "--model", "llama-2-7b", "--gpus", "H100",
                 "--context", "1024", "--slo-ms", "50", "-o", str(out)]) == 2
    assert "placement instances only" in capsys.readouterr().err and not out.exists()
