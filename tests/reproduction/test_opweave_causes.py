"""Verdict causes (opt.app.reproduction.opweave_causes): which records a perturbation leaves
unchanged, and the row naming the input that moves a quantity most."""

from __future__ import annotations

from opt.app.reproduction import opweave_causes as oc

SPLIT = {"owners": [{"batch": 64}, {"batch": 512}]}
COLOC = {"owners": [{"batch": 128}]}


def _rec(cost, t=20.0, plan=COLOC, slo=25.0, method="bnb") -> dict:
    return {"cost_usd_per_mtok": cost, "t_rtt_ms": t, "slo_ms": slo, "plan": plan,
            "method": method}


def test_keeps_only_what_a_restriction_cannot_change() -> None:
    tighter, dearer = oc.Perturbation("SLO -10 %", slo_scale=0.9), oc.Perturbation("x2", 1, 2)
    cap = oc.Perturbation("batch <= 256", batch_cap=256)
    looser = oc.Perturbation("SLO +10 %", slo_scale=1.1)
    assert oc.keeps(_rec(None), tighter) and oc.keeps(_rec(None), dearer)   # no plan stays
    assert oc.keeps(_rec(1.0, t=22.0), tighter) and not oc.keeps(_rec(1.0, t=23.0), tighter)
    assert oc.keeps(_rec(1.0), dearer) and not oc.keeps(_rec(1.0, plan=SPLIT), dearer)
    assert oc.keeps(_rec(1.0), cap) and not oc.keeps(_rec(1.0, plan=SPLIT), cap)
    assert not oc.keeps(_rec(1.0), looser) and not oc.keeps(_rec(None), looser)
    assert cap.batches() == (1, 2, 4, 8, 16, 32, 64, 128, 256)


def test_perturbed_cells_solve_only_the_unknown_ones() -> None:
    cells = {("m", "H100", 8192, 25.0): {"col": _rec(1.0, method="col"),
                                         "afd": _rec(2.0, t=24.0, plan=SPLIT, method="afd"),
                                         "bnb": _rec(1.0)}}
    p = oc.Perturbation("SLO -10 %", slo_scale=0.9)
    asked = []

    def solver(rec, pert):
        asked.append(rec["method"])
        return {**rec, "cost_usd_per_mtok": None, "plan": None}
    got = oc.perturbed_cells(cells, p, solver)
    assert asked == ["afd"] and oc.solved_count(cells, p) == 1
    assert got[("m", "H100", 8192, 25.0)]["col"]["cost_usd_per_mtok"] == 1.0


def test_cause_row_names_the_largest_mover() -> None:
    def q(cells):
        return sum(r["cost_usd_per_mtok"] or 0 for per in cells.values() for r in per.values())
    base = {"k": {"bnb": _rec(1.0)}}
    row = oc.cause_row("total", q, base, {"a": {"k": {"bnb": _rec(1.2)}},
                                          "b": {"k": {"bnb": _rec(0.5)}}})
    assert row[:4] == ["total", "1", "1.200", "0.500"] and row[4].startswith("b: 1 → 0.500")
    assert oc.cause_row("total", q, base, {"a": base})[-1] == "none moves it"


def test_unsolved_perturbations_are_not_named_as_the_mover(tmp_path) -> None:
    cells = {("gemma-3-27b", "H100", 8192, 25.0): {"afd": {
        **_rec(2.0, t=24.0, plan=SPLIT, method="afd"), "model": "gemma-3-27b",
        "gpus": ["H100"], "context": 8192}}}
    p = oc.Perturbation("SLO -10 %", slo_scale=0.9)
    raw = oc.perturbed_cells(cells, p, oc.cached_solver(tmp_path))
    assert oc.unsolved(raw) == 1 and oc.as_cells(raw) == {next(iter(cells)): {}}

    def q(c):
        return float(len(c))
    row = oc.cause_row("q", q, cells, {p.name: oc.as_cells(raw)}, missing={p.name: 1})
    assert row[2] == "n/a (1 unsolved)" and row[3] == "--"
