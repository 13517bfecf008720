"""``hetopt solve NAME`` with the default method of the instance's problem reproduces every
bundled optimum (instances/index.json and the STG graphs): cpsat for placement, cpsat-layout
for layout, bnb for serving. Instances that take more than a few seconds are ``slow``."""

from __future__ import annotations

import json
import math

import pytest

import instances
from opt.app.cli import main

#: seconds per solve: generous, the solves below end well before it
TIME_LIMIT_S = {"fast": 60.0, "slow": 300.0}
#: index instances whose default solve takes more than a few seconds
SLOW = {"opweave-gemma-3-27b-h100-32k-60ms", "p1-llama-2-7b-hp32-p64-d2-l2"}
#: optima the default method does not reach within the limit (the index names the method that
#: proved them: cpsat-blocks, 300 s on two workers, docs/placement_exact.md)
NOT_BY_DEFAULT = {"p1-llama-2-7b-hp32-p64-d2-l2"}


def _cases() -> list:
    out = []
    for rec in instances.bundled():
        if rec.optimum is None:
            continue
        marks = []
        if rec.name in SLOW or rec.name.startswith("stg-"):
            marks.append(pytest.mark.slow)
        if rec.name in NOT_BY_DEFAULT:
            marks.append(pytest.mark.xfail(reason="the default cpsat leaves a gap; "
                                                  "cpsat-blocks proves it", strict=False))
        out.append(pytest.param(rec, id=rec.name, marks=marks))
    return out


@pytest.mark.parametrize("rec", _cases())
def test_default_method_reproduces_the_bundled_optimum(rec, capsys):
    slow = rec.name in SLOW or rec.name.startswith("stg-")
    limit = TIME_LIMIT_S["slow" if slow else "fast"]
    code = main(["solve", rec.name, "--time-limit", str(limit), "--num-workers", "2",
                 "--json", "--no-solution"])
    res = json.loads(capsys.readouterr().out)
    expected = {"placement": "cpsat", "layout": "cpsat-layout", "serving": "bnb"}[rec.problem]
    assert res["problem"] == rec.problem and res["method"] == expected
    assert code == 0 and res["status"] in ("OPTIMAL", "FEASIBLE")
    assert math.isclose(res["objective"], rec.optimum, rel_tol=1e-9), res["objective"]
