"""Policy search (heuristics.placement.policy_search): the best kind → class mapping by local search."""

from __future__ import annotations

import pytest

from heuristics.placement.policy_search import kind_group, policy_search
from instances.generated import gap_case
from opt.common.errors import InputError
from opt.placement.validator import validate_placement
from solvers import solve

STATICS = ("heft", "pd", "af", "pd+linear", "pd+attn", "pd+ffn")


@pytest.mark.parametrize("seed", [1001, 1008, 1012])
def test_never_worse_than_its_starting_policies_and_valid(seed):
    inst = gap_case(seed).build()
    stats: dict = {}
    sol = policy_search(inst, {"max_evaluations": 60}, stats=stats)
    ms = validate_placement(inst, sol).makespan
    assert ms == min(stats["trajectory"])
    for m in STATICS:
        assert ms <= solve(inst, m).objective
    assert stats["evaluations"] <= 60 and isinstance(stats["mapping"], dict)


def test_not_below_the_proven_optimum_and_deterministic():
    inst = gap_case(1001).build()
    opt = solve(inst, "cpsat", time_limit=60, deterministic=True, num_workers=1, seed=0)
    assert opt.status == "OPTIMAL"
    a = solve(inst, "policy-search")
    b = solve(inst, "policy-search")
    assert a.objective >= opt.objective
    assert a.objective == b.objective and a.solution == b.solution
    assert a.lower_bound <= a.objective


def test_expert_kinds_are_grouped_and_bad_params_named():
    assert kind_group("expert3_up") == "expert*_up" and kind_group("q_proj") == "q_proj"
    inst = gap_case(1001).build()
    with pytest.raises(InputError, match="max_evaluation"):
        solve(inst, "policy-search", max_evaluation=3)
    with pytest.raises(InputError, match="≥ 1"):
        solve(inst, "policy-search", max_evaluations=0)
