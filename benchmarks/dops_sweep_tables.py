"""Print the DOPS side-by-side tables (docs/dops_analyses.md §5) from the records of
``benchmarks/dops_sweep.sh``: per-model geomean speedups over PD against the paper's seven
values, Fig. 7 ranges, the winning static policy per workload, Fig. 10 medians and
co-utilisation, and the worst Bifocal/PD ratio (issue 22 item 4: never below 1/1.02).

    python benchmarks/dops_sweep_tables.py [RECORDS_DIR]   # default results/bench/dops/cache/dops
    python benchmarks/dops_sweep_tables.py --docs docs/dops_analyses.md   # rewrite §5 in place

Records of an older build (no KV reservation, or a method run under other settings than its
current defaults, e.g. Bifocal before the copy cost) are left out and counted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections import Counter
from pathlib import Path

from opt.app.runs.dops_tables import fig7, fig10, geomean_table, insights, static_winners
from opt.app.runs.sweep import same_settings, speedups, usable
from opt.app.runs.sweep_calls import SolveCall
from opt.common.jsonio import read_json
from opt.common.report import markdown_table

BEGIN, END = "<!-- dops-sweep-tables:begin -->", "<!-- dops-sweep-tables:end -->"


def current(rec: dict, settings: dict[str, dict | None]) -> bool:
    """A record of the current build: KV reserved and the method's current settings
    (``settings``: method -> its settings, filled on first use)."""
    m = rec["method"]
    if m not in settings:
        settings[m] = SolveCall().settings(m)
    return bool(rec.get("kv_reserved")) and same_settings(rec, settings[m])


def _md(headers: list[str], rows: list[list]) -> str:
    return markdown_table(headers, rows, 3)


def main(folder: str = "results/bench/dops/cache/dops") -> None:
    records = [read_json(p) for p in sorted(Path(folder).rglob("*.json"))]
    records = [r for r in records if isinstance(r, dict) and "method" in r]
    settings: dict[str, dict | None] = {}
    fresh = [current(r, settings) for r in records]
    stale = [r for r, ok in zip(records, fresh) if not ok]  # an older build: rerun to replace
    records = [r for r, ok in zip(records, fresh) if ok]
    print(f"{len(records)} records of the current build ({len(stale)} older ones left out), "
          f"{sum(usable(r) for r in records)} usable\n")
    geo = geomean_table(records)
    print("### Geomean speedup over PD per model\n")
    print(_md(["model", "platform", "workloads", "Bifocal", "HEFT", "best static",
               "worst Bifocal", "paper Bifocal", "verdict"],
              [[g["model"], g["platform"], g["workloads"], g["bifocal"], g["heft"],
                g["best_static"], g["worst_bifocal"], g["paper"], g["verdict"]] for g in geo]))
    print("\n### DOPS Fig. 7 (HP32)\n")
    for f in fig7(records):
        rows = [[p, d, v] for (p, d), v in f["speedups"].items()]
        print(f"{f['model']} batch {f['batch']}: range {f['range']} vs paper {f['paper']} "
              f"→ {f['verdict']}; static policies below PD somewhere: "
              f"{', '.join(f['static_below_pd']) or 'none'}\n")
        print(_md(["prefill", "decode", "Bifocal / PD"], rows) + "\n")
    print("### Winning static policy per workload (count per model)\n")
    wins = static_winners(records)
    per_model = Counter((k[0], k[1], m) for k, m in wins.items())
    print(_md(["model", "platform", "winner", "workloads"],
              [[a, b, c, n] for (a, b, c), n in sorted(per_model.items())]))
    print("\n### DOPS Fig. 10 (Llama-2-7B, HP64)\n")
    print(_md(["method", "workloads", "median speedup", "p90 speedup", "median U_npu",
               "median U_pim", "median U_co"],
              [[r["method"], r["workloads"], r["median"], r["p90"], r["u_npu"], r["u_pim"],
                r["u_co"]] for r in fig10(records)]))
    scaling = [read_json(p) for p in sorted(Path(folder).parent.joinpath("scaling")
                                            .rglob("*.json"))]
    scaling = [r for r in scaling if isinstance(r, dict) and r.get("kv_reserved") is not False
               and "method" in r]
    if scaling:
        from opt.costlib.hardware import bundled_catalog

        print("\n### DOPS Insights 1–4 (Bifocal, HP0 → HP32 → HP64 → HP128): the increment "
              "with the largest marginal gain\n")
        print(_md(["insight", "workloads", "paper (first → last)", "ours (each workload)",
                   "verdict"],
                  [[i["insight"], i["workloads"], " → ".join(i["paper"]),
                    "; ".join(str(o) for o in i["ours"]), i["verdict"]]
                   for i in insights(scaling, bundled_catalog())]))
    sp = speedups(records)
    worst = sorted((v, k) for (k, m), v in sp.items() if m == "bifocal" and v is not None)[:8]
    print("\n### Worst Bifocal / PD workloads\n")
    print(_md(["workload", "Bifocal / PD", "HEFT / PD"],
              [[" ".join(map(str, k)), v, sp.get((k, "heft"))] for v, k in worst]))
    bad = [k for v, k in worst if v < 1 / 1.02]
    print(f"\nworkloads where Bifocal is more than 2 % slower than PD: {len(bad)}"
          + (f" ({'; '.join(' '.join(map(str, k)) for k in bad)})" if bad else ""))


def rewrite_docs(doc: Path, folder: str) -> None:
    """Replace the text between the markers of ``doc`` with the tables."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(folder)
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = ("\n_Generated by `python benchmarks/dops_sweep_tables.py --docs "
            f"{doc.as_posix()}` from `{folder}`._\n\n" + buf.getvalue())
    doc.write_text(head + BEGIN + "\n" + body + END + tail)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default="results/bench/dops/cache/dops")
    ap.add_argument("--docs", type=Path, help="rewrite the marked section of this file")
    args = ap.parse_args()
    if args.docs:
        rewrite_docs(args.docs, args.folder)
    else:
        main(args.folder)
    sys.exit(0)
