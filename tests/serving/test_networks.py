"""A plan's network follows the GPU types of each crossing's endpoints, not the instance
(problems.md §3.1 "Network model"; OpWeave App. B.3 Eq. 39): every consumer — the checker, the
token chain, the B&B / baselines, the exact MILP — agrees on hand-made two-network instances,
and on built ones an H100-only plan costs the same with or without an L40S in the instance."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from heuristics.serving.search import full_sequences, search
from models.serving.milp import solve_serving_milp
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.latency import Link
from opt.costlib.modelcard import bundled_cards
from opt.serving.builder import ServingWorkload, build_serving_plan, crossing_networks
from opt.serving.checker import evaluate_plan
from opt.serving.instance import ServingGrid, ServingInstance, serving_instance_from_dict
from tests.serving.test_serving import brute_force, tiny_dict

RTOL = 1e-9


def two_network_dict(seed: int, **kw) -> dict:
    """:func:`tiny_dict` with two networks: a crossing with an H endpoint takes the slow one
    (network 0, 3× the serialisation and +7 ticks of latency), G–G the fast one (network 1)."""
    d = tiny_dict(np.random.default_rng(seed), **kw)
    lat = d["latency"]
    busy = np.array(lat["transfer_busy"])
    dur = np.array(lat["transfer_duration"])
    tok_busy = np.array(lat["token_transfer_busy"])
    tok_dur = np.array(lat["token_transfer_duration"])
    lat["transfer_busy"] = [(3 * busy).tolist(), busy.tolist()]
    lat["transfer_duration"] = [(3 * busy + (dur - busy) + 7).tolist(), dur.tolist()]
    lat["token_transfer_busy"] = [(3 * tok_busy).tolist(), tok_busy.tolist()]
    lat["token_transfer_duration"] = [(3 * tok_busy + (tok_dur - tok_busy) + 7).tolist(),
                                      tok_dur.tolist()]
    hw = d["hardware"]
    hw["networks"] = [{"latency_s": 2e-5, "bandwidth_bytes_per_s": 3e9},
                      {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10}]
    hw["crossing_network"] = [[1, 0], [0, 0]]
    return d


def two_network(seed: int, **kw) -> ServingInstance:
    return serving_instance_from_dict(two_network_dict(seed, **kw), "two.json")


def test_crossing_rule_of_the_builder():
    """Slower endpoint, componentwise; equal links share one network."""
    fast, slow = Link(18.5e-6, 36.2e9, "H100"), Link(20e-6, 32e9, "L40S")
    odd = Link(10e-6, 8e9, "odd")  # lower latency, lower bandwidth
    nets, cross = crossing_networks([fast, slow, odd])
    key = [(n.latency_s, n.bandwidth_bytes_per_s) for n in nets]
    assert key[cross[0, 0]] == (18.5e-6, 36.2e9)
    assert key[cross[0, 1]] == key[cross[1, 0]] == key[cross[1, 1]] == (20e-6, 32e9)
    assert key[cross[0, 2]] == (18.5e-6, 8e9) and key[cross[1, 2]] == (20e-6, 8e9)
    assert len(crossing_networks([fast, fast])[0]) == 1


def test_round_trip_and_bad_matrix():
    inst = two_network(1)
    again = serving_instance_from_dict(json.loads(json.dumps(inst.to_dict())))
    assert again.n_networks == 2 and np.array_equal(again.transfer_busy, inst.transfer_busy)
    assert again.crossing_network.tolist() == [[1, 0], [0, 0]]
    d = two_network_dict(1)
    d["hardware"]["crossing_network"] = [[1, 2], [0, 0]]
    with pytest.raises(InputError, match="crossing_network"):
        serving_instance_from_dict(d, "bad.json")
    d = two_network_dict(1)
    d["latency"]["transfer_busy"] = d["latency"]["transfer_busy"][:1]
    with pytest.raises(InputError, match="transfer_busy.*shape"):
        serving_instance_from_dict(d, "bad.json")


@pytest.mark.parametrize("seed", [0, 3, 4, 6])
def test_search_is_the_brute_force_optimum(seed):
    """B&B over the full space (frontier and bounds on and off) = the checker's brute force:
    the search's optimistic network terms, exact leaves and network-aware frontier lose no
    plan (seeds whose optimum splits the block over two owners)."""
    inst = two_network(seed, layers=2, ops_per_layer=3, configs=3, batches=(1, 2, 4),
                       memory=1.5e8, slo=300)
    ref, _ = brute_force(inst)
    for fr in (True, False):
        for bd in (True, False):
            out = search(inst, full_sequences(inst), frontier=fr, bounds=bd)
            assert out.plan is not None
            met = evaluate_plan(inst, out.plan)
            assert met.cost_usd_per_token == pytest.approx(out.cost_usd_per_token, rel=RTOL)
            assert out.cost_usd_per_token == pytest.approx(ref, rel=RTOL)


def test_networks_change_the_optimum():
    """Switching the G–G network to the slow one (one network for every crossing, the old
    instance-wide rule) changes the optimum of some seed."""
    changed = 0
    for seed in (0, 3, 4, 6):
        d = two_network_dict(seed, layers=2, ops_per_layer=3, configs=3, batches=(1, 2, 4),
                             memory=1.5e8, slo=300)
        per_crossing = serving_instance_from_dict(d)
        d["hardware"]["crossing_network"] = [[0, 0], [0, 0]]
        slowest = serving_instance_from_dict(d)
        a = search(per_crossing, full_sequences(per_crossing)).cost_usd_per_token
        b = search(slowest, full_sequences(slowest)).cost_usd_per_token
        assert a is not None and b is not None and a <= b * (1 + RTOL)
        changed += a < b * (1 - 1e-9)
    assert changed == 4


@pytest.mark.parametrize("seed", [0, 6])
def test_milp_bound_is_the_formula_optimum(seed):
    """The MILP with per-pair transfer marks: its lower bound is the formula optimum of the
    full space (B&B with ``period="formula"``) and its plan costs at least the exact optimum
    (the MILP checks its own T and cost against the plan checker)."""
    inst = two_network(seed, layers=2, ops_per_layer=3, configs=3, batches=(1, 2, 4),
                       memory=1.5e8, slo=300)
    formula = search(inst, full_sequences(inst), period="formula")
    exact = search(inst, full_sequences(inst))
    out = solve_serving_milp(inst, time_limit=300, num_workers=1, seed=0)  # a hang guard
    assert out.lower_bound == pytest.approx(formula.cost_usd_per_token, rel=1e-6)
    assert out.cost >= exact.cost_usd_per_token * (1 - 1e-6)


# ---- built instances: H100 (measured network) with and without an L40S (catalog network) ----

@cache
def _built(gpus: tuple[str, ...]) -> ServingInstance:
    card = replace(bundled_cards()["llama-2-7b"], layers=1)
    grid = ServingGrid(max_gpus=8, max_owners=2, max_replicas=4, max_microbatches=2,
                       batches=(8, 16, 32, 64))
    return build_serving_plan(card, bundled_catalog(), list(gpus),
                              ServingWorkload(8192, 0.004), grid=grid, tp_degrees=(1, 2))


def test_h100_plan_costs_the_same_beside_an_l40s():
    """Every H100-only plan of the H100 instance (K = 2 included, so it crosses the network)
    has the same period and cost in the H100 + L40S instance: its crossings stay on the H100's
    measured network, not the L40S's catalog link."""
    hom, het = _built(("H100",)), _built(("H100", "L40S"))
    assert het.n_networks == 2 and hom.n_networks == 1
    h100 = het.networks[het.crossing_network[0, 0]]
    assert h100.latency_s == pytest.approx(hom.network.latency_s)
    assert h100.latency_s < het.network.latency_s  # the instance's slowest is the L40S's
    plans = [search(hom, {k: seqs}).plan for k, seqs in full_sequences(hom).items()]
    assert any(p is not None and p.owners_count == 2 for p in plans)
    for plan in plans:
        if plan is None:
            continue
        a, b = evaluate_plan(hom, plan), evaluate_plan(het, plan)
        assert (a.t_rtt, a.cost_usd_per_token) == (b.t_rtt, b.cost_usd_per_token)


def test_het_optimum_at_most_hom_optimum():
    """Solved exactly over the full space: the H100 + L40S optimum ≤ the H100 optimum (its
    space contains every H100 plan at the same cost)."""
    hom, het = _built(("H100",)), _built(("H100", "L40S"))
    a = search(hom, full_sequences(hom)).cost_usd_per_token
    b = search(het, full_sequences(het)).cost_usd_per_token
    assert a is not None and b is not None and b <= a * (1 + RTOL)


def test_network_override_replaces_the_measured_link():
    """OpWeave Fig. 14's sweep sets every GPU type's inter-node link: the builder's
    ``network`` overrides the calibrated H100's measured send/recv too (without it the 5 µs
    point would stay at the measured 18.5 µs), recorded in ``meta.network_override``."""
    card = replace(bundled_cards()["llama-2-7b"], layers=1)
    w = ServingWorkload(8192, 0.004)
    link = Link(5e-6, 32e9, "Fig. 14 point")
    base = build_serving_plan(card, bundled_catalog(), ["H100", "L40S"], w, tp_degrees=(1,))
    over = build_serving_plan(card, bundled_catalog(), ["H100", "L40S"], w, tp_degrees=(1,),
                              network=link)
    assert base.networks[base.crossing_network[0, 0]].latency_s > 18e-6
    assert over.n_networks == 1 and over.network.latency_s == pytest.approx(5e-6)
    assert over.meta["network_override"]["latency_s"] == pytest.approx(5e-6)
    assert ((over.transfer_duration - over.transfer_busy) == 5000).all()   # ns
