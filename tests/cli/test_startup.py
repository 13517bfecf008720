"""Startup cost of the CLI: ``import opt.app.cli`` — and everything ``hetopt
solve`` imports before it reads an instance — loads none of the solver stacks (ortools, pyomo,
highspy) nor scipy; they are imported lazily by the methods and bounds that use them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("ortools", "pyomo", "highspy", "scipy")


def imported_by(code: str) -> dict[str, int]:
    """Top-level packages that ``python -X importtime -c CODE`` imports, with their
    cumulative import time in µs (the largest entry of each)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    out: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if not cumulative.strip().isdigit():
            continue  # the header
        top = name.strip().split(".")[0]
        out[top] = max(out.get(top, 0), int(cumulative))
    return out


@pytest.mark.parametrize("code", [
    "import opt.app.cli",
    "import opt.app.cli, opt.app.cli.placement, solvers, solvers.placement.backends, "
    "heuristics.placement.bifocal, heuristics.placement.list_scheduler, opt.placement.io, "
    "opt.placement.validator, opt.common.result",
])
def test_cli_start_imports_no_solver_stack_nor_scipy(code):
    loaded = imported_by(code)
    assert "opt" in loaded  # the probe parsed -X importtime's output
    assert not [m for m in HEAVY if m in loaded]


# ---- the real commands, in a fresh interpreter: which modules they load (never timings) -----

#: the command-group modules of :mod:`opt.app.cli` (handlers; the arguments are in opt.app.cli.parser)
GROUPS = ("opt.app.cli.info", "opt.app.cli.theory", "opt.app.cli.placement", "opt.app.cli.serving",
          "opt.app.cli.validate", "opt.app.cli.runs", "opt.app.cli.plots", "opt.app.cli.view", "opt.app.cli.measure")

#: loaded by no placement solve of a heuristic: the solver stacks and scipy,
#: the serving-plan side, the viewer and plots, the layout relaxation, the column reader,
#: numpy.random (the row hash of the list scheduler needs none), importlib.resources (bundled
#: files are read with pkgutil) and the other command groups
NOT_ON_HEFT_PATH = ("ortools", "pyomo", "scipy", "matplotlib", "numpy.random", "opt.serving",
                    "opt.serving.instance", "opt.app.viewer", "opt.app.plots", "opt.placement.layout",
                    "opt.placement.columns", "models.placement", "difflib", "importlib.resources",
                    *(g for g in GROUPS if g not in ("opt.app.cli.placement", "opt.app.cli.serving")))

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
    import json

    proc = subprocess.run([sys.executable, "-c", _RUN.format(argv=list(argv))], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout.splitlines()[-1])
    return report["code"], report["out"], set(report["modules"])


def test_heft_solve_loads_only_its_path():
    code, out, loaded = run_cli("solve", "heft-topcuoglu-2002", "--method", "heft")
    assert code == 0 and "heft" in out and "FEASIBLE" in out
    # the probe did solve, bound (work_lp through highspy) and validate
    assert {"heuristics.placement.list_scheduler", "opt.placement.certified_bounds",
            "opt.placement.validator", "highspy", "opt.app.cli.placement"} <= loaded
    assert sorted(m for m in NOT_ON_HEFT_PATH if m in loaded) == []


def test_help_loads_no_command_implementation():
    code, out, loaded = run_cli("--help")
    assert code == 0 and "lower-bound" in out and "exit codes:" in out
    assert sorted(m for m in (*GROUPS, "solvers", "models", "heuristics", "instances", "numpy")
                  if m in loaded) == []


@pytest.mark.parametrize("argv, group", [
    (("models",), "opt.app.cli.info"),
    (("theory", "het", "--gpu1", "H100", "--gpu2", "L40S"), "opt.app.cli.theory"),
])
def test_a_command_loads_only_its_own_group(argv, group):
    code, _, loaded = run_cli(*argv)
    assert code == 0
    assert sorted(g for g in GROUPS if g in loaded) == [group]
