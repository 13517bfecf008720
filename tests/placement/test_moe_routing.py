"""The builder's MoE routing (problems.md §1.4 MoE, ``BuildOptions.moe_routing``): ``fixed``
(default, the DOPS authors' code: every token through experts 0 … k−1) and ``per_token``
(each token its own top-k); the two build different task graphs for Mixtral and the same
for a dense model; the option is checked, recorded in the instance's meta and round-trips
through ``hetopt build placement``."""

from __future__ import annotations

import numpy as np
import pytest

from opt.app.cli import main
from opt.common.errors import InputError
from opt.placement.build_options import MOE_ROUTINGS, BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.io import read_instance


def build(catalog, cards, model, **opts):
    return build_placement(cards[model], catalog.platform("HP32"), catalog, Workload(16, 2, 4),
                           BuildOptions(layers=1, **opts))


def experts_of(inst, step):
    return sorted({k.split("_")[0] for k, s in zip(inst.kind, inst.step)
                   if s == step and k.startswith("expert")})


def test_default_is_fixed_the_first_top_k(catalog, cards):
    assert BuildOptions().moe_routing == MOE_ROUTINGS[0] == "fixed"
    inst = build(catalog, cards, "mixtral-8x7b")
    assert experts_of(inst, 0) == experts_of(inst, 1) == ["expert0", "expert1"]
    assert sorted(b.split("_")[1] for b in inst.block_ids if "_expert" in b) == \
        ["expert0", "expert1"]
    assert inst.meta["builder"]["moe_routing"] == "fixed"
    assert inst.meta["moe_routing"] == {"rule": "fixed", "num_experts": 8, "top_k": 2,
                                        "experts": [0, 1]}


def test_the_two_readings_differ_for_mixtral(catalog, cards):
    fixed = build(catalog, cards, "mixtral-8x7b")
    per_token = build(catalog, cards, "mixtral-8x7b", moe_routing="per_token")
    # 64 prefill tokens reach all eight experts; the four decode tokens experts 0, 1, 6, 7
    assert experts_of(per_token, 0) == [f"expert{e}" for e in range(8)]
    assert len(experts_of(per_token, 1)) > 2
    assert per_token.n_tasks > fixed.n_tasks
    assert len(per_token.block_ids) == len(fixed.block_ids) + 6
    assert per_token.meta["moe_routing"]["rule"] == "per_token"
    assert per_token.meta["builder"]["moe_routing"] == "per_token"
    # each fixed expert computes every token: more work than under per-token routing
    e0 = [t for t, k in enumerate(fixed.kind) if k == "expert0_gate" and fixed.step[t] == 0]
    p0 = [t for t, k in enumerate(per_token.kind) if k == "expert0_gate"
          and per_token.step[t] == 0]
    assert fixed.cost[e0[0], 0] > per_token.cost[p0[0], 0]


def test_the_same_for_a_dense_model(catalog, cards):
    a = build(catalog, cards, "llama-2-7b")
    b = build(catalog, cards, "llama-2-7b", moe_routing="per_token")
    assert a.task_ids == b.task_ids and np.array_equal(a.cost, b.cost)
    assert np.array_equal(a.edge_src, b.edge_src) and np.array_equal(a.edge_bytes, b.edge_bytes)
    assert a.block_ids == b.block_ids and "moe_routing" not in a.meta


def test_the_option_is_checked(catalog, cards):
    with pytest.raises(InputError, match="moe_routing must be one of fixed, per_token") as e:
        BuildOptions(moe_routing="uniform")
    assert e.value.field == "moe_routing"
    with pytest.raises(InputError, match="experts") as e:
        BuildOptions(moe_routing="per_token", experts=(0, 1))
    assert e.value.field == "experts"
    with pytest.raises(InputError, match="distinct"):
        BuildOptions(experts=(1, 1))
    with pytest.raises(InputError, match=r"experts must be in 0\.\.7"):
        build(catalog, cards, "mixtral-8x7b", experts=(0, 8))
    other = build(catalog, cards, "mixtral-8x7b", experts=(3, 5))
    assert experts_of(other, 1) == ["expert3", "expert5"]
    assert other.meta["moe_routing"]["experts"] == [3, 5]


@pytest.mark.parametrize("routing", [None, *MOE_ROUTINGS])
def test_cli_round_trip(tmp_path, capsys, routing):
    out = tmp_path / "mix.json"
    argv = ["build", "placement", "--model", "mixtral-8x7b", "--platform", "HP32", "--prefill",
            "16", "--decode", "1", "--layers", "1", "-o", str(out)]
    assert main(argv + ([] if routing is None else ["--moe-routing", routing])) == 0
    capsys.readouterr()
    inst = read_instance(out)
    want = routing or "fixed"
    assert inst.meta["builder"]["moe_routing"] == want
    assert inst.meta["moe_routing"]["rule"] == want
    with pytest.raises(SystemExit) as e:
        main(argv + ["--moe-routing", "uniform"])
    assert e.value.code == 2 and "invalid choice: 'uniform'" in capsys.readouterr().err
