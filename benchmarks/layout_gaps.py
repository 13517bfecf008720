"""WLA's gap to the exact joint placement + format optimum on small LLM slices (P2, problems.md §2).

Instances: seeded 1-layer slices of dops-qwen-1.8b, qwen-1.8b and llama-2-7b on HP32 (NPU + 2
PIM), prefill 8–32, 0–1 decode steps, batch 1–4 (19–38 tasks, 7 weight blocks). Each is solved
with

- ``cpsat-layout`` over linear / npu_opt / pim_opt (the paper's WLA formats; warm-started
  from the best layout heuristic, ``--time-limit``, ``--num-workers``),
- ``bifocal/linear``, ``bifocal/wla``, ``bifocal/dual``, ``pd/linear``,
- ``cpsat-formats`` on Bifocal/Linear's placement and orders (exact formats, fixed placement),
- and, for the extension, ``cpsat-layout`` over all four formats under a budget of 1.5× the
  linear bytes against ``bifocal/wla+dual`` under the same budget.

Every result is validated by ``solvers.solve``. Per instance one JSON file is written under
``--out`` as it finishes (a rerun reuses it; ``--fresh`` recomputes). The table reports
makespans relative to the joint optimum (``gap = makespan / optimum − 1``) on the instances
CP-SAT proved OPTIMAL; a method below a proven optimum would be a bug (printed, exit 1).

    python benchmarks/layout_gaps.py [--instances 12] [--time-limit 30] [--num-workers 2]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from instances.generated import LlmCase
from opt.app.runs.sweep import geomean
from opt.common.jsonio import read_json, write_json
from opt.common.report import table
from opt.placement.layout import budget_from, with_budget
from solvers import solve

WLA_FORMATS = ["linear", "npu_opt", "pim_opt"]
HEURISTICS = ("pd/linear", "bifocal/linear", "bifocal/dual", "bifocal/wla")


def layout_case(seed: int) -> LlmCase:
    rng = random.Random(seed)
    return LlmCase(model=rng.choice(("dops-qwen-1.8b", "qwen-1.8b", "llama-2-7b")),
                   platform="HP32", prefill=rng.choice((8, 16, 32)),
                   decode=rng.choice((0, 0, 1)), batch=rng.choice((1, 2, 4)))


def run_instance(case: LlmCase, time_limit: float, num_workers: int) -> dict[str, Any]:
    inst = case.build()
    rec: dict[str, Any] = {"case": case.to_dict(), "tasks": inst.n_tasks,
                           "blocks": len(inst.block_ids), "methods": {}}

    def put(label: str, res) -> None:
        rec["methods"][label] = {"status": res.status, "objective": res.objective,
                                 "lower_bound": res.lower_bound, "runtime_s": res.runtime_s,
                                 "format_mix": res.stats.get("format_mix")}

    put("joint", solve(inst, "cpsat-layout", time_limit=time_limit, num_workers=num_workers,
                       seed=0, formats=WLA_FORMATS))
    for m in HEURISTICS:
        put(m, solve(inst, m))
    put("formats|bifocal", solve(inst, "cpsat-formats", time_limit=time_limit,
                                 num_workers=num_workers, seed=0, formats=WLA_FORMATS))
    budgeted = with_budget(inst, budget_from(inst, factor=1.5))
    put("joint+dual@1.5", solve(budgeted, "cpsat-layout", time_limit=time_limit,
                                num_workers=num_workers, seed=0))
    put("bifocal/wla+dual@1.5", solve(budgeted, "bifocal/wla+dual"))
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=12)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--out", default="results/layout-gaps")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recs = []
    seen: set = set()
    seed = 0
    while len(recs) < args.instances:
        case = layout_case(seed)
        seed += 1
        if case in seen:
            continue
        seen.add(case)
        path = out / f"{len(recs):02d}.json"
        rec = None
        if path.exists() and not args.fresh:
            rec = read_json(path)
            if rec.get("case") != case.to_dict():
                rec = None
        if rec is None:
            t0 = time.perf_counter()
            rec = run_instance(case, args.time_limit, args.num_workers)
            rec["wall_s"] = time.perf_counter() - t0
            write_json(rec, path)
        print(f"[{len(recs) + 1}/{args.instances}] {case.model} p{case.prefill} "
              f"d{case.decode} b{case.batch}: joint {rec['methods']['joint']['status']}",
              file=sys.stderr)
        recs.append(rec)
    labels = ["bifocal/wla", "bifocal/linear", "pd/linear", "bifocal/dual", "formats|bifocal"]
    rows, bugs = [], []
    for rec in recs:
        c, ms = rec["case"], rec["methods"]
        opt = ms["joint"]
        proven = opt["status"] == "OPTIMAL"
        row = [f"{c['model']} p{c['prefill']}-d{c['decode']}-b{c['batch']}", rec["tasks"],
               opt["status"], opt["objective"]]
        for lab in labels:
            v = ms[lab]["objective"]
            gap = v / opt["objective"] - 1 if v and opt["objective"] else None
            if proven and v is not None and v < opt["objective"] and lab != "bifocal/dual":
                bugs.append(f"BUG: {lab} {v} below the proven optimum {opt['objective']}")
            row.append(None if gap is None else 100 * gap)
        ext, ext_opt = ms["bifocal/wla+dual@1.5"], ms["joint+dual@1.5"]
        row.append(None if not ext_opt["objective"] else
                   100 * (ext["objective"] / ext_opt["objective"] - 1))
        row.append(" ".join(f"{f}:{n}" for f, n in (ms["bifocal/wla"]["format_mix"] or {}).items()))
        rows.append(row)
    print(table(["instance", "tasks", "joint", "optimum ns", *[f"{x} gap %" for x in labels],
                 "wla+dual gap % @1.5x", "WLA formats"], rows))
    proven = [r for r in recs if r["methods"]["joint"]["status"] == "OPTIMAL"]
    summary = []
    for lab in labels + ["bifocal/wla+dual@1.5"]:
        ref = "joint+dual@1.5" if lab.endswith("@1.5") else "joint"
        ratios = [r["methods"][lab]["objective"] / r["methods"][ref]["objective"]
                  for r in proven if r["methods"][ref]["status"] == "OPTIMAL"]
        if ratios:
            summary.append([lab, len(ratios), 100 * (geomean(ratios) - 1),
                            100 * (max(ratios) - 1), sum(x <= 1.0 + 1e-12 for x in ratios)])
    print()
    print(f"gap to the proven joint optimum ({len(proven)} of {len(recs)} instances proven; "
          f"bifocal/dual stores every block twice, so it may beat the 3-format optimum):")
    print(table(["method", "instances", "geomean gap %", "max gap %", "optimal"], summary))
    for b in bugs:
        print(b)
    return 1 if bugs else 0


if __name__ == "__main__":
    raise SystemExit(main())
