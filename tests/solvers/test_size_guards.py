"""Exact placement methods refuse, in one line naming the method and the instance's size, an
instance they cannot build a model of within the time limit (or at all: memory); without a
method the default fits the size: the exact default when it can start, else the best heuristic
schedule improved by local search, with its certified bound, the choice and its reason in ``stats["method_choice"]``. The caps are
module constants, monkeypatched small here (no giant instance)."""

from __future__ import annotations

import json

import pytest

import instances
import solvers.registry as reg
from opt.app.cli import main
from opt.common.errors import InputError
from solvers import solve
from solvers.certify import validate

SMALL = "heft-topcuoglu-2002"           # 10 tasks, placement
LAYOUT = "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5"  # 19 tasks, layout


@pytest.fixture
def small_caps(monkeypatch):
    """Caps as if the exact methods built 1 task per second and at most 12 tasks."""
    monkeypatch.setattr(reg, "BUILD_TASKS_PER_S",
                        {name: 1.0 for name in reg.BUILD_TASKS_PER_S})
    monkeypatch.setattr(reg, "MODEL_MAX_TASKS", 12)
    monkeypatch.setattr(reg, "ALWAYS_BUILT_TASKS", 0)


@pytest.mark.parametrize("method", ["cpsat", "milp", "cpsat-blocks", "portfolio",
                                    "cpsat-layout"])
def test_an_exact_method_refuses_an_instance_it_cannot_build_in_time(small_caps, method):
    inst = instances.load(SMALL)
    with pytest.raises(InputError, match=f"method '{method}' builds its model at about 1 "
                                         f"tasks/s: 10 tasks need about 10 s, more than "
                                         f"the time limit of 5 s") as exc:
        solve(inst, method, time_limit=5)
    assert exc.value.field == "method"
    if method != "cpsat-layout":  # without a limit (no verdict on the clock): it proves
        assert solve(inst, method, time_limit=None).status == "OPTIMAL"


def test_an_exact_method_refuses_an_instance_above_its_memory_cap(small_caps):
    with pytest.raises(InputError, match="19 tasks is above its cap of 12 tasks"):
        solve(instances.load(LAYOUT), "cpsat", time_limit=None)


@pytest.mark.parametrize("name, exact, fallback", [(SMALL, "portfolio", "local-search"),
                                                   (LAYOUT, "cpsat-layout", "bifocal/wla")])
def test_the_default_fits_the_size(small_caps, name, exact, fallback):
    inst = instances.load(name)
    res = solve(inst, time_limit=60 if name == SMALL else None)
    if name == SMALL:  # 10 tasks at 1 task/s within 60 s: the exact default
        assert res.method == exact and res.stats["method_choice"]["method"] == exact
        res = solve(inst, time_limit=5)
    assert res.method == fallback and res.status == "FEASIBLE"
    choice = res.stats["method_choice"]
    assert choice["method"] == fallback and f"the default '{exact}' cannot start" in \
        choice["reason"]
    assert res.lower_bound is not None and validate(inst, res).valid


def test_the_cli_refuses_in_one_line_and_records_the_choice(small_caps, tmp_path, capsys):
    code = main(["solve", SMALL, "--method", "cpsat", "--time-limit", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "method 'cpsat'" in err and "10 tasks" in err
    path = tmp_path / "inst.json"
    instances.load(SMALL).write(path)
    assert main(["solve", str(path), "--time-limit", "5", "--json", "--no-solution"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "local-search" and "cannot start" in out["stats"]["method_choice"]["reason"]


def test_the_stated_caps_hold_the_measured_rates():
    assert reg.size_error("cpsat", 8_091, 60) is None       # ~16-32 s to build here
    assert reg.size_error("milp", 413, 0.5) is None          # small: stopped, warm start
    assert "more than the time limit" in reg.size_error("cpsat", 8_091, 5)
    assert "cap of 50,000" in reg.size_error("milp", 3_611_075, None)
    assert reg.size_error("bifocal", 3_611_075, 60) is None  # ~35 s here
    assert reg.size_error("bifocal", 3_611_075, None) is None


def test_a_heuristic_refuses_a_limit_one_schedule_cannot_fit():
    # 3.6 M tasks: 35 s measured here; a limit of 30 s cannot hold one schedule
    why = reg.size_error("bifocal", 3_611_075, 30)
    assert why is not None and "--time-limit 37" in why
    assert reg.size_error("heft", 50_000, 0.01) is None  # under a second: always starts


def test_the_default_refuses_when_neither_it_nor_its_fallback_fits(small_caps, monkeypatch):
    monkeypatch.setattr(reg, "SCHEDULE_TASKS_PER_S", 1.0)
    with pytest.raises(InputError, match="no method can start") as err:
        reg.choose_default("placement", 100, 10.0)
    assert err.value.field == "time_limit"
    assert reg.choose_default("placement", 100, 200.0)[0].name == "local-search"
