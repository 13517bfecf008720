"""Per-operator FLOPs and bytes of one transformer layer step (problems.md §1.4, §5): dense, GQA, MoE,
sliding-window attention and Gated-DeltaNet linear attention, for prefill and decode.

A *step* processes ``tokens`` new tokens (T_q) per sequence for ``batch`` sequences (B) whose
context after the step is ``context`` tokens (T_kv ≥ T_q): prefill has T_q = T_kv = L_in, decode
step i has T_q = 1, T_kv = L_in + i. ``context`` may be a numpy array (one entry per step): all
counts broadcast, so a builder gets a whole decode sweep in one call.

Conventions (documented choices):
- GEMM: 2·N·d_in·d_out FLOPs, bytes = weights + input + output activations.
- Causal attention counts only the unmasked (query, key) pairs: query i of the step sees
  T_kv − T_q + i + 1 keys, capped at the sliding window. Prefill QKᵀ/PV FLOPs are therefore
  ≈ halved against the full T_q×T_kv rectangle that public analysers count; this matches DOPS'
  PIM roofline figure for qk (see the PIM calibration in ``opt/costlib/data/hardware.json``).
- qk, softmax and sv are separate ops (DOPS' operator split), so the score matrix of the
  unmasked pairs is written and read once each.
- Norms 4 FLOPs/element, softmax 5, gated activations 5, residual add 1; gathers (embedding) and
  KV writes are pure data movement.
- The LM head runs on every new token in decode and on the last token of each sequence in
  prefill (only that logit is sampled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from opt.common.errors import InputError
from opt.common.units import dtype_bytes
from opt.costlib.modelcard import ModelCard

#: FLOPs per element of the non-GEMM ops.
NORM_FLOPS = 4.0
SOFTMAX_FLOPS = 5.0
ACT_FLOPS = 5.0
ADD_FLOPS = 1.0
#: Gated DeltaNet: FLOPs per (token, v-head, d_k·d_v) of the delta-rule update and readout;
#: chunk length of the chunked prefill algorithm (state read/written once per chunk).
GDN_FLOPS_PER_STATE = 6.0
GDN_CHUNK = 64


@dataclass(frozen=True)
class Precision:
    """Storage precision of weights, activations and the KV cache (names of ``DTYPE_BYTES``).

    Precision changes *bytes only* (weights, activations, KV reads/writes, edge payloads, block
    sizes and hence load durations); FLOPs are 2 per multiply-accumulate whatever the
    precision, because each device has one peak in the latency models (an int8 MAC-rate gain is
    not modelled; decode is memory-bound anyway). int8 is 1 byte per element; int4 is grouped
    quantisation: 4 bits per element plus one fp16 scale (2 bytes) per group of
    ``opt.common.units.INT4_GROUP`` = 128 consecutive elements, i.e. 0.5 + 2/128 = 0.515625 bytes per
    element (no zero point: symmetric quantisation).
    """

    weight: str = "fp16"
    activation: str = "fp16"
    kv: str = "fp16"

    def check(self) -> Precision:
        """Raise :class:`InputError` naming the field when a dtype name is unknown."""
        for name in ("weight", "activation", "kv"):
            value = getattr(self, name)
            try:
                dtype_bytes(value)
            except InputError as exc:
                raise InputError(f"unknown {name} dtype '{value}' ({exc})",
                                 field=f"precision.{name}") from None
        return self

    @property
    def w(self) -> float:
        return dtype_bytes(self.weight)

    @property
    def a(self) -> float:
        return dtype_bytes(self.activation)

    @property
    def k(self) -> float:
        return dtype_bytes(self.kv)


#: Weight families whose GEMMs take weight and activation sparsity (the layer's linear
#: projections; not the router, the embedding or the LM head).
SPARSE_FAMILIES = frozenset({"wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"})


@dataclass(frozen=True)
class Sparsity:
    """Sparsity ratios (fractions of zeros in [0, 1)) and how they change each op (DOPS §4.1).

    weight: fraction of zero weights of the layer's linear projections (q/k/v/o, gate/up/down,
        expert and shared-expert matrices), stored compressed: the block's bytes (hence its
        load durations), the weight bytes an op reads and the GEMM FLOPs all scale by
        (1 − weight). Index metadata is not counted (structured N:M sparsity's indices are a
        few per cent of the kept values).
    activation_prefill, activation_decode: fraction of zero *input* activations of those
        GEMMs in the prefill step and in decode steps. FLOPs scale by (1 − a) (zero inputs
        are skipped). Weight *traffic* scales by the probability that a weight row is needed
        by at least one of the op's N = batch × tokens input rows when zeros are independent,
        1 − a^N: a batch-1 decode GEMV skips a fraction a of the weight rows, while a prefill
        (N in the hundreds) reads essentially all of them. The stored block (load duration)
        is unchanged: which rows are needed depends on the input. Activation bytes and edge
        payloads are unchanged (dense tensors).
    attention: fraction of (query, key) pairs skipped by sparse attention: ``qk`` and ``sv``
        FLOPs, their K/V reads and the score matrix (``qk`` output, ``softmax`` FLOPs, bytes
        and output, ``sv`` input) scale by (1 − attention). The KV cache itself (``kv_write``,
        and the KV payload of the edges to attention away from the KV home) stays dense.
    """

    weight: float = 0.0
    activation_prefill: float = 0.0
    activation_decode: float = 0.0
    attention: float = 0.0

    def check(self) -> Sparsity:
        """Raise :class:`InputError` naming the field unless every ratio is in [0, 1)."""
        for name in ("weight", "activation_prefill", "activation_decode", "attention"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                    or not 0.0 <= float(value) < 1.0:
                raise InputError(f"sparsity ratio must be in [0, 1), got {value!r}",
                                 field=f"sparsity.{name}")
        return self

    @property
    def dense(self) -> bool:
        return not (self.weight or self.activation_prefill or self.activation_decode
                    or self.attention)


def apply_sparsity(ops: list[Op], card: ModelCard, *, tokens, batch: int, sparsity: Sparsity,
                   phase: str, precision: Precision | None = None) -> list[Op]:
    """``ops`` of one layer step with the ratios of ``sparsity`` applied (see
    :class:`Sparsity`); ``phase`` ("prefill" | "decode") selects the activation ratio."""
    if phase not in ("prefill", "decode"):
        raise InputError(f"phase must be prefill or decode, got {phase!r}", field="phase")
    sparsity.check()
    if sparsity.dense:
        return ops
    p = precision or Precision()
    n = batch * np.asarray(tokens, dtype=np.float64)
    s_w = float(sparsity.weight)
    s_a = float(sparsity.activation_prefill if phase == "prefill"
                else sparsity.activation_decode)
    keep_att = 1.0 - float(sparsity.attention)
    read_frac = 1.0 - np.power(s_a, n) if s_a > 0 else 1.0
    out = []
    for o in ops:
        fam = o.family or ""
        if o.op_class == "gemm" and (fam in SPARSE_FAMILIES or fam.startswith(("expert",
                                                                                 "shared"))):
            wb = o.weight_bytes * (1.0 - s_w)
            o = replace(o, flops=o.flops * (1.0 - s_w) * (1.0 - s_a),
                        bytes=o.bytes - o.weight_bytes + wb * read_frac, weight_bytes=wb)
        elif o.kind in ("qk", "sv") and keep_att < 1.0:
            q_bytes = n * card.q_dim * p.a  # the query (qk) / output (sv) rows stay dense
            o = replace(o, flops=o.flops * keep_att,
                        bytes=q_bytes + (o.bytes - q_bytes) * keep_att,
                        out_bytes=o.out_bytes * keep_att if o.kind == "qk" else o.out_bytes)
        elif o.kind == "softmax" and keep_att < 1.0:
            o = replace(o, flops=o.flops * keep_att, bytes=o.bytes * keep_att,
                        out_bytes=o.out_bytes * keep_att)
        out.append(o)
    return out


@dataclass(frozen=True)
class Op:
    """One operator of one step. Byte/FLOP fields are floats or arrays (broadcast over context).

    kind: operator name (``q_proj``, ``expert3_up``, ...); op_class: latency class
    (:data:`opt.costlib.latency.OP_CLASSES`); module: ``attention`` | ``ffn`` | ``moe`` | ``head``;
    family: weight family (``wq`` ... ``w_down``, ``expert{e}``, ``router``, ``embed``,
    ``lm_head``) or None; flops; bytes: all bytes moved (weights + activations + KV/state);
    weight_bytes: parameter bytes read; out_bytes: output activation bytes (edge payload).
    """

    kind: str
    op_class: str
    module: str
    family: str | None
    flops: object
    bytes: object
    weight_bytes: float
    out_bytes: object


def causal_pairs(tokens, context, window: int | None = None):
    """Unmasked (query, key) pairs per sequence for T_q new tokens ending a context of T_kv
    tokens, each key range capped at ``window`` (vectorised)."""
    tq = np.asarray(tokens, dtype=np.float64)
    tkv = np.asarray(context, dtype=np.float64)
    if np.any(tkv < tq):
        raise InputError("context must be ≥ tokens (the new tokens are part of the context)",
                         field="context")
    a = tkv - tq + 1.0  # keys seen by the first new query
    if window is None:
        return tq * a + tq * (tq - 1.0) / 2.0
    w = float(window)
    n1 = np.clip(w - a, 0.0, tq)  # queries still below the window
    return n1 * a + n1 * (n1 - 1.0) / 2.0 + (tq - n1) * w


def _gemm(kind, module, family, n, d_in, d_out, p: Precision, op_class="gemm", w_bytes=None):
    wb = d_in * d_out * p.w if w_bytes is None else w_bytes
    return Op(kind, op_class, module, family, 2.0 * n * d_in * d_out,
              wb + n * (d_in + d_out) * p.a, wb, n * d_out * p.a)


def _vec(kind, op_class, module, n, width, flops_per, p: Precision, inputs=1, weight=0.0):
    """Element-wise op over n×width activations reading ``inputs`` tensors, writing one."""
    return Op(kind, op_class, module, None, flops_per * n * width,
              (inputs + 1) * n * width * p.a + weight, weight, n * width * p.a)


def _norm(kind, module, n, width, p: Precision):
    return _vec(kind, "norm", module, n, width, NORM_FLOPS, p, weight=width * p.w)


def attention_ops(card: ModelCard, layer: int, tokens, context, batch, p: Precision) -> list[Op]:
    """Token-mixer ops of one layer: full/sliding (G)QA or Gated DeltaNet, with norm and add."""
    d = card.hidden
    n = batch * np.asarray(tokens, dtype=np.float64)
    kind = card.layer_type(layer)
    ops = [_norm("attn_norm", "attention", n, d, p)]
    if kind == "linear":
        la = card.linear_attention
        tq = np.asarray(tokens, dtype=np.float64)
        ops.append(_gemm("in_proj_qkvz", "attention", "wqkvz", n, d,
                         2 * la.key_dim + 2 * la.value_dim, p))
        ops.append(_gemm("in_proj_ba", "attention", "wba", n, d, 2 * la.num_v_heads, p))
        conv_state = batch * (la.conv_kernel - 1) * la.conv_dim * p.k
        ops.append(Op("conv1d", "elementwise", "attention", None,
                      2.0 * n * la.conv_dim * la.conv_kernel,
                      2 * n * la.conv_dim * p.a + 2 * conv_state + la.conv_dim * la.conv_kernel * p.w,
                      la.conv_dim * la.conv_kernel * p.w, n * la.conv_dim * p.a))
        state = batch * la.num_v_heads * la.head_k_dim * la.head_v_dim * p.k
        chunks = np.ceil(tq / GDN_CHUNK)
        ops.append(Op("gdn_recurrence", "attention", "attention", None,
                      GDN_FLOPS_PER_STATE * n * la.num_v_heads * la.head_k_dim * la.head_v_dim,
                      2 * state * chunks + n * (la.conv_dim + la.value_dim) * p.a, 0.0,
                      n * la.value_dim * p.a))
        ops.append(_vec("gated_norm", "norm", "attention", n, la.value_dim, NORM_FLOPS + 5, p,
                        inputs=2, weight=la.head_v_dim * p.w))
        ops.append(_gemm("out_proj", "attention", "wo", n, la.value_dim, d, p))
    else:
        window = card.sliding_window if kind == "sliding" else None
        pairs = batch * causal_pairs(tokens, context, window)
        kv_tokens = batch * np.minimum(np.asarray(context, dtype=np.float64),
                                       window if window else np.inf)
        q_out = card.q_dim * (2 if card.attention_output_gate else 1)
        ops.append(_gemm("q_proj", "attention", "wq", n, d, q_out, p))
        ops.append(_gemm("k_proj", "attention", "wk", n, d, card.kv_dim, p))
        ops.append(_gemm("v_proj", "attention", "wv", n, d, card.kv_dim, p))
        ops.append(Op("kv_write", "elementwise", "attention", None, 0.0,
                      2 * n * card.kv_dim * (p.a + p.k), 0.0, 2 * n * card.kv_dim * p.k))
        h, dh = card.heads, card.head_dim
        scores = h * pairs * p.a
        kv_read = kv_tokens * card.kv_dim * p.k  # K (resp. V) of the whole visible context
        ops.append(Op("qk", "attention", "attention", None, 2.0 * h * dh * pairs,
                      n * card.q_dim * p.a + kv_read + scores, 0.0, scores))
        ops.append(Op("softmax", "softmax", "attention", None, SOFTMAX_FLOPS * h * pairs,
                      2 * scores, 0.0, scores))
        ops.append(Op("sv", "attention", "attention", None, 2.0 * h * dh * pairs,
                      scores + kv_read + n * card.q_dim * p.a, 0.0, n * card.q_dim * p.a))
        if card.attention_output_gate:
            ops.append(_vec("attn_gate", "elementwise", "attention", n, card.q_dim, ACT_FLOPS, p,
                            inputs=2))
        ops.append(_gemm("o_proj", "attention", "wo", n, card.q_dim, d, p))
    ops.append(_vec("add_attn", "elementwise", "attention", n, d, ADD_FLOPS, p, inputs=2))
    return ops


#: Multiplier of the per-token routing hash (Knuth's multiplicative constant ⌊2³²/φ⌋).
ROUTING_HASH_MULTIPLIER = 2654435761
MOE_ROUTINGS = ("per_token", "deterministic", "expected")


def routed_experts(n_tokens: int, num_experts: int, top_k: int) -> np.ndarray:
    """The experts of each of the ``n_tokens`` tokens of a step under the per-token rule
    (problems.md §1.4, MoE): token i (i = b·T_q + t for token t of sequence b) has the hash
    h(i) = ⌊(i · 2654435761 mod 2³²) / 2¹⁶⌋ and routes to the k consecutive experts
    (h(i) + j) mod E, j = 0..k−1. Returns an [n_tokens, k] int array (token 0 → 0..k−1)."""
    i = np.arange(int(n_tokens), dtype=np.uint64)
    h = ((i * np.uint64(ROUTING_HASH_MULTIPLIER)) % np.uint64(2 ** 32)) // np.uint64(2 ** 16)
    return ((h[:, None] + np.arange(top_k, dtype=np.uint64)[None, :])
            % np.uint64(num_experts)).astype(np.int64)


def expert_token_counts(n_tokens: int, num_experts: int, top_k: int) -> np.ndarray:
    """Tokens each of the E experts receives in a step of ``n_tokens`` tokens under the
    per-token rule (:func:`routed_experts`); sums to n_tokens · k."""
    return np.bincount(routed_experts(n_tokens, num_experts, top_k).ravel(),
                       minlength=num_experts).astype(np.int64)


def _token_count(n) -> int:
    """The step's token count N = B·T_q as an int (per-token routing needs one value)."""
    arr = np.unique(np.asarray(n, dtype=np.float64))
    if arr.size != 1 or arr[0] != round(float(arr[0])):
        raise InputError("per-token MoE routing needs one integer token count per call, got "
                         f"{arr.tolist()[:4]}", field="tokens")
    return int(arr[0])


def ffn_ops(card: ModelCard, tokens, batch, p: Precision, *, routing: str = "deterministic",
            experts: Sequence[int] | None = None) -> list[Op]:
    """FFN (gated) or MoE ops of one layer, with its norm and residual add.

    MoE routing ``per_token`` (DOPS §6.1, "8 local experts with deterministic top-2 routing";
    the builder's default): one gate/up/act/down op group for each of the E experts, expert e
    processing the n_e tokens :func:`expert_token_counts` routes to it (n_e = 0: zero FLOPs
    and bytes; its ``weight_bytes`` still state the expert's matrices). ``deterministic``:
    every token goes through the same top-k experts ``experts`` (default 0..k−1), one op group
    per listed expert. ``expected`` (OpWeave, uniform routing): one fused ``moe_experts`` op
    whose weight bytes are those of the E·(1 − (1 − k/E)^N) experts touched by N tokens and
    whose FLOPs are N·k experts' worth.
    """
    d = card.hidden
    n = batch * np.asarray(tokens, dtype=np.float64)
    ops = [_norm("ffn_norm", "ffn" if card.moe is None else "moe", n, d, p)]
    if card.moe is None:
        f = card.ffn
        ops += [_gemm("gate_proj", "ffn", "w_gate", n, d, f, p),
                _gemm("up_proj", "ffn", "w_up", n, d, f, p),
                _vec("act", "activation", "ffn", n, f, ACT_FLOPS, p, inputs=2),
                _gemm("down_proj", "ffn", "w_down", n, f, d, p)]
        ops.append(_vec("add_ffn", "elementwise", "ffn", n, d, ADD_FLOPS, p, inputs=2))
        return ops
    m = card.moe
    wexp = p.w if card.expert_dtype is None else dtype_bytes(card.expert_dtype)
    router = _gemm("router", "moe", "router", n, d, m.num_experts, p, op_class="router")
    ops.append(replace(router, flops=router.flops + SOFTMAX_FLOPS * n * m.num_experts))
    f = m.expert_ffn
    if routing == "deterministic":
        chosen = list(range(m.top_k)) if experts is None else list(experts)
        for e in chosen:
            fam = f"expert{e}"
            ops += [_gemm(f"{fam}_gate", "moe", fam, n, d, f, p, w_bytes=d * f * wexp),
                    _gemm(f"{fam}_up", "moe", fam, n, d, f, p, w_bytes=d * f * wexp),
                    _vec(f"{fam}_act", "activation", "moe", n, f, ACT_FLOPS, p, inputs=2),
                    _gemm(f"{fam}_down", "moe", fam, n, f, d, p, w_bytes=f * d * wexp)]
        k_eff = len(chosen)
    elif routing == "per_token":
        counts = expert_token_counts(_token_count(n), m.num_experts, m.top_k)
        for e, n_e in enumerate(counts.astype(np.float64)):
            fam = f"expert{e}"
            group = [_gemm(f"{fam}_gate", "moe", fam, n_e, d, f, p, w_bytes=d * f * wexp),
                     _gemm(f"{fam}_up", "moe", fam, n_e, d, f, p, w_bytes=d * f * wexp),
                     _vec(f"{fam}_act", "activation", "moe", n_e, f, ACT_FLOPS, p, inputs=2),
                     _gemm(f"{fam}_down", "moe", fam, n_e, f, d, p, w_bytes=f * d * wexp)]
            if n_e == 0:  # no task reads the matrices in this step
                group = [replace(o, bytes=0.0) for o in group]
            ops += group
        k_eff = m.top_k
    elif routing == "expected":
        touched = m.num_experts * (1.0 - (1.0 - m.top_k / m.num_experts) ** n)
        wb = touched * 3 * d * f * wexp
        ops.append(Op("moe_experts", "gemm", "moe", "experts", 2.0 * n * m.top_k * 3 * d * f,
                      wb + n * m.top_k * (2 * d + 3 * f) * p.a, wb, n * m.top_k * d * p.a))
        k_eff = m.top_k
    else:
        raise InputError(f"unknown routing '{routing}'; known: {', '.join(MOE_ROUTINGS)}",
                         field="routing")
    for s in range(m.shared_experts):
        fam = f"shared{s}"
        ops += [_gemm(f"{fam}_gate", "moe", fam, n, d, m.shared_ffn, p),
                _gemm(f"{fam}_up", "moe", fam, n, d, m.shared_ffn, p),
                _vec(f"{fam}_act", "activation", "moe", n, m.shared_ffn, ACT_FLOPS, p, inputs=2),
                _gemm(f"{fam}_down", "moe", fam, n, m.shared_ffn, d, p)]
    n_in = k_eff + m.shared_experts
    ops.append(Op("combine", "elementwise", "moe", None, 2.0 * n * n_in * d,
                  (n_in + 1) * n * d * p.a, 0.0, n * d * p.a))
    ops.append(_vec("add_ffn", "elementwise", "moe", n, d, ADD_FLOPS, p, inputs=2))
    return ops


def layer_ops(card: ModelCard, layer: int, *, tokens, context, batch: int,
              precision: Precision | None = None, routing: str = "deterministic",
              experts: Sequence[int] | None = None, sparsity: Sparsity | None = None,
              phase: str | None = None) -> list[Op]:
    """All ops of layer ``layer`` for one step (see the module docstring for T_q/T_kv).

    ``sparsity`` (:class:`Sparsity`) rescales FLOPs and bytes; ``phase`` picks its activation
    ratio ("prefill" | "decode"; default: decode when every step has T_q = 1)."""
    p = precision or Precision()
    if batch < 1:
        raise InputError(f"batch must be ≥ 1, got {batch}", field="batch")
    if not 0 <= layer < card.layers:
        raise InputError(f"layer {layer} out of range 0..{card.layers - 1}", field="layer")
    ops = (attention_ops(card, layer, tokens, context, batch, p)
           + ffn_ops(card, tokens, batch, p, routing=routing, experts=experts))
    if sparsity is not None and not sparsity.dense:
        if phase is None:
            phase = "decode" if np.all(np.asarray(tokens) == 1) else "prefill"
        ops = apply_sparsity(ops, card, tokens=tokens, batch=batch, sparsity=sparsity,
                             phase=phase, precision=p)
    return _broadcast(ops, np.broadcast_shapes(np.shape(tokens), np.shape(context)))


def _broadcast(ops: list[Op], shape: tuple[int, ...]) -> list[Op]:
    """Give every count the step shape, so per-step sums never drop context-free ops."""
    if not shape:
        return [replace(o, flops=float(o.flops), bytes=float(o.bytes),
                        out_bytes=float(o.out_bytes)) for o in ops]
    return [replace(o, flops=np.broadcast_to(np.asarray(o.flops, dtype=np.float64), shape),
                    bytes=np.broadcast_to(np.asarray(o.bytes, dtype=np.float64), shape),
                    out_bytes=np.broadcast_to(np.asarray(o.out_bytes, dtype=np.float64), shape))
            for o in ops]


def head_ops(card: ModelCard, *, tokens, batch: int, prefill: bool,
             precision: Precision | None = None) -> tuple[Op, list[Op]]:
    """The once-per-step ops: ``embed`` (first) and ``final_norm``, ``lm_head`` (last)."""
    p = precision or Precision()
    d = card.hidden
    n = batch * np.asarray(tokens, dtype=np.float64)
    embed = Op("embed", "elementwise", "head", "embed", 0.0, n * d * (p.w + p.a), n * d * p.w,
               n * d * p.a)
    n_out = batch * np.ones_like(n) if prefill else n
    tail = [_norm("final_norm", "head", n_out, d, p),
            _gemm("lm_head", "head", "lm_head", n_out, d, card.vocab, p)]
    embed, *tail = _broadcast([embed, *tail], np.shape(tokens))
    return embed, tail
