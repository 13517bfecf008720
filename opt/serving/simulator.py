"""Discrete-event simulator of a P3 serving plan (problems.md §3.2 fidelity check).

The plan checker (:func:`opt.serving.checker.evaluate_plan`) computes T_rtt exactly, as the cycle
time of the plan's periodic schedule (:mod:`opt.serving.period`), with the old closed form
``max(path, μ·max busy, μ·max NIC out, μ·max NIC in)`` beside it as a lower bound. This module
*runs* the plan and measures the time per token: with the fixed per-resource order
(``order="static"``, the default and the semantics of problems.md §3.2) it settles to the exact
period; ``order="fcfs"`` dispatches first-come-first-served instead, for comparison.

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
  ``transfer_duration``. A crossing between different TP degrees also redistributes
  (:mod:`opt.serving.crossing`): the sender's all-gather lengthens its NIC-out job, the
  receiver's scatter its NIC-in job (the token chain's ``busy_out`` / ``busy_in``). Full duplex: out and in are separate endpoints; compute and NIC work
  of one owner overlap (DMA).
- **Dispatch.** Every resource (owner replica, NIC-out, NIC-in endpoint) is a single server.
  ``order="static"``: it runs its actions in the fixed order of :mod:`opt.serving.period`
  (per round, chain step j ascending, then stream s), waiting for the next one in that order
  to be ready. ``order="fcfs"``: it takes its queued jobs first-come-first-served by ready
  time, ties broken by stream index. Events at the same instant are all applied before any
  resource picks its next job.

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

from opt.serving.chain import TokenChain, token_chain
from opt.serving.checker import PlanMetrics, evaluate_plan
from opt.serving.instance import ServingInstance
from opt.serving.plan import ServingPlan, plan_from_solution

# Event kinds of the loop (heap entries: (time, order, kind, a, b)).
_EV_READY = 0        # stream b's current step becomes ready at resource a
_EV_FREE = 1         # resource a becomes free (a NIC endpoint's job ended)
_EV_FREE_ADVANCE = 2  # compute resource a becomes free and stream b advances
_EV_ADVANCE = 3      # stream b's current step is done (its transfer arrived)


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
    t_rtt_exact: the checker's exact period (with ``nic="formula"`` and ``order="static"`` the
    simulation settles to it); t_rtt_formula / path / compute_term / network_term: the old
    formula, its lower bound, and its terms (compute_term = μ·max busy, network_term =
    μ·max(NIC out, NIC in)); order: the dispatch rule ("static" or "fcfs");
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
    order: str
    t_rtt_sim: float
    t_rtt_exact: float
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
    def ratio_exact(self) -> float:
        """Simulated / exact T_rtt (1 with the static order and the checker's NIC model)."""
        return self.t_rtt_sim / self.t_rtt_exact if self.t_rtt_exact else float("inf")

    @property
    def t_rtt_exact_s(self) -> float:
        return self.t_rtt_exact * self.seconds_per_tick

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
                "warmup": self.warmup, "nic": self.nic, "order": self.order,
                "t_rtt_sim": self.t_rtt_sim, "t_rtt_exact": self.t_rtt_exact,
                "ratio_exact": self.ratio_exact, "t_rtt_exact_s": self.t_rtt_exact_s,
                "t_rtt_formula": self.t_rtt_formula,
                "t_rtt_sim_s": self.t_rtt_sim_s, "t_rtt_formula_s": self.t_rtt_formula_s,
                "ratio": self.ratio, "path": self.path, "compute_term": self.compute_term,
                "network_term": self.network_term, "bottleneck": self.bottleneck,
                "lower_bound": self.lower_bound, "stream_intervals": self.stream_intervals,
                "interval_min": self.interval_min, "interval_max": self.interval_max,
                "drift": self.drift, "window": list(self.window),
                "resources": [r.to_dict() for r in self.resources], "events": self.events,
                "wall_s": self.wall_s}


ORDERS = ("static", "fcfs")


def _static_orders(chain: TokenChain, mu: int) -> list[list[tuple[int, int]]]:
    """Per resource (replicas, NIC-out, NIC-in) its actions of one round as (step, stream),
    in the fixed order of :mod:`opt.serving.period`."""
    k = chain.owners
    orders: list[list[tuple[int, int]]] = [[] for _ in range(3 * k)]
    for j, kind in enumerate(chain.kind):
        rs = [chain.res[j]] if kind == 0 else [k + chain.src[j], 2 * k + chain.dst[j]]
        for r in rs:
            orders[r].extend((j, s) for s in range(mu))
    return orders


def _run(chain: TokenChain, mu: int, tokens: int, order: str = "static"
         ) -> tuple[list[list[int]], list[list[int]],
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
    seq = 0
    static = _static_orders(chain, mu) if order == "static" else None
    pos = [0] * n_res  # static: index of each resource's next action in its order

    def first_resource(j: int) -> int:
        return res[j] if kind[j] == 0 else k + src[j]

    for s in range(mu):
        heap.append((0, seq, _EV_READY, first_resource(0), s))
        seq += 1
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
            if static is not None:
                j, s = static[r][pos[r]]
                if step[s] != j or not any(q[1] == s for q in queues[r]):
                    continue  # the next action in the fixed order is not ready yet
                queues[r].remove(next(q for q in queues[r] if q[1] == s))
                heapq.heapify(queues[r])
                pos[r] = (pos[r] + 1) % len(static[r])
            else:
                _, s = heapq.heappop(queues[r])
                j = step[s]
            idle[r] = False
            if r < k:
                end = now + dur[j]
                push(heap, (end, seq, _EV_FREE_ADVANCE, r, s))
            elif r < 2 * k:
                end = now + b_out[j]
                t_out[s] = now
                push(heap, (end, seq, _EV_FREE, r, s))
                seq += 1
                push(heap, (now + lat[j], seq, _EV_READY, 2 * k + dst[j], s))
            else:
                end = now + b_in[j]
                push(heap, (end, seq, _EV_FREE, r, s))
                seq += 1
                arrive = max(end, t_out[s] + lat[j] + b_out[j])
                push(heap, (arrive, seq, _EV_ADVANCE, -1, s))
            seq += 1
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
                  tokens: int = 48, warmup: int = 16, nic: str = "formula",
                  order: str = "static") -> SimReport:
    """Simulate ``plan`` (a :class:`ServingPlan` or a problems.md §3.2 solution object) on
    ``inst`` and compare with the checker's exact period and formula (module docstring).

    tokens: tokens every microbatch stream completes (≥ warmup + 1); warmup: leading tokens
    of each stream excluded from the measurement; nic: ``"formula"`` or ``"sender"`` NIC-in
    accounting; order: ``"static"`` (problems.md §3.2) or ``"fcfs"`` dispatch. Raises :class:`PlanError` on a structurally invalid plan and ValueError on bad
    arguments. Plans violating memory / SLO / GPU limits are simulated all the same."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    if warmup < 0 or tokens <= warmup:
        raise ValueError(f"need 0 ≤ warmup < tokens, got warmup = {warmup}, tokens = {tokens}")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    met: PlanMetrics = evaluate_plan(inst, plan)
    chain = token_chain(inst, plan, nic)
    mu, k = plan.microbatches, plan.owners_count
    t0 = time.perf_counter()
    done, starts, ends, events = _run(chain, mu, tokens, order)
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
        order=order, t_rtt_sim=t_sim, t_rtt_exact=met.t_rtt,
        t_rtt_formula=met.t_rtt_formula, path=met.path,
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
                     "t_rtt_exact_ms": rep.t_rtt_exact_s * 1e3,
                     "t_rtt_sim_ms": rep.t_rtt_sim_s * 1e3, "ratio": rep.ratio,
                     "ratio_exact": rep.ratio_exact,
                     "bottleneck": rep.bottleneck, "busiest": busiest.name,
                     "busiest_utilisation": busiest.utilisation, "drift": rep.drift})
    return rows
