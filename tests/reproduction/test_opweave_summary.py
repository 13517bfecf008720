"""OpWeave's figures aggregated as the paper aggregates them (opt.app.reproduction.opweave_summary):
Fig. 9 strictly-cheapest against tied settings, Fig. 10 means over the H100 settings."""

from __future__ import annotations

import pytest

from opt.app.reproduction import opweave_summary as osum
from opt.app.reproduction.opweave_tables import MIB, Row, by_cell
from opt.serving.figures import PlanFigures

MODELS = {"gemma-3-27b": (25.0, 60.0), "qwen3-next-80b-a3b": (40.0, 80.0)}


def _row(model: str, ctx: int, slo: float, method: str, cost: float | None,
         stages: float = 10.0, payload_mib: float = 1.0, occ: float = 0.5, mu: int = 1) -> Row:
    rec = {"model": model, "gpus": ["H100"], "context": ctx, "slo_ms": slo, "method": method,
           "status": "FEASIBLE" if cost is not None else "INFEASIBLE",
           "cost_usd_per_mtok": cost, "plan": {"owners": [{}]} if cost is not None else None}
    figs = None if cost is None else PlanFigures(stages, mu, 4, int(payload_mib * MIB), (occ,),
                                                 occ, 1.0, 1.0)
    return Row(rec, figs)


def _cells(bnb_cost_by_ctx: dict[int, float]) -> dict:
    rows = []
    for model, slos in MODELS.items():
        for ctx, bnb in bnb_cost_by_ctx.items():
            for slo in slos:
                rows += [_row(model, ctx, slo, "col", 1.0),
                         _row(model, ctx, slo, "afd", None if slo == slos[0] else 2.0,
                              stages=124, payload_mib=8.0, occ=0.4, mu=2),
                         _row(model, ctx, slo, "cad", 3.0, stages=124, payload_mib=4.0),
                         _row(model, ctx, slo, "bnb", bnb, stages=20 if bnb < 1 else 10,
                              payload_mib=0.5 if bnb < 1 else 0.0, occ=0.9)]
    return by_cell(rows)


def test_fig9_strict_and_tied_settings_and_infeasible_count():
    cells = _cells({8192: 1.0, 32768: 0.5, 131072: 0.8})   # 8K: B&B = COL's plan (a tie)
    rows = {r[1].removesuffix(f" {osum.FIG9_KIND}"): r for r in osum.fig9_summary(cells)}
    assert all(r[1].endswith(osum.FIG9_KIND) for r in rows.values())
    cheapest = rows["settings where OpWeave is cheapest (of 12)"]
    assert cheapest[4] == "8 strictly, 4 tied" and cheapest[6] == "differs"
    assert "gemma 8K/25" in cheapest[7]
    infeasible = rows["baseline configurations infeasible (of 36)"]
    assert infeasible[4] == "6 of 36"                         # AFD at every tight SLO
    assert rows["gemma-3-27b: best baseline / OpWeave, max"][4].startswith("2.000 (32K")


def test_fig10_means_over_the_h100_settings():
    cells = _cells({8192: 1.0, 32768: 0.5, 131072: 0.8})
    got = osum.fig10_means(cells, "gemma-3-27b")
    assert got["cells"] == [6.0, 3.0, 6.0]                    # AFD: relaxed SLO only
    assert got["stages"][0] == 124 and got["stages"][1] == 124
    assert got["stages"][2] == pytest.approx((10 * 2 + 20 * 4) / 6)   # 2 tied, 4 split
    assert got["payload_mib"][2] == pytest.approx(0.5 * 4 / 6, rel=1e-6)
    assert got["occupancy_pct"][1] == pytest.approx(40.0) and got["mu"][1] == 2
    rows = osum.summary_rows(cells)
    assert {r[0] for r in rows} >= {"Fig. 9", "Fig. 10", "Fig. 11"}
    assert all(len(r) == len(osum.HEADERS) for r in rows)


def test_fig14_rows_count_ties_and_compare_sensitivities():
    """Fig. 14 as §7.4 states it: cheapest at every point (ties apart), AFD / CAD without a
    plan at 500 µs, and per sweep the dearest / cheapest cost of B&B against AFD and CAD."""
    pts = [[5.0, 32.0, 1.0, 1.2, 1.3, 0.9, "yes", "1.111", 20, "H100+L40S"],
           [20.0, 32.0, 1.0, 1.3, 1.4, 0.95, "yes", "1.053", 20, "H100+L40S"],
           [500.0, 32.0, 1.0, "no plan", "no plan", 1.0, "tie", "1.000", 10, "H100+L40S"],
           [20.0, 1.0, 1.0, 3.0, 5.0, 1.0, "tie", "1.000", 10, "H100+L40S"]]
    rows = osum.fig14_summary(pts)
    assert rows[0][4] == "2 strictly, 2 tied, 0 dearer of 4 run" and rows[0][6] == "differs"
    assert rows[1][4] == "AFD no plan, CAD no plan" and rows[1][6] == "reproduced"
    lat, bw = rows[2], rows[3]
    assert "no plan at some point" in lat[4] and lat[6] == "reproduced"   # B&B 1.111
    assert bw[4] == "2.308 / 3.571 / 1.053" and bw[6] == "reproduced"
    pts[0][6] = pts[1][6] = pts[2][6] = pts[3][6] = "yes"
    assert osum.fig14_summary(pts)[0][6] == "reproduced"
    assert osum.fig14_summary([]) == []
