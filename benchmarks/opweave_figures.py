"""OpWeave's evaluation figures side by side (docs/serving.md "Measured").

    python benchmarks/opweave_figures.py tables RECORDS_DIR... [--fig14 DIR] [--mu1 DIR]
                                                [--ablation DIR]
    python benchmarks/opweave_figures.py fig14 [--out results/opweave-fig14] [--points all]
    python benchmarks/opweave_figures.py ablation [--out results/opweave-ablation]
    python benchmarks/opweave_figures.py spread RECORDS_DIR... [--out results/opweave-spread]

``tables`` reads the records of ``hetopt sweep serving`` (one JSON per model, GPU mix,
context, SLO and method), rebuilds each record's instance with the sweep's own builder
(default grid and TP degrees, as ``hetopt sweep serving`` without options), re-evaluates its
plan with the plan checker and prints Markdown tables for Fig. 10 (stages, inter-node payload,
price-weighted occupancy), Fig. 11 (mean per-GPU batch), Fig. 13 (heterogeneous against
homogeneous B&B) and Table 3 (search statistics), each with the paper's value, ours, a verdict
and a reason; with ``--fig14`` also the network sweep, with ``--ablation`` the planner
ablation's records, with ``--mu1`` AFD / CAD restricted to one microbatch on the Fig. 10 cells
(solved, sub-second, when their records are missing). The quantities are those of
:mod:`opt.serving.figures`.

``ablation`` solves the Table 3 case (Gemma-3-27B, 32K, 60 ms) with B&B's frontier and bound
pruning switched off (each, and both), resumably.

``spread`` prints Fig. 9's step-time spread sensitivity (p95 = T_rtt × (1 + s), s ∈ {0, 0.05,
0.1, 0.2}: :mod:`opt.app.reproduction.opweave_spread`) over the H100 records, re-solving
(resumably, under ``--out``) each method whose plan no longer meets the SLO.

``fig14`` runs OpWeave's network sweep (Gemma-3-27B, 8K, 60 ms; COL / AFD / CAD / B&B),
resumably: one folder per network point under ``--out``, records as ``hetopt sweep serving``
writes them, the network set by overriding every node type's ``network`` link in the bundled
catalog.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from opt.app.reproduction import opweave_spread as sp
from opt.app.reproduction.opweave_fig13 import DETAIL_HEADERS
from opt.app.reproduction.opweave_summary import (
    HEADERS,
    fig14_summary,
    incomplete_searches,
    summary_rows,
)
from opt.app.reproduction.opweave_tables import (
    TIGHT_SLO,
    _md,
    ablation_rows,
    by_cell,
    fig10_rows,
    fig11_rows,
    fig13_rows,
    fig14_rows,
    figure_rows,
    load_records,
    microbatch_counts,
    mu1_rows,
    table3_rows,
)
from opt.app.runs.serving_sweep import ServingSweepOptions, cells, run_serving_sweep
from opt.app.runs.sweep import Progress
from opt.costlib.hardware import Catalog, load_catalog
from opt.costlib.latency import Link
from opt.costlib.modelcard import load_cards

#: Fig. 14 points: (latency µs, bandwidth GB/s); latency sweep at 32 GB/s, bandwidth at 20 µs.
LATENCIES_US = (5, 20, 50, 200, 500)
BANDWIDTHS_GBPS = (1, 2, 4, 8, 16, 32)
FIG14_MODEL, FIG14_CONTEXT, FIG14_SLO_MS = "gemma-3-27b", 8192, 60.0
FIG14_MIXES = ("H100,L40S",)
METHODS = ("col", "afd", "cad", "bnb")


# ---- Fig. 14: the network sweep ------------------------------------------------------------

def fig14_points(which: str) -> list[tuple[float, float]]:
    """(latency µs, bandwidth GB/s) points: ``all``, ``latency`` (the latency sweep),
    ``reduced`` (the latency sweep and the bandwidth extremes 1 and 32 GB/s)."""
    lat = [(float(x), 32.0) for x in LATENCIES_US]
    bw = [(20.0, float(b)) for b in BANDWIDTHS_GBPS]
    if which == "latency":
        return lat
    if which == "reduced":
        bw = [p for p in bw if p[1] in (1.0, 32.0)]
    elif which != "all":
        raise ValueError(f"points must be all | latency | reduced, got {which!r}")
    return list(dict.fromkeys(lat + bw))


def point_folder(out: Path, latency_us: float, bandwidth_gbps: float) -> Path:
    return Path(out) / f"lat{latency_us:g}us-bw{bandwidth_gbps:g}GBps"


def fig14_link(latency_us: float, bandwidth_gbps: float) -> Link:
    """The inter-node link of a Fig. 14 point (latency µs, bandwidth GB/s = 10⁹ bytes/s)."""
    return Link(latency_us * 1e-6, bandwidth_gbps * 1e9,
                f"OpWeave Fig. 14 point: {latency_us:g} us, {bandwidth_gbps:g} GB/s")


def with_network(cat: Catalog, latency_us: float, bandwidth_gbps: float) -> Catalog:
    """``cat`` with every node type's network link set to the point's (what the roofline
    reads; the calibrated model's measured send/recv is overridden by the builder's
    ``network`` option, which :func:`run_fig14` passes too)."""
    link = fig14_link(latency_us, bandwidth_gbps)
    return replace(cat, node_types={k: replace(nt, network=link)
                                    for k, nt in cat.node_types.items()})


def run_fig14(out: Path, points: Sequence[tuple[float, float]], mixes: Sequence[str],
              methods: Sequence[str], time_limit: float, gpu_cost: str = "calibrated") -> None:
    """Solve every point × GPU mix × method (resumable; records under ``point_folder``): every
    GPU type's inter-node link is the point's — the catalog's and, under calibrated costs, the
    measured send/recv of the calibrated GPUs alike."""
    from opt.app.runs.sweep_calls import SolveCall

    base, cards = load_catalog(), load_cards()
    todo = cells([FIG14_MODEL], list(mixes), [FIG14_CONTEXT], [FIG14_SLO_MS])
    solve = SolveCall(time_limit=time_limit)
    progress = Progress(len(points) * len(todo) * len(methods), stream=sys.stderr)
    for lat, bw in points:
        run_serving_sweep(todo, methods, point_folder(out, lat, bw), solve,
                          catalog=with_network(base, lat, bw), cards=cards,
                          options=ServingSweepOptions(gpu_cost=gpu_cost,
                                                      network=fig14_link(lat, bw),
                                                      progress=progress))


#: Planner ablation (OpWeave Table 3): B&B pruning switches off, one at a time and both.
ABLATIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "no-frontier": (("frontier", False),), "no-bounds": (("bounds", False),),
    "neither": (("frontier", False), ("bounds", False))}


def run_ablation(out: Path, mixes: Sequence[str], variants: Sequence[str],
                 time_limit: float) -> None:
    """B&B with each ablation variant on Gemma-3-27B, 32K, 60 ms (resumable; records under
    ``out/<variant>``; the default planner's records are the sweep's)."""
    from opt.app.runs.sweep_calls import SolveCall

    cat, cards = load_catalog(), load_cards()
    todo = cells(["gemma-3-27b"], list(mixes), [32768], [60.0])
    progress = Progress(len(variants) * len(todo), stream=sys.stderr)
    for name in variants:
        solve = SolveCall(time_limit=time_limit, params=ABLATIONS[name], params_prefix="bnb")
        run_serving_sweep(todo, ["bnb"], Path(out) / name, solve, catalog=cat, cards=cards,
                          options=ServingSweepOptions(progress=progress))


def run_mu1(out: Path) -> list[dict[str, Any]]:
    """AFD and CAD restricted to one microbatch on the Fig. 10 cells (H100, 128K, tight SLO),
    as OpWeave's AFD / CAD plans are: resumable records under ``out``; returns them."""
    from opt.app.runs.sweep_calls import SolveCall

    cat, cards = load_catalog(), load_cards()
    recs = []
    for model, slo in TIGHT_SLO.items():
        done = run_serving_sweep(cells([model], ["H100"], [131072], [slo]), ["afd", "cad"],
                                 out, SolveCall(params=(("microbatches", (1,)),)),
                                 catalog=cat, cards=cards)
        recs += [{**rec, "_path": "mu1"} for rec, _ in done]
    return recs


def print_tables(folders: Sequence[str], fig14: str | None, mu1: str | None = None,
                 ablation: str | None = None) -> None:
    """Every side-by-side table, Markdown, to stdout."""
    rows = figure_rows(load_records(folders))
    cells_ = by_cell(rows)
    print(f"{len(rows)} records, {sum(r.figs is not None for r in rows)} with a plan, GPU cost "
          f"{', '.join(sorted({r.rec.get('gpu_cost', 'roofline') for r in rows}))}\n")
    print("### Side by side, as the paper compares (opt.app.reproduction.opweave_summary)\n")
    print(_md(HEADERS, summary_rows(cells_)))
    stopped = incomplete_searches(cells_)
    print(f"\nB&B searches stopped at their time limit (incumbent plans): "
          f"{', '.join(stopped) or 'none'}\n")
    print("### Fig. 10 (H100, 128K, tight SLO): CAD / AFD / B&B\n")
    print(_md(["model", "quantity", "OpWeave CAD / AFD / OpWeave", "hetopt CAD / AFD / B&B",
               "verdict", "evidence"],
              fig10_rows(cells_)))
    if mu1:
        print("\nAFD / CAD restricted to μ = 1 (Fig. 10 cells): sweep plan → μ = 1 plan\n")
        print(_md(["model", "method", "μ", "$ per M tokens", "occupancy %"],
                  mu1_rows(figure_rows(run_mu1(Path(mu1))), cells_)))
    print("\nAFD / CAD plans by microbatches (all GPU mixes and contexts):\n")
    print(_md(["method", "SLO", "plans", "μ = 1", "μ > 1"], microbatch_counts(rows)))
    print("\n### Fig. 11 (H100, relaxed SLO): per-GPU batch / B&B's, COL / AFD / CAD\n")
    print(_md(["model", "reading", "OpWeave", "hetopt 8K ; 32K ; 128K", "geomean", "verdict",
               "reason"],
              fig11_rows(cells_)))
    detail, summary = fig13_rows(cells_)
    print("\n### Fig. 13 (relaxed SLO): heterogeneous B&B against H100 B&B (a) and the best "
          "single type (b)\n")
    print(_md(DETAIL_HEADERS, detail, 3))
    print()
    print(_md(["figure", "OpWeave", "hetopt", "verdict", "evidence"], summary))
    print("\n### Table 3 (Gemma-3-27B, 32K, 60 ms): B&B search\n")
    print(_md(["GPUs", "OpWeave", "space", "candidates", "nodes", "evaluations", "exact evals",
               "runtime s (1 core, shared)", "verdict"], table3_rows(cells_)))
    if ablation:
        print("\nAblation variants (B&B pruning switches off) against the default planner:\n")
        print(_md(["GPUs", "variant", "same plan", "$ per M tokens", "candidates", "nodes",
                   "evaluations", "runtime s", "timed out"], ablation_rows(ablation, cells_)))
    if fig14:
        print_fig14(fig14)


def print_fig14(fig14: str) -> None:
    """The network sweep's table and its side-by-side rows (opweave_summary.fig14_summary)."""
    points = fig14_rows(fig14)
    print("\n### Fig. 14 (Gemma-3-27B, 8K, 60 ms): $ per M tokens, cheapest over mixes\n")
    print(_md(["latency µs", "GB/s", *METHODS, "B&B cheapest", "best baseline / B&B",
               "B&B stages/token", "mixes"], points))
    print()
    print(_md(HEADERS, fig14_summary(points)))


def print_spread(folders: Sequence[str], out: str, time_limit: float) -> None:
    """Fig. 9's spread sensitivity over the H100 cells of the records (Markdown to stdout)."""
    cells_: dict[tuple, dict[str, dict[str, Any]]] = {}
    for rec in load_records(folders):
        if rec["gpus"] == ["H100"] and rec["method"] in METHODS:
            key = (rec["model"], "H100", int(rec["context"]), float(rec["slo_ms"]))
            cells_.setdefault(key, {})[rec["method"]] = rec
    points = sp.spread_points(cells_, sp.SPREADS, sp.sweep_resolver(out, time_limit))
    print(_md(sp.SPREAD_HEADERS, sp.spread_rows(points)))
    print()
    print(_md(["cell", *(f"s = {p.spread:g}" for p in points), "baselines without a plan at "
               f"s = {points[-1].spread:g}"], sp.ratio_grid(points)))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tables", help="print the side-by-side tables from sweep records")
    t.add_argument("records", nargs="*", help="folders of hetopt sweep serving records "
                                              "(none: only the --fig14 tables)")
    t.add_argument("--fig14", default=None, help="folder of the fig14 records")
    t.add_argument("--ablation", default=None, help="folder of the ablation records")
    t.add_argument("--mu1", default=None, help="folder for the μ = 1 AFD / CAD records "
                                               "(solved when missing)")
    f = sub.add_parser("fig14", help="run the network sweep (resumable)")
    f.add_argument("--out", default="results/opweave-fig14")
    f.add_argument("--points", default="all", choices=["all", "latency", "reduced"])
    f.add_argument("--mixes", nargs="+", default=list(FIG14_MIXES))
    f.add_argument("--methods", nargs="+", default=list(METHODS))
    f.add_argument("--time-limit", type=float, default=600.0)
    f.add_argument("--gpu-cost", default="calibrated", choices=["calibrated", "roofline"])
    a = sub.add_parser("ablation", help="run the planner ablation of Table 3 (resumable)")
    a.add_argument("--out", default="results/opweave-ablation")
    a.add_argument("--mixes", nargs="+", default=["H100"])
    a.add_argument("--variants", nargs="+", default=list(ABLATIONS), choices=list(ABLATIONS))
    a.add_argument("--time-limit", type=float, default=300.0)
    r = sub.add_parser("spread", help="Fig. 9's step-time spread sensitivity (re-solves)")
    r.add_argument("records", nargs="+", help="folders of the H100 sweep records")
    r.add_argument("--out", default="results/opweave-spread")
    r.add_argument("--time-limit", type=float, default=600.0)
    args = p.parse_args(argv)
    if args.cmd == "spread":
        print_spread(args.records, args.out, args.time_limit)
        return 0
    if args.cmd == "ablation":
        run_ablation(Path(args.out), args.mixes, args.variants, args.time_limit)
        return 0
    if args.cmd == "fig14":
        run_fig14(Path(args.out), fig14_points(args.points), args.mixes, args.methods,
                  args.time_limit, args.gpu_cost)
        return 0
    if not args.records and args.fig14:
        print_fig14(args.fig14)
        return 0
    print_tables(args.records, args.fig14, args.mu1, args.ablation)
    return 0


if __name__ == "__main__":
    sys.exit(main())
