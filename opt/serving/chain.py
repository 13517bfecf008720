"""The token chain of a P3 plan: the compute segments and transfers one microbatch runs per token,
in order (problems.md §3.2). The exact period (:mod:`opt.serving.period`) and the simulator
(:mod:`opt.serving.simulator`) both run it.

Maximal runs of consecutive ops (and heads) on one owner form a *segment*, duration = Σ
``op_duration[c, b̂, i]`` (+ ``head_duration``); between segments of different owners a
transfer busies the sender's NIC-out for ``transfer_busy[n, b̂_sender, i]``, reaches the
receiver's NIC-in after the network latency (``transfer_duration − transfer_busy``), which is
busy for ``transfer_busy`` at the *receiver's* b̂ (``nic="formula"``, the checker's
accounting) or the sender's (``nic="sender"``); ``n`` is the network of the crossing,
``inst.config_network[c_sender, c_receiver]`` (problems.md §3.1 "Network model"). A crossing
between different TP degrees adds its redistribution (:mod:`opt.serving.crossing`): the
sender's all-gather to its NIC-out work and the crossing's duration, the receiver's scatter to
its NIC-in work. Times in ticks of the instance's time unit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opt.serving.crossing import CrossingTicks, crossing_ticks, token_return_ticks
from opt.serving.instance import ServingInstance
from opt.serving.plan import PlanError, ServingPlan, owner_sequence

NIC_MODELS = ("formula", "sender")


@dataclass(frozen=True)
class TokenChain:
    """The steps one microbatch runs per token, in order (compute segments and transfers).

    ``kind[j]`` is 0 for a compute segment (on owner ``res[j]``, ``dur[j]`` ticks) and 1 for a
    transfer from owner ``src[j]`` to owner ``dst[j]``: NIC-out busy ``busy_out[j]``, NIC-in
    busy ``busy_in[j]``, network latency ``latency[j]`` (ticks). ``path`` is the chain's
    uncontended duration (Σ segments + Σ transfer durations, ticks)."""

    kind: tuple[int, ...]
    res: tuple[int, ...]
    dur: tuple[int, ...]
    src: tuple[int, ...]
    dst: tuple[int, ...]
    busy_out: tuple[int, ...]
    busy_in: tuple[int, ...]
    latency: tuple[int, ...]
    owners: int

    @property
    def segments(self) -> int:
        return sum(1 for k in self.kind if k == 0)

    @property
    def transfers(self) -> int:
        return sum(1 for k in self.kind if k == 1)

    @property
    def path(self) -> int:
        return int(sum(d for k, d in zip(self.kind, self.dur) if k == 0)
                   + sum(lat + b for k, lat, b in zip(self.kind, self.latency, self.busy_out)
                         if k == 1))

    def loads(self) -> tuple[list[int], list[int], list[int]]:
        """Per owner: compute, NIC-out and NIC-in busy ticks of one microbatch token."""
        comp = [0] * self.owners
        out = [0] * self.owners
        inn = [0] * self.owners
        for j, k in enumerate(self.kind):
            if k == 0:
                comp[self.res[j]] += self.dur[j]
            else:
                out[self.src[j]] += self.busy_out[j]
                inn[self.dst[j]] += self.busy_in[j]
        return comp, out, inn


def token_chain(inst: ServingInstance, plan: ServingPlan, nic: str = "formula") -> TokenChain:
    """Cut one token of ``plan`` into segments and transfers (module docstring). Raises
    :class:`PlanError` on a structurally invalid plan, ValueError on an unknown ``nic``."""
    if nic not in NIC_MODELS:
        raise ValueError(f"nic model must be one of {NIC_MODELS}, got {nic!r}")
    k, mu, n = plan.owners_count, plan.microbatches, inst.n_ops
    if k < 1 or mu < 1:
        raise PlanError(f"a plan needs ≥ 1 owner and μ ≥ 1 (got K = {k}, μ = {mu})")
    owner = owner_sequence(n, plan.template, k)
    cfg = np.array([inst.config_index(o.config) for o in plan.owners], dtype=np.int64)
    for m, o in enumerate(plan.owners):
        if o.batch < 1 or o.batch % mu:
            raise PlanError(f"owners[{m}]: batch {o.batch} is not a positive multiple of "
                            f"μ = {mu}")
    mb = np.array([inst.mb_index(o.batch // mu) for o in plan.owners], dtype=np.int64)
    return owner_chain(inst, owner, cfg, mb, nic)


def owner_chain(inst: ServingInstance, owner: np.ndarray, cfg: np.ndarray, mb: np.ndarray,
                nic: str = "formula") -> TokenChain:
    """The token chain of the cyclic owner sequence ``owner`` (0-based owner of each block op)
    with owner m on configuration index ``cfg[m]`` at microbatch-size index ``mb[m]`` (the
    searches' form of a plan; :func:`token_chain` for a :class:`ServingPlan`)."""
    if nic not in NIC_MODELS:
        raise ValueError(f"nic model must be one of {NIC_MODELS}, got {nic!r}")
    n = inst.n_ops
    k = len(cfg)
    seq = np.concatenate([np.tile(np.arange(n, dtype=np.int64), inst.full_blocks),
                          np.arange(inst.partial_ops if inst.partial_layers else 0,
                                    dtype=np.int64)])
    own = owner[seq]
    dur = inst.op_duration[cfg[own], mb[own], seq].astype(np.int64)
    first, last = int(own[0]), int(own[-1])

    kind: list[int] = []
    res: list[int] = []
    durs: list[int] = []
    src: list[int] = []
    dst: list[int] = []
    b_out: list[int] = []
    b_in: list[int] = []
    lat: list[int] = []

    def add_transfer(a: int, b: int, x: CrossingTicks) -> None:
        kind.append(1)
        res.append(-1)
        durs.append(0)
        src.append(a)
        dst.append(b)
        b_out.append(x.busy_out)
        b_in.append((x.send if nic == "sender" else x.recv) + x.reshard_in)
        lat.append(x.latency)

    def add_segment(m: int, d: int) -> None:
        kind.append(0)
        res.append(m)
        durs.append(d)
        src.append(-1)
        dst.append(-1)
        b_out.append(0)
        b_in.append(0)
        lat.append(0)

    acc = int(inst.head_duration[cfg[first], mb[first], 0])
    for p in range(len(seq)):
        acc += int(dur[p])
        a = int(own[p])
        if p + 1 < len(seq) and int(own[p + 1]) != a:
            add_segment(a, acc)
            acc = 0
            b = int(own[p + 1])
            add_transfer(a, b, crossing_ticks(inst, int(seq[p]), int(cfg[a]), int(cfg[b]),
                                              int(mb[a]), int(mb[b])))
    acc += int(inst.head_duration[cfg[last], mb[last], 1])
    add_segment(last, acc)
    if last != first:
        add_transfer(last, first, token_return_ticks(inst, int(cfg[last]), int(cfg[first]),
                                                     int(mb[last]), int(mb[first])))
    return TokenChain(tuple(kind), tuple(res), tuple(durs), tuple(src), tuple(dst),
                      tuple(b_out), tuple(b_in), tuple(lat), k)
