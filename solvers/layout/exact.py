"""The exact P2 layout models of :mod:`solvers.layout.strategies` (problems.md §2):
``cpsat-layout`` (joint placement + formats, warm-started from the best layout heuristic) and
``cpsat-formats`` (formats for a fixed base schedule), both CP-SAT (``models.layout.cpsat``);
registered in :mod:`solvers.registry`. A module of their own: the heuristic strategies load no
CP-SAT."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from heuristics.layout.wla import WlaParams, wla
from heuristics.placement.bifocal import bifocal_schedule
from heuristics.placement.list_scheduler import heft
from models.layout.cpsat import solve_format_only, solve_layout_cpsat
from models.options import SolveOptions
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from opt.placement.layout import (
    allowed_formats,
    budget_message,
    fits_budget,
    uniform,
    with_formats,
)
from solvers.layout.strategies import infeasible, layout_stats
from solvers.placement.warm_start import Start, pick_start


def cpsat_layout(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Joint model, warm-started from the best layout heuristic unless an initial solution
    is given; the warm start is kept when CP-SAT returns nothing better within the limit."""
    t0 = time.perf_counter()
    params = dict(options.params)
    formats = allowed_formats(inst, params.get("formats"))
    msg = budget_message(inst, formats)
    if msg is not None:
        return infeasible("cpsat-layout", options, msg, t0)
    warm_kind = params.pop("warm", "heuristic")  # "heuristic" or "none" (solvers.params)
    options = replace(options, params=params)
    if options.initial_solution is not None:
        warm: tuple[str, dict[str, Any]] | None = ("initial_solution", options.initial_solution)
    else:
        warm = layout_warm_start(inst, formats) if warm_kind == "heuristic" else None
    if warm is not None:
        options = replace(options, initial_solution=warm[1])
    res = solve_layout_cpsat(inst, options)
    res.stats["layout_warm_start"] = None if warm is None else warm[0]
    if warm is not None and not warm[1].get("evictions"):
        ms = max((c["end"] for c in warm[1]["compute"]), default=0)
        if res.solution is None or ms < (res.objective or float("inf")):
            res.solution = warm[1]
            res.objective = float(ms)
            res.status = "FEASIBLE"
            res.stats["incumbent"] = f"warm start {warm[0]} (CP-SAT found nothing better)"
    if res.solution is not None:
        res.stats.update(layout_stats(inst, res.solution["formats"]))
    return res


def base_schedule(inst: PlacementInstance, base: str) -> dict[str, Any]:
    """The base schedule of the format-only model: ``bifocal`` (Bifocal/Linear),
    ``bifocal/wla`` (WLA's final schedule) or ``heft`` (all-linear)."""
    if base == "bifocal":
        return bifocal_schedule(with_formats(inst, uniform(inst, "linear")))
    if base == "bifocal/wla":
        return wla(inst).solution
    if base == "heft":
        return heft(with_formats(inst, uniform(inst, "linear")))
    raise InputError(f"unknown base '{base}'; known: bifocal, bifocal/wla, heft",
                     field="params.base")


def cpsat_formats(inst: PlacementInstance, options: SolveOptions) -> Result:
    t0 = time.perf_counter()
    msg = budget_message(inst)
    if msg is not None:
        return infeasible("cpsat-formats", options, msg, t0)
    base = None  # without an initial solution the model starts from a heuristic's schedule
    if options.initial_solution is None:
        base = base_schedule(inst, str(options.params.get("base", "bifocal")))
    res = solve_format_only(inst, options, base)
    if res.solution is not None:
        res.stats.update(layout_stats(inst, res.solution["formats"]))
    return res


def layout_warm_start(inst: PlacementInstance, formats: tuple[str, ...]) -> Start | None:
    """The best eviction-free schedule within ``formats`` and the budget among Bifocal/WLA
    under both pass rules (the paper's and ``incremental``; with ``dual`` when allowed),
    HEFT/Linear and Bifocal/Dual, or None."""
    cands: list[tuple[str, Callable[[], dict[str, Any]]]] = []
    if "linear" in formats:
        dual = "dual" in formats
        cands.append(("bifocal/wla", lambda: wla(inst, WlaParams(dual=dual)).solution))
        cands.append(("bifocal/wla (incremental)",
                      lambda: wla(inst, WlaParams(dual=dual, wla_rule="incremental")).solution))
        cands.append(("heft/linear", lambda: heft(with_formats(inst, uniform(inst, "linear")))))
    if "dual" in formats and fits_budget(inst, uniform(inst, "dual")):
        cands.append(("bifocal/dual",
                      lambda: bifocal_schedule(with_formats(inst, uniform(inst, "dual")))))

    def within(solution: dict[str, Any]) -> bool:
        return all(f in formats for f in solution["formats"].values()) \
            and fits_budget(inst, solution["formats"])

    return pick_start(inst, cands, within)
