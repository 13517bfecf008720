"""bifocal-grid (heuristics.placement.bifocal_grid): Bifocal at every member of a
hyperparameter grid, the best validated schedule; best_of, the authors' reporting rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from heuristics.placement.bifocal_grid import NOT_RUN, RUN, best_of, bifocal_grid
from heuristics.placement.bifocal_params import BIFOCAL_PARAMS
from heuristics.placement.grid_params import AXES, PAPER_GRID, TIED, GridParams
from instances.generated import gap_case
from opt.app.cli.methods import param_sections, params_markdown
from opt.common.errors import InputError
from opt.placement.validator import validate_placement
from solvers import solve
from solvers.registry import method_settings

#: A grid holding the authors' released configuration γ 0.4, λ 3, η 0 (H 3, α 1, r_min 1,
#: p_reuse 1), with γ 0.05, λ 1 and η 2 beside it.
SMALL = {"gamma": [0.05, 0.4], "lam": [1.0, 3.0], "eta": [0.0, 2.0]}


def alone(inst, params, member):
    """The makespan of Bifocal run by itself at ``member`` of the grid ``params``."""
    grid = GridParams.from_dict(params)
    return solve(inst, "bifocal", **grid.bifocal_params(member)).objective


@pytest.fixture(scope="module")
def inst():
    return gap_case(1001).build()


def test_the_default_grid_is_the_authors_eighteen_members():
    grid = GridParams.from_dict({})
    assert grid.size() == 18 == len(list(grid.members()))
    first, *_, last = grid.members()
    assert first == {"H": 3, "gamma": 0.05, "lam": 1.0, "eta": 0.02, "alpha": 1.0,
                     "r_min": 1.0, "p_reuse": 1.0}
    assert last["gamma"] == 0.4 and last["lam"] == 4.0 and last["eta"] == 2.0
    assert tuple(PAPER_GRID) == AXES


def test_the_winner_is_the_least_makespan_of_the_members_solved_one_by_one(inst):
    res = solve(inst, "bifocal-grid", time_limit=None)
    rows = res.stats["grid"]
    assert len(rows) == 18 and all(r["status"] == RUN for r in rows)
    each = [alone(inst, {}, r["params"]) for r in rows]
    assert [r["makespan"] for r in rows] == each
    assert res.objective == min(each) == validate_placement(inst, res.solution).makespan
    k = each.index(min(each))  # ties: the first in grid order
    assert res.stats["winner_index"] == k and res.stats["winner"] == rows[k]["params"]
    assert len(set(each)) > 1  # the members differ on this instance: the choice matters


def test_never_above_a_fixed_configuration_that_is_a_member(inst):
    res = solve(inst, "bifocal-grid", time_limit=None, **SMALL)
    released = {"H": 3, "gamma": 0.4, "lam": 3.0, "eta": 0.0, "alpha": 1.0, "r_min": 1.0,
                "p_reuse": 1.0}
    params = GridParams.from_dict(SMALL).bifocal_params(released)
    fixed = solve(inst, "bifocal", **params).objective
    assert res.stats["members"] == 8
    member = next(r for r in res.stats["grid"] if r["params"] == released)
    assert member["makespan"] == fixed
    assert res.objective <= fixed


def test_restricting_an_axis_changes_the_result(inst):
    full = solve(inst, "bifocal-grid", time_limit=None)
    eta2 = solve(inst, "bifocal-grid", time_limit=None, eta=[2.0])
    assert eta2.stats["members"] == 6
    assert all(r["params"]["eta"] == 2.0 for r in eta2.stats["grid"])
    assert eta2.objective > full.objective


def test_other_bifocal_params_reach_every_member(inst):
    res = solve(inst, "bifocal-grid", time_limit=None, gamma=[0.4], lam=[1.0], eta=[0.02],
                window=False)
    assert res.stats["members"] == 1
    grid = GridParams.from_dict({"gamma": [0.4], "lam": [1.0], "eta": [0.02], "window": False})
    params = grid.bifocal_params(next(grid.members()))
    assert params["window"] is False and params["gamma"] == 0.4
    one = solve(inst, "bifocal", **params)
    assert res.objective == one.objective and res.solution == one.solution


def test_the_lam_axis_sets_each_tied_weight_bifocal_declares_unless_it_is_given():
    tied = [t for names in TIED.values() for t in names if t in BIFOCAL_PARAMS.names]
    assert tied == ["consist"] or "consist" not in BIFOCAL_PARAMS.names
    grid = GridParams.from_dict({"lam": [4.0]})
    member = next(grid.members())
    assert all(grid.bifocal_params(member)[t] == 4.0 for t in tied)
    for t in tied:
        given = GridParams.from_dict({"lam": [4.0], t: 0.5}).bifocal_params(member)
        assert given[t] == 0.5 and given["lam"] == 4.0


def test_a_time_limit_of_about_zero_returns_the_first_member_validated(inst):
    stats: dict = {}
    sol = bifocal_grid(inst, {}, time_limit=1e-9, stats=stats)
    assert stats["members_run"] == 1 and stats["grid"][0]["status"] == RUN
    assert all(r["status"] == NOT_RUN and r["makespan"] is None for r in stats["grid"][1:])
    assert validate_placement(inst, sol).makespan == stats["grid"][0]["makespan"]
    res = solve(inst, "bifocal-grid", time_limit=1e-9)
    assert res.status == "FEASIBLE" and res.stats["members_run"] == 1
    assert res.objective == stats["grid"][0]["makespan"]


@pytest.mark.parametrize("params, field", [
    ({"gamma": []}, "params.gamma"),
    ({"gamma": [0.2, 1.5]}, "params.gamma"),
    ({"eta": [-1.0]}, "params.eta"),
    ({"H": [2.5]}, "params.H"),
    ({"lam": [1.0, 1.0]}, "params.lam"),
    ({"gama": [0.2]}, "params.gama"),
])
def test_bad_params_name_the_param(inst, params, field):
    with pytest.raises(InputError) as err:
        solve(inst, "bifocal-grid", **params)
    assert err.value.field == field and "bifocal-grid" in str(err.value)


def test_a_single_value_is_a_one_member_axis_and_settings_list_the_axes():
    grid = GridParams.from_dict({"gamma": 0.2})
    assert grid.axes["gamma"] == (0.2,) and grid.size() == 6
    settings = method_settings("bifocal-grid", "placement", {"gamma": 0.2, "window": False})
    assert settings["gamma"] == [0.2] and settings["eta"] == [0.02, 0.1, 2.0]
    assert settings["window"] is False and "revision" in settings


def test_methods_params_and_the_cli_doc_show_the_grid():
    section = next(s for s in param_sections("placement")
                   if s.title.startswith("BIFOCAL_GRID_PARAMS"))
    rows = {r[0]: r for r in section.rows}
    assert rows["gamma"][2] == "0.05, 0.2, 0.4" and rows["lam"][2] == "1, 4"
    assert rows["eta"][2] == "0.02, 0.1, 2" and rows["H"][2] == "3"
    assert "window" in rows and "### placement: bifocal-grid" in params_markdown()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert "### placement: bifocal-grid" in doc
    assert "| gamma | a list, each a finite number in [0, 1] | 0.05, 0.2, 0.4 |" in doc


def _rec(method, makespan, batch=1, status="FEASIBLE", **kw):
    return {"model": "m", "platform": "p", "prefill": 8, "decode": 4, "batch": batch,
            "method": method, "makespan": makespan, "status": status, **kw}


def test_best_of_takes_the_better_method_per_workload():
    recs = [_rec("heft", 90), _rec("bifocal", 100), _rec("pd", 10),
            _rec("heft", 50, batch=2), _rec("bifocal", 50, batch=2),
            _rec("heft", 10, batch=4, invalid=True), _rec("bifocal", 70, batch=4),
            _rec("heft", None, batch=8, status="ERROR")]
    out = {r["batch"]: r for r in best_of(recs, "heft", "bifocal")}
    assert set(out) == {1, 2, 4}  # batch 8: no usable record
    assert out[1]["makespan"] == 90 and out[1]["best_of"] == "heft"
    assert out[2]["best_of"] == "heft"  # a tie: the first method named
    assert out[4]["makespan"] == 70 and out[4]["best_of"] == "bifocal"
    assert all(r["method"] == "best(heft,bifocal)" for r in out.values())
    with pytest.raises(ValueError):
        best_of(recs)
