"""``hetopt validate``: status/bound consistency, serving-plan fields and
reported counts, results of the other problem kind or of another instance, --json always JSON."""

import json

import pytest

import instances
from opt.app.cli import main
from opt.common.fingerprint import instance_fingerprint
from opt.common.result import claims_error
from solvers import solve

PLACEMENT, SERVING = "heft-topcuoglu-2002", "p3-tiny-gemma-a100-l40s"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A HEFT schedule (makespan 80, certified bound 69) and a B&B plan, as written by solve."""
    folder = tmp_path_factory.mktemp("results")
    out = {}
    for name, method in ((PLACEMENT, "heft"), (SERVING, "bnb")):
        res = solve(instances.load(name), method, time_limit=10)
        res.write(folder / f"{method}.json")
        out[method] = json.loads((folder / f"{method}.json").read_text())
    return out


def _run(capsys, tmp_path, inst, data, *flags):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    code = main(["validate", inst, str(path), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_results_carry_the_instance_fingerprint(results):
    assert results["heft"]["instance_fingerprint"] == \
        instance_fingerprint(instances.load(PLACEMENT))
    assert results["bnb"]["instance_fingerprint"] == instance_fingerprint(instances.load(SERVING))


def test_valid_results_pass(capsys, tmp_path, results):
    assert _run(capsys, tmp_path, PLACEMENT, results["heft"])[0] == 0
    code, out, _ = _run(capsys, tmp_path, SERVING, results["bnb"], "--json")
    assert code == 0 and json.loads(out)["valid"] is True


@pytest.mark.parametrize("status, bound, message", [
    ("OPTIMAL", 69.0, "status OPTIMAL but the lower bound 69"),
    ("FEASIBLE", 90.0, "lower bound 90 exceeds the objective 80"),
    ("OPTIMAL", 90.0, "lower bound 90 exceeds the objective 80"),
])
def test_status_and_bound_must_agree_with_the_objective(capsys, tmp_path, results, status,
                                                        bound, message):
    data = {**results["heft"], "status": status, "lower_bound": bound, "gap": None}
    code, out, err = _run(capsys, tmp_path, PLACEMENT, data)
    assert code == 1 and message in err
    code, out, _ = _run(capsys, tmp_path, PLACEMENT, data, "--json")
    verdict = json.loads(out)
    assert code == 1 and verdict["valid"] is False and message in verdict["error"]


def test_reported_gap_is_recomputed(capsys, tmp_path, results):
    code, _, err = _run(capsys, tmp_path, PLACEMENT, {**results["heft"], "gap": 0.0})
    assert code == 1 and "gap" in err


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["owners"][0].update(replicas=-2), "owners[0].replicas must be an integer ≥ 1"),
    (lambda s: s["owners"][0].update(replicas=1.5), "owners[0].replicas must be an integer"),
    (lambda s: s.update(gpus=-16), "reported gpus = -16"),
    (lambda s: s.update(gpus=7), "reported gpus = 7"),
    (lambda s: s.update(memory_bytes=[1.0]), "reported memory_bytes[0]"),
    (lambda s: s.update(stages_per_token=1), "reported stages_per_token"),
    (lambda s: s["owners"][0].update(tp=4), "reports tp = 4"),
    (lambda s: s["owners"][0].update(batch=0), "owners[0].batch must be an integer ≥ 1"),
    (lambda s: s.update(template=[0, "ten"]), "template[1] must be an integer"),
    (lambda s: s.update(owners="A100x2"), "owners must be a list"),
    (lambda s: s.pop("template"), "missing field 'template'"),
])
def test_serving_plan_fields_and_reported_counts(capsys, tmp_path, results, edit, message):
    data = json.loads(json.dumps(results["bnb"]))
    edit(data["solution"])
    code, out, _ = _run(capsys, tmp_path, SERVING, data, "--json")
    verdict = json.loads(out)
    assert code == 1 and verdict["valid"] is False and message in verdict["error"], verdict


def test_results_of_the_other_problem_kind_are_one_line_exit_2(capsys, tmp_path, results):
    code, out, err = _run(capsys, tmp_path, PLACEMENT, results["bnb"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "serving result cannot be validated against the placement instance" in err
    code, _, err = _run(capsys, tmp_path, SERVING, results["heft"], "--json")
    assert code == 2 and err.count("\n") == 1 and "field 'problem'" in err


def test_a_result_of_another_instance_is_rejected(capsys, tmp_path, results):
    code, _, err = _run(capsys, tmp_path, "sinnen-Nodes_7_OutTree-p2", results["heft"])
    assert code == 2 and "instance_fingerprint" in err and "not on this one" in err
    unknown = {**results["heft"], "problem": "scheduling"}
    code, _, err = _run(capsys, tmp_path, PLACEMENT, unknown)
    assert code == 2 and "unknown problem 'scheduling'" in err


def test_json_is_json_when_invalid_or_without_solution(capsys, tmp_path, results):
    broken = json.loads(json.dumps(results["heft"]))
    broken["solution"]["compute"][0]["end"] += 1
    for data in (broken, {**results["heft"], "solution": None, "status": "ERROR"},
                 {**results["heft"], "solution": {"compute": 3}}):
        code, out, _ = _run(capsys, tmp_path, PLACEMENT, data, "--json")
        assert code == 1 and json.loads(out)["valid"] is False


def test_claims_error_rules():
    assert claims_error("OPTIMAL", 10.0, 10.0) is None
    assert claims_error("OPTIMAL", 10.0, 10.0 - 1e-4) is None  # within the MIP gap
    assert claims_error("OPTIMAL", 10.0, None) is None
    assert "below" in claims_error("OPTIMAL", 10.0, 9.0)
    assert "exceeds" in claims_error("FEASIBLE", 10.0, 10.1)
    assert "no objective" in claims_error("FEASIBLE", None, None)
    assert "finite" in claims_error("FEASIBLE", float("nan"), None)


@pytest.fixture(scope="module")
def pd_result(tmp_path_factory):
    """A PD (static heuristic) schedule as written by solve: FEASIBLE with a certified bound
    below its makespan."""
    path = tmp_path_factory.mktemp("pd") / "pd.json"
    solve(instances.load(PLACEMENT), "pd", time_limit=10).write(path)
    return json.loads(path.read_text())


@pytest.mark.parametrize("edit, message", [
    ({"status": "OPTIMAL", "lower_bound": None, "gap": None},
     "status OPTIMAL but no lower bound"),
    ({"status": "INFEASIBLE"}, "status INFEASIBLE but the result carries a solution"),
    ({"status": "TIME_LIMIT_NO_SOLUTION"},
     "status TIME_LIMIT_NO_SOLUTION but the result carries a solution"),
    ({"status": "ERROR", "stats": {"message": "out of memory"}}, "status ERROR: out of memory"),
    ({"problem": "layout"}, "method 'pd' solves placement, not layout"),
])
def test_status_and_problem_must_match_the_content(capsys, tmp_path, pd_result, edit, message):
    data = {**pd_result, **edit}
    code, out, err = _run(capsys, tmp_path, PLACEMENT, data)
    assert code == 1 and out == "" and err.count("\n") == 1 and message in err, err
    code, out, _ = _run(capsys, tmp_path, PLACEMENT, data, "--json")
    verdict = json.loads(out)
    assert code == 1 and verdict["valid"] is False and message in verdict["error"]


def test_a_placement_result_keeps_the_fixed_formats(capsys, tmp_path):
    """A layout method's schedule (formats chosen) relabelled as a P1 result is invalid."""
    name = "p1-llama-2-7b-hp32-p64-d2-l2"
    path = tmp_path / "wla.json"
    solve(instances.load(name), "bifocal/wla", time_limit=10).write(path)
    data = json.loads(path.read_text())
    assert _run(capsys, tmp_path, name, data)[0] == 0
    relabelled = {**data, "problem": "placement", "method": "heft"}
    code, _, err = _run(capsys, tmp_path, name, relabelled)
    assert code == 1 and "a placement result keeps each block's format" in err, err


def test_library_validate_reports_the_status_rule(pd_result):
    from opt.common.result import result_from_dict
    from solvers.certify import validate

    res = result_from_dict({**pd_result, "status": "OPTIMAL", "lower_bound": None,
                            "gap": None})
    report = validate(instances.load(PLACEMENT), res)
    assert report.valid is False and "no lower bound" in report.violations[0]


@pytest.mark.parametrize("name, method", [
    (PLACEMENT, "cpsat"), (PLACEMENT, "pd"), (PLACEMENT, "bifocal/wla"),
    (PLACEMENT, "cpsat-layout"), ("p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5", "cpsat"),
    ("p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5", "bifocal/wla+dual"),
    (SERVING, "enum"), (SERVING, "milp"), (SERVING, "afd"),
])
def test_what_solve_returns_validates(name, method):
    from solvers.certify import validate

    inst = instances.load(name)
    res = solve(inst, method, time_limit=20)
    assert res.status in ("OPTIMAL", "FEASIBLE")
    report = validate(inst, res)
    assert report.valid, report.violations
