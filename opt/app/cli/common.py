"""The parser's shared pieces: the options every command takes, the argument groups of several
commands, the exit codes, the check of output paths and :func:`run_command`, which runs a
parsed command.

With :mod:`opt.app.cli.parser` this is all ``hetopt --help`` loads: no ``solvers``,
``models``, ``heuristics`` nor a numeric stack. What the handlers share at run time is in
:mod:`opt.app.cli.helpers`.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
from pathlib import Path
from types import MappingProxyType

from opt.common.errors import InputError
from opt.common.outpath import (
    FILE,
    JSON_SUFFIXES,
    PLACEMENT_SUFFIXES,
    check_output,
    suffix_error,
)


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

def add_solve_args(p: argparse.ArgumentParser, *, time_limit: float, time_help: str,
                   all_cores: bool = False) -> None:
    """``--time-limit``, ``--num-workers`` (threads of each solve; ``all_cores``: default the
    machine's cores, else 1, for commands that run several solves at once) and ``--seed``."""
    p.add_argument("--time-limit", type=float, default=time_limit, help=time_help)
    cores = min(os.cpu_count() or 1, 256)  # solvers.api.MAX_WORKERS (not imported: --help)
    p.add_argument("--num-workers", type=int, default=cores if all_cores else 1,
                   help=(f"threads of each exact solve (default: this machine's cores, "
                         f"{cores})" if all_cores else "threads of each exact solve (default 1)"))
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


# ---- output files and exit codes ------------------------------------------------------------

EXIT_CODES_HELP = """exit codes:
  0  success; for solve: status OPTIMAL, FEASIBLE or INFEASIBLE (the status is in the output)
  1  solve: status ERROR (the reason is printed); validate: the result is invalid
  2  bad input: one line naming the file, field and value (also an unwritable --output)
  3  solve: the time limit ran out with no solution (TIME_LIMIT_NO_SOLUTION)
  130  interrupted (Ctrl-C): one line saying where finished records are kept"""


#: Output options by their ``dest``: (option, kind). ``--plot`` is a folder of PNGs except for
#: the commands in :data:`PLOT_FILE`; ``--out`` of ``theory verify`` only matters with
#: ``--detailed``.
OUTPUT_OPTIONS = MappingProxyType({"output": ("--output", "file"), "export": ("--export", "file"),
                                   "out": ("--out", "folder"), "plot": ("--plot", "folder")})
PLOT_FILE = frozenset({"cmd_compare"})
#: What ``--output`` holds, by handler: (the document, "json" or "placement"); its name must
#: end in a suffix its reader reads as that document (opt.common.outpath.JSON_SUFFIXES,
#: PLACEMENT_SUFFIXES).
OUTPUT_DOCUMENTS = MappingProxyType({
    "cmd_solve": ("a result", "json"), "cmd_build_serving": ("a serving instance", "json"),
    "cmd_build_placement": ("a placement instance", "placement"),
    "cmd_import_dot": ("a placement instance", "placement")})


def check_output_args(args: argparse.Namespace) -> None:
    """Check every output path of the parsed command before any work
    (:func:`opt.common.outpath.check_output`, and for the commands of
    :data:`OUTPUT_DOCUMENTS` the suffix of ``--output``: one InputError naming the option and
    path)."""
    name = getattr(args.func, "function_name", "")
    for dest, (option, kind) in OUTPUT_OPTIONS.items():
        path = getattr(args, dest, None)
        if not isinstance(path, str) or (dest == "out" and name == "cmd_verify"
                                         and not getattr(args, "detailed", False)):
            continue
        check_output(path, option, FILE if dest == "plot" and name in PLOT_FILE else kind)
    path = getattr(args, "output", None)
    if isinstance(path, str) and name in OUTPUT_DOCUMENTS:
        what, kind = OUTPUT_DOCUMENTS[name]
        why = suffix_error(path, PLACEMENT_SUFFIXES if kind == "placement" else JSON_SUFFIXES,
                           what)
        if why is not None:
            raise InputError(f"cannot write '{path}': {why}", source="<argument>",
                             field="--output")


# ---- running a command ----------------------------------------------------------------------

def run_command(args: argparse.Namespace) -> int:
    """Run the handler of the parsed command: bad input prints one line and exits 2; Ctrl-C
    prints one line (where finished records are kept) and exits 130. Once the interpreter
    exits, Ctrl-C is ignored (:func:`_ignore_sigint`)."""
    atexit.unregister(_ignore_sigint)  # once per process, however many commands ran in it
    atexit.register(_ignore_sigint)
    try:
        check_output_args(args)
        return args.func(args)
    except InputError as exc:
        print(f"hetopt: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, exit 130 (128 + SIGINT)
        return _interrupted(args)
    except Exception as exc:
        # Ctrl-C inside a C extension's import (ortools, highspy) surfaces as the ImportError
        # it caused: still an interrupt, not a crash
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, KeyboardInterrupt):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        return _interrupted(args)


def _ignore_sigint() -> None:
    """At interpreter exit: the command has finished (its outputs written, its exit code
    decided), so a Ctrl-C now must not kill the process by the signal — its shell would report
    an interrupt (130) for work that was done. (Python resets its own SIGINT handler to the
    system's default while it shuts down, but leaves an ignored signal ignored.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line on stderr (where finished records are kept), exit 130."""
    out = getattr(args, "out", None)
    print(f"hetopt: interrupted{f'; finished records are kept in {out}/' if out else ''}",
          file=sys.stderr)
    return 130
