"""No builder writes what its reader refuses: over the options of the placement and serving
builders (``opt.api.build_placement`` / ``build_serving``, the code of ``hetopt build``), either
the builder raises InputError, or the instance it returns, written and read back, is accepted by
the reader, and ``solve`` with a quick heuristic accepts it (no InputError, no ERROR result).
Small workloads, a modest number of seeded examples."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from opt.api import (
    Budget,
    BuildOptions,
    Goal,
    GpuCost,
    Parallelism,
    ServingGrid,
    ServingWorkload,
    Workload,
    build_placement,
    build_serving,
)
from opt.common.errors import InputError
from opt.common.lists import positive_ints
from opt.placement.request import chosen_precision, chosen_sparsity
from opt.problems import read_problem_instance
from solvers import solve

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

#: a quick heuristic per problem (P1, P2, P3)
QUICK = {"placement": "pd", "layout": "pd/linear", "serving": "col"}



def mostly(valid: list, hostile: list) -> st.SearchStrategy:
    """One of ``valid``, and about one time in twenty one of ``hostile`` (on the edge or
    just outside the valid range: the builder must refuse it or build right)."""
    return st.integers(0, 19).flatmap(
        lambda k: st.sampled_from(hostile if k == 7 else valid))


RATIOS = mostly([None, None, 0.0, 0.5, 0.9], [0.999, 1.0, -0.1])
SLO_MS = mostly([None, None, None, 50.0, 1e4], [1e-6, 0.01, 1e12])

PLACEMENT = st.fixed_dictionaries({
    "model": st.sampled_from(["dops-qwen-1.8b", "llama-2-7b", "mixtral-8x7b", "gemma-3-27b"]),
    "platform": st.sampled_from(["HP0", "HP32", "HP128"]),
    "prefill": st.integers(1, 48),
    "decode": st.integers(0, 3),
    "batch": st.integers(1, 4),
    "layers": st.integers(1, 2),
    "tp": mostly([1, 1, 2, 3, 4], [8, 64]),
    "block_span": st.integers(1, 3),
    "kv_layout": st.sampled_from(["heads", "single"]),
    "dtype": st.sampled_from(["fp16", "int8", "int4"]),
    "act_dtype": st.none() | st.sampled_from(["fp16", "int8"]),
    "kv_dtype": st.none() | st.sampled_from(["fp16", "int8", "int4"]),
    "weight_sparsity": RATIOS,
    "attn_sparsity": RATIOS,
    "act_sparsity": mostly([None, None, "0.5", "prefill=0.3,decode=0.9"], ["decode=1", "x"]),
    "load_timing": st.sampled_from(["at_use", "prefetch"]),
    "time_unit": mostly(["ns"], ["us"]),
    "formats": mostly([None, ("linear",), ("linear", "dual"),
                       ("linear", "npu_opt", "pim_opt", "dual")], [("npu_opt",)]),
    "budget": st.none() | st.tuples(st.sampled_from(["budget_gb", "budget_factor"]),
                                    mostly([0.0, 0.01, 0.5, 1.0, 2.0], [1e6, 1e300])),
    "objective": st.sampled_from(["makespan", "decode_time", "ttft"]),
    "slo_ttft_ms": SLO_MS,
    "slo_tpot_ms": SLO_MS,
    "slo_e2e_ms": SLO_MS,
})

SERVING = st.fixed_dictionaries({
    "model": st.sampled_from(["llama-2-7b", "gemma-3-27b", "qwen3-next-80b-a3b"]),
    "gpus": st.sampled_from(["H100", "A100", "H100,L40S", "L40S"]),
    "context": st.sampled_from([1, 128, 4096, 65536]),
    "slo_ms": st.sampled_from([1e-3, 5.0, 60.0, 1000.0, 86_400_000.0]),
    "tp": mostly(["1", "1,2", "1,2,4", "2,4"], ["8", "16"]),
    "batches": st.sampled_from(["1", "1,4", "8,16", "3,5"]),
    "max_gpus": mostly([1, 2, 4, 8], [0, -1]),
    "max_owners": mostly([1, 2], [0]),
    "max_replicas": mostly([1, 2], [0]),
    "max_microbatches": mostly([1, 2, 3], [0]),
    "memory_fraction": st.sampled_from([0.05, 0.5, 1.0]),
    "gpu_cost": st.sampled_from(["calibrated", "roofline"]),
    "unmeasured_gpu": st.sampled_from(["transfer", "roofline"]),
})


def _build_placement(opts: dict):
    """The instance of the drawn options, made into the typed options the API takes (the
    dtype and sparsity options read as ``hetopt build placement`` reads them)."""
    budget = opts["budget"]
    return build_placement(
        opts["model"], opts["platform"], Workload(opts["prefill"], opts["decode"], opts["batch"]),
        options=BuildOptions(
            layers=opts["layers"], tp=opts["tp"], block_span=opts["block_span"],
            kv_layout=opts["kv_layout"], dtype=opts["dtype"], load_timing=opts["load_timing"],
            time_unit=opts["time_unit"],
            formats=None if opts["formats"] is None else list(opts["formats"]),
            precision=chosen_precision(opts["model"], opts["dtype"], activation=opts["act_dtype"],
                                       kv=opts["kv_dtype"]),
            sparsity=chosen_sparsity(opts["weight_sparsity"], opts["act_sparsity"],
                                     opts["attn_sparsity"])),
        budget=Budget() if budget is None else Budget(**{budget[0][len("budget_"):]: budget[1]}),
        goal=Goal(opts["objective"], opts["slo_ttft_ms"], opts["slo_tpot_ms"],
                  opts["slo_e2e_ms"]))


def _build_serving(opts: dict):
    """The serving instance of the drawn options, made into the typed options."""
    return build_serving(
        opts["model"], opts["gpus"], ServingWorkload(opts["context"], opts["slo_ms"] / 1e3),
        grid=ServingGrid(max_gpus=opts["max_gpus"], max_owners=opts["max_owners"],
                         max_replicas=opts["max_replicas"],
                         max_microbatches=opts["max_microbatches"],
                         batches=positive_ints(opts["batches"], "batches")),
        parallelism=Parallelism(positive_ints(opts["tp"], "tp")),
        memory_fraction=opts["memory_fraction"],
        cost=GpuCost(opts["gpu_cost"], opts["unmeasured_gpu"]))


def _round_trip(inst, suffix: str):
    """``inst`` written under ``suffix`` and read back (the reader's own checks)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"i{suffix}"
        inst.write(path)
        return read_problem_instance(path)


def _solves(inst) -> None:
    """``solve`` with a quick heuristic accepts the instance: no InputError, no ERROR."""
    problem = getattr(inst, "problem", "placement")
    res = solve(inst, QUICK[problem], time_limit=30)
    assert res.status != "ERROR", (problem, res.stats.get("message"))


@seed(20240601)
@SETTINGS
@given(PLACEMENT, st.sampled_from([".json", ".json.gz", ".npz"]))
def test_placement_builder_writes_what_its_reader_and_solve_accept(opts, suffix):
    try:
        inst = _build_placement(opts)
    except InputError:
        return
    back = _round_trip(inst, suffix)
    assert back.fingerprint == inst.fingerprint
    _solves(back)


@seed(20240602)
@settings(SETTINGS, max_examples=20)
@given(SERVING)
def test_serving_builder_writes_what_its_reader_and_solve_accept(opts):
    try:
        inst = _build_serving(opts)
    except InputError:
        return
    back = _round_trip(inst, ".json")
    assert back.fingerprint == inst.fingerprint
    _solves(back)


@pytest.mark.parametrize("option,value", [("max_owners", 0), ("max_microbatches", 0),
                                          ("max_gpus", -1), ("max_replicas", 0)])
def test_grid_limits_below_one_are_refused_by_the_builder(option, value):
    with pytest.raises(InputError) as exc:
        build_serving("llama-2-7b", "H100", ServingWorkload(1024, 0.06),
                      grid=ServingGrid(**{option: value}))
    assert exc.value.field == option
