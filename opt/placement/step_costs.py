"""Durations, payloads and weight blocks of a built P1 instance over its steps
(:mod:`opt.placement.builder`, problems.md §1.4, §5): the per-step shapes, every operator's
FLOPs and bytes from one prefill and one vectorised decode evaluation, task durations in ticks
per legal device, the template's edges over every step, and the weight blocks with their
load durations per format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.units import seconds_to_ticks
from opt.costlib.hardware import PlatformSpec
from opt.costlib.latency import regime_class, ring_allreduce_s, star_allreduce_s
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import Op, Precision, head_ops, layer_ops
from opt.placement.build_devices import BuildDevices, KvPlan
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.step_template import StepTemplate, routing_name

PIM_ILLEGAL = frozenset({"router", "combine", "embed", "lm_head"})
ROW_PARALLEL = ("o_proj", "down_proj")
#: largest share of the positive durations (tasks and loads) that may round to 0 ticks of
#: the chosen time unit (a coarser unit is refused: the optimum would ignore those costs)
MAX_ZERO_ROUNDED_SHARE = 0.01


@dataclass(frozen=True)
class StepShapes:
    """Per-step shapes of the workload: step 0 is the prefill, steps 1..L_out decode."""

    n_steps: int
    ctx: np.ndarray  # T_kv per step (float64)
    tok: np.ndarray  # T_q per step (float64)


@dataclass
class Rounding:
    """Converts seconds to ticks of ``unit`` and counts the positive durations, and those of
    them that round to 0 ticks (local to one build)."""

    unit: str
    positive: int = 0
    zeroed: int = 0

    def ticks(self, seconds):
        out = seconds_to_ticks(seconds, self.unit)
        pos = np.asarray(seconds) > 0
        self.positive += int(pos.sum())
        self.zeroed += int((pos & (np.asarray(out) == 0)).sum())
        return out

    def check(self) -> None:
        """InputError naming ``time_unit`` when more than MAX_ZERO_ROUNDED_SHARE of the
        positive durations rounded to 0."""
        if self.zeroed > MAX_ZERO_ROUNDED_SHARE * self.positive:
            raise InputError(f"time_unit '{self.unit}' rounds {self.zeroed} of the "
                             f"{self.positive} positive task and load durations to 0 ticks "
                             f"({self.zeroed / self.positive:.0%}; at most "
                             f"{MAX_ZERO_ROUNDED_SHARE:.0%} may): use a finer time unit",
                             field="time_unit")


# ---- op costs per step (prefill scalar, decode vectorised) ----------------------------------

def step_shapes(workload: Workload) -> StepShapes:
    l_in, l_out = workload.prefill, workload.decode
    ctx = np.concatenate([[l_in], l_in + np.arange(1, l_out + 1)]).astype(np.float64)
    tok = np.concatenate([[l_in], np.ones(l_out)]).astype(np.float64)
    return StepShapes(l_out + 1, ctx, tok)


def _empty_decode(ops: list[Op]) -> list[Op]:
    """The decode ops of a workload without decode steps: zero-length arrays."""
    return [Op(o.kind, o.op_class, o.module, o.family, np.zeros(0), np.zeros(0),
               o.weight_bytes, np.zeros(0)) for o in ops]


def step_ops(card: ModelCard, opt: BuildOptions, n_layers: int, prec: Precision,
              workload: Workload) -> dict[tuple[str, int], dict[str, Any]]:
    """{(kind, layer): {"op": the prefill Op, "flops"/"bytes"/"out_bytes": arrays over steps}}
    from one prefill and one (vectorised) decode evaluation; layer −1 for the head ops."""
    l_in, l_out, batch = workload.prefill, workload.decode, workload.batch
    ctx = step_shapes(workload).ctx
    sparsity = opt.sparsity
    table: dict[tuple[str, int], dict[str, Any]] = {}

    def put(key, ops_pre, ops_dec):
        for op_p, op_d in zip(ops_pre, ops_dec):
            table[(op_p.kind, key)] = {
                "op": op_p,
                **{f: np.concatenate([np.atleast_1d(getattr(op_p, f)),
                                      np.broadcast_to(getattr(op_d, f), (l_out,))])
                   for f in ("flops", "bytes", "out_bytes")}}

    for layer in range(n_layers):
        routing = routing_name(card, opt)
        pre = layer_ops(card, layer, tokens=l_in, context=l_in, batch=batch, precision=prec,
                        experts=opt.experts, sparsity=sparsity, phase="prefill",
                        routing=routing)
        dec = layer_ops(card, layer, tokens=1, context=ctx[1:] if l_out else np.array([l_in + 1.0]),
                        batch=batch, precision=prec, experts=opt.experts, sparsity=sparsity,
                        phase="decode", routing=routing)
        if not l_out:
            dec = _empty_decode(dec)
        put(layer, pre, dec)
    e_p, t_p = head_ops(card, tokens=l_in, batch=batch, prefill=True, precision=prec)
    e_d, t_d = head_ops(card, tokens=np.ones(max(l_out, 1)), batch=batch, prefill=False,
                        precision=prec)
    if not l_out:
        e_d, *t_d = _empty_decode([e_d, *t_d])
    put(-1, [e_p, *t_p], [e_d, *t_d])
    return table


def allreduce_bytes(card: ModelCard, workload: Workload, prec: Precision, steps: StepShapes
                    ) -> np.ndarray:
    """float64 [steps]: bytes one tensor-parallel all-reduce moves at each step (the batch's
    tokens of the step × the hidden size × the activation bytes)."""
    return workload.batch * steps.tok * card.hidden * prec.a


def task_costs(tpl: StepTemplate, table: dict, devs: BuildDevices, kv: KvPlan,
               platform: PlatformSpec, opt: BuildOptions, steps: StepShapes,
               ar_bytes: np.ndarray, rounding: Rounding) -> tuple[np.ndarray, np.ndarray]:
    """(cost [steps, K, D] ticks, −1 illegal; output bytes [K, steps]) of the template's tasks.
    A task does its share ``tpl.frac`` of the layer's op (1/tp for a TP shard, the cell's heads
    for attention; row-parallel outputs keep full size). Legality: kv_write on its cell's KV
    home; NPU/GPU everything else, PIM all but PIM_ILLEGAL; the all-reduces only on the host
    (duration from the fabric's collective model of ``ar_bytes``, :func:`allreduce_bytes`).
    Op classes take their regime (:func:`opt.costlib.latency.regime_class`: decode attention
    is the GEMV regime)."""
    tp, nd, k_tasks = opt.tp, len(devs.devices), len(tpl.names)
    cost = np.full((steps.n_steps, k_tasks, nd), -1, dtype=np.int64)
    out_bytes = np.zeros((k_tasks, steps.n_steps))
    decode = steps.tok == 1
    decode[0] = False  # step 0 is the prefill, even with L_in = 1
    for k in range(k_tasks):
        kind, layer, shard = tpl.ops[k]
        if kind.startswith("allreduce"):
            link = platform.fabric
            f_ar = ring_allreduce_s if platform.topology == "full" else star_allreduce_s
            cost[:, k, devs.host] = rounding.ticks(f_ar(ar_bytes, tp, link))
            continue
        entry = table[(kind, layer)]
        op: Op = entry["op"]
        frac = tpl.frac[k]
        flops, nbytes = entry["flops"] * frac, entry["bytes"] * frac
        out = entry["out_bytes"] * (frac if kind not in ROW_PARALLEL else 1.0)
        out_bytes[k] = out
        if kind == "kv_write":
            legal = [kv.homes[tpl.home[k]]]
        else:
            legal = list(devs.compute)
            if kind not in PIM_ILLEGAL:
                legal += list(devs.pim)
        regimes = [(regime_class(op.op_class, False), ~decode),
                   (regime_class(op.op_class, True), decode)]
        if regimes[0][0] == regimes[1][0]:
            regimes = [(regimes[0][0], np.ones(steps.n_steps, dtype=bool))]
        for d in legal:
            spec = devs.specs[d][1]
            for c, sel in regimes:
                if sel.any():
                    cost[sel, k, d] = rounding.ticks(spec.latency_s(c, flops[sel],
                                                                    nbytes[sel]))
    return cost, out_bytes


# ---- edges (template → all steps) -----------------------------------------------------------

def template_edges(tpl: StepTemplate, out_bytes: np.ndarray, card: ModelCard, n_layers: int,
           workload: Workload, opt: BuildOptions, prec: Precision, steps: StepShapes
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, bytes) of every step's template edges (payload: the source's output, a
    share of it, the visible K/V of the cell's heads, or 0), then the lm_head → next embed token chain."""
    batch, n_steps, k_tasks = workload.batch, steps.n_steps, len(tpl.names)
    kv_tok = {}
    for layer in range(n_layers):
        window = card.sliding_window if card.layer_type(layer) == "sliding" else None
        visible = np.minimum(steps.ctx, window) if window else steps.ctx
        kv_tok[layer] = batch * visible * card.kv_dim * prec.k  # all KV heads of the layer
    e_src = np.array([a for a, _, _ in tpl.edges], dtype=np.int64)
    e_dst = np.array([b for _, b, _ in tpl.edges], dtype=np.int64)
    e_bytes = np.zeros((len(tpl.edges), n_steps))
    for i, (_, _, spec) in enumerate(tpl.edges):
        if spec[0] == "out":
            e_bytes[i] = out_bytes[spec[1]]
        elif spec[0] == "part":
            e_bytes[i] = out_bytes[spec[1]] * spec[2]
        elif spec[0] == "kv":
            e_bytes[i] = kv_tok[spec[1]] * spec[2]
    step_ids = np.arange(n_steps, dtype=np.int64)
    src_all = (step_ids[:, None] * k_tasks + e_src[None, :]).ravel()
    dst_all = (step_ids[:, None] * k_tasks + e_dst[None, :]).ravel()
    bytes_all = np.ceil(e_bytes.T).astype(np.int64).ravel()
    lm, e_idx = tpl.names.index("lm_head"), tpl.names.index("embed")
    chain_src = step_ids[:-1] * k_tasks + lm
    chain_dst = step_ids[1:] * k_tasks + e_idx
    chain_bytes = np.full(n_steps - 1, batch * 4, dtype=np.int64)  # sampled token ids (int32)
    return (np.concatenate([src_all, chain_src]), np.concatenate([dst_all, chain_dst]),
            np.concatenate([bytes_all, chain_bytes]))


# ---- weight blocks ----------------------------------------------------------------------------

def weight_blocks(tpl: StepTemplate, table: dict, devs: BuildDevices, platform: PlatformSpec,
            opt: BuildOptions, formats: tuple[str, ...], rounding: Rounding
            ) -> tuple[list[str], np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(block ids, bytes, load ticks per format [B, D] (−1 = not loadable), block of each
    template task (−1 = none)). Blocks are ordered by first layer, then name."""
    nd = len(devs.devices)
    block_ids = sorted({f for f in tpl.family if f is not None},
                       key=lambda b: (int(b.split("-")[0][1:]), b))  # by first layer, then name
    bindex = {b: i for i, b in enumerate(block_ids)}
    block_bytes = np.zeros(len(block_ids), dtype=np.float64)
    for k, f in enumerate(tpl.family):
        if f is not None:
            kind, layer, _ = tpl.ops[k]
            wb = table[(kind, layer)]["op"].weight_bytes * tpl.frac[k]
            block_bytes[bindex[f]] += wb
    # gate/up/down of one expert share the expert's block: weight counted once per op above is
    # right (each op reads its own matrix); the same block name appears for all three.
    block_bytes = np.ceil(block_bytes).astype(np.int64)
    block_load = {fmt: np.full((len(block_ids), nd), -1, dtype=np.int64) for fmt in formats}
    for d, (_, spec) in enumerate(devs.specs):
        if spec.device_class == "cpu":
            continue
        for fmt in formats:
            try:
                spec.conversion_chain(fmt, 1.0)
            except InputError:
                continue
            block_load[fmt][:, d] = [rounding.ticks(spec.load_s(float(b), fmt,
                                                                platform.host_link))
                                     for b in block_bytes]
    t_block = np.array([bindex[f] if f is not None else -1 for f in tpl.family], dtype=np.int64)
    return block_ids, block_bytes, block_load, t_block
