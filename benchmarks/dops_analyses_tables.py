"""Markdown tables of docs/dops_analyses.md from the stored results (no solving).

    python benchmarks/dops_analyses_tables.py replay results/replay/dops-qwen-1.8b/HP32/<trace>
    python benchmarks/dops_analyses_tables.py scaling results/scaling-L4 [--models ...]
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

from opt.app.runs.scaling import DEFAULT_PLATFORMS, insight_table, summarise
from opt.costlib.hardware import bundled_catalog

METHODS = ["bifocal", "pd", "af", "pd+linear", "pd+attn", "pd+ffn"]


def _md(headers, rows) -> str:
    def cell(v):
        if v is None:
            return "–"
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def replay(folder: Path) -> None:
    rows = []
    for m in METHODS:
        path = folder / f"{m}.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        rows.append([m, r["batches"], round(r["mean_batch"], 2), r["distinct_shapes"],
                     *(r[k][q] * 1e3 for k in ("ttft_s", "tbt_s", "e2e_s")
                       for q in ("median", "p90", "p99")),
                     round(r["busy_fraction"], 2), r["schedules_computed"],
                     round(r["schedule_s"], 0)])
    print(_md(["method", "batches", "mean B", "shapes", "TTFT p50", "TTFT p90", "TTFT p99",
               "TBT p50", "TBT p90", "TBT p99", "E2E p50", "E2E p90", "E2E p99", "busy",
               "schedules", "sched s"], rows))


def scaling(folder: Path, models: list[str] | None) -> None:
    recs = [json.loads(Path(f).read_text()) for f in glob.glob(str(folder / "*/*/*/bifocal.json"))]
    if models:
        recs = [r for r in recs if r["model"] in models]
    plats = list(DEFAULT_PLATFORMS)
    summ = [r for r in summarise(recs, plats, bundled_catalog())
            if all(r["makespan"][p] for p in plats)]
    incs = [f"{a}->{c}" for a, c in zip(plats, plats[1:])]
    for model in sorted({r["model"] for r in summ}):
        rows = []
        for r in (x for x in summ if x["model"] == model):
            rows.append([r["batch"], r["prefill"], r["decode"],
                         *(round(r["speedup"][p], 2) for p in plats[1:]),
                         *((f"**{r['marginal'][i]:.3f}**" if i == r["best_increment"]
                            else f"{r['marginal'][i]:.3f}") for i in incs),
                         r["payoff_platform"], r["saturation_platform"]])
        print(f"\n#### {model}\n")
        print(_md(["B", "prefill", "decode", *(f"S {p}" for p in plats[1:]),
                   *(f"m {i}" for i in incs), "payoff", "saturates"], rows))
    print("\n#### factor levels (mean over the other factors)\n")
    for model in [None] + sorted({r["model"] for r in summ}):
        sub = [r for r in summ if model is None or r["model"] == model]
        rows = [[x["factor"], x["level"], x["workloads"], x["mean_payoff_index"],
                 x["mean_saturation_index"], x[f"mean_speedup_{plats[-1]}"]]
                for x in insight_table(sub, plats) if model is None or x["factor"] != "model"]
        print(f"\n{'all models' if model is None else model}:\n")
        print(_md(["factor", "level", "workloads", "mean payoff index (0=HP0..3=HP128)",
                   "mean saturation index", f"mean S {plats[-1]}"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["replay", "scaling"])
    ap.add_argument("folder")
    ap.add_argument("--models", nargs="+")
    args = ap.parse_args()
    if args.what == "replay":
        replay(Path(args.folder))
    else:
        scaling(Path(args.folder), args.models)


if __name__ == "__main__":
    main()
