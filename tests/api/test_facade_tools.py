"""The façade's DOT import, simulation and viewer page (opt.api.import_dot, simulate, view):
each does what its command does on a bundled instance, and bad input is one InputError naming
the argument."""

from __future__ import annotations

from pathlib import Path

import pytest

import opt.api as hetopt
from opt.placement.dot import dot_to_instance, read_dot
from opt.serving.simulator import simulate_plan

ROOT = Path(__file__).resolve().parents[2]
DOT = ROOT / "instances" / "data" / "sinnen-dot" / "Nodes_7_OutTree.dot"
P1, P3 = "heft-topcuoglu-2002", "p3-tiny-gemma-a100-l40s"


@pytest.fixture(scope="module")
def serving() -> tuple[hetopt.ServingInstance, hetopt.Result]:
    inst = hetopt.load_instance(P3)
    return inst, hetopt.solve(inst, "bnb", time_limit=30)


def test_import_dot_is_the_commands_instance():
    inst = hetopt.import_dot(DOT, 2)
    assert inst.fingerprint == dot_to_instance(read_dot(DOT), 2, source=str(DOT)).fingerprint
    assert inst.n_devices == 2 and inst.problem == "placement"


@pytest.mark.parametrize("kwargs, field", [({"processors": 0}, "processors"),
                                           ({"processors": 2.5}, "processors"),
                                           ({"path": 3}, "path")])
def test_import_dot_refuses_bad_arguments(kwargs, field):
    with pytest.raises(hetopt.InputError) as err:
        hetopt.import_dot(**{"path": DOT, "processors": 2, **kwargs})
    assert err.value.field == field and "\n" not in str(err.value)


def test_a_missing_dot_file_is_an_input_error(tmp_path):
    with pytest.raises(hetopt.InputError) as err:
        hetopt.import_dot(tmp_path / "none.dot", 2)
    assert "none.dot" in str(err.value)


def test_simulate_a_result_or_its_plan_as_solve_simulate_does(serving):
    inst, res = serving
    report = hetopt.simulate(inst, res)
    assert report.to_dict().keys() == simulate_plan(inst, res.solution).to_dict().keys()
    assert report.t_rtt_sim == simulate_plan(inst, res.solution).t_rtt_sim
    assert report.t_rtt_exact == res.plan_metrics(inst).t_rtt  # the checker's period
    assert hetopt.simulate(inst, res.plan(inst), order="fcfs").order == "fcfs"


@pytest.mark.parametrize("kwargs, field", [({"tokens": 4, "warmup": 8}, "warmup"),
                                           ({"order": "random"}, "order"),
                                           ({"nic": "x"}, "nic"),
                                           ({"tokens": 1.5}, "tokens")])
def test_simulate_refuses_bad_arguments(serving, kwargs, field):
    inst, res = serving
    with pytest.raises(hetopt.InputError) as err:
        hetopt.simulate(inst, res, **kwargs)
    assert err.value.field == field and err.value.source == "opt.api.simulate"


def test_simulate_refuses_a_placement_result(serving):
    inst, _ = serving
    placement = hetopt.solve(hetopt.load_instance(P1), "cpsat", time_limit=30, warm_start=None)
    with pytest.raises(hetopt.InputError) as err:
        hetopt.simulate(inst, placement)
    assert err.value.field == "plan" and "schedule()" in str(err.value)


def test_view_writes_the_commands_page(serving, tmp_path):
    inst, res = serving
    size = hetopt.view(inst, res, tmp_path / "plan.html")
    assert size == (tmp_path / "plan.html").stat().st_size > 0
    p1 = hetopt.load_instance(P1)
    p1_res = hetopt.solve(p1, "cpsat", time_limit=30, warm_start=None)
    assert hetopt.view(p1, p1_res, str(tmp_path / "p1.html"), compress=False) > 0
    assert "<html" in (tmp_path / "p1.html").read_text()[:2000].lower()


def test_view_refuses_a_result_of_another_problem_or_an_unwritable_path(serving, tmp_path):
    inst, res = serving
    with pytest.raises(hetopt.InputError) as err:
        hetopt.view(hetopt.load_instance(P1), res, tmp_path / "x.html")
    assert err.value.field == "result" and err.value.source == "opt.api.view"
    with pytest.raises(hetopt.InputError) as err:
        hetopt.view(inst, res, tmp_path / "no-folder" / "x.html")
    assert err.value.field == "path"
