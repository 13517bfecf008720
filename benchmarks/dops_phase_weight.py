"""Evidence for a grid verdict's cause (docs/dops_analyses.md §5): Bifocal with another phase-term
weight λ (``lam``) on a model's §6.2 grid, against PD and default Bifocal from the grid's
records (read-only), per batch.

    python benchmarks/dops_phase_weight.py --records results/grid-records --out results/lam0 \\
        --model dops-qwen-1.8b --platform HP32 --lam 0 --batch 1 4

Runs the missing Bifocal records (resumable, ``hetopt sweep placement`` records of settings
``lam``) into ``--out``, then prints per workload PD / Bifocal at the default and at ``--lam``,
and per batch their geomeans over the workloads where all three exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from opt.app.reproduction.dops_tables import GRID_AXES
from opt.app.runs.sweep import Progress, SweepOptions, geomean, grid, run_sweep, usable
from opt.app.runs.sweep_calls import SolveCall
from opt.common.jsonio import read_json
from opt.common.report import markdown_table
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards


def _index(folder: Path) -> dict[tuple, dict]:
    recs = (read_json(p) for p in folder.rglob("*.json"))
    return {(r["prefill"], r["decode"], r["batch"], r["method"]): r for r in recs
            if isinstance(r, dict) and usable(r)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="dops-qwen-1.8b")
    ap.add_argument("--platform", default="HP32")
    ap.add_argument("--lam", type=float, default=0.0)
    ap.add_argument("--batch", type=int, nargs="+", default=list(GRID_AXES[2]))
    ap.add_argument("--no-run", action="store_true", help="only print from existing records")
    args = ap.parse_args(argv)
    call = SolveCall(time_limit=60.0, params=(("lam", args.lam),), params_prefix="bifocal")
    if not args.no_run:
        for b in args.batch:
            wl = grid([args.model], [args.platform], GRID_AXES[0], GRID_AXES[1], [b])
            run_sweep(wl, ["bifocal"], args.out, call, catalog=bundled_catalog(),
                      cards=bundled_cards(),
                      options=SweepOptions(paper_precision=True, progress=Progress(len(wl))))
    base = _index(args.records / args.model / args.platform)
    other = _index(args.out / args.model / args.platform)
    rows, per_batch = [], {}
    for p in GRID_AXES[0]:
        for d in GRID_AXES[1]:
            for b in args.batch:
                pd, bif = base.get((p, d, b, "pd")), base.get((p, d, b, "bifocal"))
                lam = other.get((p, d, b, "bifocal"))
                if pd and bif and lam:
                    x, y = pd["makespan"] / bif["makespan"], pd["makespan"] / lam["makespan"]
                    rows.append([p, d, b, x, y])
                    per_batch.setdefault(b, []).append((x, y))
    print(markdown_table(["prefill", "decode", "batch", "Bifocal / PD (default)",
                          f"Bifocal / PD (lam = {args.lam:g})"], rows, 3))
    print()
    print(markdown_table(["batch", "workloads", "geomean default", f"geomean lam = {args.lam:g}",
                          f"lam = {args.lam:g}: > 2 % slower than PD"],
                         [[b, len(v), geomean([x for x, _ in v]), geomean([y for _, y in v]),
                           sum(y < 1 / 1.02 for _, y in v)] for b, v in sorted(per_batch.items())],
                         3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
