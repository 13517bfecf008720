"""Latency models: roofline regimes, NPU utilisation ends, PIM calibration, collectives."""

import numpy as np
import pytest

from opt.costlib.calibration import PIM_TRACE, calibration_ops, pim_slowdowns
from opt.costlib.latency import Link, ring_allreduce_s, star_allreduce_s
from opt.costlib.operators import layer_ops


def test_gpu_decode_gemv_memory_bound_and_large_gemm_compute_bound(catalog, cards):
    h100 = catalog.device("H100")
    m = h100.latency_model
    card = cards["llama-2-7b"]
    gemv = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=2048, batch=1)}["up_proj"]
    t_c = gemv.flops / (m.eta_c * h100.peak_flops)
    t_m = gemv.bytes / (m.eta_m * h100.mem_bw_bytes_per_s)
    assert t_m > 50 * t_c
    assert h100.latency_s("gemm", gemv.flops, gemv.bytes) == pytest.approx(7.9e-6 + t_m)
    gemm = {o.kind: o for o in layer_ops(card, 0, tokens=4096, context=4096, batch=8)}["up_proj"]
    t_c = gemm.flops / (m.eta_c * h100.peak_flops)
    t_m = gemm.bytes / (m.eta_m * h100.mem_bw_bytes_per_s)
    assert t_c > 10 * t_m
    assert h100.latency_s("gemm", gemm.flops, gemm.bytes) == pytest.approx(7.9e-6 + t_c)


def test_a100_coefficients(catalog):
    a100 = catalog.device("A100")
    assert a100.latency_s("gemm", 312e12 * 0.69, 0) == pytest.approx(1.0 + 9.4e-6)
    assert a100.latency_s("gemm", 0, 2039e9 * 0.74) == pytest.approx(1.0 + 9.4e-6)


def test_npu_utilisation_ends_and_overheads(catalog):
    npu = catalog.device("Ascend-910B").latency_model
    assert npu.utilisation(1e3) == 0.5 and npu.utilisation(5e7) == 0.5
    assert npu.utilisation(5e12) == 0.8 and npu.utilisation(1e15) == 0.8
    assert npu.utilisation(1e10) == pytest.approx(0.65)
    f = np.logspace(7, 13, 200)
    assert np.all(np.diff(npu.utilisation(f)) >= 0)
    # compute-bound large op: f/(P·u_max) + 4 µs gemm overhead
    assert npu.latency_s("gemm", 1e14, 0) == pytest.approx(1e14 / (280e12 * 0.8) + 4e-6)
    assert npu.latency_s("softmax", 0, 819.2e9) == pytest.approx(1.0 + 0.25e-6)
    assert npu.latency_s("norm", 0, 0) == pytest.approx(3e-6)


def test_pim_slowdowns_reproduce_trace(catalog, cards):
    pim = catalog.device("AiM")
    ops = calibration_ops(cards["llama-2-7b"])
    for point in PIM_TRACE:
        op = ops[point.kind]
        got = pim.latency_s(point.op_class, op.flops, op.bytes) * 1e6
        assert got == pytest.approx(point.trace_us, rel=2e-4), point.kind


def test_bundled_pim_factors_agree_with_recalibration(catalog, cards):
    pim = catalog.device("AiM").latency_model
    fresh = pim_slowdowns(pim, cards["llama-2-7b"])
    assert set(fresh) == set(pim.slowdown)
    for cls, value in fresh.items():
        assert pim.slowdown[cls] == pytest.approx(value, rel=5e-4), cls


def test_gemv_ops_match_dops_roofline(catalog, cards):
    """For GEMV-type ops the FLOP model is unambiguous: our roofline ≈ DOPS' (within 2 %)."""
    pim = catalog.device("AiM").latency_model
    ops = calibration_ops(cards["llama-2-7b"])
    for point in PIM_TRACE:
        if point.kind in ("q_proj", "qk"):
            op = ops[point.kind]
            ours = float(pim.roofline_s(op.flops, op.bytes)) * 1e6
            assert ours == pytest.approx(point.dops_roofline_us, rel=0.02)


def test_collectives():
    nv = Link(2e-6, 450e9)
    b = 64e6
    assert ring_allreduce_s(b, 1, nv) == 0
    assert ring_allreduce_s(b, 4, nv) == pytest.approx(5e-6 + 6 * 2e-6 + 1.5 * b / 450e9)
    assert star_allreduce_s(b, 3, Link(1e-6, 31.5e9)) == pytest.approx(5e-6 + 2 * (1e-6 + b / 31.5e9))
    assert Link(1e-6, 1e9).transfer_s(0) == 0
    assert Link(1e-6, 1e9).transfer_s(1e9) == pytest.approx(1.000001)


def test_decode_attention_takes_the_gemv_factor_and_prefill_factors_stay(catalog, cards):
    """problems.md §5.2: decode qk/sv (T_q = 1) are GEMVs over the KV cache and take the GEMV-path
    factor; the prefill trace factors are unchanged (the bundled values of the trace fit)."""
    from opt.costlib.calibration import PIM_REGIME_PROXY
    from opt.costlib.latency import regime_class

    pim, npu = catalog.device("AiM"), catalog.device("Ascend-910B")
    slow = pim.latency_model.slowdown
    assert PIM_REGIME_PROXY == {"attention_decode": "gemm"}
    assert slow["attention_decode"] == slow["gemm"] == pytest.approx(1.2136)
    assert slow["attention"] == pytest.approx(10.29) and slow["softmax"] == pytest.approx(392.7)
    assert regime_class("attention", True) == "attention_decode"
    assert regime_class("attention", False) == "attention"
    assert regime_class("softmax", True) == "softmax"
    card = cards["llama-2-7b"]
    for ctx, batch in ((512, 1), (2048, 1), (2048, 16)):
        ops = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=ctx, batch=batch)}
        for kind in ("qk", "sv"):
            op = ops[kind]
            cls = regime_class(op.op_class, True)
            t_pim = float(pim.latency_s(cls, op.flops, op.bytes))
            t_npu = float(npu.latency_s(cls, op.flops, op.bytes))
            # the PIM roofline (16 TB/s internal vs 819 GB/s) says PIM wins on this GEMV
            roof_pim = float(pim.latency_model.roofline_s(op.flops, op.bytes))
            roof_npu = float(npu.latency_model.roofline_s(op.flops, op.bytes))
            assert roof_pim < roof_npu
            assert t_pim < t_npu / 4, (kind, ctx, batch)
            assert t_pim == pytest.approx(roof_pim * slow["gemm"])
