"""Issue 18 item 11: one time limit covers the warm start, the model build and the solve."""

from __future__ import annotations

import time

import pytest

from models.options import Deadline, TimeLimitReached
from opt.placement.builder import BuildOptions, Workload, build_placement
from solvers import solve


@pytest.fixture(scope="module")
def mid(catalog, cards):
    """413 tasks, 664 edges: the MILP's channel constraints alone take several seconds."""
    return build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                           Workload(64, 6), BuildOptions(layers=2))


def test_milp_build_stops_at_the_deadline(mid):
    from models.placement.milp import build_placement_milp

    with pytest.raises(TimeLimitReached):
        build_placement_milp(mid, clock=Deadline.after(0.0))


def test_milp_respects_a_short_time_limit(mid):
    t0 = time.perf_counter()
    res = solve(mid, "milp", time_limit=0.5)
    backend = res.runtime_s
    assert backend < 1.5, backend  # was 24 s at time_limit 1 (18 s of it building)
    assert res.status == "FEASIBLE" and "time limit" in res.stats["message"]
    assert res.stats["warm_start"] is not None and res.params["time_limit"] == 0.5
    assert time.perf_counter() - t0 < 10  # + the certified bound and the validation


def test_milp_without_warm_start_has_no_start(mid):
    res = solve(mid, "milp", time_limit=0.5, warm_start="none")
    assert res.status == "TIME_LIMIT_NO_SOLUTION" and res.solution is None
    assert res.stats["warm_start"] is None
    assert res.stats["mip_start"]["used"] is False and res.stats["mip_start"]["source"] is None
