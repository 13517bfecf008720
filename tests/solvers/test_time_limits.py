"""One time limit covers the warm start, the model build and the solve."""

from __future__ import annotations

import pytest

from models.options import Deadline, TimeLimitReached
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
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
    """A short limit gives a valid result whatever the machine's speed (stopped: the warm
    start or better, saying why; the build itself stops at the deadline: the test above); how
    far past the limit it returns is measured by benchmarks/timing_checks.py, not asserted."""
    res = solve(mid, "milp", time_limit=0.5)
    assert res.status in ("FEASIBLE", "OPTIMAL")  # (solve validated the schedule)
    if res.status == "FEASIBLE":
        assert "time limit" in res.stats["message"]
    assert res.stats["warm_start"] is not None and res.params["time_limit"] == 0.5


def test_milp_without_warm_start_has_no_start(mid):
    res = solve(mid, "milp", time_limit=0.5, warm_start="none")
    assert res.status in ("TIME_LIMIT_NO_SOLUTION", "FEASIBLE", "OPTIMAL")
    assert (res.solution is None) == (res.status == "TIME_LIMIT_NO_SOLUTION")
    assert res.stats["warm_start"] is None
    assert res.stats["mip_start"]["used"] is False and res.stats["mip_start"]["source"] is None


def test_cpsat_deterministic_runs_repeat():
    """Item 15: with ``deterministic`` two runs stopped by the limit give the same result
    (1 and 2 workers); the limit is CP-SAT's deterministic time."""
    import instances

    inst = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")
    for workers in (1, 2):
        runs = [solve(inst, "cpsat", time_limit=0.1, num_workers=workers, seed=7,
                      deterministic=True) for _ in range(2)]
        assert all(r.stats["deterministic"] for r in runs)
        a, b = runs
        assert (a.status, a.objective, a.lower_bound, a.solution) == \
            (b.status, b.objective, b.lower_bound, b.solution)
        assert a.stats["deterministic_time"] == b.stats["deterministic_time"]


def test_an_error_status_always_has_a_reason(monkeypatch, catalog, cards):
    import solvers.placement.backends as backends
    from opt.common.result import Result

    monkeypatch.setattr(backends, "heft", lambda inst, options: Result(
        "placement", "heft", "ERROR", stats={"termination": "odd"}))
    inst = build_placement(cards["qwen-1.8b"], catalog.platform("HP32"), catalog,
                           Workload(8, 1), BuildOptions(layers=1))
    res = solve(inst, "heft")
    assert res.status == "ERROR" and "odd" in res.stats["message"]
