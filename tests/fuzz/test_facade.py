"""Fuzz the public API (opt.api, docs/api.md "Arguments and file names"): every function, called
with hostile values in some of its arguments (None, wrong types, NaN and infinities, integers
beyond int64, negative numbers, empty, long and odd Unicode strings, lists where a scalar
belongs, paths to a missing file, a folder or a binary file), returns normally or raises
InputError (UnknownNameError included) — never another exception.

Seeded (``derandomize``) and small: every workload is a few hundred tasks at most and every
solve is bounded by a time limit, so no example runs long; ``pytest -m slow tests/fuzz`` runs
:data:`LONG` examples per function instead of :data:`SHORT`.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opt.api as hetopt
from opt.placement.build_options import paper_precision

SHORT, LONG = 40, 400
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

P1, P2, P3 = "heft-topcuoglu-2002", "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5", \
    "p3-tiny-gemma-a100-l40s"
INSTANCES = {name: hetopt.load_instance(name) for name in (P1, P2, P3)}
RESULTS = {P1: hetopt.solve(INSTANCES[P1], "heft"),
           P2: hetopt.solve(INSTANCES[P2], "bifocal/wla"),
           P3: hetopt.solve(INSTANCES[P3], "bnb", time_limit=10)}

# ---- files: good ones and hostile ones ------------------------------------------------------

DIR = Path(tempfile.mkdtemp(prefix="hetopt-fuzz-facade-"))
OUT = DIR / "out"
OUT.mkdir()
for _name, _inst in INSTANCES.items():
    _inst.write(DIR / f"{_name}.json")
    RESULTS[_name].write(DIR / f"{_name}.result.json")
INSTANCES[P1].write(DIR / f"{P1}.npz")
GOOD_INSTANCE_FILES = [DIR / f"{n}.json" for n in INSTANCES] + [DIR / f"{P1}.npz"]
GOOD_RESULT_FILES = [DIR / f"{n}.result.json" for n in INSTANCES]
(DIR / "binary.json").write_bytes(bytes(range(256)) * 4)
(DIR / "binary.npz").write_bytes(b"PK\x03\x04" + bytes(range(256)))
(DIR / "binary.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
(DIR / "empty.json").write_bytes(b"")
(DIR / "folder.json").mkdir()
HOSTILE_PATHS = [DIR / "missing.json", DIR / "no-folder" / "x.json", DIR / "folder.json",
                 DIR / "binary.json", DIR / "binary.npz", DIR / "binary.json.gz",
                 DIR / "empty.json", DIR / ("n" * 300 + ".json"), DIR / "ünï☃\u202e.json",
                 GOOD_RESULT_FILES[0], GOOD_INSTANCE_FILES[0], DIR]
HOSTILE_PATHS += [str(p) for p in HOSTILE_PATHS] + ["", ".", "/", "/dev/null", "-"]

# ---- hostile values -------------------------------------------------------------------------

HOSTILE_SCALARS = [None, True, False, -1, 0, -(2 ** 31), 2 ** 63, -(2 ** 70), 10 ** 400, 1.5,
                   -0.5, 0.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, "", " ",
                   "\0", "a\0b", "x" * 5000, "ünïcødé ☃ \u202e", "1,2", "-1", "nan", "0x10",
                   b"bytes", [], [None], ["HP32"], [1, "a"], [-1], [2 ** 63], (1,), {},
                   {"a": 1}, {1, 2}, object(), hetopt.Status.ERROR, hetopt.Problem.SERVING]
HOSTILE = st.one_of(st.sampled_from(HOSTILE_SCALARS), st.sampled_from(HOSTILE_PATHS),
                    st.sampled_from(list(INSTANCES.values()) + list(RESULTS.values())),
                    st.text(max_size=20), st.integers(-(2 ** 70), 2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True))


class _Option:
    """A typed option argument (a builder's ``Workload``, ``BuildOptions`` …): made from
    drawn fields, hostile ones too, when the call runs."""

    def __init__(self, kind: type, fields: dict[str, list[Any]]) -> None:
        self.kind, self.fields = kind, fields

    def __repr__(self) -> str:
        return f"{self.kind.__name__}(…)"


class _Made:
    """An option to make, with its drawn fields (made inside the checked call)."""

    def __init__(self, kind: type, kwargs: dict[str, Any]) -> None:
        self.kind, self.kwargs = kind, kwargs

    def make(self) -> Any:
        return self.kind(**{k: v.make() if isinstance(v, _Made) else v
                            for k, v in self.kwargs.items()})

    def __repr__(self) -> str:
        return f"{self.kind.__name__}(**{self.kwargs!r})"


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Make the drawn options and call ``fn``: a normal return or an InputError (from an
    option's own check or from ``fn``) pass, anything else fails the test."""
    try:
        fn(**{k: v.make() if isinstance(v, _Made) else v for k, v in kwargs.items()})
    except hetopt.InputError:
        pass


class _Omit:
    """A keyword left out (its default)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()
#: Hostile values of a path argument: the hostile files first, then anything.
HOSTILE_PATH = st.one_of(st.sampled_from(HOSTILE_PATHS), HOSTILE)


def _args(data: st.DataObject, valid: dict[str, list[Any]], prefix: str = ""
          ) -> dict[str, Any]:
    """One keyword set: a valid value for most arguments, a hostile one for up to three of
    them (each argument left out when ``valid`` offers ``OMIT`` and it is drawn); a typed
    option drawn valid gets its own keyword set, hostile fields included."""
    names = sorted(valid)
    bad = data.draw(st.sets(st.sampled_from(names), max_size=3), label=f"{prefix}hostile")
    out = {}
    for name in names:
        hostile = HOSTILE_PATH if name in ("path", "name") else HOSTILE
        value = data.draw(hostile if name in bad else st.sampled_from(valid[name]),
                          label=prefix + name)
        if isinstance(value, _Option):
            value = _Made(value.kind, _args(data, value.fields, f"{prefix}{name}."))
        if value is not OMIT:
            out[name] = value
    return out


def _fuzz(valid: dict[str, list[Any]], fn: Callable[..., Any]):
    """A test over ``fn`` with the argument pools ``valid``, SHORT examples (slow: LONG)."""

    def run(data: st.DataObject) -> None:
        _call(fn, _args(data, valid))

    def short(data):
        run(data)

    def long(data):
        run(data)

    return (settings(max_examples=SHORT, **SETTINGS)(given(st.data())(short)),
            pytest.mark.slow(settings(max_examples=LONG, **SETTINGS)(given(st.data())(long))))


def _write_paths(*suffixes: str) -> list[Any]:
    return [OUT / f"w{s}" for s in suffixes] + [str(OUT / f"w{s}") for s in suffixes]


PRECISION = _Option(hetopt.Precision, {"weight": [OMIT, "fp16", "int8"],
                                        "activation": [OMIT, "fp16"], "kv": [OMIT, "int8"]})
SPARSITY = _Option(hetopt.Sparsity, {"weight": [OMIT, 0.5], "activation_prefill": [OMIT, 0.1],
                                     "activation_decode": [OMIT, 0.25, 0.2],
                                     "attention": [OMIT, 0.3]})
BUILD_OPTIONS = {
    "layers": [1, 2], "tp": [OMIT, 1, 2], "block_span": [OMIT, 1, 4],
    "kv_layout": [OMIT, "heads", "single"], "dtype": [OMIT, "fp16", "int8", "int4"],
    "precision": [OMIT, None, PRECISION, paper_precision("mixtral-8x7b")],
    "sparsity": [OMIT, None, SPARSITY], "time_unit": [OMIT, "ns", "us"],
    "load_timing": [OMIT, "at_use", "prefetch"], "formats": [OMIT, None, ["linear", "dual"]]}
SOURCES = _Option(hetopt.Sources, {"catalog": [OMIT, None], "models_file": [OMIT, None]})
PLACEMENT_ARGS = {
    "model": ["llama-2-7b", "dops-qwen-1.8b", "mixtral-8x7b", "no-such-model"],
    "platform": ["HP32", "HP64", "no-such-platform"],
    "workload": [_Option(hetopt.Workload, {"prefill": [1, 8, 16], "decode": [0, 1, 2],
                                           "batch": [OMIT, 1, 2]})],
    "options": [_Option(hetopt.BuildOptions, BUILD_OPTIONS)],
    "budget": [OMIT, None, _Option(hetopt.Budget, {"gb": [OMIT, 8.0]}),
               _Option(hetopt.Budget, {"factor": [OMIT, 1.5]})],
    "measurements": [OMIT, None],
    "goal": [OMIT, None, _Option(hetopt.Goal, {
        "objective": [OMIT, "makespan", "ttft"], "slo_ttft_ms": [OMIT, 100.0],
        "slo_tpot_ms": [OMIT, 50], "slo_e2e_ms": [OMIT, 1000.0]})],
    "sources": [OMIT, None, SOURCES]}
LAYOUT_ARGS = {**PLACEMENT_ARGS,
               "options": [_Option(hetopt.BuildOptions,
                                   {**BUILD_OPTIONS, "load_timing": ["prefetch"]})],
               "budget": [_Option(hetopt.Budget, {"factor": [1.5, 3]})]}
SERVING_ARGS = {
    "model": ["llama-2-7b", "gemma-3-27b", "no-such-model"],
    "gpus": ["H100", ["H100", "L40S"], "A100,L40S", "no-such-gpu"],
    "workload": [_Option(hetopt.ServingWorkload, {"context_tokens": [512, 8192],
                                                  "tpot_slo_s": [0.05, 0.06]})],
    "grid": [_Option(hetopt.ServingGrid, {
        "batches": [(1, 4), [1, 4, 16]], "max_gpus": [2, 4], "max_owners": [1, 2],
        "max_replicas": [1, 2], "max_microbatches": [OMIT, 1, 2]})],
    "parallelism": [OMIT, None, _Option(hetopt.Parallelism, {
        "tp_degrees": [OMIT, [1, 2], (1,)], "expert_parallel": [OMIT, False]})],
    "memory_fraction": [OMIT, 0.9],
    "cost": [OMIT, None, _Option(hetopt.GpuCost, {
        "kind": [OMIT, "calibrated", "roofline"], "unmeasured": [OMIT, "transfer", "roofline"],
        "calibration": [OMIT, None]})],
    "measurements": [OMIT, None], "sources": [OMIT, None, SOURCES]}
PROBLEMS = [OMIT, None, "placement", "layout", "serving", hetopt.Problem.LAYOUT, "P1"]
SOLVE_ARGS = {
    "instance": list(INSTANCES.values()),
    "method": [OMIT, "heft", "bifocal", "bnb", "pd", "cpsat", "no-such-method"],
    "time_limit": [2.0, 3], "num_workers": [OMIT, None, 1, 2], "seed": [OMIT, 0, 7]}

test_read_instance, test_read_instance_long = _fuzz(
    {"path": GOOD_INSTANCE_FILES + [str(p) for p in GOOD_INSTANCE_FILES]}, hetopt.read_instance)
test_read_result, test_read_result_long = _fuzz(
    {"path": GOOD_RESULT_FILES + [str(p) for p in GOOD_RESULT_FILES]}, hetopt.read_result)
test_write_instance, test_write_instance_long = _fuzz(
    {"instance": list(INSTANCES.values()),
     "path": _write_paths(".json", ".json.gz", ".npz", ".txt", "")}, hetopt.write_instance)
test_write_result, test_write_result_long = _fuzz(
    {"result": list(RESULTS.values()), "path": _write_paths(".json", ".json.gz", ".npz")},
    hetopt.write_result)
test_build_placement, test_build_placement_long = _fuzz(PLACEMENT_ARGS, hetopt.build_placement)
test_build_layout, test_build_layout_long = _fuzz(LAYOUT_ARGS, hetopt.build_layout)
test_build_serving, test_build_serving_long = _fuzz(SERVING_ARGS, hetopt.build_serving)
test_instance_names, test_instance_names_long = _fuzz({"problem": PROBLEMS},
                                                      hetopt.instance_names)
test_methods, test_methods_long = _fuzz({"problem": PROBLEMS}, hetopt.methods)
test_load_instance, test_load_instance_long = _fuzz(
    {"name": [P1, P3, "no-such-instance", *GOOD_INSTANCE_FILES]}, hetopt.load_instance)
test_solve, test_solve_long = _fuzz(SOLVE_ARGS, hetopt.solve)
test_validate, test_validate_long = _fuzz(
    {"instance": list(INSTANCES.values()), "result": list(RESULTS.values())}, hetopt.validate)
test_lower_bound, test_lower_bound_long = _fuzz({"instance": list(INSTANCES.values())},
                                                hetopt.lower_bound)
DOT = Path(__file__).resolve().parents[2] / "instances" / "data" / "sinnen-dot" / \
    "Nodes_7_OutTree.dot"
test_import_dot, test_import_dot_long = _fuzz(
    {"path": [DOT, str(DOT)], "processors": [1, 2, 4]}, hetopt.import_dot)
test_simulate, test_simulate_long = _fuzz(
    {"instance": [INSTANCES[P3]], "plan": [RESULTS[P3], RESULTS[P3].plan(INSTANCES[P3])],
     "tokens": [OMIT, 20, 48], "warmup": [OMIT, 0, 4], "nic": [OMIT, "formula", "sender"],
     "order": [OMIT, "static", "fcfs"]}, hetopt.simulate)
test_view, test_view_long = _fuzz(
    {"instance": list(INSTANCES.values()), "result": list(RESULTS.values()),
     "path": _write_paths(".html"), "title": [OMIT, None, "t"], "periods": [OMIT, 1, 2],
     "compress": [OMIT, True, False]}, hetopt.view)


def _solve_params(data: st.DataObject) -> None:
    """``solve``'s options and ``**params``: one method parameter or option, hostile."""
    name = data.draw(st.sampled_from([P1, P3]))
    method = "heft" if name == P1 else "bnb"
    key = data.draw(st.sampled_from(["device_choice", "frontier", "bounds", "foo",
                                     "initial_solution", "deterministic", "log",
                                     "warm_start", "export_path", ""]))
    _call(hetopt.solve, {"instance": INSTANCES[name], "method": method, "time_limit": 5.0,
                         key: data.draw(HOSTILE)})


@settings(max_examples=SHORT, **SETTINGS)
@given(data=st.data())
def test_solve_params(data):
    _solve_params(data)


@pytest.mark.slow
@settings(max_examples=LONG, **SETTINGS)
@given(data=st.data())
def test_solve_params_long(data):
    _solve_params(data)


def test_every_public_function_is_fuzzed():
    import inspect

    functions = {n for n in hetopt.__all__ if inspect.isfunction(getattr(hetopt, n))}
    assert functions <= {n[len("test_"):] for n in globals() if n.startswith("test_")}


def teardown_module() -> None:
    import shutil

    shutil.rmtree(DIR, ignore_errors=True)
