"""Startup cost of the CLI and the API: which modules a command loads (never timings).

``hetopt --help`` and ``import opt.api`` load no numeric stack (numba, scipy), solver stack
(ortools, pyomo, highspy) nor plots. The scheduling loops are numba kernels, loaded with
:mod:`heuristics.placement`: a heuristic's solve loads numba and what numba loads (scipy,
``numpy.random``, ``importlib.resources``), and still no solver stack it does not run, no
plots and no ``opt.serving``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: loaded by neither ``hetopt --help``, ``import opt.api`` nor ``import opt.app.cli``
NUMERIC = ("numba", "scipy")
#: the solver stacks and plots: loaded only by the methods, bounds and commands that use them
HEAVY = ("ortools", "pyomo", "highspy", "matplotlib")


def imported_by(code: str) -> set[str]:
    """Every module that ``python -X importtime -c CODE`` imports (by its full name)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    out: set[str] = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit():  # not the header
            out.add(name.strip())
    return out


def _tops(loaded: set[str]) -> set[str]:
    return {m.split(".")[0] for m in loaded}


@pytest.mark.parametrize("code", ["import opt.app.cli", "import opt.api"])
def test_cli_and_api_import_no_numeric_nor_solver_stack(code):
    loaded = imported_by(code)
    assert "opt" in loaded  # the probe parsed -X importtime's output
    assert sorted(_tops(loaded) & {*NUMERIC, *HEAVY}) == []


def test_solve_path_imports_numba_but_no_solver_stack():
    loaded = imported_by(
        "import opt.app.cli, opt.app.cli.placement, solvers, solvers.placement.backends, "
        "heuristics.placement.bifocal, heuristics.placement.list_scheduler, opt.placement.io, "
        "opt.placement.validator, opt.common.result")
    assert "numba" in loaded  # the scheduling kernels
    assert sorted(_tops(loaded) & set(HEAVY)) == []
    assert sorted(m for m in loaded if m.startswith("opt.serving")) == []


# ---- the real commands, in a fresh interpreter: which modules they load (never timings) -----

#: the command-group modules of :mod:`opt.app.cli` (handlers; the arguments are in
#: opt.app.cli.parser)
GROUPS = ("opt.app.cli.info", "opt.app.cli.methods", "opt.app.cli.theory", "opt.app.cli.build",
          "opt.app.cli.placement", "opt.app.cli.serving", "opt.app.cli.validate",
          "opt.app.cli.runs", "opt.app.cli.plots", "opt.app.cli.view", "opt.app.cli.measure")

#: loaded by no placement solve of a heuristic: the solver stacks it does not run, the
#: serving-plan side, the viewer and plots, the layout relaxation, the column reader, the
#: instance builder and the other command groups
NOT_ON_HEFT_PATH = ("ortools", "pyomo", "matplotlib", "opt.serving", "opt.serving.instance",
                    "opt.app.viewer", "opt.app.plots", "opt.placement.layout",
                    "opt.placement.columns", "opt.placement.builder", "models.placement",
                    *(g for g in GROUPS if g != "opt.app.cli.placement"))

_RUN = """
import contextlib, io, json, sys
from opt.app.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main({argv!r})
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}}))
"""


def run_cli(*argv: str) -> tuple[int, str, set[str]]:
    """``hetopt ARGV`` in a fresh interpreter: (exit code, stdout, every module it loaded)."""
    proc = subprocess.run([sys.executable, "-c", _RUN.format(argv=list(argv))], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout.splitlines()[-1])
    return report["code"], report["out"], set(report["modules"])


def test_heft_solve_loads_only_its_path():
    code, out, loaded = run_cli("solve", "heft-topcuoglu-2002", "--method", "heft")
    assert code == 0 and "heft" in out and "FEASIBLE" in out
    # the probe did solve (numba kernels), bound (work_lp through highspy) and validate
    assert {"heuristics.placement.list_scheduler", "opt.placement.certified_bounds",
            "opt.placement.validator", "highspy", "opt.app.cli.placement", "numba"} <= loaded
    assert sorted(m for m in NOT_ON_HEFT_PATH if m in loaded) == []


def test_help_loads_no_command_implementation():
    code, out, loaded = run_cli("--help")
    assert code == 0 and "lower-bound" in out and "exit codes:" in out
    assert sorted(m for m in (*GROUPS, "opt.app.cli.run", "opt.app.cli.helpers", "solvers",
                              "models", "heuristics", "instances", "numpy", *NUMERIC)
                  if m in loaded) == []


def test_solve_help_lists_the_methods_through_the_handler_table():
    code, out, loaded = run_cli("solve", "--help")
    assert code == 0 and "heft" in out and "bifocal" in out
    assert "opt.app.cli.method_names" in loaded
    assert sorted(g for g in GROUPS if g in loaded) == []


def test_a_serving_solve_loads_the_serving_side():
    code, out, loaded = run_cli("solve", "p3-llama-2-7b-h100-l40s-8k-50ms", "--method", "col")
    assert code == 0 and "plan: K=" in out
    assert sorted(g for g in GROUPS if g in loaded) == ["opt.app.cli.placement",
                                                        "opt.app.cli.serving"]


@pytest.mark.parametrize("argv, group", [
    (("models",), "opt.app.cli.info"),
    (("methods",), "opt.app.cli.methods"),
    (("theory", "het", "--gpu1", "H100", "--gpu2", "L40S"), "opt.app.cli.theory"),
])
def test_a_command_loads_only_its_own_group(argv, group):
    code, _, loaded = run_cli(*argv)
    assert code == 0
    assert sorted(g for g in GROUPS if g in loaded) == [group]
