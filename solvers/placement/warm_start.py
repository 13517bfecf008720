"""Start schedules for the exact placement and layout models: the shortest valid,
eviction-free schedule among a few heuristics (the exact models model no evictions).

One picker (:func:`pick_start`) with two candidate lists: :func:`warm_start_schedule` (P1:
HEFT and/or Bifocal (also in HEFT's order), or policy search; ``solvers.solve`` seeds ``cpsat``, ``cpsat-blocks`` and
``milp`` with it, and ``cpsat-blocks``' configuration search runs it on each restricted
instance) and :func:`layout_warm_start` (P2: Bifocal/WLA, HEFT/Linear, Bifocal/Dual within the
allowed formats and the memory budget; ``cpsat-layout`` starts from it). A given
``initial_solution`` is checked by ``solvers.solve`` itself. Heuristics are imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from models.options import SolveOptions
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement
from solvers.registry import get_method

#: heuristics an exact solve may start from ("best": the shortest of heft, bifocal and Bifocal in
#: HEFT's order, ``ready_set: rank``; "policy-search" is slower — up to 200 schedules — and
#: often shorter on large slices)
WARM_STARTS = ("heft", "bifocal", "best", "policy-search")


class Start(NamedTuple):
    """A start schedule and the name of the heuristic that made it."""

    name: str
    solution: dict[str, Any]


def pick_start(inst: PlacementInstance,
               candidates: Iterable[tuple[str, Callable[[], dict[str, Any]]]],
               accept: Callable[[dict[str, Any]], bool] = lambda solution: True
               ) -> Start | None:
    """The shortest (validated makespan; first on ties) of the candidates' schedules that
    has no evictions and passes ``accept``; candidates that cannot schedule the instance
    (InputError) or give an invalid schedule are skipped. None if no schedule qualifies."""
    best: tuple[int, Start] | None = None
    for name, make in candidates:
        try:
            solution = make()
            if solution.get("evictions") or not accept(solution):
                continue
            span = validate_placement(inst, solution).makespan
        except (InputError, ScheduleError):
            continue  # e.g. capacities a heuristic cannot meet without evictions
        if best is None or span < best[0]:
            best = (span, Start(name, solution))
    return None if best is None else best[1]


def warm_start_schedule(inst: PlacementInstance, name: str) -> Start | None:
    """The schedule of heuristic ``name`` (one of :data:`WARM_STARTS`; "best": the shortest of
    HEFT's, Bifocal's and Bifocal's in HEFT's order) that the exact P1 models can take, or
    None."""
    keys = (("heft", {}), ("bifocal", {}), ("bifocal", RANK)) if name == "best" else \
        ((name, {}),)
    return pick_start(inst, [(_label(key, params), _registered(inst, key, params))
                             for key, params in keys])


#: Bifocal in HEFT's order (``ready_set: rank``; often shorter, so a candidate start)
RANK = {"ready_set": "rank"}


def _label(name: str, params: dict[str, Any]) -> str:
    """``name``, with its parameters when it has any (``bifocal (ready_set rank)``)."""
    return name + (" (" + ", ".join(f"{k} {v}" for k, v in params.items()) + ")"
                   if params else "")


def _registered(inst: PlacementInstance, name: str, params: dict[str, Any]
                ) -> Callable[[], dict[str, Any]]:
    """The schedule of registered placement heuristic ``name`` with ``params`` (no limit)."""
    spec = get_method(name, "placement")
    return lambda: spec.backend(inst, SolveOptions(time_limit=None, params=params)).solution
