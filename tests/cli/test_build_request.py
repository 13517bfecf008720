"""``hetopt build placement|serving`` and ``opt.api.build_placement|build_serving`` read their
options into the same typed request (:mod:`opt.placement.request`, :mod:`opt.serving.request`)
and build the same instance from it; the request checks each option on its own."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import opt.api as hetopt
from opt.app.cli.parser import main
from opt.common.errors import InputError
from opt.costlib.gpu_calib import BUNDLED_CALIBRATION
from opt.problems import read_problem_instance

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "opt" / "costlib" / "data" / "measurements"
SMALL = dict(model="llama-2-7b", platform="HP32", prefill=8, decode=2, layers=1)
WORKLOAD = hetopt.Workload(prefill=8, decode=2)
LAYER = hetopt.BuildOptions(layers=1)

#: case → (the command line's options, the API call building the same instance)
PLACEMENT_CASES = {
    "plain": (SMALL, lambda: hetopt.build_placement("llama-2-7b", "HP32", WORKLOAD,
                                                     options=LAYER)),
    "budget-gb": ({**SMALL, "budget_gb": 0.5, "formats": ["linear", "dual"]},
                  lambda: hetopt.build_placement(
                      "llama-2-7b", "HP32", WORKLOAD,
                      options=hetopt.BuildOptions(layers=1, formats=["linear", "dual"]),
                      budget=hetopt.Budget(gb=0.5))),
    "budget-factor": ({**SMALL, "budget_factor": 1.5},
                      lambda: hetopt.build_layout("llama-2-7b", "HP32", WORKLOAD, options=LAYER,
                                                  budget=hetopt.Budget(factor=1.5))),
    "slo": ({**SMALL, "objective": "ttft", "slo_ttft_ms": 5.0, "slo_tpot_ms": 0.7,
             "slo_e2e_ms": 100.0},
            lambda: hetopt.build_placement(
                "llama-2-7b", "HP32", WORKLOAD, options=LAYER,
                goal=hetopt.Goal("ttft", slo_ttft_ms=5.0, slo_tpot_ms=0.7, slo_e2e_ms=100.0))),
    "precision-sparsity": (
        {**SMALL, "weight_dtype": "int8", "kv_dtype": "int8",
         "act_sparsity": "prefill=0.1,decode=0.5", "attn_sparsity": 0.2,
         "weight_sparsity": 0.25, "tp": 2, "kv_layout": "single"},
        lambda: hetopt.build_placement(
            "llama-2-7b", "HP32", WORKLOAD, options=hetopt.BuildOptions(
                layers=1, tp=2, kv_layout="single",
                precision=hetopt.Precision(weight="int8", kv="int8"),
                sparsity=hetopt.Sparsity(weight=0.25, activation_prefill=0.1,
                                         activation_decode=0.5, attention=0.2)))),
    "paper-precision": (
        {**SMALL, "model": "mixtral-8x7b", "platform": "HP128", "paper_precision": True,
         "load_timing": "prefetch"},
        lambda: hetopt.build_placement(
            "mixtral-8x7b", "HP128", WORKLOAD, options=hetopt.BuildOptions(
                layers=1, load_timing="prefetch",
                precision=hetopt.Precision(weight="int8", activation="int8", kv="int8")))),
    "measurements": (
        dict(model="dops-qwen-1.8b", platform="HP32", prefill=16, decode=2, layers=2,
             block_span=1, measurements=str(DATA / "triform-aim-dops-qwen-1.8b-hp32.csv")),
        lambda: hetopt.build_placement(
            "dops-qwen-1.8b", "HP32", hetopt.Workload(16, 2),
            options=hetopt.BuildOptions(layers=2, block_span=1),
            measurements=DATA / "triform-aim-dops-qwen-1.8b-hp32.csv")),
}
SERVE = dict(model="llama-2-7b", gpus="H100", context=1024, slo_ms=50.0, batches="1,4",
             max_gpus=4, max_owners=1, max_replicas=1)
LOAD = hetopt.ServingWorkload(context_tokens=1024, tpot_slo_s=50.0 / 1e3)
GRID = dict(batches=(1, 4), max_gpus=4, max_owners=1, max_replicas=1)
SERVING_CASES = {
    "plain": (SERVE, lambda: hetopt.build_serving("llama-2-7b", "H100", LOAD,
                                                   grid=hetopt.ServingGrid(**GRID))),
    "grid-roofline": (
        {**SERVE, "gpus": "H100,A100", "tp": "1,2", "max_owners": 2, "max_microbatches": 2,
         "memory_fraction": 0.8, "gpu_cost": "roofline"},
        lambda: hetopt.build_serving(
            "llama-2-7b", ["H100", "A100"], LOAD,
            grid=hetopt.ServingGrid(**{**GRID, "max_owners": 2, "max_microbatches": 2}),
            parallelism=hetopt.Parallelism(tp_degrees=(1, 2)), memory_fraction=0.8,
            cost=hetopt.GpuCost("roofline"))),
    "calibration": (
        {**SERVE, "gpus": "A100,L40S", "gpu_calibration": str(BUNDLED_CALIBRATION),
         "unmeasured_gpu": "roofline"},
        lambda: hetopt.build_serving(
            "llama-2-7b", "A100,L40S", LOAD, grid=hetopt.ServingGrid(**GRID),
            cost=hetopt.GpuCost(unmeasured="roofline", calibration=str(BUNDLED_CALIBRATION)))),
    "no-ep-moe": (
        {**SERVE, "model": "mixtral-8x7b", "no_ep": True, "tp": "2,4"},
        lambda: hetopt.build_serving(
            "mixtral-8x7b", "H100", LOAD, grid=hetopt.ServingGrid(**GRID),
            parallelism=hetopt.Parallelism(tp_degrees=[2, 4], expert_parallel=False))),
    "measurements": (
        {**SERVE, "measurements": str(DATA / "vidur_gpu.csv")},
        lambda: hetopt.build_serving("llama-2-7b", "H100", LOAD,
                                     grid=hetopt.ServingGrid(**GRID),
                                     measurements=str(DATA / "vidur_gpu.csv"))),
}


def _argv(options: dict) -> list[str]:
    """``options`` (the command's options by their destination names) as its arguments."""
    argv = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def _cli_instance(command: str, options: dict, tmp_path: Path):
    out = tmp_path / f"{command}.json"
    assert main(["build", command, *_argv(options), "-o", str(out)]) == 0
    return read_problem_instance(out)


@pytest.mark.parametrize("case", PLACEMENT_CASES)
def test_cli_and_api_build_the_same_placement_instance(case, tmp_path, capsys):
    options, build = PLACEMENT_CASES[case]
    api = build()
    cli = _cli_instance("placement", options, tmp_path)
    assert cli.fingerprint == api.fingerprint
    assert cli.problem == ("layout" if "budget" in case else "placement")


@pytest.mark.parametrize("case", SERVING_CASES)
def test_cli_and_api_build_the_same_serving_instance(case, tmp_path, capsys):
    options, build = SERVING_CASES[case]
    assert _cli_instance("serving", options, tmp_path).fingerprint == build().fingerprint


def test_paper_precision_is_the_precision_the_command_chooses():
    """``--paper-precision`` is :func:`opt.placement.build_options.paper_precision` of the
    model, the ``Precision`` the "paper-precision" case passes."""
    from opt.placement.build_options import paper_precision
    from opt.placement.request import chosen_precision

    assert chosen_precision("mixtral-8x7b", paper=True) == paper_precision("mixtral-8x7b") \
        == hetopt.Precision(weight="int8", activation="int8", kv="int8")


def test_the_facade_builds_without_the_command_line():
    """opt.app.facade imports nothing of opt.app.cli (nor argparse): it builds a request."""
    tree = ast.parse((ROOT / "opt" / "app" / "facade.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and (m.startswith("opt.app.cli") or m == "argparse")]


# ---- the requests check their options on construction ----------------------------------------

def _field(call) -> str | None:
    with pytest.raises(InputError) as err:
        call()
    return err.value.field


def test_placement_request_parts_check_their_fields():
    from opt.placement.build_options import Workload
    from opt.placement.request import Budget, Goal, PlacementRequest, chosen_sparsity

    assert _field(lambda: Goal(slo_tpot_ms=-1.0)) == "slo_tpot_ms"
    assert _field(lambda: Goal(slo_e2e_ms=float("inf"))) == "slo_e2e_ms"
    assert _field(lambda: Goal(objective="speed")) == "objective"
    assert _field(lambda: Budget(gb=-1.0)) == "budget_gb"
    assert _field(lambda: Budget(gb=1.0, factor=1.0)) == "memory_budget"
    assert _field(lambda: chosen_sparsity(activation="prefill=x")) == "act_sparsity"
    assert _field(lambda: chosen_sparsity(activation={"warmup": 0.1})) == "act_sparsity"
    assert _field(lambda: PlacementRequest("llama-2-7b", 32, Workload(8, 1))) == "platform"
    assert _field(lambda: PlacementRequest("llama-2-7b", "HP32", Workload(8, 1),
                                           goal="ttft")) == "goal"
    request = PlacementRequest("llama-2-7b", "HP32", Workload(8, 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.model = "other"  # type: ignore[misc]


def test_serving_request_parts_check_their_fields():
    from opt.serving.builder import ServingWorkload
    from opt.serving.request import GpuCost, ServingRequest

    workload = ServingWorkload(1024, 0.05)
    assert _field(lambda: GpuCost("measured")) == "gpu_cost"
    assert _field(lambda: GpuCost(unmeasured="guess")) == "unmeasured_gpu"
    assert _field(lambda: ServingRequest("llama-2-7b", (), workload)) == "gpus"
    assert _field(lambda: ServingRequest("llama-2-7b", ("H100",), workload,
                                         tp_degrees=(0,))) == "tp"
    assert _field(lambda: ServingRequest("llama-2-7b", ("H100",), workload,
                                         memory_fraction=1.5)) == "memory_fraction"


def test_build_options_check_their_types_on_construction():
    import numpy as np

    assert _field(lambda: hetopt.BuildOptions(tp="2")) == "tp"
    assert _field(lambda: hetopt.BuildOptions(layers=1.0)) == "layers"
    assert _field(lambda: hetopt.BuildOptions(dtype=None)) == "dtype"
    assert _field(lambda: hetopt.BuildOptions(formats="linear")) == "formats"
    assert _field(lambda: hetopt.BuildOptions(kv_memory="yes")) == "kv_memory"
    assert _field(lambda: hetopt.BuildOptions(precision="int8")) == "precision"
    assert _field(lambda: hetopt.BuildOptions(
        precision=hetopt.Precision(kv=["int8"]))) == "precision.kv"
    assert _field(lambda: hetopt.BuildOptions(
        precision=hetopt.Precision(weight="int3"))) == "precision.weight"
    assert _field(lambda: hetopt.BuildOptions(
        sparsity=hetopt.Sparsity(attention=10 ** 400))) == "sparsity.attention"
    options = hetopt.BuildOptions(layers=np.int64(2), formats=["linear", "dual"])
    assert options.formats == ("linear", "dual")


def test_parallelism_checks_its_fields():
    import numpy as np

    assert _field(lambda: hetopt.Parallelism(tp_degrees=(0,))) == "tp"
    assert _field(lambda: hetopt.Parallelism(tp_degrees="1,2")) == "tp"
    assert _field(lambda: hetopt.Parallelism(tp_degrees=())) == "tp"
    assert _field(lambda: hetopt.Parallelism(expert_parallel="no")) == "expert_parallel"
    assert hetopt.Parallelism([1, np.int64(2)]).tp_degrees == (1, 2)


def test_an_integer_beyond_a_float_is_an_input_error_naming_the_field():
    assert _field(lambda: hetopt.Goal(slo_tpot_ms=10 ** 400)) == "slo_tpot_ms"
    assert _field(lambda: hetopt.Budget(gb=10 ** 400)) == "budget_gb"
    assert _field(lambda: hetopt.Budget(factor=-(10 ** 400))) == "budget_factor"
