"""The task graph of one step of a built P1 instance (:mod:`opt.placement.builder`,
problems.md §1.4): ``embed``, every layer's operators (TP shards, all-reduces, attention per KV
cell, the dense FFN or the MoE experts), ``final_norm`` and ``lm_head``, with the edges and
their payload specs and each task's weight block."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import Op, Precision, layer_ops
from opt.placement.build_devices import KvPlan
from opt.placement.build_options import BuildOptions


@dataclass
class StepTemplate:
    """The task structure of one step."""

    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    shard: list[int] = field(default_factory=list)
    family: list[str | None] = field(default_factory=list)
    ops: list[tuple[str, int, int]] = field(default_factory=list)  # (op kind, layer, shard)
    edges: list[tuple[int, int, Any]] = field(default_factory=list)  # (src, dst, payload spec)
    frac: list[float] = field(default_factory=list)  # share of the layer's op this task does
    home: list[int] = field(default_factory=list)  # KV home index of an attention cell, else -1

    def add(self, name: str, kind: str, layer: int, shard: int, family: str | None,
            op_ref: tuple[str, int, int], frac: float = 1.0, home: int = -1) -> int:
        self.frac.append(frac)
        self.home.append(home)
        self.names.append(name)
        self.kinds.append(kind)
        self.layer.append(layer)
        self.shard.append(shard)
        self.family.append(family)
        self.ops.append(op_ref)
        return len(self.names) - 1


# ---- the step template ------------------------------------------------------------------------

@dataclass
class _Layer:
    """Adds one layer's tasks to the template: task names ``L{layer}.{kind}[#shard][@g{group}]``
    and weight-block names ``L{lo}-{hi}_{family}[#shard]`` (``block_span`` layers per block)."""

    tpl: StepTemplate
    layer: int
    probe: dict[str, Op]
    block_span: int
    n_layers: int
    shards: Sequence[int]
    tp: int

    def add(self, kind: str, shard: int = -1, family: str | None = None,
            cell: tuple[int, float, bool] | None = None) -> int:
        """A task; ``cell`` = (home index, share, grouped) for an attention-cell task."""
        name = f"L{self.layer}.{kind}" + (f"#{shard}" if shard >= 0 else "")
        frac, home = (1.0 / self.tp if shard >= 0 else 1.0), -1
        if cell is not None:
            home, frac, grouped = cell
            if grouped:
                name += f"@g{home}"
        return self.tpl.add(name, kind, self.layer, shard, family, (kind, self.layer, shard),
                            frac, home)

    def fam(self, kind: str, shard: int = -1) -> str | None:
        f = self.probe[kind].family
        if f is None:
            return None
        span = self.layer // self.block_span
        lo = span * self.block_span
        hi = min((span + 1) * self.block_span, self.n_layers) - 1
        return f"L{lo}-{hi}_{f}" + (f"#{shard}" if shard >= 0 else "")

    def edge(self, src: int, dst: int, spec: tuple | None = None) -> None:
        """Edge src → dst carrying ``spec`` (default: src's output)."""
        self.tpl.edges.append((src, dst, ("out", src) if spec is None else spec))


def step_template(card: ModelCard, opt: BuildOptions, n_layers: int, prec: Precision,
                   kv: KvPlan) -> StepTemplate:
    """``embed``, every layer's operators (sharded, with all-reduces when tp > 1; attention
    per KV cell of ``kv``), ``final_norm`` and ``lm_head`` of one step, with the edges."""
    tpl = StepTemplate()
    e_idx = tpl.add("embed", "embed", -1, -1, None, ("embed", -1, -1))
    x_src = e_idx  # the residual stream entering the next layer
    shards = range(opt.tp) if opt.tp > 1 else [-1]
    for layer in range(n_layers):
        probe = {o.kind: o for o in layer_ops(card, layer, tokens=1, context=1, batch=1,
                                              precision=prec, experts=opt.experts,
                                              routing=routing_name(card, opt))}
        lay = _Layer(tpl, layer, probe, opt.block_span, n_layers, shards, opt.tp)
        add_attn = _attention_tasks(lay, x_src, opt.tp, kv)
        x_src = _ffn_tasks(lay, add_attn, card.moe is not None, opt.tp)
    fn = tpl.add("final_norm", "final_norm", -1, -1, None, ("final_norm", -1, -1))
    lm = tpl.add("lm_head", "lm_head", -1, -1, None, ("lm_head", -1, -1))
    tpl.edges += [(x_src, fn, ("out", x_src)), (fn, lm, ("out", fn))]
    return tpl


def _attention_tasks(lay: _Layer, x_src: int, tp: int, kv: KvPlan) -> int:
    """attn_norm, per shard q/k/v, per KV cell of the shard kv_write, qk, softmax, sv, then
    (attn_gate) o_proj, the all-reduce (tp > 1) and add_attn; returns add_attn. Payloads into a
    cell are the cell's share of the shard's q/k/v; qk and sv read the cell's K (V) cache."""
    add, fam, edge, tpl = lay.add, lay.fam, lay.edge, lay.tpl
    norm = add("attn_norm")
    edge(x_src, norm)
    o_list = []
    shard_frac = 1.0 / tp
    for s in lay.shards:
        q = add("q_proj", s, fam("q_proj", s))
        k = add("k_proj", s, fam("k_proj", s))
        v = add("v_proj", s, fam("v_proj", s))
        for p in (q, k, v):
            edge(norm, p)
        svs = []
        for c_shard, home, frac in kv.cells:
            if c_shard != s:
                continue
            cell = (home, frac, kv.grouped)
            kvw = add("kv_write", s, None, cell)
            qk = add("qk", s, None, cell)
            sm = add("softmax", s, None, cell)
            sv = add("sv", s, None, cell)
            r = frac / shard_frac  # the cell's share of the shard's heads
            tpl.edges += [(k, kvw, ("part", k, r)), (v, kvw, ("part", v, r)),
                          (q, qk, ("part", q, r)), (kvw, qk, ("kv", lay.layer, frac)),
                          (qk, sm, ("out", qk)), (sm, sv, ("out", sm)),
                          (kvw, sv, ("kv", lay.layer, frac))]
            svs.append(sv)
        last = svs
        if "attn_gate" in lay.probe:
            g = add("attn_gate", s)
            tpl.edges += [(sv, g, ("out", sv)) for sv in svs] + [(q, g, ("out", q))]
            last = [g]
        o = add("o_proj", s, fam("o_proj", s))
        for x in last:
            edge(x, o)
        o_list.append(o)
    add_attn = add("add_attn")
    edge(x_src, add_attn)
    if tp > 1:
        ar = add("allreduce_attn")
        tpl.edges += [(o, ar, ("zero",)) for o in o_list]
        edge(ar, add_attn, ("zero",))
    else:
        edge(o_list[0], add_attn)
    return add_attn


def _mlp_tasks(lay: _Layer, fnorm: int, prefix: str, router: int | None) -> list[int]:
    """gate, up, act, down of one MLP (``prefix`` '' for the dense FFN, else an expert's) per
    shard; routed experts also depend on the router. Returns the down projections."""
    add, fam, tpl = lay.add, lay.fam, lay.tpl
    g_kind, u_kind, a_kind, d_kind = ((f"{prefix}_gate", f"{prefix}_up", f"{prefix}_act",
                                       f"{prefix}_down") if prefix else
                                      ("gate_proj", "up_proj", "act", "down_proj"))
    downs = []
    for s in lay.shards:
        gt = add(g_kind, s, fam(g_kind, s))
        up = add(u_kind, s, fam(u_kind, s))
        act = add(a_kind, s)
        dn = add(d_kind, s, fam(d_kind, s))
        tpl.edges += [(fnorm, gt, ("out", fnorm)), (fnorm, up, ("out", fnorm)),
                      (gt, act, ("out", gt)), (up, act, ("out", up)),
                      (act, dn, ("out", act))]
        if router is not None and prefix.startswith("expert"):
            tpl.edges += [(router, gt, ("zero",))]
        downs.append(dn)
    return downs


def _ffn_tasks(lay: _Layer, add_attn: int, moe: bool, tp: int) -> int:
    """ffn_norm, the dense FFN or the MoE (router, experts, shared experts, combine), the
    all-reduce (tp > 1) and add_ffn; returns add_ffn."""
    add, edge, tpl = lay.add, lay.edge, lay.tpl
    fnorm = add("ffn_norm")
    edge(add_attn, fnorm)
    router = None
    if not moe:
        ffn_out = _mlp_tasks(lay, fnorm, "", None)
    else:
        router = add("router", -1, lay.fam("router"))
        edge(fnorm, router)
        ffn_out = []
        expert_kinds = sorted({k.rsplit("_", 1)[0] for k in lay.probe
                               if k.startswith(("expert", "shared")) and k.endswith("_gate")})
        for ek in expert_kinds:
            ffn_out += _mlp_tasks(lay, fnorm, ek, router)
    add_ffn = add("add_ffn")
    edge(add_attn, add_ffn)
    if tp > 1:
        ar = add("allreduce_ffn")
        tpl.edges += [(dn, ar, ("zero",)) for dn in ffn_out]
        merged = ar
    else:
        merged = None
    if moe:
        comb = add("combine")
        edge(router, comb)
        if merged is not None:
            edge(merged, comb, ("zero",))
        else:
            tpl.edges += [(dn, comb, ("out", dn)) for dn in ffn_out]
        edge(comb, add_ffn)
    elif merged is not None:
        edge(merged, add_ffn, ("zero",))
    else:
        edge(ffn_out[0], add_ffn)
    return add_ffn


def routing_name(card: ModelCard, opt: BuildOptions) -> str:
    """The cost library's routing (:func:`opt.costlib.operators.ffn_ops`) of
    ``BuildOptions.moe_routing``: ``per_token`` for an MoE card under ``per_token``, else
    ``deterministic`` (the fixed rule, every token through ``BuildOptions.experts``, default
    the first top-k; dense cards ignore it)."""
    return "per_token" if card.moe is not None and opt.moe_routing == "per_token" \
        else "deterministic"
