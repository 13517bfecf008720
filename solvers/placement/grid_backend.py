"""The ``bifocal-grid`` back end of ``solvers.solve`` (registered in :mod:`solvers.registry`):
Bifocal at every member of a hyperparameter grid, the best validated schedule
(:mod:`heuristics.placement.bifocal_grid`), and its effective settings for sweep records."""

from __future__ import annotations

from typing import Any

from models.options import SolveOptions
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from solvers.placement.backends import bifocal_settings, heuristic_with_stats


def bifocal_grid(inst: PlacementInstance, options: SolveOptions) -> Result:
    """The best member of the grid ``options.params`` (default DOPS §6.2's); the solve's time
    limit (seconds) stops the grid between members; ``stats`` as
    :func:`heuristics.placement.bifocal_grid.bifocal_grid` fills them."""
    from heuristics.placement.bifocal_grid import GridParams
    from heuristics.placement.bifocal_grid import bifocal_grid as grid_schedule

    grid = GridParams.from_dict(options.params)
    return heuristic_with_stats(inst, "bifocal-grid", options,
                                lambda stats: grid_schedule(inst, grid,
                                                            time_limit=options.time_limit,
                                                            stats=stats))


def bifocal_grid_settings(params: dict[str, Any]) -> dict[str, Any]:
    """bifocal-grid's effective settings for ``params`` (typed): the values of every axis, the
    other Bifocal parameters with their defaults filled in and Bifocal's ``revision``."""
    from heuristics.placement.bifocal_grid import GridParams

    grid = GridParams.from_dict(params)
    rest = {k: v for k, v in bifocal_settings(dict(grid.fixed)).items() if k not in grid.axes}
    return {**grid.settings(), **rest}
