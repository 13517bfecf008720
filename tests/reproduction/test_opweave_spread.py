"""Fig. 9's step-time spread sensitivity (opt.app.reproduction.opweave_spread): p95 = T_rtt (1 + s)
must meet the SLO; more spread never makes fewer configurations infeasible nor a cost lower."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from opt.app.reproduction import opweave_spread as sp
from opt.app.runs.serving_sweep import ServingCell, make_record
from opt.serving.instance import read_serving_instance
from solvers import solve

INSTANCE = Path(__file__).parents[2] / "instances" / "data" / "p3-tiny-qwen3-next-h100-a100.json"
SPREADS = (0.0, 0.05, 0.10, 0.20, 0.40, 0.80)


def _record(inst, method: str) -> dict:
    res = solve(inst, method, time_limit=60)
    cell = ServingCell(inst.model, tuple(inst.gpus), inst.context_tokens, inst.tpot_slo / 1e6)
    return make_record(cell, method, res, 0.0)


@pytest.fixture(scope="module")
def tiny():
    """Cells of the tiny instance at three SLOs (20 ms, the instance's, and 2.0 and 1.4 ms, near
    the tightest plans: B&B 1.06, COL 1.14, AFD 1.19, CAD 1.34 ms), each method's record, and a
    resolver that solves the instance at a tightened SLO."""
    base = read_serving_instance(INSTANCE)
    calls = []

    def at(slo_ms: float):
        return dataclasses.replace(base, tpot_slo=math.floor(slo_ms * 1e6))

    def resolve(rec, slo_ms):
        calls.append((rec["method"], slo_ms))
        return _record(at(slo_ms), rec["method"])

    cells = {}
    for slo_ms in (20.0, 2.0, 1.4):
        inst = at(slo_ms)
        cells[("qwen3", "H100+A100", inst.context_tokens, inst.tpot_slo / 1e6)] = {
            m: _record(inst, m) for m in sp.METHODS}
    return cells, resolve, calls


def test_spread_is_monotone_and_exact_where_the_plan_still_fits(tiny) -> None:
    cells, resolve, calls = tiny
    points = sp.spread_points(cells, SPREADS, resolve)
    infeasible = [len(p.infeasible()) for p in points]
    assert infeasible == sorted(infeasible) and infeasible[0] == 0 and infeasible[-1] > 3
    for key, per in cells.items():
        for m in sp.METHODS:
            costs = [p.costs[key][m].cost for p in points]
            for a, b in zip(costs, costs[1:]):   # no plan stays no plan; a cost never drops
                assert a is not None or b is None
                assert a is None or b is None or b >= a * (1 - 1e-12)
            for p in points:
                c = p.costs[key][m]
                if c.cost is not None:     # the p95 meets the SLO
                    assert c.t_rtt_ms * (1 + p.spread) <= key[3] * (1 + 1e-9)
    s0 = points[0]
    assert not any(c.resolved for per in s0.costs.values() for c in per.values())
    # each re-solve matches a direct solve at SLO / (1 + s)
    key = min(cells, key=lambda k: k[3])
    for p in points[1:]:
        for m in sp.METHODS:
            c = p.costs[key][m]
            if c.resolved:
                direct = solve(dataclasses.replace(read_serving_instance(INSTANCE), tpot_slo=
                               math.floor(key[3] / (1 + p.spread) * 1e6)), m, time_limit=60)
                assert c.cost == pytest.approx(direct.objective) if direct.objective else \
                    c.cost is None
    assert calls


def test_rows_and_grid_shapes(tiny) -> None:
    cells, resolve, _ = tiny
    points = sp.spread_points(cells, SPREADS[:3], resolve)
    rows = sp.spread_rows(points)
    assert [r[0] for r in rows] == ["0", "0.05", "0.1"]
    assert all(len(r) == len(sp.SPREAD_HEADERS) for r in rows)
    grid = sp.ratio_grid(points)
    assert len(grid) == len(cells) and all(len(r) == 2 + len(points) for r in grid)


def test_no_plan_stays_no_plan_and_fitting_plans_are_kept() -> None:
    rec = {"slo_ms": 10.0, "t_rtt_ms": 9.0, "cost_usd_per_mtok": 2.0, "method": "col"}

    def never(rec, slo):
        raise AssertionError("no re-solve expected")
    assert sp.spread_cost(rec, 0.10, never) == sp.SpreadCost(0.10, 2.0, 9.0, False)
    assert sp.spread_cost({**rec, "cost_usd_per_mtok": None}, 0.5, never).cost is None
    got = sp.spread_cost(rec, 0.20, lambda r, slo: {"cost_usd_per_mtok": 3.0,
                                                    "t_rtt_ms": slo})
    assert got.resolved and got.cost == 3.0 and got.t_rtt_ms == pytest.approx(10 / 1.2)
    with pytest.raises(ValueError):
        sp.spread_cost(rec, -0.1, never)


def test_an_unsolved_method_is_unknown_not_infeasible(tmp_path: Path) -> None:
    """A re-solve without a record (the cached resolver before solving) is never counted as
    infeasible, and the cell's ratio is unknown."""
    key = ("gemma-3-27b", "H100", 8192, 25.0)
    recs = {m: {"model": key[0], "gpus": ["H100"], "context": key[2], "slo_ms": key[3],
                "method": m, "cost_usd_per_mtok": 1.0 + i, "t_rtt_ms": 24.0}
            for i, m in enumerate(sp.METHODS)}
    (p,) = sp.spread_points({key: recs}, [0.1], sp.cached_resolver(tmp_path))
    assert p.infeasible() == [] and p.unknown() == 4 and p.ratio(key) is None
    assert sp.spread_rows([p])[0][1] == "0 of 3 (4 methods not re-solved)"
    assert sp.ratio_grid([p])[0][1] == "?"


def test_a_stopped_resolve_is_marked() -> None:
    key = ("gemma-3-27b", "H100", 8192, 25.0)
    recs = {m: {"slo_ms": 25.0, "method": m, "cost_usd_per_mtok": 1.0, "t_rtt_ms": 24.0}
            for m in sp.METHODS}

    def resolve(rec, slo):
        return {"cost_usd_per_mtok": 2.0 if rec["method"] == "bnb" else 3.0, "t_rtt_ms": slo,
                "search": {"timed_out": rec["method"] == "bnb"}}
    (p,) = sp.spread_points({key: recs}, [0.1], resolve)
    assert p.costs[key]["bnb"].stopped and sp.ratio_grid([p])[0][1] == "1.500*"
