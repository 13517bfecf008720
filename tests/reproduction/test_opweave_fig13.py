"""Fig. 13 both ways (opt.app.reproduction.opweave_fig13): heterogeneous B&B against H100 B&B
(a) and against the best single-type B&B (b), with the GPUs of each type in the plan."""

from __future__ import annotations

import pytest

from opt.app.reproduction import opweave_fig13 as f13
from opt.serving.figures import gpus_by_type

M, CTX, SLO = "gemma-3-27b", 8192, 60.0


def _rec(cost: float | None, *owners: tuple[str, int, int, int], timed_out: bool = False
         ) -> dict:
    """A B&B record; owners (gpu, tp, batch, replicas)."""
    plan = None if cost is None else {"owners": [
        {"gpu": g, "tp": tp, "batch": b, "replicas": r} for g, tp, b, r in owners]}
    return {"cost_usd_per_mtok": cost, "plan": plan, "search": {"timed_out": timed_out}}


def _cells(het: dict, alone: dict | None = None, hom: float = 1.0) -> dict:
    cells = {(M, "H100", CTX, SLO): {"bnb": _rec(hom, ("H100", 8, 64, 1))},
             (M, "H100+A100", CTX, SLO): {"bnb": het, "col": _rec(1.5, ("H100", 8, 64, 1))}}
    if alone is not None:
        cells[(M, "A100", CTX, SLO)] = {"bnb": alone}
    return cells


def test_readings_differ_where_the_plan_uses_the_partner_only() -> None:
    """An A100-only het plan is the A100's best single-type plan: (b) = 1, (a) = H100 / het."""
    c = f13.fig13_cell(_cells(_rec(0.8, ("A100", 4, 32, 2))), M, "A100", CTX, SLO)
    assert c.gpus == {"A100": 8} and c.alone == 0.8 and c.alone_from == "inferred"
    assert c.reading_a == pytest.approx(1.25) and c.reading_b == pytest.approx(1.0)
    assert c.reading_a != c.reading_b
    assert c.why().startswith("A100 only: H100 is dominated") and "1.250×" in c.why()
    assert c.baseline_gain == pytest.approx(1.5 / 0.8)


def test_readings_agree_where_the_plan_uses_both_types_and_h100_is_the_best_single_type(
        ) -> None:
    het = _rec(0.9, ("H100", 2, 32, 1), ("A100", 4, 16, 2))
    c = f13.fig13_cell(_cells(het, alone=_rec(1.2, ("A100", 8, 64, 1))), M, "A100", CTX, SLO)
    assert c.gpus == {"H100": 2, "A100": 8} and c.why() == "both types"
    assert c.reading_a == pytest.approx(1 / 0.9) == c.reading_b


def test_reading_b_is_never_above_reading_a_and_needs_the_partner_alone() -> None:
    both = _rec(0.9, ("H100", 2, 32, 1), ("A100", 4, 16, 2))
    c = f13.fig13_cell(_cells(both, alone=_rec(0.95, ("A100", 8, 64, 1))), M, "A100", CTX, SLO)
    assert c.reading_b == pytest.approx(0.95 / 0.9) and c.reading_b < c.reading_a
    missing = f13.fig13_cell(_cells(both), M, "A100", CTX, SLO)
    assert missing.reading_b is None and missing.alone_from == "missing"
    # a stopped search proves nothing about the partner's optimum
    stopped = f13.fig13_cell(_cells(_rec(0.8, ("A100", 8, 64, 1), timed_out=True)), M, "A100",
                             CTX, SLO)
    assert stopped.reading_b is None and stopped.reading_a == pytest.approx(1.25)


def test_h100_only_plan_names_the_partner_dominated() -> None:
    c = f13.fig13_cell(_cells(_rec(1.0, ("H100", 8, 64, 1)), alone=_rec(1.6, ("A100", 8, 8, 1))),
                       M, "A100", CTX, SLO)
    assert c.reading_a == c.reading_b == pytest.approx(1.0)
    assert c.why().startswith("H100 only: A100 is dominated") and "1.600×" in c.why()


def test_stats_and_rows_over_settings() -> None:
    cells = _cells(_rec(0.8, ("A100", 4, 32, 2)))
    got = f13.fig13_cells(cells, models=[M], partners=["A100"])
    assert len(got) == 1
    assert f13.reading_stats(got, "A100", "a") == (pytest.approx(1.25), pytest.approx(1.25), 1, 1)
    assert f13.reading_stats(got, "A100", "b")[:2] == (pytest.approx(1.0), pytest.approx(1.0))
    (row,) = f13.detail_rows(got)
    assert len(row) == len(f13.DETAIL_HEADERS) and row[4] == "0.8 (= het)"


def test_gpus_by_type_derives_missing_replicas() -> None:
    plan = {"owners": [{"gpu": "H100", "tp": 2, "batch": 8},
                       {"gpu": "A100", "tp": 4, "batch": 4, "replicas": 0},
                       {"gpu": "H100", "tp": 1, "batch": 2, "replicas": 3}]}
    assert gpus_by_type(plan) == {"H100": 2 * 1 + 1 * 3, "A100": 4 * 2}
