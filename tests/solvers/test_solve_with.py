"""``solvers.solve_with`` (the options as one SolveOptions) runs what ``solvers.solve`` runs."""

from __future__ import annotations

import pytest

from instances import load
from models.options import SolveOptions
from opt.common.errors import InputError
from solvers.api import solve, solve_with


@pytest.mark.parametrize("method", ["heft", "bifocal"])
def test_solve_with_gives_the_result_of_solve(method):
    inst = load("sinnen-Nodes_10_Random-p4")
    a = solve(inst, method, seed=3)
    b = solve_with(inst, method, SolveOptions(seed=3))
    assert (a.status, a.objective, a.lower_bound, a.solution) == \
        (b.status, b.objective, b.lower_bound, b.solution)
    assert a.params == b.params


def test_solve_with_checks_the_options_as_solve_does():
    inst = load("sinnen-Nodes_7_OutTree-p2")
    with pytest.raises(InputError) as err:
        solve_with(inst, "heft", SolveOptions(num_workers=0))
    assert err.value.field == "num_workers"
    with pytest.raises(InputError, match="bogus"):
        solve_with(inst, "heft", SolveOptions(), warm_start="bogus")
    start = solve(inst, "heft")
    res = solve_with(inst, "heft", SolveOptions(initial_solution=start.solution))
    assert res.objective == start.objective
