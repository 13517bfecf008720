"""The figure quantities of opt.serving.figures: a two-owner plan computed by hand, the busy
fractions against the periodic schedule of opt.serving.period on random plans (occupancy in
[0, 1]), and the AFD payload of Gemma-3-27B counted by hand."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.serving.builder import ServingWorkload, build_serving_plan
from opt.serving.checker import evaluate_plan
from opt.serving.figures import busy_fractions, payload_bytes_per_token, plan_figures
from opt.serving.instance import ServingInstance, serving_instance_from_dict
from opt.serving.period import steady_round
from opt.serving.plan import Owner, ServingPlan


def _gpu(name: str, price: float) -> dict:
    return {"name": name, "peak_flops": 1e14, "mem_bw_bytes_per_s": 1e12, "memory_bytes": 1e9,
            "price_usd_per_hour": price, "gpus_per_node": 8,
            "intra_node": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e11}}


def hand_instance() -> ServingInstance:
    """Two layers of one block with ops a, b (out 1000 / 3000 bytes per request); c0 = one G
    GPU at $2/h, c1 = two H GPUs at $5/h each; microbatch sizes 1, 2."""
    return serving_instance_from_dict({
        "schema": 1, "problem": "serving_plan", "time_unit": "us",
        "model": {"name": "hand", "layers": 2, "block_layers": 1,
                  "ops": [{"id": "a", "layer": 0, "weight_bytes": 10**6,
                           "out_bytes_per_request": 1000},
                          {"id": "b", "layer": 0, "weight_bytes": 10**6,
                           "out_bytes_per_request": 3000}],
                  "embed_weight_bytes": 10**6, "lm_head_weight_bytes": 10**6},
        "hardware": {"gpus": [_gpu("G", 2.0), _gpu("H", 5.0)],
                     "network": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10}},
        "configs": [{"id": "c0", "gpu": "G", "tp": 1}, {"id": "c1", "gpu": "H", "tp": 2}],
        "workload": {"context_tokens": 1024, "tpot_slo": 10**6},
        "grid": {"max_gpus": 8, "max_owners": 2, "max_replicas": 4, "max_microbatches": 2,
                 "batches": [2]},
        "latency": {"microbatch_sizes": [1, 2],
                    "op_duration": [[[10, 20], [15, 30]], [[4, 8], [6, 12]]],
                    "head_duration": [[[1, 2], [1, 3]], [[1, 1], [2, 2]]],
                    "transfer_duration": [[5, 7], [6, 8]], "transfer_busy": [[2, 3], [3, 4]],
                    "token_transfer_duration": [4, 4], "token_transfer_busy": [1, 1]}})


def test_two_owner_plan_by_hand() -> None:
    """Stage 1 = op b on owner 0 (c0), op a on owner 1 (c1, TP 2), batches 2, μ = 1 (b̂ = 2).
    busy: owner 0 runs b twice + LM head = 2·30 + 3 = 63; owner 1 runs a twice + embedding =
    2·6 + 2 = 14. One stream: T_rtt = path = 63 + 14 + 2·6 (a→b, sender's b̂) + 8 (b→a block
    wrap) + 4 (token id back) = 101. Payload: a→b twice (1000), b→a once (3000), token id."""
    inst = hand_instance()
    plan = ServingPlan((1, 2, 3), (Owner("c0", 2), Owner("c1", 2)), 1)
    met = evaluate_plan(inst, plan)
    assert met.busy == [63, 14] and met.t_rtt_exact == 101
    figs = plan_figures(inst, plan)
    assert figs.payload_bytes == 2 * 1000 + 3000 + 4
    assert figs.busy_fraction == (63 / 101, 14 / 101)
    # prices per replica: c0 $2/h, c1 2 GPUs × $5/h; one replica each
    assert figs.occupancy == pytest.approx((2 * 63 + 10 * 14) / (101 * 12), rel=1e-12)
    assert figs.gpus == 3 and figs.mean_gpu_batch == pytest.approx(4 / 3)
    assert figs.served_per_gpu == pytest.approx(2 / 3)
    assert figs.stages_per_token == 4


def test_two_microbatches_wait_and_colocated_plan() -> None:
    """Both owners on c0 with μ = 2 (b̂ = 1): the coupled period of 86 ticks
    (tests/serving/test_serving.py::test_evaluate_by_hand), busy 42 and 21 per microbatch, so
    f = (84/86, 42/86). A one-owner plan sends nothing and, with μ = 1, computes all period."""
    inst = hand_instance()
    plan = ServingPlan((1, 2, 3), (Owner("c0", 2), Owner("c0", 2)), 2)
    met = evaluate_plan(inst, plan)
    assert met.t_rtt_exact == 86
    assert busy_fractions(plan, met) == (Fraction(84, 86), Fraction(42, 86))
    figs = plan_figures(inst, plan)
    assert figs.occupancy == pytest.approx(126 / 172, rel=1e-12)
    assert figs.mean_gpu_batch == 2 and figs.served_per_gpu == 1
    col = ServingPlan((0, 2), (Owner("c1", 2),), 1)
    assert payload_bytes_per_token(inst, col) == 0
    assert plan_figures(inst, col).occupancy == 1.0


def _schedule_fractions(inst: ServingInstance, plan: ServingPlan) -> list[Fraction]:
    """Per owner: compute time in the periodic regime's rounds / (rounds · T_rtt)."""
    reg = steady_round(inst, plan)
    assert reg.periodic
    k = plan.owners_count
    work = [sum(end - start for res, _, _, start, end in reg.jobs if res == m) for m in range(k)]
    return [Fraction(w) / (reg.cycle * reg.t_rtt) for w in work]


def _random_plan(inst: ServingInstance, data: st.DataObject) -> ServingPlan:
    n = inst.n_ops
    k = data.draw(st.integers(1, inst.grid.max_owners), label="K")
    s = k * data.draw(st.integers(1, n // k), label="stages / K")
    q0 = data.draw(st.integers(0, n - 1), label="q0")
    cuts = sorted(data.draw(st.sets(st.integers(q0 + 1, q0 + n - 1), min_size=s - 1,
                                    max_size=s - 1), label="cuts"))
    mu = data.draw(st.integers(1, inst.grid.max_microbatches), label="mu")
    batches = [b for b in inst.grid.batches if b % mu == 0]
    owners = tuple(Owner(data.draw(st.sampled_from([c.id for c in inst.configs])),
                         data.draw(st.sampled_from(batches))) for _ in range(k))
    return ServingPlan((q0, *cuts, q0 + n), owners, mu)


def _random_instance(seed: int) -> ServingInstance:
    """Three ops per layer, blocks of two layers, five layers (a truncated block), random
    integer tables, three configurations."""
    rng = np.random.default_rng(seed)
    d = hand_instance().to_dict()
    d["model"].update(layers=5, block_layers=2, ops=[
        {"id": f"L{l}.{j}", "kind": "op", "layer": l, "module": "other",
         "weight_bytes": 10**6, "kv_bytes_per_request": 0,
         "out_bytes_per_request": int(rng.integers(1, 5000))} for l in range(2) for j in range(3)])
    d["configs"].append({"id": "c2", "gpu": "H", "tp": 1, "ep": 1})
    d["grid"].update(max_owners=3, max_microbatches=3, batches=[2, 3, 6])
    mbs = [1, 2, 3, 6]
    lat = d["latency"]
    lat["microbatch_sizes"] = mbs
    lat["op_duration"] = (rng.integers(1, 40, (3, 1, 6)) * np.array(mbs)[None, :, None]).tolist()
    lat["head_duration"] = rng.integers(0, 10, (3, 4, 2)).tolist()
    busy = rng.integers(0, 6, (4, 6))
    lat["transfer_busy"] = busy.tolist()
    lat["transfer_duration"] = (busy + int(rng.integers(0, 8))).tolist()
    lat["token_transfer_duration"] = [3] * 4
    lat["token_transfer_busy"] = [1] * 4
    return serving_instance_from_dict(d)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3), st.data())
def test_busy_fractions_match_the_periodic_schedule(seed: int, data: st.DataObject) -> None:
    """f_m = μ·busy_m/T_rtt is the compute share of the period in the schedule the simulator
    settles into; the occupancy is a price-weighted mean of them, so it lies in [0, 1]."""
    inst = _random_instance(seed)
    plan = _random_plan(inst, data)
    met = evaluate_plan(inst, plan)
    fr = busy_fractions(plan, met)
    assert list(fr) == _schedule_fractions(inst, plan)
    occ = plan_figures(inst, plan, met).occupancy
    assert 0.0 < occ <= 1.0
    assert min(fr) - 1e-12 <= occ <= max(fr) + 1e-12


def test_gemma_afd_payload_by_hand() -> None:
    """Gemma-3-27B AFD: each of the 62 layers sends its attention output after o_proj and its
    FFN output after ffn_out (the hidden state, 5376 bf16 values = 10752 bytes each), except
    after the last layer, whose LM head is on the FFN owner: 123 transfers + the token id."""
    inst = build_serving_plan(bundled_cards()["gemma-3-27b"], bundled_catalog(), ["H100"],
                              ServingWorkload(8192, 0.06))
    n = inst.n_ops
    afd = ServingPlan(tuple(sorted({0, *range(3, n, 5), *range(5, n + 1, 5)})),
                      (Owner("H100x4", 8), Owner("H100x4", 8)), 1)
    assert afd.template[:4] == (0, 3, 5, 8) and afd.template[-1] == n
    assert [inst.ops[i].out_bytes_per_request for i in (2, 4)] == [10752, 10752]
    assert payload_bytes_per_token(inst, afd) == 123 * 10752 + 4
