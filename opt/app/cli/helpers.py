"""What the command handlers share at run time: instance loading, ``--param`` parsing, JSON
output, the exit code of a result and a result file that is never lost.

The command-group modules import it at their top; the parser (:mod:`opt.app.cli.parser`,
:mod:`opt.app.cli.common`) does not, so ``hetopt --help`` loads none of it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import instances
from opt.common.errors import InputError
from opt.common.jsonio import json_bytes
from opt.common.lists import positive_ints
from opt.common.result import swapped_error
from opt.problems import INSTANCE_SUFFIXES, read_problem_instance


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout, encoded like the files
    (:func:`opt.common.jsonio.json_bytes`: NaN and ±Infinity are null, never bare tokens)."""
    sys.stdout.write(json_bytes(obj).decode())
    sys.stdout.flush()


# ---- instances ------------------------------------------------------------------------------

def _is_file(ref: str) -> bool:
    """Whether ``ref`` names an instance file (else a bundled instance's name)."""
    return Path(ref).exists() or ref.endswith(INSTANCE_SUFFIXES)


def load_instance(ref: str) -> Any:
    """An instance file path (any problem), or the name of a bundled instance."""
    if _is_file(ref):
        try:
            return read_problem_instance(ref)
        except InputError as exc:
            raise swapped_error(ref, exc) from None
    return instances.load(ref)


def bundled_method(ref: str) -> str | None:
    """The method ``solve`` runs on ``ref`` when none is given, beyond the problem's default:
    for a bundled instance named ``ref``, the method its index entry records as having proved
    its optimum (:attr:`instances.InstanceInfo.proven_by`), so ``hetopt solve NAME`` reproduces
    every bundled optimum; None (the problem's default, :data:`solvers.registry.DEFAULTS`) for
    an instance file or an entry that records none."""
    if _is_file(ref):
        return None
    return instances.info(ref).proven_by


def instance_summary(inst: Any) -> dict[str, Any]:
    """Size and devices of a placement instance (the JSON output of build / import)."""
    return {"tasks": inst.n_tasks, "edges": inst.n_edges, "devices": [d.name for d in inst.devices],
            "blocks": len(inst.block_ids), "time_unit": inst.time_unit}


# ---- arguments ------------------------------------------------------------------------------

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


def int_csv(text: str, what: str) -> tuple[int, ...]:
    """Comma-separated positive integers (``--tp 1,2,4``); InputError naming ``what``."""
    return positive_ints(text, what, source="<argument>")


def check_methods(methods: Sequence[str], registry: Sequence[str], *,
                  suggest: Sequence[str] | None = None, label: str = "known") -> None:
    """InputError naming every method of ``methods`` not in ``registry``."""
    unknown = [m for m in dict.fromkeys(methods) if m not in registry]
    if unknown:
        raise InputError(f"unknown method(s) {', '.join(unknown)}; {label}: "
                         f"{', '.join(suggest if suggest is not None else registry)}",
                         source="<argument>", field="methods")


# ---- results --------------------------------------------------------------------------------

#: exit code of ``solve`` per result status (docs/cli.md, "Exit codes and input limits"); bad
#: input exits 2 (:func:`opt.app.cli.run.run_command`)
STATUS_EXIT = MappingProxyType({"OPTIMAL": 0, "FEASIBLE": 0, "INFEASIBLE": 0, "ERROR": 1,
                                "TIME_LIMIT_NO_SOLUTION": 3})


def write_or_rescue(write: Callable[[str], object], path: str) -> str | None:
    """``write(path)``; when that fails, ``write`` to a new file in the temporary folder
    instead and return an error line naming both (None on success): a finished result is
    never lost."""
    try:
        write(path)
        return None
    except OSError as exc:
        fd, rescue = tempfile.mkstemp(prefix="hetopt-result-", suffix=".json")
        os.close(fd)
        write(rescue)
        return f"cannot write '{path}' ({exc.strerror or exc}); the result is in {rescue}"
