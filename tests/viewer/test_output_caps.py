"""``hetopt view --periods``: the drawn periods are capped (a stated maximum and a cap on the
jobs drawn), beyond which the option is refused in one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest

import opt.app.viewer.serving as vs
from opt.app.cli.view import cmd_view
from opt.common.errors import InputError
from opt.common.result import Result
from opt.serving.period import steady_round

from .test_view_cli import _parse


def _plan_file(tmp_path, afd):
    rpath = tmp_path / "plan.json"
    Result(problem="serving", method="afd", status="FEASIBLE", solution=afd[1]).write(rpath)
    return str(rpath)


def test_periods_beyond_the_stated_maximum_are_refused(tmp_path, afd, capsys):
    out = tmp_path / "plan.html"
    args = _parse(["view", "p3-tiny-gemma-a100-l40s", _plan_file(tmp_path, afd), "-o",
                   str(out), "--periods", "100000000"])
    assert cmd_view(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--periods" in err and "100000000" in err
    assert f"{vs.MAX_PERIODS:,}" in err and not out.exists()


def test_the_drawn_jobs_are_capped(afd, monkeypatch):
    inst, sol = afd
    jobs = len(np.array(steady_round(inst, sol).jobs).reshape(-1, 5))
    monkeypatch.setattr(vs, "MAX_DRAWN_JOBS", 4 * jobs)
    assert vs.max_periods(jobs) == 4
    header, _ = vs.serving_payload(inst, sol, periods=4)
    assert header["counts"]["drawn_jobs"] == 4 * jobs
    with pytest.raises(InputError, match="at most 4 periods"):
        vs.serving_payload(inst, sol, periods=5)
