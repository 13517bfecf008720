"""Startup cost of the CLI (issue 20, item 5): ``import opt.cli`` — and everything ``hetopt
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
    "import opt.cli",
    "import opt.cli, opt.cli.placement, solvers, solvers.placement.backends, "
    "heuristics.placement.bifocal, heuristics.placement.list_scheduler, opt.placement.io, "
    "opt.placement.validator, opt.common.result",
])
def test_cli_start_imports_no_solver_stack_nor_scipy(code):
    loaded = imported_by(code)
    assert "opt" in loaded  # the probe parsed -X importtime's output
    assert not [m for m in HEAVY if m in loaded]
