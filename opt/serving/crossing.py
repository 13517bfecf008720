"""Stage-boundary crossings priced as OpWeave's f_comm (equation 39 of its appendix B.3;
problems.md §3.2 "Crossings"): the send/recv of the activation and, between different
tensor-parallel layouts, its redistribution.

The transfer after stage j is ``u_j = f_comm(A_j, h_σ(j), π_σ(j), b̂_σ(j),
h_σ(j+), π_σ(j+), b̂_σ(j+))``, "obtained from communication profiles", accounting "for any
resharding or redistribution between the source and destination replicas". The one place
that says what a crossing costs; the builder tabulates it, every consumer (plan checker,
token chain → exact period and simulator, branch-and-bound, MILP) reads it through
:func:`crossing_ticks` or the same tables.

A crossing moves the activation ``A_j`` of one microbatch, ``X = b̂ · out_bytes_per_request``
bytes, from a replica of the source configuration (GPU type h_s, tensor-parallel degree t_s,
expert-parallel degree e_s) to one of the destination's (h_d, t_d, e_d):

1. **Send/recv** (always): one copy of X over the crossing's inter-node network (the measured
   NCCL send/recv fit of the two endpoints' GPU types, the slower one componentwise):
   ``latency + X / bandwidth``. Each endpoint serialises its own replica's microbatch (the
   sender at b̂_s, the receiver at b̂_d): with r_s ≠ r_d replicas (``r_s·b_s = r_d·b_d``) one
   replica feeds, or is fed by, several, and its NIC carries all of them.
2. **Redistribution** (only when the layouts differ, ``t_s ≠ t_d``) of an activation that is
   *sharded* over the TP ranks: the column-parallel outputs — after ``qkv`` (Q, K, V by
   head), ``attn`` (attention output by head) and a dense ``ffn_in`` (the FFN intermediate).
   The source all-gathers its t_s shards so that the sending rank holds X (``t_s > 1``), and
   the destination's receiving rank scatters X into its t_d shards (``t_d > 1``):

   - all-gather of X over t_s GPUs of the source's node: **half the measured all-reduce** of X
     over t_s GPUs (a ring all-reduce is a reduce-scatter plus an all-gather of equal cost;
     the measured tables have no all-gather; ``meta.crossing.all_gather`` says so), on the
     ring formula of §5.3 where the all-reduce was not measured;
   - scatter of X over t_d GPUs: the receiving rank sends the t_d − 1 other shards over the
     measured intra-node send/recv link, ``latency + (t_d − 1)/t_d · X / bandwidth``.

   The gather holds the sender's network endpoint before the send (it is charged to the
   sender's NIC-out work and to the crossing's duration); the scatter holds the receiver's
   endpoint after it (its NIC-in work).

Unsharded activations — after ``o_proj`` and ``ffn_out`` (the all-reduced hidden state) and a
MoE ``ffn_in`` (the normed input every expert rank routes) — need no redistribution: every
source rank holds all of X, so any destination layout is served as an equal one is. The
expert-parallel degree does not change a boundary's layout (expert dispatch and combine run
inside the MoE op, whose input and output are in the TP layout), so ``e_s ≠ e_d`` costs
nothing extra. Equal TP degrees cost the send/recv alone: rank k of the destination receives
the part rank k of the source holds, and one copy of X crosses the replica's link — the
crossing of every instance built before this rule.

Not charged (stated limits): the destination's local fan-out of an unsharded activation to its
other TP ranks (OpWeave §6 sends one inter-node copy to a leader that fans it out over CUDA
IPC) — in no layout, so equal layouts keep the measured send/recv value; the replicated
residual inside a sharded boundary (priced as sharded with the rest: ``d`` of the
``q + 2·kv + d`` or ``ffn + d`` elements); a direct rank-to-rank resharding that skips the
gather.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from opt.costlib.latency import Link


class ServingConfig(Protocol):
    """A device-group configuration (:class:`opt.serving.instance.ServingConfig`, which
    imports this module): its TP degree is what a crossing's layout depends on."""

    @property
    def tp(self) -> int: ...


class ServingOp(Protocol):
    """An op of the block (:class:`opt.serving.instance.ServingOp`): its kind, module and
    boundary bytes per request."""

    @property
    def kind(self) -> str: ...

    @property
    def module(self) -> str: ...

    @property
    def out_bytes_per_request(self) -> int: ...


#: A configuration type of the callers (the instance's ServingConfig).
C = TypeVar("C", bound=ServingConfig)

#: A serving instance (:class:`opt.serving.instance.ServingInstance`; not imported: it imports
#: this module).
ServingInstance = Any

#: The op kinds whose boundary activation is sharded over the TP ranks (``ffn_in`` of a dense
#: model only: a MoE ``ffn_in`` ends with the router and hands on the whole normed input).
SHARDED_KINDS = frozenset({"qkv", "attn", "ffn_in"})

#: ``meta.crossing`` of a built instance: the rule and where each collective's price comes from.
CROSSING_PROVENANCE = {
    "rule": "send/recv of one copy on the crossing's network; when the TP degrees differ and "
            "the activation is TP-sharded (after qkv, attn, dense ffn_in): all-gather on the "
            "source's node before, scatter on the destination's node after "
            "(opt.serving.crossing; problems.md §3.2 'Crossings')",
    "send_recv": "measured inter-node NCCL send/recv fit of the two endpoints' GPU types "
                 "(slower endpoint), else the catalog link",
    "all_gather": "derived, not measured: half the measured all-reduce of the same bytes and "
                  "GPU count (ring: all-reduce = reduce-scatter + all-gather); the ring "
                  "formula where the all-reduce was not measured",
    "scatter": "measured intra-node send/recv fit (one latency, (t-1)/t of the bytes), "
               "else the catalog's intra-node link",
}


def activation_sharded(op: ServingOp) -> bool:
    """Whether the activation after ``op`` is split over the TP ranks (module docstring)."""
    if op.kind == "ffn_in":
        return op.module != "moe"
    return op.kind in SHARDED_KINDS


def layouts_differ(src: ServingConfig, dst: ServingConfig) -> bool:
    """Whether a crossing from ``src`` to ``dst`` redistributes a sharded activation: their
    TP degrees differ (the EP degree never changes a boundary's layout)."""
    return src.tp != dst.tp


def all_gather_s(all_reduce_s: float) -> float:
    """All-gather seconds of X bytes over g GPUs from the all-reduce seconds of X over g: half
    (ring: all-reduce = reduce-scatter + all-gather)."""
    return 0.5 * all_reduce_s


def scatter_s(bytes_: float, gpus: int, link: Link) -> float:
    """Seconds for one rank to scatter ``bytes_`` into ``gpus`` equal shards over ``link``
    (the other gpus − 1 shards leave it: one latency, (g − 1)/g of the bytes); 0 for g = 1."""
    if gpus <= 1:
        return 0.0
    return link.latency_s + (gpus - 1) / gpus * bytes_ / link.bandwidth_bytes_per_s


def redistribution_s(sharded: bool, bytes_: float, src: C, dst: C,
                     gather: Callable[[C, float], float],
                     scatter: Callable[[C, float], float]) -> tuple[float, float]:
    """(source-side, destination-side) seconds of redistributing ``bytes_`` across a crossing
    from ``src`` to ``dst``: ``gather(cfg, X)`` and ``scatter(cfg, X)`` price the collectives
    on one configuration; (0, 0) for an unsharded activation or equal layouts."""
    if not sharded or not layouts_differ(src, dst):
        return 0.0, 0.0
    return gather(src, bytes_), scatter(dst, bytes_)


def reshard_tables_s(ops: Sequence[ServingOp], configs: Sequence[C],
                     microbatches: Sequence[int],
                     gather: Callable[[C, float], float],
                     scatter: Callable[[C, float], float]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(out [c, mb, i], in [c, mb, i]) seconds: the all-gather a replica of configuration c
    runs before sending the boundary after op i at microbatch b̂ to a replica of another TP
    degree, and the scatter it runs after receiving one (0 for unsharded boundaries and
    single-GPU configurations)."""
    out = np.zeros((len(configs), len(microbatches), len(ops)))
    inn = np.zeros_like(out)
    for i, op in enumerate(ops):
        if not activation_sharded(op):
            continue
        for ci, cfg in enumerate(configs):
            if cfg.tp <= 1:
                continue
            for mi, mb in enumerate(microbatches):
                x = float(mb) * op.out_bytes_per_request
                out[ci, mi, i] = gather(cfg, x)
                inn[ci, mi, i] = scatter(cfg, x)
    return out, inn


@dataclass(frozen=True)
class CrossingTicks:
    """One crossing in ticks: the network's ``latency``, the serialisation of the sender's
    (``send``) and the receiver's (``recv``) microbatch, and the redistribution before
    (``reshard_out``, on the sender) and after it (``reshard_in``, on the receiver)."""

    latency: int
    send: int
    recv: int
    reshard_out: int = 0
    reshard_in: int = 0

    @property
    def duration(self) -> int:
        """The crossing on the token's path: gather, latency, the sender's serialisation."""
        return self.reshard_out + self.latency + self.send

    @property
    def busy_out(self) -> int:
        """The sender's NIC-out work: the gather and its serialisation."""
        return self.reshard_out + self.send

    @property
    def busy_in(self) -> int:
        """The receiver's NIC-in work: its serialisation and the scatter."""
        return self.recv + self.reshard_in


def crossing_ticks(inst: ServingInstance, i: int, c_src: int, c_dst: int, mb_src: int,
                   mb_dst: int) -> CrossingTicks:
    """The crossing of the boundary after block op ``i`` from a replica of configuration
    ``c_src`` at microbatch-size index ``mb_src`` to one of ``c_dst`` at ``mb_dst``
    (instance tables; module docstring)."""
    n = int(inst.config_network[c_src, c_dst])
    total = int(inst.transfer_duration[n, mb_src, i])
    send = int(inst.transfer_busy[n, mb_src, i])
    recv = int(inst.transfer_busy[n, mb_dst, i])
    if not inst.config_reshard[c_src, c_dst]:
        return CrossingTicks(total - send, send, recv)
    return CrossingTicks(total - send, send, recv, int(inst.reshard_out[c_src, mb_src, i]),
                         int(inst.reshard_in[c_dst, mb_dst, i]))


def token_return_ticks(inst: ServingInstance, c_src: int, c_dst: int, mb_src: int,
                       mb_dst: int) -> CrossingTicks:
    """The sampled token ids from the LM-head owner (``c_src``) back to the embedding owner
    (``c_dst``): a send/recv on their network, never redistributed (a replicated vector)."""
    n = int(inst.config_network[c_src, c_dst])
    total = int(inst.token_transfer_duration[n, mb_src])
    send = int(inst.token_transfer_busy[n, mb_src])
    return CrossingTicks(total - send, send, int(inst.token_transfer_busy[n, mb_dst]))
