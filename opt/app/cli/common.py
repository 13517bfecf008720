"""Shared pieces of the command line: the common options, argument helpers, ``--param``
parsing, instance loading and JSON output.

Nothing here imports ``solvers``, ``models`` or ``heuristics`` at module level, nor a numeric
stack: ``hetopt --help`` stays cheap. Handlers import what they need inside their bodies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from opt.common.errors import InputError
from opt.common.lists import positive_ints


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout, encoded like the files
    (:func:`opt.common.jsonio.json_bytes`: NaN and ±Infinity are null, never bare tokens)."""
    from opt.common.jsonio import json_bytes

    sys.stdout.write(json_bytes(obj).decode())
    sys.stdout.flush()


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


# ---- inputs shared by several commands ------------------------------------------------------

def catalog(args: argparse.Namespace):
    """The hardware catalog of ``--catalog`` (merged over the bundled one)."""
    from opt.costlib.hardware import load_catalog

    return load_catalog(args.catalog)


def cards(args: argparse.Namespace):
    """The model cards of ``--models-file`` (added to the bundled ones)."""
    from opt.costlib.modelcard import load_cards

    return load_cards(args.models_file)


def _is_file(ref: str) -> bool:
    """Whether ``ref`` names an instance file (else a bundled instance's name)."""
    from opt.problems import INSTANCE_SUFFIXES

    return Path(ref).exists() or ref.endswith(INSTANCE_SUFFIXES)


def load_instance(ref: str):
    """An instance file path (any problem), or the name of a bundled instance."""
    from opt.problems import read_problem_instance

    if _is_file(ref):
        from opt.common.result import swapped_error

        try:
            return read_problem_instance(ref)
        except InputError as exc:
            raise swapped_error(ref, exc) from None
    import instances

    return instances.load(ref)


def bundled_method(ref: str) -> str | None:
    """The method ``solve`` runs on ``ref`` when none is given, beyond the problem's default:
    for a bundled instance named ``ref``, the method its index entry records as having proved
    its optimum (:attr:`instances.InstanceInfo.proven_by`), so ``hetopt solve NAME`` reproduces
    every bundled optimum; None (the problem's default, :data:`solvers.registry.DEFAULTS`) for
    an instance file or an entry that records none."""
    if _is_file(ref):
        return None
    import instances

    return instances.info(ref).proven_by


def instance_summary(inst) -> dict[str, Any]:
    """Size and devices of a placement instance (the JSON output of build / import)."""
    return {"tasks": inst.n_tasks, "edges": inst.n_edges, "devices": [d.name for d in inst.devices],
            "blocks": len(inst.block_ids), "time_unit": inst.time_unit}


#: ``build placement --tables``: the ``columns`` argument of ``PlacementInstance.write`` (None:
#: automatic, column tables above its LARGE_TASKS tasks)
TABLES = MappingProxyType({"auto": None, "rows": False, "columns": True})

#: arguments of ``solvers.solve`` that have their own option: not a ``--param``
SOLVE_OPTIONS = MappingProxyType({"time_limit": "--time-limit", "num_workers": "--num-workers",
                                  "seed": "--seed", "initial_solution": "--initial-solution",
                                  "export_path": "--export"})


def parse_params(items: Sequence[str] | None) -> dict[str, Any]:
    """``--param KEY=VALUE`` items as a dict; a VALUE that parses as JSON is decoded. A KEY
    that is one of :data:`SOLVE_OPTIONS` is an InputError naming its option."""
    params: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", source="<argument>",
                             field="param")
        if key in SOLVE_OPTIONS:
            raise InputError(f"{key} is not a param: use {SOLVE_OPTIONS[key]}",
                             source="<argument>", field=f"param.{key}")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


def parse_method_params(items: Sequence[str] | None, methods: Sequence[str]
                        ) -> dict[str, dict[str, Any]]:
    """``--param METHOD.KEY=VALUE`` items (``hetopt sweep placement``) as {method: {key:
    value}}: KEY=VALUE as :func:`parse_params` reads it, METHOD one of ``methods`` (the part
    before the first dot). Each method's params are checked against its declared ones here,
    before any solve (InputError naming the item). ``solvers`` is imported here for
    ``hetopt --help``'s start-up, as in :func:`placement_method_names`."""
    from solvers.registry import get_method

    out: dict[str, dict[str, Any]] = {}
    for item in items or ():
        method, dot, rest = item.partition(".")
        if not dot or method not in methods or "=" not in rest:
            raise InputError(f"expected METHOD.KEY=VALUE with METHOD one of the sweep's "
                             f"methods ({', '.join(methods)}), got {item!r}",
                             source="<argument>", field="param")
        out.setdefault(method, {}).update(parse_params([rest]))
    for method, params in out.items():
        get_method(method, ("placement", "layout")).params.parse(method, params)
    return out


def int_csv(text: str, what: str) -> tuple[int, ...]:
    """Comma-separated positive integers (``--tp 1,2,4``); InputError naming ``what``."""
    return positive_ints(text, what, source="<argument>")


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


# ---- method names in help texts -------------------------------------------------------------

def placement_method_names() -> list[str]:
    """Registered placement methods (``solvers`` imported here, not at the top: this module
    builds ``hetopt --help``, and importing the package imports its API; tests/cli/test_startup.py)."""
    from solvers.registry import names

    return list(names(("placement", "layout")))


class PlacementMethodsHelp(argparse.Action):
    """A store action whose help is a template with ``{methods}``, filled with the registered
    placement methods only when help is printed: importing ``solvers`` while building the
    parser would load it for every command."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self._template: str | None = None
        super().__init__(option_strings, dest, **kwargs)

    @property
    def help(self) -> str | None:  # type: ignore[override]
        if self._template is None:
            return None
        return self._template.format(methods=" | ".join(placement_method_names()))

    @help.setter
    def help(self, template: str | None) -> None:
        self._template = template

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)


def check_methods(methods: Sequence[str], registry, *, suggest=None,
                  label: str = "known") -> None:
    """InputError naming every method of ``methods`` not in ``registry``."""
    unknown = [m for m in dict.fromkeys(methods) if m not in registry]
    if unknown:
        raise InputError(f"unknown method(s) {', '.join(unknown)}; {label}: "
                         f"{', '.join(suggest if suggest is not None else registry)}",
                         source="<argument>", field="methods")


# ---- output files and exit codes ------------------------------------------------------------

#: exit code of ``solve`` per result status (docs/cli.md, "Exit codes and input limits"); bad
#: input exits 2 (:func:`run_command`)
STATUS_EXIT = MappingProxyType({"OPTIMAL": 0, "FEASIBLE": 0, "INFEASIBLE": 0, "ERROR": 1,
                                "TIME_LIMIT_NO_SOLUTION": 3})

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
    from opt.common.outpath import (
        FILE,
        JSON_SUFFIXES,
        PLACEMENT_SUFFIXES,
        check_output,
        suffix_error,
    )

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


def write_or_rescue(write, path: str) -> str | None:
    """``write(path)``; when that fails, ``write`` to a new file in the temporary folder
    instead and return an error line naming both (None on success): a finished result is
    never lost."""
    import tempfile

    try:
        write(path)
        return None
    except OSError as exc:
        fd, rescue = tempfile.mkstemp(prefix="hetopt-result-", suffix=".json")
        os.close(fd)
        write(rescue)
        return f"cannot write '{path}' ({exc.strerror or exc}); the result is in {rescue}"


# ---- running a command ----------------------------------------------------------------------

def run_command(args: argparse.Namespace) -> int:
    """Run the handler of the parsed command: bad input prints one line and exits 2; Ctrl-C
    prints one line (where finished records are kept) and exits 130. Once the interpreter
    exits, Ctrl-C is ignored (:func:`_ignore_sigint`)."""
    import atexit

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
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line on stderr (where finished records are kept), exit 130."""
    out = getattr(args, "out", None)
    print(f"hetopt: interrupted{f'; finished records are kept in {out}/' if out else ''}",
          file=sys.stderr)
    return 130
