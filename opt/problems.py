"""The problems and their names (:class:`Problem`), and reading an instance of any problem by
its ``"problem"`` field: ``placement`` (P1), ``layout`` (P2) or ``serving`` (P3; files written
before this name say ``serving_plan``, still read)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from opt.common.errors import InputError
from opt.common.jsonio import read_json
from opt.common.problem import LEGACY_NAMES, PROBLEMS, Problem, problem_name
from opt.placement.instance import PlacementInstance
from opt.placement.io import instance_from_dict, read_instance

if TYPE_CHECKING:  # imported when a serving plan is read (start-up time)
    from opt.serving.instance import ServingInstance

#: the problem names are defined in opt.common.problem; these modules read them from here too
__all__ = ["LEGACY_NAMES", "PROBLEMS", "Problem", "problem_name", "INSTANCE_SUFFIXES",
           "instance_of", "read_problem_instance"]

#: the names of instance files (anything else on the command line may be a bundled instance)
INSTANCE_SUFFIXES = (".json", ".json.gz", ".npz")


def instance_of(obj: object, source: str | None = None) -> PlacementInstance | ServingInstance:
    """Build the instance a parsed JSON object describes (errors name ``source``)."""
    problem = obj.get("problem") if isinstance(obj, dict) else None
    if problem in ("serving", "serving_plan"):
        from opt.serving.instance import serving_instance_from_dict

        return serving_instance_from_dict(obj, source=source)
    if problem in (None, "placement", "layout"):
        return instance_from_dict(obj, source=source)
    raise InputError(f"unknown problem {problem!r}; known: {', '.join(PROBLEMS)}",
                     source=source, field="problem")


def read_problem_instance(path: str | Path) -> PlacementInstance | ServingInstance:
    """Read a ``.json`` / ``.json.gz`` instance of any problem, or a placement instance in
    the binary column container (``.npz``, docs/problems.md §1.2c)."""
    if str(path).endswith(".npz"):
        return read_instance(path)
    return instance_of(read_json(path), source=str(path))
