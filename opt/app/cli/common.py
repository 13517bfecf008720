"""The parser's shared pieces: the options every command takes, the argument groups of several
commands and the exit codes.

With :mod:`opt.app.cli.parser` this is all ``hetopt --help`` loads: no ``solvers``,
``models``, ``heuristics`` nor a numeric stack. A parsed command runs through
:mod:`opt.app.cli.run`; what the handlers share is in :mod:`opt.app.cli.helpers`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import MappingProxyType


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of every command: ``--json``, ``--catalog``, ``--models-file``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--catalog", metavar="FILE", type=input_file,
                        help="hardware JSON merged over the bundled catalog")
    common.add_argument("--models-file", metavar="FILE", type=input_file,
                        help="extra model cards: a card set, one card, or a HF config.json")
    return common


def input_file(text: str) -> str:
    """argparse type of ``--catalog`` / ``--models-file``: a file that exists (a missing one is
    an error for every command, not silently ignored by those that do not read it)."""
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text}: file not found")
    return text


#: ``build placement --tables``: the ``columns`` argument of ``PlacementInstance.write`` (None:
#: automatic, column tables above its LARGE_TASKS tasks)
TABLES = MappingProxyType({"auto": None, "rows": False, "columns": True})


# ---- argument groups shared by several commands ---------------------------------------------

def add_solve_args(p: argparse.ArgumentParser, *, time_limit: float, time_help: str) -> None:
    """``--time-limit``, ``--num-workers`` (threads of each solve, default 1:
    ``models.options.DEFAULT_NUM_WORKERS``, not imported so that ``--help`` stays light) and
    ``--seed``."""
    p.add_argument("--time-limit", type=float, default=time_limit, help=time_help)
    p.add_argument("--num-workers", type=int, default=1,
                   help="threads of each exact solve (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def add_out_args(p: argparse.ArgumentParser, default: str, *, note: str = "",
                 items: str = "results") -> None:
    """``--out`` (a resumable results folder) and ``--fresh``."""
    p.add_argument("--out", default=default,
                   help=f"results folder (default %(default)s{note})")
    p.add_argument("--fresh", action="store_true", help=f"recompute {items} already in --out")


def add_budget_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    """The P2 memory budget: ``--budget-gb`` or ``--budget-factor`` (one of them when
    ``required``: ``build layout``)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--budget-gb", type=float, metavar="GB",
                   help="P2 main-memory budget for the stored weight blocks, 10^9 bytes")
    g.add_argument("--budget-factor", type=float, metavar="F",
                   help="P2 memory budget as F x the blocks' linear bytes (2 admits all-dual)")


# ---- exit codes ------------------------------------------------------------------------

EXIT_CODES_HELP = """exit codes:
  0  success; for solve: status OPTIMAL, FEASIBLE or INFEASIBLE (the status is in the output)
  1  solve: status ERROR (the reason is printed); validate: the result is invalid
  2  bad input: one line naming the file, field and value (also an unwritable --output)
  3  solve: the time limit ran out with no solution (TIME_LIMIT_NO_SOLUTION)
  130  interrupted (Ctrl-C): one line saying where finished records are kept"""
