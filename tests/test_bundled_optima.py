"""``hetopt solve NAME`` without ``--method`` reproduces every bundled optimum
(instances/index.json and the STG graphs): it runs the method the index entry records as having
proved the optimum (``provenance.best_by``; cpsat-blocks for the P1 Llama-2-7B slice), else the
default of the instance's problem: portfolio for placement, cpsat-layout for layout, bnb for
serving (docs/cli.md, "Default method"). Instances that take more than a few seconds are
``slow``; the limits are ceilings, each solve ends when its optimum is proven."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import instances
from opt.app.cli import main
from solvers.registry import DEFAULTS, get_method

#: seconds per solve: a hang guard only, far above what the solves below take (the fast ones
#: prove their optimum in a few seconds on a loaded machine), so no verdict depends on the clock
TIME_LIMIT_S = {"fast": 600.0, "slow": 1800.0}
#: index instances whose default solve takes more than a few seconds
SLOW = {"opweave-gemma-3-27b-h100-32k-60ms", "p1-llama-2-7b-hp32-p64-d2-l2"}


def _cases() -> list:
    out = []
    for rec in instances.bundled():
        if rec.optimum is None:
            continue
        marks = []
        if rec.name in SLOW or rec.name.startswith(("stg-", "llm-")):
            marks.append(pytest.mark.slow)
        out.append(pytest.param(rec, id=rec.name, marks=marks))
    return out


@pytest.mark.parametrize("rec", _cases())
def test_default_method_reproduces_the_bundled_optimum(rec, capsys):
    slow = rec.name in SLOW or rec.name.startswith(("stg-", "llm-"))
    limit = TIME_LIMIT_S["slow" if slow else "fast"]
    code = main(["solve", rec.name, "--time-limit", str(limit), "--num-workers", "2",
                 "--json", "--no-solution"])
    res = json.loads(capsys.readouterr().out)
    expected = rec.proven_by or DEFAULTS[rec.problem]
    assert res["problem"] == rec.problem and res["method"] == expected
    assert code == 0 and res["status"] in ("OPTIMAL", "FEASIBLE")
    assert math.isclose(res["objective"], rec.optimum, rel_tol=1e-9), res["objective"]


def test_recorded_methods_are_methods_of_their_problem():
    """Every method an index entry records as proving its optimum is a registered method of
    the entry's problem (so ``hetopt solve NAME`` can run it)."""
    recorded = {rec.name: rec.proven_by for rec in instances.bundled() if rec.proven_by}
    assert recorded["p1-llama-2-7b-hp32-p64-d2-l2"] == "cpsat-blocks"
    for rec in instances.bundled():
        if rec.proven_by:
            assert get_method(rec.proven_by, rec.problem).problem == rec.problem


def test_a_file_path_runs_the_problem_default(capsys):
    """The recorded method applies to a bundled name only: the same instance as a file runs
    its problem's default (a 1 s limit: only the method is checked)."""
    path = Path(instances.__file__).parent / instances.info("p1-llama-2-7b-hp32-p64-d2-l2").file
    main(["solve", str(path), "--time-limit", "1", "--num-workers", "1", "--json", "--no-solution"])
    assert json.loads(capsys.readouterr().out)["method"] == "portfolio"
