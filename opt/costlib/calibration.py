"""Calibration data of the cost library and the code that derives coefficients from it.

DOPS reports, for SK hynix AiM PIM, trace-measured latencies next to its roofline estimates
(Llama-7B-like dims, prefill, batch 1, sequence 512). hetopt's PIM latency model multiplies its
own roofline by a per-class slowdown chosen so that the model reproduces each trace figure on
that shape. The trace is prefill only; decode attention (T_q = 1, a GEMV over the KV cache)
takes the GEMV-path factor (:data:`PIM_REGIME_PROXY`). :func:`pim_slowdowns` recomputes those factors; the bundled catalog stores them
(rounded to 4 significant digits) and the tests check the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from opt.costlib.latency import LogisticRoofline
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import layer_ops


@dataclass(frozen=True)
class TracePoint:
    """One DOPS measurement: op ``kind`` of a layer, trace and DOPS-roofline latency (µs)."""

    kind: str
    op_class: str
    trace_us: float
    dops_roofline_us: float


#: DOPS' PIM trace-vs-roofline figures (problems.md §5.2, from the DOPS paper's PIM characterisation).
PIM_TRACE = (
    TracePoint("softmax", "softmax", 1678.85, 26.09),
    TracePoint("attn_norm", "norm", 672.77, 13.02),
    TracePoint("qk", "attention", 1761.28, 168.35),
    TracePoint("q_proj", "gemm", 3259.39, 2684.36),
)
#: The calibration shape: Llama-7B-like dims, prefill of 512 tokens, batch 1.
CALIBRATION_SHAPE = {"tokens": 512, "context": 512, "batch": 1}
#: Classes without a trace figure and the measured class whose factor they take.
PIM_CLASS_PROXY = {"activation": "norm", "elementwise": "norm", "router": "gemm"}
#: Regimes the trace does not cover and the measured class whose factor they take, with why.
#: Decode attention (T_q = 1): qk = q (1 × D_h) · Kᵀ (D_h × T_kv) and sv = p (1 × T_kv) · V per
#: sequence and head, a GEMV whose matrix is the KV cache — AiM's native operation, which DOPS
#: runs at the roofline like the projections (problems.md §5.2). The trace's qk point is the
#: prefill GEMM (512 query rows), compute-bound at AiM's utilisation, so its factor (≈ 10) is
#: that regime's; the one GEMV-path figure the trace has is q_proj's, hence the gemm factor.
PIM_REGIME_PROXY = {"attention_decode": "gemm"}


def calibration_ops(card: ModelCard) -> dict[str, object]:
    """The ops of layer 0 of ``card`` at the calibration shape, by kind."""
    return {op.kind: op for op in layer_ops(card, 0, **CALIBRATION_SHAPE)}


def pim_slowdowns(model: LogisticRoofline, card: ModelCard) -> dict[str, float]:
    """Per-class slowdown = trace latency / hetopt roofline latency of the same op."""
    ops = calibration_ops(card)
    factors = {}
    for point in PIM_TRACE:
        op = ops[point.kind]
        factors[point.op_class] = point.trace_us * 1e-6 / float(model.roofline_s(op.flops, op.bytes))
    for cls, proxy in {**PIM_CLASS_PROXY, **PIM_REGIME_PROXY}.items():
        factors[cls] = factors[proxy]
    return factors
