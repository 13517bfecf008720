"""docs/serving.md's OpWeave tables (Figs. 9, 10, 11, 13, Table 3; Fig. 14 with ``--fig14``),
regenerated from ``hetopt sweep serving`` records, each verdict with its measured cause.

    python benchmarks/opweave_regenerate.py RECORDS_DIR... [--out results/opweave-causes]
        [--fig14 DIR] [--compare DIR] [--time-limit 600] [--cached | --no-causes]

Prints Markdown: the Fig. 9 cell table (model T_rtt, a mean, against OpWeave's measured p95),
Fig. 9's step-time spread sensitivity (:mod:`opt.app.reproduction.opweave_spread`), the verdict
table (:mod:`opt.app.reproduction.opweave_summary`), Fig. 13 both ways
(:mod:`opt.app.reproduction.opweave_fig13`) and the causes table
(:mod:`opt.app.reproduction.opweave_causes`): each compared quantity on the records and under
each perturbation — crossings ×2, SLO −10 %, batch grid ≤ 256 — solving again (resumably, under
``--out``) only the methods whose answer a perturbation can change; the A100 price's effect on
Fig. 13 is bounded without solving (an A100-only plan's cost scales with the A100's price).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.app.reproduction import opweave_causes as oc
from opt.app.reproduction import opweave_fig13 as f13
from opt.app.reproduction import opweave_spread as sp
from opt.app.reproduction.opweave_summary import (
    HEADERS,
    fig14_summary,
    incomplete_searches,
    summary_rows,
)
from opt.app.reproduction.opweave_tables import (
    _md,
    by_cell,
    fig14_rows,
    figure_rows,
    load_records,
    record_cells,
)

PERTURBATIONS = (oc.Perturbation("crossing x2", crossing_scale=2.0),
                 oc.Perturbation("SLO -10 %", slo_scale=0.9),
                 oc.Perturbation("batch <= 256", batch_cap=256))
MODELS = ("gemma-3-27b", "qwen3-next-80b-a3b")
Cells = dict[tuple, dict[str, Any]]


def _h100(cells: Cells) -> Cells:
    return {k: v for k, v in cells.items() if k[1] == "H100"}


def _cost(rec: Any) -> float | None:
    c = None if rec is None else rec.get("cost_usd_per_mtok")
    return float(c) if isinstance(c, (int, float)) else None


def _ratio(per: dict[str, Any]) -> float | None:
    base = [c for m in ("col", "afd", "cad") if (c := _cost(per.get(m))) is not None]
    b = _cost(per.get("bnb"))
    return min(base) / b if base and b else None


def max_ratio(model: str):
    def q(cells: Cells) -> float | None:
        vals = [r for k, per in cells.items() if k[0] == model and k[1] == "H100"
                and (r := _ratio(per)) is not None]
        return max(vals) if vals else None
    return q


def infeasible(cells: Cells) -> float:
    return float(sum(_cost(per.get(m)) is None for k, per in cells.items() if k[1] == "H100"
                     for m in ("col", "afd", "cad") if m in per))


def strictly_cheapest(cells: Cells) -> float:
    return float(sum((r := _ratio(per)) is not None and r > 1 + 1e-9
                     for k, per in cells.items() if k[1] == "H100"))


def bnb_mean_stages(model: str):
    def q(cells: Cells) -> float | None:
        vals = [float(r["stages_per_token"]) for k, per in cells.items()
                if k[0] == model and k[1] == "H100" and (r := per.get("bnb")) is not None
                and r.get("stages_per_token") is not None]
        return sum(vals) / len(vals) if vals else None
    return q


def fig9_table(cells: Cells) -> list[list[Any]]:
    """Per H100 cell: COL / AFD / CAD / B&B $/M (✗: no plan), ratio, B&B stages and T_rtt."""
    out = []
    for k in sorted(_h100(cells)):
        per = cells[k]
        vals = ["--" if m not in per else "✗" if (c := _cost(per[m])) is None else f"{c:.4g}"
                for m in ("col", "afd", "cad", "bnb")]
        b = per.get("bnb") or {}
        r = _ratio(per)
        out.append([k[0], f"{k[2] // 1024}K", f"{k[3]:g}", *vals,
                    "--" if r is None else f"{r:.3f}", b.get("stages_per_token"),
                    b.get("t_rtt_ms"), "yes" if (b.get("search") or {}).get("timed_out")
                    else ""])
    return out


def causes(cells: Cells, out: Path, time_limit: float, cached: bool) -> list[list[Any]]:
    """Each quantity on the records and under each perturbation (H100 cells; ``cached``: no
    solving, a method not solved yet makes the perturbation's values n/a)."""
    h100 = _h100(cells)
    solver = oc.cached_solver(out) if cached else oc.sweep_solver(out, time_limit)
    perturbed, missing = {}, {}
    for p in PERTURBATIONS:
        print(f"# {p.name}: {oc.solved_count(h100, p)} methods to solve", file=sys.stderr)
        raw = oc.perturbed_cells(h100, p, solver)
        perturbed[p.name], missing[p.name] = oc.as_cells(raw), oc.unsolved(raw)
    quantities = [(f"Fig. 9 {m.split('-')[0]} max best baseline / B&B", max_ratio(m))
                  for m in MODELS]
    quantities += [("Fig. 9 baseline configurations infeasible", infeasible),
                   ("Fig. 9 settings B&B strictly cheapest", strictly_cheapest)]
    quantities += [(f"Fig. 10 {m.split('-')[0]} B&B stages per token (mean)",
                    bnb_mean_stages(m)) for m in MODELS]
    return [oc.cause_row(name, q, h100, perturbed, missing=missing) for name, q in quantities]


def price_bound_rows(fig13: Sequence[f13.Fig13Cell], scale: float = 1.1) -> list[list[Any]]:
    """Fig. 13 reading (a) with the partner's price × ``scale``, bounded without solving: every
    plan's cost T_rtt · Σ price / b rises at most × scale, so the heterogeneous optimum does,
    and (a) falls at most to (a) / scale; an H100-only optimum keeps its cost (it stays the
    optimum: every other plan's cost only rises), so (a) stays."""
    out = []
    for partner in f13.PARTNERS:
        mine = [c for c in fig13 if c.partner == partner and c.reading_a is not None]
        if not mine:
            continue
        lo = [c.reading_a if set(c.gpus) == {f13.HOME} else c.reading_a / scale for c in mine]
        uses = sum(partner in c.gpus for c in mine)
        out.append([f"Fig. 13 H100+{partner} (a) max", f"{max(c.reading_a for c in mine):.3f}",
                    f"≥ {max(lo):.3f}", f"{uses} of {len(mine)} plans use the {partner}"])
        out.append([f"Fig. 13 H100+{partner} (a) mean",
                    f"{sum(c.reading_a for c in mine) / len(mine):.3f}",
                    f"≥ {sum(lo) / len(lo):.3f}", ""])
    return out


def _raw_cells(folder: str) -> Cells:
    """Records under ``folder`` by cell and method, as read (not re-evaluated: they may come
    from another revision of the cost model)."""
    out: Cells = {}
    for rec in load_records([folder]):
        key = (rec["model"], "+".join(rec["gpus"]), int(rec["context"]), float(rec["slo_ms"]))
        out.setdefault(key, {})[rec["method"]] = rec
    return out


def compare_rows(cells: Cells, other: Cells) -> list[list[Any]]:
    """Per H100 cell and method present in ``other``: $/M here → there (✗: no plan), and the
    infeasible baseline configurations on each side."""
    out = []
    for k in sorted(_h100(other)):
        vals = []
        for m in ("col", "afd", "cad", "bnb"):
            if m not in other[k]:
                vals.append("--")
                continue
            a, b = _cost((cells.get(k) or {}).get(m)), _cost(other[k][m])
            vals.append(f"{'✗' if a is None else f'{a:.4g}'} → {'✗' if b is None else f'{b:.4g}'}")
        out.append([k[0], f"{k[2] // 1024}K", f"{k[3]:g}", *vals])
    n_here = infeasible({k: {m: r for m, r in cells.get(k, {}).items() if m in other[k]}
                         for k in _h100(other)})
    out.append(["infeasible baseline configurations", "", "", f"{n_here:g} → "
                f"{infeasible(_h100(other)):g}", "", "", ""])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+")
    p.add_argument("--out", default="results/opweave-causes")
    p.add_argument("--fig14", default=None)
    p.add_argument("--compare", default=None,
                   help="records of another revision (e.g. another crossing rule): the H100 "
                        "cells side by side, not re-evaluated")
    p.add_argument("--time-limit", type=float, default=600.0)
    p.add_argument("--cached", action="store_true",
                   help="solve nothing: spread and causes from the records under --out so far")
    p.add_argument("--no-causes", action="store_true",
                   help="no solving: neither the spread sensitivity nor the causes")
    args = p.parse_args(argv)
    rows = figure_rows(load_records(args.records))
    cells_ = by_cell(rows)
    cells = record_cells(cells_)
    print(f"{len(rows)} records\n\n### Fig. 9 cells (model T_rtt mean; OpWeave: measured p95)\n")
    print(_md(["model", "ctx", "SLO ms", "COL", "AFD", "CAD", "B&B", "best baseline / B&B",
               "B&B stages/token", "B&B T_rtt ms", "B&B stopped at limit"], fig9_table(cells)))
    if not args.no_causes:
        print("\n### Fig. 9 spread sensitivity\n")
        spread_out = Path(args.out) / "spread"
        pts = sp.spread_points(_h100(cells), sp.SPREADS,
                               sp.cached_resolver(spread_out) if args.cached else
                               sp.sweep_resolver(spread_out, args.time_limit))
        print(_md(sp.SPREAD_HEADERS, sp.spread_rows(pts)))
        print()
        print(_md(["cell", *(f"s = {x.spread:g}" for x in pts),
                   f"no plan at s = {pts[-1].spread:g}"], sp.ratio_grid(pts)))
    print("\n### Verdicts\n")
    print(_md(HEADERS, summary_rows(cells_)))
    print(f"\nB&B searches stopped at their time limit: "
          f"{', '.join(incomplete_searches(cells_)) or 'none'}")
    fig13 = f13.fig13_cells(cells)
    print("\n### Fig. 13 both ways\n")
    print(_md(f13.DETAIL_HEADERS, f13.detail_rows(fig13), 3))
    print("\n### Fig. 13: partner price +10 % (bound, no solve)\n")
    print(_md(["quantity", "records", "partner price x1.1", "evidence"], price_bound_rows(fig13)))
    if not args.no_causes:
        print("\n### Causes: each quantity under one changed input\n")
        print(_md(["quantity", "records", *(x.name for x in PERTURBATIONS), "largest mover"],
                  causes(cells, Path(args.out), args.time_limit, args.cached)))
    if args.compare:
        print(f"\n### H100 cells: these records → {args.compare}\n")
        print(_md(["model", "ctx", "SLO ms", "COL", "AFD", "CAD", "B&B"],
                  compare_rows(cells, _raw_cells(args.compare))))
    if args.fig14:
        pts14 = fig14_rows(args.fig14)
        print("\n### Fig. 14\n")
        print(_md(["latency µs", "GB/s", "COL", "AFD", "CAD", "B&B", "B&B cheapest",
                   "best baseline / B&B", "B&B stages/token", "mixes"], pts14))
        print()
        print(_md(HEADERS, fig14_summary(pts14)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
