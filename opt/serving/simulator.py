"""Discrete-event simulator of a P3 serving plan (problems.md §3.2 fidelity check).

The plan checker (:func:`opt.serving.plan.evaluate_plan`) scores a plan with the closed form
``T_rtt = max(path, μ·max busy, μ·max NIC out, μ·max NIC in)``. This module *runs* the plan
instead and measures the time per token; the formula stays the optimisation objective, the
simulation only says how close it is.

What is simulated
-----------------
- **Replicas.** One representative replica per owner carrying μ microbatch streams. Global
  microbatch s (B/μ requests) is split over the n_m replicas of owner m as microbatches of
  b̂_m = b_m/μ requests (n_m·b̂_m = B/μ for every owner); replicas of an owner are identical
  and, started together, run in lockstep, so one replica's timeline stands for all of them.
  This is exactly the formula's per-replica accounting (each replica of owner m runs μ
  microbatches of busy_m per round trip).
- **Token chain** of every stream, repeated forever: embedding gather (owner of the block's
  first op) → the ops of every block in order (``op_count`` semantics, truncated last block) →
  final norm + LM head (owner of ``last_op``) → the token ids back to the embedding owner
  (when that is another owner) → the next token of the same stream. Maximal runs of
  consecutive ops (and heads) on one owner form a *segment*: one non-preemptive job on its
  owner's replica, duration = Σ ``op_duration[c, b̂, i]`` (+ ``head_duration``).
- **Transfers** between segments of different owners: the sender's NIC-out endpoint is busy
  for the serialisation time ``transfer_busy[b̂_sender, i]`` from the moment it starts
  (t0 ≥ segment end); the bytes reach the receiver's NIC-in endpoint at t0 + network latency
  (latency = ``transfer_duration − transfer_busy``), which is busy deserialising them from
  t1 = max(t0 + latency, endpoint free); the next segment is ready at
  max(t1 + busy_in, t0 + transfer_duration). Without contention a transfer takes exactly
  ``transfer_duration``. Full duplex: out and in are separate endpoints; compute and NIC work
  of one owner overlap (DMA).
- **Dispatch.** Every resource (owner replica, NIC-out, NIC-in endpoint) is a single server
  taking its queued jobs first-come-first-served by ready time, ties broken by stream index.
  Events at the same instant are all applied before any resource picks its next job.

NIC accounting: each receiving replica deserialises its own share, ``transfer_busy`` at the
*receiver's* b̂ (with different batches per owner one receiver gathers from several senders
or one sender feeds several receivers) — the per-replica load the checker's ``net_in`` uses,
so every resource's work per round equals the formula's term (``nic="formula"``, the default);
``nic="sender"`` charges the receiver at the sender's b̂ instead, for comparison.

Not simulated: KV-cache / memory pressure, request arrivals and completions (a full batch
decodes forever at the workload's mean context), replica skew, contention on the network core
(only endpoints), intra-segment overlap of TP collectives (already inside the op latencies),
preemption, and speculative or continuous batching effects.

Measurement. Stream s's token k completes when its token ids are back at the embedding owner
(time C_s(k), C_s(0) = 0). Tokens 1..``warmup`` are warm-up; the simulated T_rtt is the mean
over streams of ``(C_s(tokens) − C_s(warmup)) / (tokens − warmup)``. All streams keep running
until the last one completes ``tokens`` tokens, so no measured token sees a draining system.
Provable facts (tested): every single interval C_s(k) − C_s(k−1) ≥ ``path`` (a stream's own
chain is sequential); over the window [A, Z] = [min_s C_s(warmup), max_s C_s(tokens)] every
resource does μ·(tokens − warmup) rounds of its work, so Z − A ≥ (tokens − warmup)·μ·load.
Times are in the instance's ``time_unit`` (ticks) unless a name ends in ``_s`` (seconds).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opt.serving.instance import ServingInstance
from opt.serving.plan import (
    PlanError,
    PlanMetrics,
    ServingPlan,
    evaluate_plan,
    owner_sequence,
    plan_from_solution,
)

NIC_MODELS = ("formula", "sender")

# Event kinds of the loop (heap entries: (time, order, kind, a, b)).
_EV_READY = 0        # stream b's current step becomes ready at resource a
_EV_FREE = 1         # resource a becomes free (a NIC endpoint's job ended)
_EV_FREE_ADVANCE = 2  # compute resource a becomes free and stream b advances
_EV_ADVANCE = 3      # stream b's current step is done (its transfer arrived)


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

    def add_transfer(a: int, b: int, busy_a: int, busy_b: int, total: int) -> None:
        kind.append(1)
        res.append(-1)
        durs.append(0)
        src.append(a)
        dst.append(b)
        b_out.append(busy_a)
        b_in.append(busy_a if nic == "sender" else busy_b)
        lat.append(total - busy_a)

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
            i = int(seq[p])
            add_transfer(a, b, int(inst.transfer_busy[mb[a], i]),
                         int(inst.transfer_busy[mb[b], i]),
                         int(inst.transfer_duration[mb[a], i]))
    acc += int(inst.head_duration[cfg[last], mb[last], 1])
    add_segment(last, acc)
    if last != first:
        add_transfer(last, first, int(inst.token_transfer_busy[mb[last]]),
                     int(inst.token_transfer_busy[mb[first]]),
                     int(inst.token_transfer_duration[mb[last]]))
    return TokenChain(tuple(kind), tuple(res), tuple(durs), tuple(src), tuple(dst),
                      tuple(b_out), tuple(b_in), tuple(lat), k)


@dataclass
class ResourceUsage:
    """One simulated resource: an owner's replica or a NIC endpoint of it.

    work_per_token: busy ticks of one microbatch token; utilisation: measured busy fraction
    over the steady-state window; formula_load: the checker's per-token term for it (busy,
    net_out or net_in; ticks)."""

    name: str
    kind: str  # "replica", "nic_out" or "nic_in"
    owner: int  # 0-based owner index
    work_per_token: int
    formula_load: int
    utilisation: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "owner": self.owner + 1,
                "work_per_token": self.work_per_token, "formula_load": self.formula_load,
                "utilisation": self.utilisation}


@dataclass
class SimReport:
    """Simulated vs formula T_rtt of one plan (times in ``time_unit`` ticks; ``*_s`` seconds).

    t_rtt_sim: mean steady-state interval between a stream's consecutive tokens;
    t_rtt_formula / path / compute_term / network_term: the checker's T_rtt and its terms
    (compute_term = μ·max busy, network_term = μ·max(NIC out, NIC in));
    interval_min / interval_max: extreme single intervals over the measured tokens;
    drift: |mean of the window's second half − first half| / t_rtt_sim (≈ 0 once periodic);
    window: [A, Z] = [min_s C_s(warmup), max_s C_s(tokens)], over which utilisations are
    measured."""

    model: str
    time_unit: str
    seconds_per_tick: float
    owners_count: int
    microbatches: int
    segments_per_token: int
    transfers_per_token: int
    tokens: int
    warmup: int
    nic: str
    t_rtt_sim: float
    t_rtt_formula: int
    path: int
    compute_term: int
    network_term: int
    bottleneck: str
    stream_intervals: list[float]
    interval_min: int
    interval_max: int
    drift: float
    window: tuple[int, int]
    resources: list[ResourceUsage]
    events: int
    wall_s: float
    completions: list[list[int]] = field(default_factory=list, repr=False)

    @property
    def ratio(self) -> float:
        """Simulated / formula T_rtt (≥ 1 means the formula is optimistic)."""
        return self.t_rtt_sim / self.t_rtt_formula if self.t_rtt_formula else float("inf")

    @property
    def t_rtt_sim_s(self) -> float:
        return self.t_rtt_sim * self.seconds_per_tick

    @property
    def t_rtt_formula_s(self) -> float:
        return self.t_rtt_formula * self.seconds_per_tick

    @property
    def lower_bound(self) -> int:
        """max(path, μ·max busy, μ·max NIC load) of the *simulated* loads (ticks): the
        steady-state value no schedule can beat (equals the formula with ``nic="formula"``)."""
        loads = [r.work_per_token for r in self.resources]
        return max(self.path, self.microbatches * max(loads, default=0))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "time_unit": self.time_unit,
                "owners_count": self.owners_count, "microbatches": self.microbatches,
                "segments_per_token": self.segments_per_token,
                "transfers_per_token": self.transfers_per_token, "tokens": self.tokens,
                "warmup": self.warmup, "nic": self.nic,
                "t_rtt_sim": self.t_rtt_sim, "t_rtt_formula": self.t_rtt_formula,
                "t_rtt_sim_s": self.t_rtt_sim_s, "t_rtt_formula_s": self.t_rtt_formula_s,
                "ratio": self.ratio, "path": self.path, "compute_term": self.compute_term,
                "network_term": self.network_term, "bottleneck": self.bottleneck,
                "lower_bound": self.lower_bound, "stream_intervals": self.stream_intervals,
                "interval_min": self.interval_min, "interval_max": self.interval_max,
                "drift": self.drift, "window": list(self.window),
                "resources": [r.to_dict() for r in self.resources], "events": self.events,
                "wall_s": self.wall_s}


def _run(chain: TokenChain, mu: int, tokens: int) -> tuple[list[list[int]], list[list[int]],
                                                            list[list[int]], int]:
    """The event loop: μ streams run ``chain`` until every stream completed ``tokens`` tokens.

    Returns per stream the completion times C_s(1..), per resource the start and end times of
    its jobs (resources 0..K−1 replicas, K..2K−1 NIC-out, 2K..3K−1 NIC-in), and the number of
    events processed."""
    k = chain.owners
    kind, res, dur = chain.kind, chain.res, chain.dur
    src, dst, b_out, b_in, lat = (chain.src, chain.dst, chain.busy_out, chain.busy_in,
                                  chain.latency)
    n_steps = len(kind)
    n_res = 3 * k
    queues: list[list[tuple[int, int]]] = [[] for _ in range(n_res)]
    idle = [True] * n_res
    starts: list[list[int]] = [[] for _ in range(n_res)]
    ends: list[list[int]] = [[] for _ in range(n_res)]
    step = [0] * mu
    t_out = [0] * mu  # start of the current transfer's NIC-out job
    done: list[list[int]] = [[] for _ in range(mu)]
    finished = 0
    heap: list[tuple[int, int, int, int, int]] = []
    order = 0

    def first_resource(j: int) -> int:
        return res[j] if kind[j] == 0 else k + src[j]

    for s in range(mu):
        heap.append((0, order, _EV_READY, first_resource(0), s))
        order += 1
    heapq.heapify(heap)
    events = 0
    push, pop = heapq.heappush, heapq.heappop
    while finished < mu:
        now = heap[0][0]
        touched: set[int] = set()
        while heap and heap[0][0] == now:
            _, _, ev, a, s = pop(heap)
            events += 1
            if ev == _EV_READY:
                heapq.heappush(queues[a], (now, s))
                touched.add(a)
                continue
            if ev != _EV_ADVANCE:
                idle[a] = True
                touched.add(a)
                if ev == _EV_FREE:
                    continue
            j = step[s] + 1
            if j == n_steps:
                j = 0
                done[s].append(now)
                if len(done[s]) == tokens:
                    finished += 1
            step[s] = j
            r = first_resource(j)
            heapq.heappush(queues[r], (now, s))
            touched.add(r)
        for r in sorted(touched):
            if not idle[r] or not queues[r]:
                continue
            _, s = heapq.heappop(queues[r])
            j = step[s]
            idle[r] = False
            if r < k:
                end = now + dur[j]
                push(heap, (end, order, _EV_FREE_ADVANCE, r, s))
            elif r < 2 * k:
                end = now + b_out[j]
                t_out[s] = now
                push(heap, (end, order, _EV_FREE, r, s))
                order += 1
                push(heap, (now + lat[j], order, _EV_READY, 2 * k + dst[j], s))
            else:
                end = now + b_in[j]
                push(heap, (end, order, _EV_FREE, r, s))
                order += 1
                arrive = max(end, t_out[s] + lat[j] + b_out[j])
                push(heap, (arrive, order, _EV_ADVANCE, -1, s))
            order += 1
            starts[r].append(now)
            ends[r].append(end)
    return done, starts, ends, events


def _busy_within(starts: list[int], ends: list[int], lo: int, hi: int) -> int:
    """Ticks of the jobs [start, end) that fall inside [lo, hi] (jobs of one resource never
    overlap)."""
    if not starts or hi <= lo:
        return 0
    s = np.minimum(np.maximum(np.asarray(starts, dtype=np.int64), lo), hi)
    e = np.minimum(np.maximum(np.asarray(ends, dtype=np.int64), lo), hi)
    return int((e - s).sum())


def simulate_plan(inst: ServingInstance, plan: ServingPlan | dict[str, Any], *,
                  tokens: int = 48, warmup: int = 16, nic: str = "formula") -> SimReport:
    """Simulate ``plan`` (a :class:`ServingPlan` or a problems.md §3.2 solution object) on ``inst``
    and compare with the checker's formula (module docstring for the model).

    tokens: tokens every microbatch stream completes (≥ warmup + 1); warmup: leading tokens
    of each stream excluded from the measurement; nic: ``"formula"`` or ``"sender"`` NIC-in
    accounting. Raises :class:`PlanError` on a structurally invalid plan and ValueError on bad
    arguments. Plans violating memory / SLO / GPU limits are simulated all the same."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    if warmup < 0 or tokens <= warmup:
        raise ValueError(f"need 0 ≤ warmup < tokens, got warmup = {warmup}, tokens = {tokens}")
    met: PlanMetrics = evaluate_plan(inst, plan)
    chain = token_chain(inst, plan, nic)
    mu, k = plan.microbatches, plan.owners_count
    t0 = time.perf_counter()
    done, starts, ends, events = _run(chain, mu, tokens)
    wall = time.perf_counter() - t0

    measured = tokens - warmup
    comp = [[0] + d[:tokens] for d in done]  # C_s(0..tokens)
    per_stream = [(c[tokens] - c[warmup]) / measured for c in comp]
    t_sim = float(np.mean(per_stream))
    intervals = np.array([np.diff(c[warmup:tokens + 1]) for c in comp], dtype=np.int64)
    half = measured // 2
    if half >= 1:
        first_half = float(np.mean([(c[warmup + half] - c[warmup]) / half for c in comp]))
        rest = measured - half
        second_half = float(np.mean([(c[tokens] - c[tokens - rest]) / rest for c in comp]))
        drift = abs(second_half - first_half) / t_sim if t_sim else 0.0
    else:
        drift = 0.0
    lo = min(c[warmup] for c in comp)
    hi = max(c[tokens] for c in comp)

    comp_load, out_load, in_load = chain.loads()
    labels = [f"{m + 1}:{o.config}" for m, o in enumerate(plan.owners)]
    resources: list[ResourceUsage] = []
    span = hi - lo
    for r in range(3 * k):
        m = r % k
        kind_name, work, formula = (("replica", comp_load[m], met.busy[m]) if r < k else
                                    ("nic_out", out_load[m], met.net_out[m]) if r < 2 * k else
                                    ("nic_in", in_load[m], met.net_in[m]))
        util = _busy_within(starts[r], ends[r], lo, hi) / span if span > 0 else 0.0
        resources.append(ResourceUsage(f"{labels[m]} {kind_name}", kind_name, m, int(work),
                                       int(formula), util))
    return SimReport(
        model=inst.model, time_unit=inst.time_unit, seconds_per_tick=inst.seconds(1),
        owners_count=k, microbatches=mu, segments_per_token=chain.segments,
        transfers_per_token=chain.transfers, tokens=tokens, warmup=warmup, nic=nic,
        t_rtt_sim=t_sim, t_rtt_formula=met.t_rtt, path=met.path,
        compute_term=int(mu * max(met.busy)),
        network_term=int(mu * max(max(met.net_out), max(met.net_in))),
        bottleneck=met.bottleneck, stream_intervals=per_stream,
        interval_min=int(intervals.min()), interval_max=int(intervals.max()), drift=drift,
        window=(int(lo), int(hi)), resources=resources, events=events, wall_s=wall,
        completions=[c[1:] for c in comp])


def simulate_report_rows(inst: ServingInstance,
                         plans: Mapping[str, ServingPlan | dict[str, Any]], *,
                         tokens: int = 48, warmup: int = 16,
                         nic: str = "formula") -> list[dict[str, Any]]:
    """One flat table row per named plan: formula vs simulated T_rtt (ms), their ratio, the
    formula's binding term and the busiest simulated resource (for a CLI or a report)."""
    rows: list[dict[str, Any]] = []
    for name, plan in plans.items():
        rep = simulate_plan(inst, plan, tokens=tokens, warmup=warmup, nic=nic)
        busiest = max(rep.resources, key=lambda r: r.utilisation)
        rows.append({"plan": name, "owners": rep.owners_count, "microbatches": rep.microbatches,
                     "segments_per_token": rep.segments_per_token,
                     "t_rtt_formula_ms": rep.t_rtt_formula_s * 1e3,
                     "t_rtt_sim_ms": rep.t_rtt_sim_s * 1e3, "ratio": rep.ratio,
                     "bottleneck": rep.bottleneck, "busiest": busiest.name,
                     "busiest_utilisation": busiest.utilisation, "drift": rep.drift})
    return rows
