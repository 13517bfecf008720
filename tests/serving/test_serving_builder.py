"""The serving builder's kernel model (docs/serving.md "Kernels and launch cost"): vLLM's fused
kernels per layer type, their merged work, and a Llama-2-7B H100 decode step checked against a
hand roofline and against the public GenZ simulator's figures."""

from __future__ import annotations

import pytest

from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.costlib.operators import Precision, layer_ops
from opt.serving.builder import (
    P3_OPS,
    ServingWorkload,
    _saved_bytes,
    build_serving_plan,
    decode_step_s,
    launches_per_layer,
    vllm_kernels,
)

CAT = bundled_catalog()
CARDS = bundled_cards()

#: Kernels paying t0 per layer under kernels="vllm" (layer types of one block), and under the
#: old per-operator model: see docs/serving.md for the vLLM kernel list behind each count.
LAUNCHES = {
    "llama-2-7b": ([10], [10]),            # norm, qkv, rope, kv write, attn, o, norm, gate_up, act, down
    "gemma-3-27b": ([12] * 6, [10] * 6),   # + q_norm, k_norm (the card has no post-norms)
    "mixtral-8x7b": ([14], [9]),           # router, topk, align, w13, act, w2, moe_sum
    "gpt-oss-120b": ([14, 14], [9, 9]),
    "qwen3-next-80b-a3b": ([20, 20, 20, 19], [9, 9, 9, 12]),   # GDN x3, gated full attention
}


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_launch_count_per_layer(name):
    card = CARDS[name]
    vllm, unfused = LAUNCHES[name]
    assert [launches_per_layer(card, i) for i in range(card.block_period)] == vllm
    assert [launches_per_layer(card, i, "unfused") for i in range(card.block_period)] == unfused


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_plan_covers_every_operator_once(name):
    """Every operator's work is done by the plan's kernels exactly once (fractions sum to 1),
    so no fallback kernel is needed for a bundled card."""
    card = CARDS[name]
    for layer in range(card.block_period):
        ops = layer_ops(card, layer, tokens=1, context=64, batch=1, routing="expected")
        plan = vllm_kernels(card, layer)
        assert set(plan) == set(P3_OPS)
        done: dict[str, float] = {}
        for kernels in plan.values():
            for k in kernels:
                for kind, frac in k.members:
                    done[kind] = done.get(kind, 0.0) + frac
        assert done == pytest.approx({o.kind: 1.0 for o in ops})


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_fused_kernel_never_moves_more_bytes(name):
    card = CARDS[name]
    for layer in range(card.block_period):
        ops = {o.kind: o for o in layer_ops(card, layer, tokens=1, context=4096, batch=8,
                                            routing="expected")}
        for kernels in vllm_kernels(card, layer).values():
            for k in kernels:
                if all(kind in ops for kind, _ in k.members):
                    saved = _saved_bytes(k, ops)
                    total = sum(frac * float(ops[kind].bytes) for kind, frac in k.members)
                    assert 0.0 <= saved < total or (saved == 0.0 and not k.members), k.name


def test_fused_attention_drops_the_scores():
    card = CARDS["llama-2-7b"]
    ops = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=8192, batch=1)}
    attn = next(k for k in vllm_kernels(card, 0)["attn"] if k.saves == "scores")
    scores = 32 * 8192 * 2.0                               # heads × keys × bf16
    assert _saved_bytes(attn, ops) == pytest.approx(4 * scores)


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_fused_not_slower_than_unfused_at_equal_launches(batch):
    """Llama's layer launches 10 kernels either way: fusion only removes bytes."""
    card = CARDS["llama-2-7b"]
    for tp in (1, 2):
        v = decode_step_s(card, CAT, "H100", batch=batch, context=8192, tp=tp)
        u = decode_step_s(card, CAT, "H100", batch=batch, context=8192, tp=tp, kernels="unfused")
        assert v <= u


def _hand_roofline_llama_s(batch: int, context: int) -> float:
    """Llama-2-7B decode step on one H100 (problems.md §5.3: η_m 0.84, β 3.35 TB/s, t0 7.9 µs),
    every kernel memory-bound: weights once + per-request activations + the KV cache read."""
    d, f, layers, vocab, a = 4096, 11008, 32, 32000, 2.0
    bw = 0.84 * 3350e9
    t0 = 7.9e-6
    n = batch
    layer_bytes = (
        (4 * n * d * a + d * a)                            # fused_add_rms_norm
        + (3 * d * d * a + n * (d + 3 * d) * a)            # QKV GEMM, input read once
        + 2 * n * 2 * d * a                                # rotary on q, k
        + 2 * n * d * 2 * a                                # reshape_and_cache (read k, v; write)
        + (n * d * a + 2 * n * context * d * a + n * d * a)   # flash attention: q, K, V, out
        + (d * d * a + 2 * n * d * a)                      # o_proj
        + 2 * n * d * a                                    # residual add riding on the norm
        + (4 * n * d * a + d * a)                          # fused_add_rms_norm
        + (2 * d * f * a + n * (d + 2 * f) * a)            # gate_up GEMM
        + 3 * n * f * a                                    # silu_and_mul
        + (f * d * a + n * (f + d) * a)                    # down GEMM
        + 2 * n * d * a)                                   # residual add
    head = (n * d * 2 * a                                  # embedding gather
            + d * vocab * a + n * (d + vocab) * a)         # LM head (final norm in its t0)
    return layers * (layer_bytes / bw + 10 * t0) + head / bw + 3 * t0


#: GenZ (PyPI genz-llm 0.0.16, GenZ.decode_moddeling, model "meta-llama/Llama-2-7B", bf16,
#: TP 1, an H100 system of 989 TFLOPS and 3350 GB/s, system_eff 0.84): step latency in ms.
#: GenZ charges no launch cost and no element-wise kernels (norms, rope, activations).
GENZ_MS = {(1, 8192): 5.7972, (32, 8192): 49.9364}


@pytest.mark.parametrize("batch,context", sorted(GENZ_MS))
def test_llama_h100_decode_step_vs_hand_roofline_and_genz(batch, context):
    card = CARDS["llama-2-7b"]
    step = decode_step_s(card, CAT, "H100", batch=batch, context=context, gpu_cost="roofline")
    assert step == pytest.approx(_hand_roofline_llama_s(batch, context), rel=1e-3)
    launches = (32 * launches_per_layer(card, 0) + 3) * 7.9e-6
    # without its launch costs the step is GenZ's roofline within 10 % (the KV write, rotary,
    # norms and activations that GenZ leaves out are the difference)
    assert (step - launches) / (GENZ_MS[batch, context] / 1e3) == pytest.approx(1.0, abs=0.10)


def test_builder_records_the_kernel_model_and_rejects_unknown():
    card = CARDS["llama-2-7b"]
    w = ServingWorkload(8192, 0.050)
    fused = build_serving_plan(card, CAT, ["H100"], w, tp_degrees=(1,))
    old = build_serving_plan(card, CAT, ["H100"], w, tp_degrees=(1,), kernels="unfused")
    assert fused.meta["kernels"] == "vllm" and old.meta["kernels"] == "unfused"
    # per layer (the block) fused is faster; single ops may not be: ffn_in gains the
    # launches of its norm and silu_and_mul, qkv loses two of its three GEMM launches
    assert (fused.op_duration.sum(axis=2) < old.op_duration.sum(axis=2)).all()
    qkv, ffn_in = P3_OPS.index("qkv"), P3_OPS.index("ffn_in")
    assert (fused.op_duration[..., qkv] < old.op_duration[..., qkv]).all()
    assert (fused.op_duration[..., ffn_in] > old.op_duration[..., ffn_in]).all()
    with pytest.raises(InputError, match="unknown kernel model"):
        build_serving_plan(card, CAT, ["H100"], w, kernels="fused")


def test_unfused_matches_the_per_operator_sum():
    """kernels="unfused" is the earlier model: Σ member rooflines + t0 per GEMM/attention/
    softmax/router operator (a Llama qkv op: 3 GEMMs and the replicated norm)."""
    card = CARDS["llama-2-7b"]
    inst = build_serving_plan(card, CAT, ["H100"], ServingWorkload(8192, 0.050),
                              tp_degrees=(1,), kernels="unfused", gpu_cost="roofline")
    mb = inst.microbatch_sizes.index(1)
    ops = layer_ops(card, 0, tokens=1, context=8192, batch=1, precision=Precision("bf16", "bf16",
                                                                                     "bf16"))
    bw = 0.84 * 3350e9
    qkv = sum(float(o.bytes) for o in ops if o.kind in ("attn_norm", "q_proj", "k_proj",
                                                         "v_proj")) / bw + 3 * 7.9e-6
    assert inst.op_duration[0, mb, 0] == pytest.approx(qkv * 1e9, abs=1)
