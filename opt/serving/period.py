"""The exact round-trip time of a P3 plan: the cycle time of its periodic schedule
(problems.md §3.2).

The schedule. μ microbatch streams each run the plan's token chain (compute segments and
transfers, :func:`opt.serving.simulator.token_chain`) forever. Every resource — an owner's
replica, its NIC-out and its NIC-in endpoint — runs its actions in a fixed order, the same in
every round: within round k (token k of every stream) the actions ``(chain step j, stream s)``
sorted by j, then s ("for each stage visit, microbatches 0 … μ−1"). An action starts when its
input has arrived and its resource's previous action is done:

- compute step j of stream s: after the previous step of s (a transfer's arrival, or the
  previous segment), and after the resource's previous action;
- transfer step j: the sender's NIC-out job starts after the segment it carries; the
  receiver's NIC-in job starts ``latency`` after the NIC-out start; the next segment may start
  ``busy_in`` after the NIC-in start and ``latency + busy_out`` after the NIC-out start.

This is a timed event graph: arcs ``u → v`` with a weight (ticks) and 0 or 1 tokens (1 when
the arc enters the next round: a resource's last action to its first, a stream's last step to
its next token's first). Its start times obey the max-plus recursion
``x(k) = A0 ⊗ x(k) ⊕ A1 ⊗ x(k − 1)`` and grow, from any start, at the rate λ = the maximum cycle
mean Σ weight / Σ tokens over its cycles; λ is T_rtt. Every within-round arc increases
``(j, s, out < in)``, so the 0-token arcs form a DAG (no deadlock); eliminating them leaves
``y(k) = M ⊗ y(k − 1)`` over the few tails of 1-token arcs (≤ 3K + μ), and λ is the maximum cycle
mean of the small matrix M (Karp's theorem), exact as a fraction of ticks.

The old formula is a lower bound (proof): a stream's own cycle (its chain plus the wrap arc)
has one token and weight ``path``; a resource's cycle through its μ·(jobs per token) actions
has one token and weight μ·(its per-token work); so λ ≥ max(path, μ·busy, μ·NIC out,
μ·NIC in) — every term is the mean of one cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from opt.serving.chain import TokenChain, token_chain
from opt.serving.instance import ServingInstance
from opt.serving.plan import ServingPlan, plan_from_solution

NEG = -np.inf


@dataclass(frozen=True)
class EventGraph:
    """The timed event graph of a plan's periodic schedule (module docstring).

    Nodes are the actions of one round, in topological order of the 0-token arcs;
    ``resource[v]`` (0..K−1 replicas, K..2K−1 NIC-out, 2K..3K−1 NIC-in), ``step[v]``,
    ``stream[v]``, ``duration[v]`` (ticks). ``arcs``: (u, v, weight, tokens) with tokens 0/1."""

    resource: tuple[int, ...]
    step: tuple[int, ...]
    stream: tuple[int, ...]
    duration: tuple[int, ...]
    arcs: tuple[tuple[int, int, int, int], ...]
    owners: int
    microbatches: int

    @property
    def n_nodes(self) -> int:
        return len(self.resource)


def event_graph(chain: TokenChain, microbatches: int) -> EventGraph:
    """The event graph of ``microbatches`` streams running ``chain`` with the fixed
    per-resource order of the module docstring."""
    k, mu, n_steps = chain.owners, microbatches, len(chain.kind)
    keys: list[tuple[int, int, int]] = []  # (step, stream, sub): sub 0 compute / NIC-out, 1 NIC-in
    resource: list[int] = []
    duration: list[int] = []
    for j in range(n_steps):
        for s in range(mu):
            if chain.kind[j] == 0:
                keys.append((j, s, 0))
                resource.append(chain.res[j])
                duration.append(chain.dur[j])
            else:
                keys.append((j, s, 0))
                resource.append(k + chain.src[j])
                duration.append(chain.busy_out[j])
                keys.append((j, s, 1))
                resource.append(2 * k + chain.dst[j])
                duration.append(chain.busy_in[j])
    node = {key: v for v, key in enumerate(keys)}  # keys are already in (j, s, sub) order
    arcs: list[tuple[int, int, int, int]] = []
    for s in range(mu):
        for j in range(n_steps):
            nxt, tok = (j + 1, 0) if j + 1 < n_steps else (0, 1)
            head = node[(nxt, s, 0)]
            if chain.kind[j] == 0:
                arcs.append((node[(j, s, 0)], head, chain.dur[j], tok))
            else:
                out, inn = node[(j, s, 0)], node[(j, s, 1)]
                arcs.append((out, inn, chain.latency[j], 0))
                arcs.append((inn, head, chain.busy_in[j], tok))
                arcs.append((out, head, chain.latency[j] + chain.busy_out[j], tok))
    by_resource: dict[int, list[int]] = {}
    for v, r in enumerate(resource):
        by_resource.setdefault(r, []).append(v)
    for jobs in by_resource.values():
        for a, b in zip(jobs, jobs[1:]):
            arcs.append((a, b, duration[a], 0))
        arcs.append((jobs[-1], jobs[0], duration[jobs[-1]], 1))
    return EventGraph(tuple(resource), tuple(key[0] for key in keys),
                      tuple(key[1] for key in keys), tuple(duration), tuple(arcs), k, mu)


def reduced_matrix(graph: EventGraph) -> tuple[np.ndarray, list[int]]:
    """(M, tails): ``M[a, b]`` = the longest 0-token path (ticks) from the 1-token arcs out of
    tail ``tails[b]`` into round k to tail ``tails[a]`` (−inf when none), so that
    ``y(k) = M ⊗ y(k − 1)`` for the start times y of the tails."""
    vals, tails = _full_matrix(graph)
    return vals[tails], tails


def max_cycle_mean(m: np.ndarray) -> Fraction:
    """Karp's maximum cycle mean of the max-plus matrix ``m`` (arc b → a of weight m[a, b]),
    exact for integer weights; raises ValueError when the graph has no cycle."""
    n = m.shape[0]
    d = np.full((n + 1, n), NEG)
    d[0] = 0.0  # walks from a virtual source joined to every node
    for step in range(1, n + 1):
        d[step] = np.max(m + d[step - 1][None, :], axis=1)
    best: Fraction | None = None
    for v in range(n):
        if d[n, v] == NEG:
            continue
        worst: Fraction | None = None
        for step in range(n):
            if d[step, v] == NEG:
                continue
            val = Fraction(int(d[n, v] - d[step, v]), n - step)
            worst = val if worst is None or val < worst else worst
        if worst is not None and (best is None or worst > best):
            best = worst
    if best is None:
        raise ValueError("the event graph has no cycle")
    return best


def round_start_times(graph: EventGraph, rounds: int) -> np.ndarray:
    """[rounds, nodes] start times (ticks) of the schedule that starts every action as early as
    its arcs allow, all resources free at time 0 (the deterministic schedule the simulator
    runs). Round 0 is a longest-path pass; later rounds use :func:`reduced_matrix`."""
    vals, tails = _full_matrix(graph)
    n = graph.n_nodes
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w, tok in graph.arcs:
        if not tok:
            preds[v].append((u, w))
    x = np.zeros((rounds, n))
    for v in range(n):
        for u, w in preds[v]:
            x[0, v] = max(x[0, v], x[0, u] + w)
    for k in range(1, rounds):
        x[k] = np.max(vals + x[k - 1, tails][None, :], axis=1)
    return x


def _full_matrix(graph: EventGraph) -> tuple[np.ndarray, list[int]]:
    """(V, tails): ``V[v, b]`` = the longest 0-token path from the 1-token arcs out of
    ``tails[b]`` to node v (−inf when none)."""
    tails = sorted({u for u, _, _, tok in graph.arcs if tok})
    col = {u: i for i, u in enumerate(tails)}
    n = graph.n_nodes
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    vals = np.full((n, len(tails)), NEG)
    for u, v, w, tok in graph.arcs:
        if tok:
            vals[v, col[u]] = max(vals[v, col[u]], w)
        else:
            preds[v].append((u, w))
    for v in range(n):  # node ids are a topological order of the 0-token arcs
        for u, w in preds[v]:
            if u >= v:
                raise AssertionError("0-token arcs must follow the node order")
            np.maximum(vals[v], vals[u] + w, out=vals[v])
    return vals, tails


@dataclass(frozen=True)
class Period:
    """The exact T_rtt of a plan and the lower-bound formula beside it (ticks of the
    instance's ``time_unit``; ``*_s`` seconds).

    t_rtt: the cycle time (a fraction of ticks); formula: max(path, μ·busy, μ·NIC) of the
    plan checker; binding: which resource's own cycle attains t_rtt ("path", "compute",
    "network") or "coupled" when only a cycle through several resources does (a stage waits
    for another owner)."""

    t_rtt: Fraction
    formula: int
    path: int
    compute_term: int
    network_term: int
    binding: str
    nodes: int
    seconds_per_tick: float

    @property
    def t_rtt_s(self) -> float:
        return float(self.t_rtt) * self.seconds_per_tick

    @property
    def ratio(self) -> float:
        """Exact period / formula (≥ 1: the formula is a lower bound)."""
        return float(self.t_rtt) / self.formula if self.formula else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {"t_rtt": float(self.t_rtt), "t_rtt_exact": f"{self.t_rtt.numerator}/"
                f"{self.t_rtt.denominator}", "t_rtt_s": self.t_rtt_s,
                "formula": self.formula, "ratio": self.ratio, "path": self.path,
                "compute_term": self.compute_term, "network_term": self.network_term,
                "binding": self.binding, "nodes": self.nodes}


def exact_period(inst: ServingInstance, plan: ServingPlan | dict[str, Any]) -> Period:
    """T_rtt of ``plan`` (a :class:`ServingPlan` or a problems.md §3.2 solution object) as
    problems.md §3.2 defines it: the cycle time of its periodic schedule (module docstring),
    with the formula's terms from the same chain. Raises
    :class:`opt.serving.plan.PlanError` on a structurally invalid plan."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    return chain_period(token_chain(inst, plan), plan.microbatches, inst.seconds(1))


def chain_period(chain: TokenChain, microbatches: int, seconds_per_tick: float = 1.0
                 ) -> Period:
    """The exact period of ``microbatches`` streams running ``chain`` and the lower-bound
    formula's terms (path, μ·max compute, μ·max NIC) beside it."""
    graph = event_graph(chain, microbatches)
    m, _ = reduced_matrix(graph)
    lam = max_cycle_mean(m)
    comp, out, inn = chain.loads()
    compute = microbatches * max(comp)
    network = microbatches * max(max(out), max(inn))
    formula = max(chain.path, compute, network)
    binding = ("path" if lam == chain.path else "compute" if lam == compute else
               "network" if lam == network else "coupled")
    return Period(t_rtt=lam, formula=formula, path=chain.path, compute_term=compute,
                  network_term=network, binding=binding, nodes=graph.n_nodes,
                  seconds_per_tick=seconds_per_tick)


@dataclass(frozen=True)
class SteadyRound:
    """``cycle`` consecutive rounds of the periodic regime: the start times repeat after them
    shifted by ``cycle · t_rtt``. ``jobs``: (resource, stream, step, start, end) in ticks from
    the first start; ``resources``: names ("1:H100x2 replica", "… nic_out", "… nic_in");
    ``periodic``: False when the regime was not reached within the rounds tried (the jobs are
    then the last rounds simulated)."""

    t_rtt: Fraction
    cycle: int
    jobs: tuple[tuple[int, int, int, int, int], ...]
    resources: tuple[str, ...]
    periodic: bool


def steady_round(inst: ServingInstance, plan: ServingPlan | dict[str, Any], *,
                 max_rounds: int = 400) -> SteadyRound:
    """The periodic regime of ``plan``'s schedule (for viewers and checks): rounds are
    simulated by :func:`round_start_times` until ``x(k) = x(k − c) + c·T_rtt`` for some
    c ≤ 8."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    graph = event_graph(token_chain(inst, plan), plan.microbatches)
    m, _ = reduced_matrix(graph)
    lam = max_cycle_mean(m)
    x = round_start_times(graph, max_rounds)
    found: tuple[int, int] | None = None
    for k in range(1, max_rounds):
        for c in range(1, min(8, k) + 1):
            if np.array_equal(x[k] - x[k - c], np.full(graph.n_nodes, float(c * lam))):
                found = (k - c, c)
                break
        if found:
            break
    first, cycle = found if found else (max(0, max_rounds - 1), 1)
    dur = graph.duration
    t0 = float(x[first].min())
    jobs = [(graph.resource[v], graph.stream[v], graph.step[v], int(x[r, v] - t0),
             int(x[r, v] - t0) + dur[v])
            for r in range(first, first + cycle) for v in range(graph.n_nodes)]
    k = plan.owners_count
    names = [f"{m_ + 1}:{o.config} {kind}" for kind in ("replica", "nic_out", "nic_in")
             for m_, o in enumerate(plan.owners)]
    return SteadyRound(lam, cycle, tuple(sorted(jobs, key=lambda j: (j[0], j[3]))),
                       tuple(names[:3 * k]), found is not None)
