"""GPU cost models of serving instances (opt.serving.kernel_cost): calibrated vs roofline,
measured kernel rows, measured network crossings, provenance."""

from __future__ import annotations

import pytest

from opt.common.errors import InputError
from opt.costlib.gpu_calib import BUNDLED_CALIBRATION, read_calibrations
from opt.costlib.hardware import bundled_catalog
from opt.costlib.measured import read_measurements
from opt.costlib.modelcard import bundled_cards
from opt.serving.builder import ServingWorkload, build_serving_plan, op_durations_s
from opt.serving.instance import ServingGrid

CAT = bundled_catalog()
CARDS = bundled_cards()
GRID = ServingGrid(batches=(1, 8), max_microbatches=1)
W = ServingWorkload(4096, 0.05)


def _build(**kw):
    return build_serving_plan(CARDS["llama-2-7b"], CAT, ["H100"], W, grid=GRID,
                              tp_degrees=(1,), **kw)


def test_calibrated_and_roofline_differ_and_say_which():
    cal, roof = _build(), _build(gpu_cost="roofline")
    assert cal.meta["gpu_cost"] == "calibrated" and roof.meta["gpu_cost"] == "roofline"
    assert cal.meta["gpu_models"]["H100"]["model"] == "calibrated"
    assert (cal.op_duration != roof.op_duration).any()


def test_network_crossings_use_the_measured_send_recv_between_nodes():
    h100 = read_calibrations(BUNDLED_CALIBRATION, CAT)["H100"]
    inter = h100.send_recv["inter"]
    cal, roof = _build(), _build(gpu_cost="roofline")
    assert cal.network.latency_s == pytest.approx(inter.latency_s)
    assert cal.network.bandwidth_bytes_per_s == pytest.approx(inter.bandwidth_bytes_per_s)
    assert roof.network.latency_s == pytest.approx(20e-6)
    assert inter.latency_s != pytest.approx(20e-6, rel=0.01)   # the option changes the result
    # an uncalibrated GPU type in the mix keeps its catalog network: its crossings take the
    # slower endpoint's link, H100–H100 crossings the measured one (problems.md §3.1)
    mix = build_serving_plan(CARDS["llama-2-7b"], CAT, ["H100", "L40S"], W, grid=GRID,
                             tp_degrees=(1,))
    assert mix.meta["gpu_models"]["L40S"]["model"] == "transferred"
    assert mix.network.latency_s == pytest.approx(max(20e-6, inter.latency_s))
    lat = [[mix.networks[mix.crossing_network[a, b]].latency_s for b in range(2)]
           for a in range(2)]
    assert lat == [[pytest.approx(inter.latency_s), pytest.approx(20e-6)],
                   [pytest.approx(20e-6), pytest.approx(20e-6)]]


def test_a_measured_kernel_row_replaces_the_model(tmp_path):
    table = tmp_path / "m.csv"
    table.write_text("device,op_kind,model,tokens,context,batch,share,latency_us,source\n"
                     "H100,qkv_proj,llama-2-7b,1,1,1,1,123.0,test row\n", encoding="utf-8")
    base = _build()
    meas = _build(measurements=read_measurements(table, CAT))
    prov = meas.meta["measurements"]
    assert prov["kernel_costs"]["exact"] == 1 and prov["sources"] == ["test row"]
    mb1 = list(meas.microbatch_sizes).index(1)
    qkv = [o.kind for o in meas.ops].index("qkv")
    h100 = read_calibrations(BUNDLED_CALIBRATION, CAT)["H100"]
    d = 4096
    f, m = 2 * d * 3 * d, 2 * (3 * d * d + d + 3 * d)   # the fused QKV GEMM's model work
    model_qkv_ns = float(h100.kernel_s("gemm", f, m)) * 1e9
    delta = int(meas.op_duration[0, mb1, qkv]) - int(base.op_duration[0, mb1, qkv])
    assert delta == pytest.approx(123_000 - model_qkv_ns, abs=2)
    # the other microbatch has no row: unchanged
    mb8 = list(meas.microbatch_sizes).index(8)
    assert meas.op_duration[0, mb8, qkv] == base.op_duration[0, mb8, qkv]


def test_unknown_gpu_cost_is_rejected():
    with pytest.raises(InputError, match="unknown GPU cost model"):
        _build(gpu_cost="measured")


def test_decode_attention_at_long_context_is_slower_than_the_roofline_says():
    """Qwen3-Next full attention at 128K, batch 1, one H100 (OpWeave's 700 us point: an
    out-of-sample check, not a fitted target): the calibrated decode-attention curve (2 KV
    heads × 1 sequence = 2 work units) costs more than the roofline's full-bandwidth read,
    and the linear-attention module stays below it."""
    card = CARDS["qwen3-next-80b-a3b"]
    full = next(l for l in range(card.block_period) if card.layer_type(l) != "linear")
    lin = next(l for l in range(card.block_period) if card.layer_type(l) == "linear")
    out = {}
    for cost in ("roofline", "calibrated"):
        ops, _ = op_durations_s(card, CAT, "H100", batch=1, context=131072, gpu_cost=cost)
        out[cost] = [sum(ops[f"L{layer}.{k}"] for k in ("qkv", "attn", "o_proj"))
                     for layer in (full, lin)]
    assert out["calibrated"][0] > out["roofline"][0]
    assert out["calibrated"][0] / out["calibrated"][1] > out["roofline"][0] / out["roofline"][1]


def test_a_sweep_never_reuses_a_record_of_the_other_cost_model():
    from opt.app.runs.serving_sweep import _same_cost
    measured = frozenset({"A100", "H100"})
    roof, cal = ("roofline", "transfer", frozenset()), ("calibrated", "transfer", measured)
    old = {"cost_usd_per_mtok": 1.0}             # a record built on the roofline
    assert _same_cost(old, roof) is old
    assert _same_cost(old, cal) is None
    assert _same_cost({"gpu_cost": "calibrated", "gpus": ["H100"]}, cal) is not None
    # an L40S cell of before the unmeasured-GPU rule (its L40S on the roofline) is rebuilt;
    # so is a mixed cell of before the per-crossing network rule (problems.md §3.1)
    assert _same_cost({"gpu_cost": "calibrated", "gpus": ["L40S"]}, cal) is None
    assert _same_cost({"gpu_cost": "calibrated", "gpus": ["L40S"],
                       "unmeasured_gpu": "transfer"}, cal) is not None
    assert _same_cost({"gpu_cost": "calibrated", "gpus": ["H100", "A100"]}, cal) is None
    assert _same_cost({"gpu_cost": "calibrated", "gpus": ["H100", "A100"],
                       "network_rule": "per_crossing"}, cal) is not None
