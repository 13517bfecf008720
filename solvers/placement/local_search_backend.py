"""The ``local-search`` back end of ``solvers.solve`` (registered in :mod:`solvers.registry`;
the default placement method beyond the exact default's size cap): the best constructive
schedule improved by replayed assignment moves (:mod:`heuristics.placement.local_search`)
within the solve's time limit, and its effective settings for sweep records."""

from __future__ import annotations

from typing import Any

from models.options import SolveOptions
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from solvers.placement.backends import heuristic_with_stats
from solvers.registry import parsed_params


def local_search(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Local search with ``options.params`` (``max_evaluations``) and the solve's time limit;
    ``stats`` as :func:`heuristics.placement.local_search.local_search` fills them."""
    from heuristics.placement.local_search import LocalSearchParams
    from heuristics.placement.local_search import local_search as search

    params = LocalSearchParams(**parsed_params("local-search", "placement", options.params))
    return heuristic_with_stats(inst, "local-search", options,
                                lambda stats: search(inst, params, time_limit=options.time_limit,
                                                     stats=stats))


def local_search_settings(params: dict[str, Any]) -> dict[str, Any]:
    """local-search's effective settings for ``params`` (typed): its budget, the start set
    and Bifocal's ``revision`` (a start)."""
    from dataclasses import asdict

    from heuristics.placement.bifocal import BIFOCAL_VERSION
    from heuristics.placement.local_search import STARTS, LocalSearchParams

    return {**asdict(LocalSearchParams(**params)), "starts": [s[0] for s in STARTS],
            "bifocal_revision": BIFOCAL_VERSION}
