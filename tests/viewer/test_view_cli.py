"""``hetopt view``'s handler, called directly (arguments: opt.app.cli.parser.add_view_parser)."""

from __future__ import annotations

import argparse
import copy

import pytest

from opt.app.cli.parser import add_view_parser
from opt.app.cli.view import cmd_view
from opt.common.result import Result


def _parse(argv):
    p = argparse.ArgumentParser(prog="hetopt")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    add_view_parser(p.add_subparsers(dest="command", required=True), common)
    return p.parse_args(argv)


def _write(tmp_path, inst, solution, problem="placement", name="inst.json"):
    ipath, rpath = tmp_path / name, tmp_path / "res.json"
    inst.write(ipath)
    Result(problem=problem, method="test", status="FEASIBLE", solution=solution).write(rpath)
    return str(ipath), str(rpath)


def test_view_placement_writes_a_page(tmp_path, llama1, capsys):
    ipath, rpath = _write(tmp_path, *llama1)
    out = tmp_path / "schedule.html"
    args = _parse(["view", ipath, rpath, "-o", str(out)])
    assert args.func.function() is cmd_view
    assert cmd_view(args) == 0
    text = out.read_text()
    assert text.startswith("<!doctype html>") and 'id="hetopt-blob"' in text
    assert "tasks" in capsys.readouterr().out


def test_view_serving_and_bundled_name(tmp_path, afd):
    inst, sol = afd
    rpath = tmp_path / "plan.json"
    Result(problem="serving_plan", method="afd", status="FEASIBLE", solution=sol).write(rpath)
    out = tmp_path / "plan.html"
    assert cmd_view(_parse(["view", "p3-tiny-gemma-a100-l40s", str(rpath), "-o", str(out),
                            "--periods", "2"])) == 0
    assert '"kind":"serving"' in out.read_text()


@pytest.mark.parametrize("breakage", ["overlap", "missing", "wrong-problem", "no-solution"])
def test_bad_input_exits_2_with_one_line(tmp_path, llama1, capsys, breakage):
    inst, sol = llama1
    sol = copy.deepcopy(sol)
    problem = "placement"
    if breakage == "overlap":
        ev = sol["compute"][1]
        ev["start"] -= 1
        ev["end"] -= 1
    elif breakage == "missing":
        sol["compute"].pop()
    elif breakage == "wrong-problem":
        problem = "serving_plan"
    else:
        sol = None
    ipath, rpath = _write(tmp_path, inst, sol, problem=problem)
    out = tmp_path / "x.html"
    assert cmd_view(_parse(["view", ipath, rpath, "-o", str(out)])) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hetopt: error: ") and "\n" not in err
    assert not out.exists()


def test_missing_files_exit_2(tmp_path, capsys):
    assert cmd_view(_parse(["view", str(tmp_path / "nope.json"), "r.json"])) == 2
    assert "file not found" in capsys.readouterr().err
    assert cmd_view(_parse(["view", "no-such-bundled", "r.json"])) == 2
    assert "no such file or bundled instance" in capsys.readouterr().err


def test_view_rejects_a_result_of_another_instance(tmp_path, capsys):
    """A result names its instance by fingerprint (opt.common.fingerprint)."""
    import instances
    from opt.app.cli import main
    from solvers import solve

    res = solve(instances.load("sinnen-Nodes_7_OutTree-p2"), "heft")
    res.write(tmp_path / "r.json")
    code = main(["view", "sinnen-Nodes_7_OutTree-p4", str(tmp_path / "r.json"), "-o",
                 str(tmp_path / "v.html")])
    err = capsys.readouterr().err
    assert code == 2 and "instance_fingerprint" in err and "not on this one" in err
    assert main(["view", "sinnen-Nodes_7_OutTree-p2", str(tmp_path / "r.json"), "-o",
                 str(tmp_path / "v.html")]) == 0
