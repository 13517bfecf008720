"""Bifocal tuned per instance: the best of a hyperparameter grid (DOPS §6.2 tunes Bifocal per
setting; the grid and its source: :mod:`heuristics.placement.grid_params`).

:func:`bifocal_grid` runs Bifocal (:func:`heuristics.placement.bifocal.bifocal_schedule`) at
every member of the grid in grid order, checks each member's schedule with the independent
validator (:func:`opt.placement.validator.validate_placement`, which recomputes the makespan)
and returns the schedule of least makespan (ties: the first in grid order). ``stats["grid"]``
lists every member (its parameters, its makespan in the instance's time unit, whether it ran),
``stats["winner"]`` the winner's parameters. A time limit stops the grid between members: the
first member always runs, the members not reached are listed as ``not run`` and the best so
far is returned.

:func:`best_of` is the reporting rule of the DOPS authors' released plots (the better of two
methods per workload; docs/dops_reproduction.md §2) applied to sweep records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from heuristics.placement.bifocal import bifocal_schedule
from heuristics.placement.bifocal_params import BifocalParams
from heuristics.placement.grid_params import GridParams
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement

#: A member's status in ``stats["grid"]``.
RUN, NOT_RUN, INVALID = "run", "not run", "invalid"


def member_params(grid: GridParams) -> list[tuple[dict[str, Any], BifocalParams]]:
    """Each member's axis values and its full Bifocal parameters (the fixed ones added), in
    grid order; InputError (naming ``params.<name>``) for a combination Bifocal refuses."""
    return [(axes, BifocalParams.from_dict(grid.bifocal_params(axes), "bifocal-grid"))
            for axes in grid.members()]


def _run_member(inst: PlacementInstance, params: BifocalParams
                ) -> tuple[dict[str, Any], int | None, str, dict[str, Any]]:
    """(schedule, validated makespan or None, status, Bifocal's stats) of one member."""
    stats: dict[str, Any] = {}
    solution = bifocal_schedule(inst, params, stats=stats)
    try:
        makespan = validate_placement(inst, solution).makespan
    except ScheduleError as exc:
        stats["invalid"] = str(exc)
        return solution, None, INVALID, stats
    return solution, int(makespan), RUN, stats


def bifocal_grid(inst: PlacementInstance, params: Mapping[str, Any] | GridParams | None = None,
                 *, time_limit: float | None = None, stats: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The validated schedule of least makespan over the grid ``params`` (a
    :class:`GridParams` or its params dict; default: the §6.2 grid), ties to the first in grid
    order. time_limit: seconds (None: every member runs); stats: filled with ``grid`` (one
    entry per member: ``params``, ``makespan`` or None, ``status`` run / not run / invalid),
    ``winner`` (its params), ``winner_index``, ``members``, ``members_run`` and ``bifocal``
    (the winner's Bifocal stats). ScheduleError when no member's schedule is valid."""
    grid = params if isinstance(params, GridParams) else GridParams.from_dict(params)
    members = member_params(grid)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    best: tuple[int, int, dict[str, Any], dict[str, Any]] | None = None  # ms, index, sol, stats
    first_error = ""
    for k, (axes, p) in enumerate(members):
        if k and time_limit is not None and time.perf_counter() - t0 >= time_limit:
            rows.append({"params": axes, "makespan": None, "status": NOT_RUN})
            continue
        solution, makespan, status, member_stats = _run_member(inst, p)
        rows.append({"params": axes, "makespan": makespan, "status": status})
        if makespan is None:
            first_error = first_error or member_stats["invalid"]
        elif best is None or makespan < best[0]:
            best = (makespan, k, solution, member_stats)
    if best is None:
        raise ScheduleError(f"bifocal-grid: no member's schedule is valid: {first_error}")
    makespan, index, solution, member_stats = best
    if stats is not None:
        stats.update({"grid": rows, "winner": dict(rows[index]["params"]),
                      "winner_index": index, "members": len(rows),
                      "members_run": sum(r["status"] != NOT_RUN for r in rows),
                      "bifocal": member_stats})
    return solution


def _usable(rec: Mapping[str, Any]) -> bool:
    """A record with a schedule: solved, not marked invalid, with a makespan."""
    return (rec.get("status") in ("OPTIMAL", "FEASIBLE") and not rec.get("invalid")
            and rec.get("makespan") is not None)


def _workload(rec: Mapping[str, Any]) -> tuple:
    return (rec["model"], rec["platform"], rec["prefill"], rec["decode"], rec["batch"])


def best_of(records: Iterable[Mapping[str, Any]], *methods: str) -> list[dict[str, Any]]:
    """Per workload (model, platform, prefill, decode, batch) with a usable record of any of
    ``methods``: a copy of the record of least makespan among them (ties: the first of
    ``methods``), its ``method`` renamed ``best(<methods>)`` and the chosen one kept in
    ``best_of``. The DOPS authors' plots report Bifocal this way, as the better of HEFT and
    Bifocal per workload (docs/dops_reproduction.md §2): ``best_of(records, "heft",
    "bifocal")``. Workloads in first-seen order."""
    if not methods:
        raise ValueError("best_of needs at least one method")
    label = f"best({','.join(methods)})"
    chosen: dict[tuple, dict[str, Any]] = {}
    for rec in records:
        if rec.get("method") not in methods or not _usable(rec):
            continue
        key = _workload(rec)
        old = chosen.get(key)
        rank = (rec["makespan"], methods.index(rec["method"]))
        if old is None or rank < (old["makespan"], methods.index(old["best_of"])):
            chosen[key] = {**rec, "method": label, "best_of": rec["method"]}
    return list(chosen.values())
