"""The kernels vLLM launches per decode step for each P3 op (docs/serving.md "Kernels and launch
cost" cites the vLLM files): fused QKV and gate/up GEMMs, fused residual-add + RMSNorm, rotary, the
KV-cache write, one FlashAttention kernel, SiLU/GELU-and-mul, the fused-MoE kernels and the
Gated-DeltaNet decode kernels. Moved out of :mod:`opt.serving.builder` (which re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass

from opt.costlib.modelcard import ModelCard

# ---- kernel model: the kernels vLLM launches per decode step (module docstring) ------------

#: Kernel models of :func:`build_serving_plan` (``kernels=``).
KERNEL_MODELS = ("vllm", "unfused")


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a decode step.

    name: the vLLM kernel / op it stands for; members: ``(op kind, fraction)`` of the
    ``opt.costlib.operators`` work it does; launches: whether it pays t0 (False for a residual
    add riding on the next fused add+norm kernel); extra: structural work that the operator
    list does not hold (``rope``, ``q_norm``, ``k_norm``, ``qk_norm_rope_gate``, ``topk``,
    ``gdn_prep``, or None); saves: bytes that stay on chip (``shared_input``: a merged GEMM
    reads its input once; ``scores``: FlashAttention never writes the scores; ``residual``:
    the fused add+norm does not re-read the sum; or None).
    """

    name: str
    members: tuple[tuple[str, float], ...] = ()
    launches: bool = True
    extra: str | None = None
    saves: str | None = None


def _k(name: str, *kinds: str, saves: str | None = None) -> Kernel:
    return Kernel(name, tuple((k, 1.0) for k in kinds), saves=saves)


def _token_mixer_kernels(card: ModelCard, layer: int) -> dict[str, list[Kernel]]:
    """Kernels of the qkv / attn / o_proj ops (vLLM ``LlamaAttention``, ``Gemma3Attention``,
    ``Qwen3NextAttention``, ``QwenGatedDeltaNetAttention``)."""
    norm = _k("fused_add_rms_norm", "attn_norm", saves="residual")
    if card.layer_type(layer) == "linear":
        return {"qkv": [norm, _k("in_proj_qkvz GEMM", "in_proj_qkvz"),
                        _k("in_proj_ba GEMM", "in_proj_ba")],
                "attn": [Kernel("gdn input rearrange (compiled copy)", extra="gdn_prep"),
                         _k("causal_conv1d_update", "conv1d"),
                         _k("fused_sigmoid_gating_delta_rule_update", "gdn_recurrence"),
                         _k("RMSNormGated", "gated_norm")],
                "o_proj": [_k("out_proj GEMM", "out_proj"), _rider("add_attn")]}
    if card.qk_norm and card.attention_output_gate:   # Qwen3-Next: one fused Triton kernel
        pre = [Kernel("fused_qk_rmsnorm_rope_gate", extra="qk_norm_rope_gate")]
    elif card.qk_norm:                                 # Gemma-3, Qwen3: q_norm, k_norm, rope
        pre = [Kernel("q_norm", extra="q_norm"), Kernel("k_norm", extra="k_norm"),
               Kernel("rotary_embedding", extra="rope")]
    else:
        pre = [Kernel("rotary_embedding", extra="rope")]
    attn = pre + [_k("reshape_and_cache_flash", "kv_write"),
                  _k("flash_attn (QK^T, softmax, PV)", "qk", "softmax", "sv", saves="scores")]
    if card.attention_output_gate:
        attn.append(_k("sigmoid gate * attn", "attn_gate"))
    return {"qkv": [norm, _k("qkv_proj GEMM (QKVParallelLinear)", "q_proj", "k_proj", "v_proj",
                             saves="shared_input")],
            "attn": attn,
            "o_proj": [_k("o_proj GEMM", "o_proj"), _rider("add_attn")]}


def _rider(kind: str) -> Kernel:
    """A residual add done by the next ``fused_add_rms_norm`` (its work counted, no launch)."""
    return Kernel(f"{kind} (in the next fused_add_rms_norm)", ((kind, 1.0),), launches=False)


def _ffn_kernels(card: ModelCard) -> dict[str, list[Kernel]]:
    """Kernels of the ffn_in / ffn_out ops (vLLM ``LlamaMLP`` / ``Gemma3MLP`` with
    ``MergedColumnParallelLinear`` + ``SiluAndMul`` / ``GeluAndMul``; MoE: router GEMM,
    ``fused_topk``, then ``fused_experts``: ``moe_align_block_size``, the w13 fused-MoE kernel,
    ``silu_and_mul``, the w2 fused-MoE kernel, ``moe_sum``)."""
    norm = _k("fused_add_rms_norm", "ffn_norm", saves="residual")
    act = "gelu_and_mul" if card.ffn_activation == "geglu" else "silu_and_mul"
    if card.moe is None:
        return {"ffn_in": [norm, _k("gate_up_proj GEMM (MergedColumnParallelLinear)",
                                    "gate_proj", "up_proj", saves="shared_input"),
                           _k(act, "act")],
                "ffn_out": [_k("down_proj GEMM", "down_proj"), _rider("add_ffn")]}
    out = [Kernel("moe_align_block_size"),
           Kernel("fused_moe w13 (gate/up of the chosen experts)", (("moe_experts", 2 / 3),)),
           Kernel(act),   # its bytes are in moe_experts' activation traffic
           Kernel("fused_moe w2 (down)", (("moe_experts", 1 / 3),)),
           _k("moe_sum", "combine")]
    for s in range(card.moe.shared_experts):
        out += [_k(f"shared{s} gate_up GEMM", f"shared{s}_gate", f"shared{s}_up",
                   saves="shared_input"),
                _k(f"shared{s} {act}", f"shared{s}_act"), _k(f"shared{s} down GEMM",
                                                             f"shared{s}_down")]
        if card.moe.shared_gate:
            out.append(Kernel(f"shared{s} sigmoid gate (ReplicatedLinear, 1 output)"))
    return {"ffn_in": [norm, _k("router GEMM (ReplicatedLinear gate)", "router"),
                       Kernel("topk_softmax (fused_topk)", extra="topk")],
            "ffn_out": out + [_rider("add_ffn")]}


def vllm_kernels(card: ModelCard, layer: int) -> dict[str, list[Kernel]]:
    """The kernels vLLM launches for each P3 op of ``layer`` in a decode step (docs/serving.md
    "Kernels and launch cost" cites the vLLM files). TP collectives are charged separately."""
    return {**_token_mixer_kernels(card, layer), **_ffn_kernels(card)}
