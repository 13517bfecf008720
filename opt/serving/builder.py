"""Build a P3 serving-plan instance from a model card, GPU types and a workload (problems.md §3.1).

One partition block (``card.block_period`` layers: Gemma-3 6, Qwen3-Next 4, GPT-OSS 2, dense 1)
is cut into five decode operators per layer, the granularity at which stage boundaries may fall
(documented choice; norms, residual adds and activations belong to the neighbouring GEMM's
op — they run as kernels of their own under ``kernels="vllm"``, see below):

=========  =====================================================  ==========================
op         members (``opt.costlib.operators`` kinds)                      boundary activation / req.
=========  =====================================================  ==========================
qkv        attn_norm, q/k/v_proj (GDN: in_proj_qkvz, in_proj_ba)   q + k + v + residual
attn       kv_write, qk, softmax, sv, attn_gate (GDN: conv1d,      attention output + residual
           gdn_recurrence, gated_norm) — holds the KV / state
o_proj     o_proj / out_proj, add_attn                             hidden
ffn_in     ffn_norm, gate_proj, up_proj, act (MoE: ffn_norm,       FFN activation + residual
           router)                                                 (MoE: normed x + residual)
ffn_out    down_proj, add_ffn (MoE: experts, shared experts,       hidden
           combine, add_ffn)
=========  =====================================================  ==========================

Latency of an op on a replica of ``tp`` GPUs at microbatch b̂ (decode: 1 token per request,
context = the workload's mean context s), with the GPU model of problems.md §5.3, depends on the
kernel model (``kernels``):

- ``"vllm"`` (default): the op runs the kernels vLLM launches for it (:func:`vllm_kernels`:
  fused QKV and gate/up GEMMs, fused residual-add + RMSNorm, rotary, KV-cache write, one
  FlashAttention kernel, SiLU/GELU-and-mul, the fused-MoE kernels, the Gated-DeltaNet decode
  kernels). Each kernel costs ``t0 + max(f/(η_c·F), m/(η_m·β))`` over its *merged* work: a fused
  GEMM reads its input once, FlashAttention never writes the score matrix, the fused add+norm
  does not re-read the sum; residual adds ride on the next layer norm's kernel (no launch).
- ``"unfused"`` (the model before fused kernels, kept to show the effect): each operator of
  ``opt.costlib.operators`` costs its own roofline term, plus t0 once per GEMM / attention /
  softmax / router operator (norms, adds and activations free of launches).

Shards:
GEMMs and activations split over ``tp``; attention over ``min(tp, kv_heads)`` (KV heads are
replicated beyond that); norms and residual adds are replicated. Collectives on the node's
intra-node link: a ring all-reduce of the hidden state after ``o_proj`` and ``ffn_out``; with
``ep > 1`` MoE experts use two all-to-alls (dispatch + combine) instead of sharded GEMMs'
reduction, plus the shared experts' all-reduce; the LM head is vocabulary-parallel with an
all-gather of the logits. MoE experts use OpWeave's expected (uniform) routing.

Memory: resident weights per op (all experts of a MoE layer); KV per request at context s
(full layers s tokens, sliding layers min(s, window), Gated-DeltaNet the fixed recurrent + conv
state), attributed to the ``attn`` op that reads it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from opt.common.errors import InputError
from opt.common.jsonio import json_bytes
from opt.common.units import dtype_bytes, seconds_to_ticks
from opt.costlib.gpu_calib import GpuCalibration
from opt.costlib.gpu_match import CardMatch
from opt.costlib.hardware import Catalog
from opt.costlib.latency import COLLECTIVE_OVERHEAD_S, EfficiencyRoofline, Link, ring_allreduce_s
from opt.costlib.measured import MeasuredTable
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import NORM_FLOPS, SOFTMAX_FLOPS, Op, Precision, layer_ops
from opt.serving.crossing import (
    CROSSING_PROVENANCE,
    all_gather_s,
    reshard_tables_s,
    scatter_s,
)
from opt.serving.instance import (
    GpuType,
    ServingConfig,
    ServingGrid,
    ServingInstance,
    ServingOp,
    microbatch_sizes_for,
    serving_instance_from_dict,
)
from opt.serving.kernel_cost import (
    DEFAULT_GPU_COST,
    DEFAULT_UNMEASURED_GPU,
    KernelCoster,
    check_gpu_cost,
    check_unmeasured_gpu,
    load_calibrations,
    measured_kind,
    nearest_calibrated,
    transferred_calibration,
)
from opt.serving.vllm_kernels import KERNEL_MODELS, Kernel, _k, vllm_kernels

P3_OPS = ("qkv", "attn", "o_proj", "ffn_in", "ffn_out")

_MEMBERS = {
    "qkv": {"attn_norm", "q_proj", "k_proj", "v_proj", "in_proj_qkvz", "in_proj_ba"},
    "attn": {"kv_write", "qk", "softmax", "sv", "attn_gate", "conv1d", "gdn_recurrence",
             "gated_norm"},
    "o_proj": {"o_proj", "out_proj", "add_attn"},
    "ffn_in": {"ffn_norm", "gate_proj", "up_proj", "act", "router"},
}
#: Kernels that pay the launch cost t0 (the others are fused into them).
_KERNEL_CLASSES = {"gemm", "attention", "softmax", "router"}
#: Kernels replicated on every TP rank (not sharded).
_REPLICATED = {"attn_norm", "ffn_norm", "add_attn", "add_ffn", "gated_norm"}
#: Default tensor-parallel degrees tried per GPU type (within one node).
DEFAULT_TP = (1, 2, 4, 8)
#: Per-request bytes of the sampled token id sent back to the embedding owner.
TOKEN_ID_BYTES = 4


#: longest TPOT SLO accepted (seconds): one day; the instance stores it in integer ticks
MAX_TPOT_SLO_S = 86_400.0
#: the longest mean context a serving instance takes (tokens; the CLI's integer limit)
MAX_CONTEXT_TOKENS = 2 ** 31 - 1


@dataclass(frozen=True)
class ServingWorkload:
    """Mean context s (tokens, an integer ≥ 1) and the TPOT SLO (seconds, finite, in
    (0, MAX_TPOT_SLO_S]); checked on construction (InputError naming ``context`` / ``slo``)."""

    context_tokens: int
    tpot_slo_s: float

    def __post_init__(self) -> None:
        ctx, slo = self.context_tokens, self.tpot_slo_s
        if isinstance(ctx, bool) or not isinstance(ctx, (int, np.integer)) \
                or not 1 <= ctx <= MAX_CONTEXT_TOKENS:
            raise InputError(f"context must be an integer in 1..{MAX_CONTEXT_TOKENS:,} tokens, "
                             f"got {ctx!r}", field="context")
        if isinstance(slo, bool) or not isinstance(slo, (int, float, np.number)) \
                or not 0 < slo <= MAX_TPOT_SLO_S or not math.isfinite(slo):
            raise InputError(f"TPOT SLO must be a finite number of seconds in (0, "
                             f"{MAX_TPOT_SLO_S:g}], got {slo!r} s", field="slo")


def _p3_op(kind: str) -> str:
    for p3, members in _MEMBERS.items():
        if kind in members:
            return p3
    return "ffn_out"  # down_proj, add_ffn, moe_experts, shared*, combine


def _shard(op: Op, card: ModelCard, tp: int) -> float:
    if op.kind in _REPLICATED:
        return 1.0
    if op.kind in ("gdn_recurrence", "conv1d"):
        return float(min(tp, card.linear_attention.num_v_heads))
    if op.op_class in ("attention", "softmax") or op.kind in ("kv_write", "attn_gate"):
        return float(min(tp, card.kv_heads))
    return float(tp)


def _group_latency_s(members: list[Op], card: ModelCard, coster: KernelCoster, gpu: str,
                     tp: int, n: float) -> float:
    """Seconds of an op under ``kernels="unfused"``: every operator's roofline on its shard,
    plus t0 per GEMM / attention / softmax / router operator (problems.md §5.3)."""
    t = 0.0
    for op in members:
        div = _shard(op, card, tp)
        f, m = float(op.flops) / div, float(op.bytes) / div
        cls = {"gemm": "gemm", "router": "gemm", "attention": "attention_decode",
               "norm": "norm", "activation": "activation"}.get(op.op_class, "elementwise")
        t += coster.kernel_s(gpu, cls, f, m, units=n * card.kv_heads / min(tp, card.kv_heads),
                             launches=op.op_class in _KERNEL_CLASSES)
    return t


def launches_per_layer(card: ModelCard, layer: int, kernels: str = "vllm") -> int:
    """How many kernels of ``layer`` pay the launch cost t0 under the kernel model ``kernels``."""
    _check_kernels(kernels)
    if kernels == "unfused":
        ops = layer_ops(card, layer, tokens=1, context=1, batch=1, routing="expected")
        return sum(1 for o in ops if o.op_class in _KERNEL_CLASSES)
    return sum(1 for ks in vllm_kernels(card, layer).values() for k in ks if k.launches)


def _check_kernels(kernels: str) -> None:
    if kernels not in KERNEL_MODELS:
        raise InputError(f"unknown kernel model '{kernels}'; known: {', '.join(KERNEL_MODELS)}",
                         field="kernels")


def _extra_work(extra: str, card: ModelCard, n: float, p: Precision) -> tuple[float, float]:
    """(FLOPs, bytes) of structural kernels absent from the operator list, for ``n`` tokens:
    element-wise passes that read and write their tensors once (rope, q/k norms, the gate
    copy, the GDN input rearrange) and the top-k over the router logits."""
    q, kv, la, moe = card.q_dim, card.kv_dim, card.linear_attention, card.moe
    if extra == "gdn_prep" and la is not None:
        return 0.0, 2.0 * n * (la.conv_dim + la.value_dim + 2 * la.num_v_heads) * p.a
    width = {"rope": q + kv, "q_norm": q, "k_norm": kv, "qk_norm_rope_gate": 2 * q + kv}
    if extra in width:
        return NORM_FLOPS * n * width[extra], 2.0 * n * width[extra] * p.a
    if extra == "topk" and moe is not None:
        return SOFTMAX_FLOPS * n * moe.num_experts, n * moe.num_experts * p.a
    raise InputError(f"unknown structural kernel '{extra}'", field="kernels")


def _extra_shard(extra: str, card: ModelCard, tp: int) -> float:
    if extra == "gdn_prep" and card.linear_attention is not None:
        return float(min(tp, card.linear_attention.num_v_heads))
    if extra == "topk":
        return 1.0
    return float(min(tp, card.kv_heads))


def _num(x: object) -> float:
    """A scalar count of an :class:`Op` (its fields are floats or 0-d arrays here)."""
    return float(np.asarray(x, dtype=np.float64))


def _saved_bytes(kernel: Kernel, ops: dict[str, Op]) -> float:
    """Bytes of ``kernel``'s members that stay on chip when they run as one kernel."""
    if kernel.saves == "shared_input":   # every member after the first re-read the input
        return sum(_num(ops[k].bytes) - ops[k].weight_bytes - _num(ops[k].out_bytes)
                   for k, _ in kernel.members[1:])
    if kernel.saves == "scores":         # qk writes, softmax reads+writes, sv reads them
        return 4.0 * _num(ops["qk"].out_bytes)
    if kernel.saves == "residual":       # the norm's input is the add's output, in registers
        return _num(ops[kernel.members[0][0]].out_bytes)
    return 0.0


def _kernel_class(kernel: Kernel, ops: dict[str, Op]) -> str:
    """The calibrated class of a kernel (problems.md §5.3b): FlashAttention decode, a GEMM, a
    norm, an activation, or element-wise (rotary, the Gated-DeltaNet kernels, launches only)."""
    kinds = {k for k, _ in kernel.members}
    if kinds & {"qk", "sv"}:
        return "attention_decode"
    classes = {ops[k].op_class for k in kinds}
    if classes & {"gemm", "router"}:
        return "gemm"
    if "norm" in classes or kernel.extra in ("q_norm", "k_norm"):
        return "norm"
    return "activation" if "activation" in classes else "elementwise"


def _kernel_s(kernel: Kernel, ops: dict[str, Op], card: ModelCard, coster: KernelCoster,
              gpu: str, tp: int, n: float, s: int, p: Precision) -> float:
    """Seconds of one kernel over its merged work on its per-GPU shard (t0 when it launches);
    a measured table's row of the kernel wins where it has one (opt.serving.kernel_cost)."""
    f = m = 0.0
    for kind, frac in kernel.members:
        div = _shard(ops[kind], card, tp)
        f += frac * _num(ops[kind].flops) / div
        m += frac * _num(ops[kind].bytes) / div
    if kernel.members:
        m -= _saved_bytes(kernel, ops) / _shard(ops[kernel.members[0][0]], card, tp)
    if kernel.extra is not None:
        fe, me = _extra_work(kernel.extra, card, n, p)
        div = _extra_shard(kernel.extra, card, tp)
        f, m = f + fe / div, m + me / div
    cls = _kernel_class(kernel, ops)
    attn_div = float(min(tp, card.kv_heads))
    mkind = measured_kind(frozenset(k for k, _ in kernel.members), kernel.extra)
    key = None
    if mkind == "flash_attn":
        key = (mkind, 1, s, int(n), 1.0 / attn_div)
    elif mkind is not None:
        key = (mkind, int(n), int(n), 1, 1.0 / tp)
    return coster.kernel_s(gpu, cls, f, m, units=n * card.kv_heads / attn_div,
                           launches=kernel.launches, key=key)


def _vllm_latency_s(p3: str, members: list[Op], card: ModelCard, layer: int,
                    coster: KernelCoster, gpu: str, tp: int, n: float, s: int,
                    p: Precision) -> float:
    """Seconds of P3 op ``p3`` of ``layer`` as vLLM's kernels; an operator that no kernel of
    the plan covers (a card feature the plan does not know) runs as its own launched kernel."""
    ops = {o.kind: o for o in members}
    plan = [k for k in vllm_kernels(card, layer)[p3]
            if all(kind in ops for kind, _ in k.members)]
    covered = {kind for k in plan for kind, _ in k.members}
    plan += [_k(o.kind, o.kind) for o in members if o.kind not in covered]
    return sum(_kernel_s(k, ops, card, coster, gpu, tp, n, s, p) for k in plan)


def _all_to_all_s(bytes_: float, group: int, link: Link) -> float:
    if group <= 1:
        return 0.0
    return (COLLECTIVE_OVERHEAD_S + (group - 1) * link.latency_s
            + (group - 1) / group * bytes_ / link.bandwidth_bytes_per_s)


def _kv_bytes_per_request(card: ModelCard, layer: int, context: int, p: Precision) -> float:
    kind = card.layer_type(layer)
    if kind == "linear":
        la = card.linear_attention
        conv = (la.conv_kernel - 1) * la.conv_dim
        return (la.num_v_heads * la.head_k_dim * la.head_v_dim + conv) * p.k
    tokens = min(context, card.sliding_window) if kind == "sliding" else context
    return 2.0 * card.kv_dim * tokens * p.k


def _resident_weights(card: ModelCard, members: list[Op], p: Precision) -> float:
    w = 0.0
    for op in members:
        if op.kind == "moe_experts":
            m = card.moe
            wexp = p.w if card.expert_dtype is None else dtype_bytes(card.expert_dtype)
            w += m.num_experts * 3 * card.hidden * m.expert_ffn * wexp
        else:
            w += op.weight_bytes
    return w


def _boundary_bytes(card: ModelCard, layer: int, p3: str, p: Precision) -> float:
    d = card.hidden
    if card.layer_type(layer) == "linear":
        la = card.linear_attention
        after = {"qkv": 2 * la.key_dim + 2 * la.value_dim + 2 * la.num_v_heads + d,
                 "attn": la.value_dim + d}
    else:
        q_out = card.q_dim * (2 if card.attention_output_gate else 1)
        after = {"qkv": q_out + 2 * card.kv_dim + d, "attn": card.q_dim + d}
    after["o_proj"] = d
    after["ffn_in"] = (2 * d) if card.moe is not None else (card.ffn + d)
    after["ffn_out"] = d
    return after[p3] * p.a


def build_serving_plan(card: ModelCard, catalog: Catalog, gpu_names: Sequence[str],
                       workload: ServingWorkload, *, grid: ServingGrid | None = None,
                       tp_degrees: Sequence[int] = DEFAULT_TP, expert_parallel: bool = True,
                       precision: Precision | None = None, memory_fraction: float = 1.0,
                       time_unit: str = "ns", kernels: str = "vllm",
                       gpu_cost: str = DEFAULT_GPU_COST,
                       calibrations: Mapping[str, GpuCalibration] | None = None,
                       measurements: MeasuredTable | None = None,
                       unmeasured_gpu: str = DEFAULT_UNMEASURED_GPU,
                       network: Link | None = None) -> ServingInstance:
    """The P3 instance for ``card`` on ``gpu_names`` (module docstring for the cost model).

    Configurations: every GPU type × TP degree ≤ its GPUs per node (and ≤ ``grid.max_gpus``);
    for MoE models also ``ep = tp`` when ``expert_parallel``. ``kernels``: ``"vllm"`` (fused
    kernels as vLLM launches them) or ``"unfused"`` (the earlier per-operator model), recorded
    in ``meta["kernels"]``. ``gpu_cost``: ``"calibrated"`` (the per-class model fitted to
    measured kernels, collectives and send/recv: ``calibrations``, default the bundled file)
    or ``"roofline"`` (opt.serving.kernel_cost); ``unmeasured_gpu``: under ``calibrated``,
    ``"transfer"`` (the nearest measured GPU's fitted classes on the GPU's own peaks) or
    ``"roofline"`` for GPU types the calibration does not cover (``meta.unmeasured_gpu``,
    per GPU ``meta.gpu_models``); ``measurements``: a measured table whose kernel rows
    replace the model's (provenance in ``meta.measurements``); ``network``: every GPU type's
    inter-node link, overriding the catalog's and the calibration's measured send/recv
    (OpWeave Fig. 14's network sweep; ``meta.network_override``).
    """
    _check_choices(kernels, gpu_cost, unmeasured_gpu, memory_fraction, gpu_names)
    p = precision or Precision(weight=card.dtype, activation=card.dtype, kv=card.dtype)
    grid = grid or ServingGrid()
    gpus, models, networks = _gpu_types(catalog, gpu_names)
    coster = _coster(catalog, card, models, gpu_cost, calibrations, measurements,
                     unmeasured_gpu)
    gpus = {k: replace(g, intra_node=coster.intra_link(k, g.intra_node)) for k, g in gpus.items()}
    own = {k: network or coster.network(k, net) for k, net in networks.items()}
    nets, cross = crossing_networks(list(own.values()))
    slowest = slowest_link(list(own.values()), "slowest network of the chosen node types" + (
        " (measured send/recv between nodes)" if coster.calibrations and network is None
        else ""))
    configs = _configs(card, gpus, tp_degrees, grid, expert_parallel)
    s = workload.context_tokens
    limit = memory_batch_limit(card, configs, gpus, _block_ops(card, [1], s, p)[0],
                               memory_fraction, grid.max_replicas)
    given = grid.batches is not None
    batches = grid.batches if grid.batches is not None else limit.batches
    grid = replace(grid, batches=batches)
    mbs = microbatch_sizes_for(batches, grid.max_microbatches)
    ops, members_by_mb = _block_ops(card, mbs, s, p)
    dur_s, head_s = _durations(card, configs, gpus, coster, ops, members_by_mb, mbs, s, p,
                               kernels)
    busy, tok_busy, lat = _network_ticks(nets, mbs, ops, time_unit)
    r_out, r_in = _reshard_s(configs, gpus, coster, ops, mbs)
    embed_w = card.vocab * card.hidden * p.w
    return as_read(ServingInstance(
        model=card.name, layers=card.layers, block_layers=card.block_period, ops=tuple(ops),
        embed_weight_bytes=int(embed_w), lm_head_weight_bytes=int(embed_w),
        tied_embeddings=card.tied_embeddings, gpus=gpus, network=slowest,
        configs=tuple(configs), context_tokens=s,
        tpot_slo=int(_ticks(workload.tpot_slo_s, time_unit)), grid=grid, microbatch_sizes=mbs,
        op_duration=_ticks(dur_s, time_unit), head_duration=_ticks(head_s, time_unit),
        transfer_duration=busy + lat[:, None, None], transfer_busy=busy,
        token_transfer_duration=tok_busy + lat[:, None], token_transfer_busy=tok_busy,
        memory_fraction=memory_fraction, time_unit=time_unit,
        networks=nets if len(nets) > 1 else (), crossing_network=cross,
        reshard=(_ticks(r_out, time_unit), _ticks(r_in, time_unit)),
        meta={"builder": "opt.serving.builder", "model": card.name,
              "gpus": list(gpus), "context_tokens": s, "tpot_slo_s": workload.tpot_slo_s,
              "precision": {"weight": p.weight, "activation": p.activation, "kv": p.kv},
              "routing": "expected" if card.moe is not None else None, "kernels": kernels,
              "network": slowest.to_dict(),
              **({"network_override": network.to_dict()} if network is not None else {}),
              "gpu_networks": {k: link.to_dict() for k, link in own.items()},
              "crossing_rule": CROSSING_RULE, "crossing": CROSSING_PROVENANCE,
              "unmeasured_gpu": unmeasured_gpu,
              "batch_grid": limit.provenance(batches, given),
              **coster.provenance(),
              **({"measurements": coster.measurements_meta()} if measurements else {})}))


#: Largest per-replica batch the memory-derived grid offers (requests): 2^16. It guards the
#: build and search only — each doubling adds a microbatch size to every latency table and a
#: batch value to every owner's candidates — and stays inside the grid's MAX_GRID_BATCH (2^20).
MAX_MEMORY_BATCH = 1 << 16


@dataclass(frozen=True)
class BatchLimit:
    """Per-replica batch limits from memory (OpWeave App. B.4 with μ = 1: the μ microbatches
    of b̂_m requests hold μ·b̂_m = b_m requests' KV).

    ``memory_batch`` (requests) = max over configurations c and KV-holding ops i of
    ⌊(M_c − w_i) / kv_i⌋: the stage set of op i alone (the smallest weight share a stage set
    holding KV can have; ``w_i`` its weights, ``kv_i`` its KV per request, both over every
    block it runs in) on a replica of ``config`` (M_c = tp × GPU memory × memory fraction);
    None when no op holds KV. Every plan has an owner holding KV, so its batch is at most
    ``memory_batch``; every owner serves the same global batch B = n_m·b_m with at most
    ``max_replicas`` replicas, so no owner's batch exceeds ``max_replicas`` times it (a stage
    set without KV is bounded by memory only through its weights).

    ``batches``, the grid's form: the powers of two 1, 2, 4, … up to P·R, P the largest power
    of two ≤ ``memory_batch`` (the KV owners' largest) and R the largest ≤ ``max_replicas``,
    and at most MAX_MEMORY_BATCH — every power-of-two batch a feasible plan can use below the
    cap (1 alone when no configuration holds one request)."""

    memory_batch: int | None
    max_replicas: int
    config: str | None = None
    op: str | None = None

    @property
    def by_memory(self) -> int | None:
        """P·R (requests), the largest power-of-two batch memory and replicas allow; None
        when no op holds KV."""
        if self.memory_batch is None:
            return None
        if self.memory_batch < 1:
            return 1
        return _floor_pow2(self.memory_batch) * _floor_pow2(self.max_replicas)

    @property
    def largest(self) -> int:
        """The grid's largest batch: :attr:`by_memory`, at most MAX_MEMORY_BATCH."""
        top = self.by_memory
        return MAX_MEMORY_BATCH if top is None else min(top, _floor_pow2(MAX_MEMORY_BATCH))

    @property
    def batches(self) -> tuple[int, ...]:
        return tuple(1 << k for k in range(self.largest.bit_length()))

    def provenance(self, batches: Sequence[int], given: bool) -> dict[str, object]:
        """``meta.batch_grid`` of an instance whose grid holds ``batches`` (``given``: the
        caller's, else :attr:`batches`): the rule, which limit bound its largest batch
        (``memory``, ``cap`` = MAX_MEMORY_BATCH, or ``given``), and the memory limit with the
        configuration and op defining it."""
        top = self.by_memory
        bound = "given" if given else (
            "cap" if top is None or top > MAX_MEMORY_BATCH else "memory")
        return {"rule": "given batches" if given else
                "powers of two up to the largest KV-holding batch memory allows (OpWeave App. "
                "B.4) times the replicas per owner",
                "largest": max(batches), "bound": bound, "memory_batch": self.memory_batch,
                "memory_config": self.config, "memory_op": self.op,
                "max_replicas": self.max_replicas, "cap": MAX_MEMORY_BATCH}


def _floor_pow2(n: int) -> int:
    """The largest power of two ≤ ``n`` (n ≥ 1)."""
    return 1 << (int(n).bit_length() - 1)


def memory_batch_limit(card: ModelCard, configs: Sequence[ServingConfig],
                       gpus: Mapping[str, GpuType], ops: Sequence[ServingOp],
                       memory_fraction: float, max_replicas: int) -> BatchLimit:
    """The :class:`BatchLimit` of the block ``ops`` of ``card`` on ``configs``: every op's
    weights and KV per request count once per block it runs in (full blocks + the truncated
    one, as :attr:`ServingInstance.op_count`)."""
    best: BatchLimit | None = None
    full, partial = divmod(card.layers, card.block_period)
    for op in ops:
        if op.kv_bytes_per_request <= 0:
            continue
        runs = full + (1 if op.layer < partial else 0)
        w, kv = runs * op.weight_bytes, runs * op.kv_bytes_per_request
        for cfg in configs:
            cap = cfg.tp * gpus[cfg.gpu].memory_bytes * memory_fraction
            b = max(0, math.floor((cap - w) / kv))
            while b > 0 and w + b * kv > cap:   # float division rounding
                b -= 1
            if best is None or b > (best.memory_batch or 0):
                best = BatchLimit(b, max_replicas, cfg.id, op.id)
    return best or BatchLimit(None, max_replicas)


def _check_choices(kernels: str, gpu_cost: str, unmeasured_gpu: str, memory_fraction: float,
                   gpu_names: Sequence[str]) -> None:
    """InputError naming the field for an unknown kernel model, GPU cost model or unmeasured
    GPU policy, a memory fraction outside (0, 1], or no GPU type."""
    _check_kernels(kernels)
    check_gpu_cost(gpu_cost)
    check_unmeasured_gpu(unmeasured_gpu)
    if not (isinstance(memory_fraction, (int, float)) and 0 < memory_fraction <= 1):
        raise InputError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}",
                         field="memory_fraction")
    if not gpu_names:
        raise InputError("at least one GPU type is needed", field="gpus")


def _ticks(seconds: object, time_unit: str) -> np.ndarray:
    """``seconds`` (scalar or array) as int64 ticks of ``time_unit``."""
    return np.asarray(seconds_to_ticks(seconds, time_unit), dtype=np.int64)


def _network_ticks(nets: Sequence[Link], mbs: Sequence[int], ops: Sequence[ServingOp],
                   time_unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(busy [net, mb, op], token busy [net, mb], latency [net]) in ticks of ``time_unit``:
    each network's serialisation of an op's output for a microbatch, of the sampled token
    ids, and its latency (problems.md §3.1 "Network model")."""
    out_b = np.array([o.out_bytes_per_request for o in ops], dtype=np.float64)
    mb_arr = np.array(mbs, dtype=np.float64)
    bw = np.array([n.bandwidth_bytes_per_s for n in nets])
    busy = _ticks(mb_arr[None, :, None] * out_b[None, None, :] / bw[:, None, None], time_unit)
    tok_busy = _ticks(mb_arr[None, :] * TOKEN_ID_BYTES / bw[:, None], time_unit)
    lat = _ticks(np.array([n.latency_s for n in nets]), time_unit)
    return busy, tok_busy, lat


def _reshard_s(configs: Sequence[ServingConfig], gpus: Mapping[str, GpuType],
               coster: KernelCoster, ops: Sequence[ServingOp], mbs: Sequence[int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """(all-gather [c, mb, i], scatter [c, mb, i]) seconds of the crossings that redistribute
    (:func:`opt.serving.crossing.reshard_tables_s`): the all-gather as half the measured
    all-reduce of the node (the ring formula on the intra-node link where it was not
    measured), the scatter on the measured intra-node send/recv link (``gpus`` hold it)."""
    def gather(cfg: ServingConfig, x: float) -> float:
        link = gpus[cfg.gpu].intra_node
        return all_gather_s(coster.all_reduce_s(cfg.gpu, x, cfg.tp,
                                                float(ring_allreduce_s(x, cfg.tp, link))))

    def scatter(cfg: ServingConfig, x: float) -> float:
        return scatter_s(x, cfg.tp, gpus[cfg.gpu].intra_node)

    return reshard_tables_s(ops, configs, mbs, gather, scatter)


def as_read(inst: ServingInstance) -> ServingInstance:
    """``inst`` as its file reads back (:func:`serving_instance_from_dict` on its JSON): the
    builder never returns an instance its reader refuses (InputError naming the field the
    reader names, prefixed by what was built)."""
    try:
        return serving_instance_from_dict(json.loads(json_bytes(inst.to_dict())),
                                          source="<built serving instance>")
    except InputError as exc:
        raise InputError(f"the built instance is not a valid serving instance: {exc.detail}",
                         field=exc.field) from None


#: The network of a stage-boundary crossing (problems.md §3.1 "Network model"; OpWeave App.
#: B.3 Eq. 39): the slower endpoint's, per crossing.
CROSSING_RULE = "slower endpoint: latency max, bandwidth min of the two GPU types' networks"


def slowest_link(links: Sequence[Link], source: str) -> Link:
    """The componentwise slowest of ``links``: the largest latency, the smallest bandwidth."""
    return Link(max(n.latency_s for n in links), min(n.bandwidth_bytes_per_s for n in links),
                source)


def crossing_networks(links: Sequence[Link]) -> tuple[tuple[Link, ...], np.ndarray]:
    """(networks, crossing_network) for GPU types whose own inter-node links are ``links``
    (in the instance's GPU order): a crossing between types a and b takes the slower endpoint's
    link, componentwise (:data:`CROSSING_RULE`); equal links share one network, so a
    single-type instance has one."""
    nets: list[Link] = []
    g = len(links)
    cross = np.zeros((g, g), dtype=np.int64)
    for a in range(g):
        for b in range(g):
            pair = (links[a], links[b])
            key = (max(n.latency_s for n in pair), min(n.bandwidth_bytes_per_s for n in pair))
            found = [k for k, n in enumerate(nets)
                     if (n.latency_s, n.bandwidth_bytes_per_s) == key]
            if found:
                cross[a, b] = found[0]
                continue
            src = links[a].source if a == b else (
                f"slower endpoint of {links[a].source or '?'} | {links[b].source or '?'}")
            cross[a, b] = len(nets)
            nets.append(Link(key[0], key[1], src))
    return tuple(nets), cross


def _coster(catalog: Catalog, card: ModelCard, models: dict[str, EfficiencyRoofline],
            gpu_cost: str, calibrations: Mapping[str, GpuCalibration] | None,
            measurements: MeasuredTable | None, unmeasured_gpu: str) -> KernelCoster:
    """The kernel cost model of a build (the bundled calibrations when none are given; GPU
    types without one take ``unmeasured_gpu``'s rule, opt.serving.kernel_cost)."""
    cals: dict[str, GpuCalibration] = {}
    donors: dict[str, CardMatch] = {}
    if gpu_cost == "calibrated":
        every = load_calibrations(catalog) if calibrations is None else dict(calibrations)
        if not every:
            raise InputError("the GPU calibration covers no GPU type (give a file written "
                             "by 'hetopt calibrate --gpu', or gpu_cost 'roofline')",
                             field="gpu_calibration")
        cals = {k: v for k, v in every.items() if k in models}
        if unmeasured_gpu == "transfer" and every:
            for gpu in models:
                if gpu not in cals:
                    donors[gpu] = nearest_calibrated(gpu, catalog, every)
                    cals[gpu] = transferred_calibration(gpu, models[gpu],
                                                        every[donors[gpu].card])
    return KernelCoster(gpu_cost, models, cals, measurements, card.name, transferred=donors)


def _gpu_types(catalog: Catalog, gpu_names: Sequence[str]
               ) -> tuple[dict[str, GpuType], dict[str, EfficiencyRoofline], dict[str, Link]]:
    """(GPU types by name, their roofline models, their node types' catalog networks — all
    bundled node types share OpWeave's 20 us / 32 GB/s baseline)."""
    gpus: dict[str, GpuType] = {}
    models: dict[str, EfficiencyRoofline] = {}
    networks: dict[str, Link] = {}
    for name in gpu_names:
        dev = catalog.device(name)
        if dev.device_class != "gpu" or not isinstance(dev.latency_model, EfficiencyRoofline):
            raise InputError(f"'{name}' is not a GPU with a roofline latency model",
                             field="gpus")
        if dev.price_usd_per_hour is None:
            raise InputError(f"GPU '{dev.name}' has no price in the catalog; serving plans "
                             f"minimise cost (add price_usd_per_hour with --catalog)",
                             field="gpus")
        node = catalog.node_type(dev.name)
        gpus[dev.name] = GpuType(dev.name, dev.peak_flops, dev.mem_bw_bytes_per_s,
                                 float(dev.memory_bytes), dev.price_usd_per_hour,
                                 node.gpus_per_node, node.intra_node)
        models[dev.name] = dev.latency_model
        networks[dev.name] = node.network
    return gpus, models, networks


def _configs(card: ModelCard, gpus: dict[str, GpuType], tp_degrees: Sequence[int],
             grid: ServingGrid, expert_parallel: bool) -> list[ServingConfig]:
    """Every GPU type × TP degree that fits a node and the grid (plus ``-ep`` for MoE)."""
    configs: list[ServingConfig] = []
    for g in gpus.values():
        for tp in sorted(set(tp_degrees)):
            if tp > g.gpus_per_node or tp > grid.max_gpus:
                continue
            configs.append(ServingConfig(f"{g.name}x{tp}", g.name, tp, 1))
            if card.moe is not None and expert_parallel and tp > 1:
                configs.append(ServingConfig(f"{g.name}x{tp}-ep", g.name, tp, tp))
    if not configs:
        raise InputError(f"no configuration: TP degrees {list(tp_degrees)} exceed every GPU "
                         f"type's GPUs per node", field="tp")
    return configs


def _block_ops(card: ModelCard, mbs: Sequence[int], s: int, p: Precision
               ) -> tuple[list[ServingOp], list[list[list[Op]]]]:
    """(the block's ops, their member kernels per microbatch: [mb][op] -> kernels)."""
    ops: list[ServingOp] = []
    members_by_mb: list[list[list[Op]]] = []
    for mi, mb in enumerate(mbs):
        row: list[list[Op]] = []
        for layer in range(card.block_period):
            groups: dict[str, list[Op]] = {k: [] for k in P3_OPS}
            for op in layer_ops(card, layer, tokens=1, context=s, batch=mb, precision=p,
                                routing="expected"):
                groups[_p3_op(op.kind)].append(op)
            for kind in P3_OPS:
                row.append(groups[kind])
                if mi == 0:
                    module = ("attention" if kind in ("qkv", "attn", "o_proj")
                              else "moe" if card.moe is not None else "ffn")
                    kv = _kv_bytes_per_request(card, layer, s, p) if kind == "attn" else 0.0
                    ops.append(ServingOp(
                        f"L{layer}.{kind}", kind, layer, module,
                        int(round(_resident_weights(card, groups[kind], p))), int(round(kv)),
                        int(round(_boundary_bytes(card, layer, kind, p)))))
        members_by_mb.append(row)
    return ops, members_by_mb


def _durations(card: ModelCard, configs: list[ServingConfig], gpus: dict[str, GpuType],
               coster: KernelCoster, ops: list[ServingOp],
               members_by_mb: list[list[list[Op]]], mbs: Sequence[int], s: int, p: Precision,
               kernels: str = "vllm") -> tuple[np.ndarray, np.ndarray]:
    """(op seconds [c, mb, i] incl. TP collectives, head seconds [c, mb, embed|lm_head])."""
    n = len(ops)
    dur_s = np.zeros((len(configs), len(mbs), n))
    head_s = np.zeros((len(configs), len(mbs), 2))
    d, a = card.hidden, p.a
    for ci, cfg in enumerate(configs):
        g = gpus[cfg.gpu]
        link = g.intra_node
        for mi, mb in enumerate(mbs):
            for i, op in enumerate(ops):
                members = members_by_mb[mi][i]
                if kernels == "unfused":
                    t = _group_latency_s(members, card, coster, cfg.gpu, cfg.tp, float(mb))
                else:
                    t = _vllm_latency_s(op.kind, members, card, op.layer, coster, cfg.gpu,
                                        cfg.tp, float(mb), s, p)
                if op.kind in ("o_proj", "ffn_out") and cfg.tp > 1:
                    b = mb * d * a
                    t += coster.all_reduce_s(cfg.gpu, b, cfg.tp,
                                             float(ring_allreduce_s(b, cfg.tp, link)))
                    if op.kind == "ffn_out" and card.moe is not None and cfg.ep > 1:
                        t += 2 * _all_to_all_s(mb * card.moe.top_k * d * a, cfg.ep, link)
                dur_s[ci, mi, i] = t
            head_s[ci, mi] = _head_s(card, coster, cfg, mb, p, link)
    return dur_s, head_s


def _head_s(card: ModelCard, coster: KernelCoster, cfg: ServingConfig, mb: int,
            p: Precision, link: Link) -> tuple[float, float]:
    """Seconds of the embedding gather (replicated) and of the final norm + vocabulary-parallel
    LM head (with the logits' all-gather when tp > 1) at microbatch ``mb``."""
    d, a, gpu = card.hidden, p.a, cfg.gpu
    embed = coster.kernel_s(gpu, "elementwise", 0.0, mb * d * (p.w + a))
    w_lm = d * card.vocab * p.w / cfg.tp
    f_lm = 2.0 * mb * d * card.vocab / cfg.tp
    norm_launch = coster.kernel_s(gpu, "elementwise", 0.0, 0.0)   # the final norm's t0
    lm = coster.kernel_s(gpu, "gemm", f_lm, w_lm + mb * (d + card.vocab / cfg.tp) * a) \
        + norm_launch
    if cfg.tp > 1:
        lm += _all_to_all_s(mb * card.vocab * a, cfg.tp, link)
    return embed, lm


def op_durations_s(card: ModelCard, catalog: Catalog, gpu: str, *, batch: int, context: int,
                   tp: int = 1, kernels: str = "vllm", precision: Precision | None = None,
                   gpu_cost: str = DEFAULT_GPU_COST, unmeasured_gpu: str = DEFAULT_UNMEASURED_GPU
                   ) -> tuple[dict[str, float], tuple[float, float]]:
    """(seconds of each op of one block by name ``L<layer>.<op>``, (embedding, LM head)
    seconds) of ``batch`` requests at ``context`` tokens on one replica of ``tp`` ``gpu``
    GPUs, as the builder's op tables charge them (TP collectives included; ``gpu_cost`` and
    ``unmeasured_gpu`` as in :func:`build_serving_plan`)."""
    _check_kernels(kernels)
    check_gpu_cost(gpu_cost)
    check_unmeasured_gpu(unmeasured_gpu)
    p = precision or Precision(weight=card.dtype, activation=card.dtype, kv=card.dtype)
    gpus, models, _ = _gpu_types(catalog, [gpu])
    coster = _coster(catalog, card, models, gpu_cost, None, None, unmeasured_gpu)
    gpus = {k: replace(g, intra_node=coster.intra_link(k, g.intra_node)) for k, g in gpus.items()}
    g = next(iter(gpus.values()))
    cfg = ServingConfig(f"{g.name}x{tp}", g.name, tp, 1)
    ops, members = _block_ops(card, [batch], context, p)
    dur, head = _durations(card, [cfg], gpus, coster, ops, members, [batch], context, p,
                           kernels)
    return ({o.id: float(dur[0, 0, i]) for i, o in enumerate(ops)},
            (float(head[0, 0, 0]), float(head[0, 0, 1])))


def decode_step_s(card: ModelCard, catalog: Catalog, gpu: str, *, batch: int, context: int,
                  tp: int = 1, kernels: str = "vllm", precision: Precision | None = None,
                  gpu_cost: str = DEFAULT_GPU_COST) -> float:
    """Seconds of one whole-model decode step (every layer, embedding and LM head, TP
    collectives) of ``batch`` requests at ``context`` tokens on one replica of ``tp`` ``gpu``
    GPUs, as the builder's op tables charge it (one owner, no pipeline transfers)."""
    ops, head = op_durations_s(card, catalog, gpu, batch=batch, context=context, tp=tp,
                               kernels=kernels, precision=precision, gpu_cost=gpu_cost)
    per_layer = np.array(list(ops.values())).reshape(card.block_period, len(P3_OPS)).sum(axis=1)
    layers = sum(float(per_layer[layer % card.block_period]) for layer in range(card.layers))
    return layers + sum(head)
