"""The exact round-trip time (opt.serving.period): a hand example, Karp's cycle time against
an independent Bellman-Ford certificate and an unrolled max-plus simulation on random chains,
and the old formula as a lower bound on random plans of the bundled instances."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import instances
from opt.serving.chain import TokenChain, token_chain
from opt.serving.checker import evaluate_plan
from opt.serving.period import EventGraph, event_graph, exact_period, max_cycle_mean, reduced_matrix
from opt.serving.plan import Owner, PlanError, ServingPlan


def _chain(steps: list[tuple], owners: int) -> TokenChain:
    """steps: ("c", owner, dur) or ("t", src, dst, latency, busy_out, busy_in)."""
    cols: dict[str, list[int]] = {k: [] for k in
                                  ("kind", "res", "dur", "src", "dst", "out", "inn", "lat")}
    for st_ in steps:
        comp = st_[0] == "c"
        row = ((0, st_[1], st_[2], -1, -1, 0, 0, 0) if comp else
               (1, -1, 0, st_[1], st_[2], st_[4], st_[5], st_[3]))
        for key, val in zip(cols, row):
            cols[key].append(val)
    return TokenChain(*(tuple(cols[k]) for k in cols), owners)


def _unrolled_slope(graph: EventGraph, rounds: int) -> float:
    """Start times by the plain max-plus recursion, all actions free at 0; the growth of the
    first node's start over the second half of ``rounds`` rounds (ticks per round)."""
    n = graph.n_nodes
    tok0: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    tok1: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for u, v, w, t in graph.arcs:
        (tok1 if t else tok0)[v].append((u, w))
    prev: list[float] = []
    hist = []
    for k in range(rounds):
        cur = [0.0] * n
        for v in range(n):
            best = 0.0 if k == 0 else -np.inf
            for u, w in tok1[v]:
                if k > 0:
                    best = max(best, prev[u] + w)
            for u, w in tok0[v]:
                best = max(best, cur[u] + w)
            cur[v] = best
        prev = cur
        hist.append(cur[0])
    half = rounds // 2
    return (hist[-1] - hist[half - 1]) / (rounds - half)


def _positive_cycle(graph: EventGraph, lam: Fraction) -> bool:
    """Bellman-Ford: does some cycle have Σ(weight − lam·tokens) > 0?"""
    n = graph.n_nodes
    dist = [Fraction(0)] * n
    arcs = [(u, v, Fraction(w) - lam * t) for u, v, w, t in graph.arcs]
    for _ in range(n + 1):
        changed = False
        for u, v, w in arcs:
            if dist[u] + w > dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            return False
    return True


def test_hand_example_two_owners_two_microbatches() -> None:
    """A runs 3 then 1 tick, B 1 then 3 ticks per token, transfers free, μ = 2: path 8 and
    each owner busy 4 per microbatch, so the formula says 8. By hand, round 0: A s0 [0,3],
    s1 [3,6]; B s0 [3,4], s1 [6,7]; A s0 [6,7], s1 [7,8]; B s0 [7,10], s1 [10,13]; round 1
    starts A s0 at 10 and ends B s0 at 20: the period is 10 (B's long stage waits for A)."""
    chain = _chain([("c", 0, 3), ("t", 0, 1, 0, 0, 0), ("c", 1, 1), ("t", 1, 0, 0, 0, 0),
                    ("c", 0, 1), ("t", 0, 1, 0, 0, 0), ("c", 1, 3), ("t", 1, 0, 0, 0, 0)], 2)
    g = event_graph(chain, 2)
    m, _ = reduced_matrix(g)
    assert max_cycle_mean(m) == 10
    comp, _, _ = chain.loads()
    assert chain.path == 8 and 2 * max(comp) == 8
    assert _unrolled_slope(g, 40) == 10


def _slow_path(chain: TokenChain) -> int:
    """One stream alone: its segments plus, per transfer, latency + the slower endpoint."""
    return sum(d if k == 0 else lat + max(o, i) for k, d, lat, o, i in
               zip(chain.kind, chain.dur, chain.latency, chain.busy_out, chain.busy_in))


def test_one_microbatch_period_is_the_chain() -> None:
    """μ = 1: nothing waits but the chain itself; a receiver slower to deserialise than the
    sender to serialise (4 > 1 ticks) delays the next segment beyond the formula's path."""
    chain = _chain([("c", 0, 5), ("t", 0, 1, 2, 3, 1), ("c", 1, 7), ("t", 1, 0, 1, 1, 4)], 2)
    m, _ = reduced_matrix(event_graph(chain, 1))
    assert chain.path == 5 + 5 + 7 + 2
    assert max_cycle_mean(m) == _slow_path(chain) == 5 + 5 + 7 + 5


@st.composite
def chains(draw) -> tuple[TokenChain, int]:
    k = draw(st.integers(1, 3))
    mu = draw(st.integers(1, 4))
    segs = draw(st.integers(1, 6))
    owners = [draw(st.integers(0, k - 1)) for _ in range(segs)]
    steps: list[tuple] = []
    for i, o in enumerate(owners):
        steps.append(("c", o, draw(st.integers(0, 20))))
        nxt = owners[(i + 1) % segs]
        if nxt != o:
            steps.append(("t", o, nxt, draw(st.integers(0, 5)), draw(st.integers(0, 6)),
                          draw(st.integers(0, 6))))
    return _chain(steps, k), mu


@settings(max_examples=150, deadline=None, derandomize=True)
@given(chains())
def test_cycle_time_is_certified_and_bounds_the_formula(case) -> None:
    chain, mu = case
    g = event_graph(chain, mu)
    m, _ = reduced_matrix(g)
    lam = max_cycle_mean(m)
    # exact: no cycle beats lam, and one attains it (a cycle is positive just below lam)
    assert not _positive_cycle(g, lam)
    assert _positive_cycle(g, lam - Fraction(1, 1000))
    # the old formula is a lower bound: every term is the mean of one cycle
    comp, out, inn = chain.loads()
    assert lam >= chain.path and lam >= mu * max(comp + out + inn)
    # the deterministic schedule settles to it
    assert _unrolled_slope(g, 6 * g.n_nodes + 20) == pytest.approx(float(lam), rel=1e-9)


def _random_plan(inst, rng: random.Random) -> ServingPlan:
    n = inst.n_ops
    k = rng.randint(1, min(3, inst.grid.max_owners))
    mu = rng.randint(1, inst.grid.max_microbatches)
    stages = k * rng.randint(1, max(1, n // k))
    q0 = rng.randrange(n)
    cuts = sorted(rng.sample(range(q0 + 1, q0 + n), stages - 1)) if stages > 1 else []
    template = (q0, *cuts, q0 + n)
    owners = []
    for _ in range(k):
        cfg = rng.choice(inst.configs)
        batch = mu * rng.choice(inst.microbatch_sizes)
        owners.append(Owner(cfg.id, batch))
    return ServingPlan(template, tuple(owners), mu)


@pytest.mark.parametrize("name", [n for n in instances.names() if n.startswith("p3")])
def test_formula_never_exceeds_the_exact_period_on_random_plans(name: str) -> None:
    """The formula is a lower bound on ≥ 1,000 random plans of the bundled P3
    instances."""
    inst = instances.load(name)
    rng = random.Random(7)
    checked = 0
    while checked < 340:  # 3 bundled P3 instances: 1,020 random plans
        plan = _random_plan(inst, rng)
        try:
            met = evaluate_plan(inst, plan)
        except PlanError:
            continue  # e.g. a microbatch size without a latency table
        p = exact_period(inst, plan)
        assert p.formula == met.t_rtt_formula <= p.t_rtt == met.t_rtt_exact
        if plan.microbatches == 1:
            assert p.t_rtt == _slow_path(token_chain(inst, plan))
        checked += 1


@pytest.mark.parametrize("method", ["afd", "cad"])
def test_steady_round_repeats_and_never_overlaps(method: str) -> None:
    from opt.serving.period import steady_round
    from solvers import solve

    inst = instances.load("p3-tiny-gemma-a100-l40s")
    res = solve(inst, method, time_limit=20)
    rnd = steady_round(inst, res.solution)
    assert rnd.periodic and rnd.t_rtt == exact_period(inst, res.solution).t_rtt
    by_res: dict[int, list[tuple[int, int]]] = {}
    for r, _, _, start, end in rnd.jobs:
        by_res.setdefault(r, []).append((start, end))
    for spans in by_res.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # each resource's work over the cycle fits in cycle · T_rtt
    assert max(sum(e - s for s, e in v) for v in by_res.values()) <= rnd.cycle * rnd.t_rtt
