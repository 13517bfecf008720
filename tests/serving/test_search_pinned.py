"""The B&B's vectorised candidate frontier and node bounds (planner time on the
Table-3 case) leave every search unchanged: outcomes and search counts pinned to the values of the
per-candidate Python loops they replaced, and the frontier checked against its pairwise
definition."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import instances
from heuristics.serving import search as ss
from tests.serving.test_serving import tiny

#: Outcomes of ``ss.search`` recorded with the loop implementation (commit 33326b4): cost
#: ($/token, repr), exact T_rtt (ticks), plan (template, owners, μ) and the counts space,
#: candidates, nodes, evaluations, sequences, exact evaluations, sequences pruned, tightest
#: formula T_rtt.
GOLDEN = json.loads((Path(__file__).parent / "data" / "search_golden.json").read_text())
COUNTS = ("space", "candidates", "nodes", "evaluations", "sequences", "exact_evaluations",
          "sequences_pruned", "tightest_t_rtt_formula")


def _digest(out: ss.SearchOutcome) -> dict:
    s = out.stats.to_dict()
    return {"cost": None if out.cost_usd_per_token is None else repr(out.cost_usd_per_token),
            "t_rtt": None if out.t_rtt is None else str(out.t_rtt),
            "plan": None if out.plan is None else [
                list(out.plan.template), [[o.config, o.batch] for o in out.plan.owners],
                out.plan.microbatches],
            "counts": [s[f] for f in COUNTS]}


def _tiny_cases(seed: int) -> dict[str, dict]:
    out = {}
    for k in (2, 3):
        inst = tiny(seed, layers=3, ops_per_layer=3, memory=3e8, slo=900, configs=4,
                    batches=(1, 2, 4, 8), max_mu=3, max_owners=k)
        seqs = ss.structured_sequences(inst)
        for fr, bd in itertools.product((True, False), repeat=2):
            out[f"tiny{seed}-k{k}-f{int(fr)}b{int(bd)}"] = _digest(
                ss.search(inst, seqs, frontier=fr, bounds=bd))
        out[f"tiny{seed}-k{k}-tight"] = _digest(ss.search(inst, seqs, objective="t_rtt"))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_tiny_searches_pinned(seed):
    """Random instances with 4 configurations, 4 batches, μ ≤ 3, K = 2 and 3, every
    frontier / bounds switch and the tightest-T_rtt objective: same plan, cost (to the bit),
    period and search counts as the loop implementation."""
    for key, got in _tiny_cases(seed).items():
        assert got == GOLDEN[key], key


@pytest.mark.parametrize("name", ["p3-tiny-gemma-a100-l40s", "p3-tiny-qwen3-next-h100-a100"])
def test_bundled_searches_pinned(name):
    inst = instances.load(name)
    assert _digest(ss.search(inst, ss.structured_sequences(inst))) == GOLDEN[name]


def test_frontier_switch_changes_the_count():
    """The frontier prunes on these instances (so the pinned counts exercise it)."""
    on, off = GOLDEN["tiny0-k2-f1b1"]["counts"], GOLDEN["tiny0-k2-f0b1"]["counts"]
    assert on[1] < off[1]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 3), st.booleans())
def test_frontier_is_the_pairwise_definition(seed, mu, equal_times):
    """Each owner's candidates with the frontier are exactly the memory-feasible (config,
    batch) not dominated, within their batch, in (every op's duration, price / b, tp) by
    another feasible one, the first of equal ones kept — checked pair by pair."""
    inst = tiny(seed, layers=2, ops_per_layer=3, memory=3e8, configs=4, batches=(1, 2, 4, 8),
                max_mu=3)
    owner = ss.tile(inst, 1, np.array([0, 1, 0]))
    seq = ss._sequence_data(inst, owner, inst.op_duration * inst.op_count[None, None, :])
    cfgs = ss._Configs.of(inst)
    for role in seq.roles:
        if equal_times:  # ties in every duration: the tie rule decides
            role = ss._Role(role.busy, role.send, role.out, role.weights, role.kv,
                            np.broadcast_to(role.times[:1], role.times.shape).copy(), role.net)
        got, _ = ss._candidates(inst, cfgs, role, mu, True)
        allc, _ = ss._candidates(inst, cfgs, role, mu, False)
        want = set()
        for i in range(len(allc)):
            def better(j: int) -> bool:
                ti, tj = allc.times[i], allc.times[j]
                le = ((tj <= ti).all() and allc.rate[j] <= allc.rate[i]
                      and allc.tp[j] <= allc.tp[i])
                lt = (tj < ti).any() or allc.rate[j] < allc.rate[i] or allc.tp[j] < allc.tp[i]
                return bool(le and (lt or allc.cfg[j] < allc.cfg[i]))
            if not any(allc.batch[j] == allc.batch[i] and j != i and better(j)
                       for j in range(len(allc))):
                want.add((int(allc.cfg[i]), int(allc.batch[i])))
        assert set(zip(got.cfg.tolist(), got.batch.tolist())) == want
