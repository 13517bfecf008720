"""``certify`` (what ``solve`` applies to every back end's result) turns a result whose status
contradicts its content into ERROR with the reason, so ``solve`` never returns a result that
``validate`` refuses."""

from __future__ import annotations

from dataclasses import replace

import pytest

import instances
from solvers import solve
from solvers.certify import certify, validate


@pytest.mark.parametrize("edit, why", [
    ({"status": "OPTIMAL", "lower_bound": None}, "status OPTIMAL but no lower bound"),
    ({"status": "INFEASIBLE"}, "status INFEASIBLE but the result carries a solution"),
    ({"status": "FEASIBLE", "solution": None}, "status FEASIBLE but no solution"),
])
def test_a_contradictory_back_end_result_becomes_error(edit, why):
    inst = instances.load("heft-topcuoglu-2002")
    res = solve(inst, "heft")
    assert validate(inst, res).valid
    bad = certify(inst, replace(res, **edit))
    assert bad.status == "ERROR" and why in bad.stats["message"] and bad.stats["invalid"]
