"""Certified lower bounds (opt.placement.certified_bounds): tightness on small instances and certified gaps
of PD and Bifocal on full-size DOPS workloads.

``small``: on every bundled instance (known optimum) and on ``--cases`` generated small LLM
slices (instances.generated.gap_case, CP-SAT optimum within ``--time-limit``), prints the old
bound (critical path / work), the certified bound, each over the optimum, and the component
that gave it. A certified bound above a proven optimum is a bug (exit status 1).

``dops``: for every workload of the grid (full model, all layers), builds the instance, computes
the certified bound (timed, each component too), then solves with PD and Bifocal; prints
``gap = (makespan − bound) / makespan`` per method (and ``makespan / bound − 1``). ``--methods``
picks the methods (default PD and Bifocal); ``--improve`` adds Bifocal + the assignment-move
post-pass of ``heuristics.placement.improve`` (validated; used nowhere else). One JSON record
per workload under
``--out`` as soon as it finishes; a rerun reuses them (``--fresh`` recomputes).

    python benchmarks/certified_bounds.py small [--cases 12] [--time-limit 30]
    python benchmarks/certified_bounds.py dops --models dops-qwen-1.8b --platforms HP32 \\
        --prefill 128 512 1024 2048 --decode 128 1024 --batch 1 16
    python benchmarks/certified_bounds.py dops --models llama-2-7b --platforms HP64 \
        --prefill 128 1024 --decode 128 1024 --batch 1 16 --methods bifocal --improve

Machines here are shared and noisy: bounds and gaps are exact, timings are not (medians).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import instances
from instances.generated import gap_case
from opt.app.runs.sweep import grid
from opt.common.jsonio import read_json, write_json
from opt.common.report import table
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.lower_bounds import placement_lower_bound
from solvers.api import solve

METHODS = ("pd", "bifocal")
#: Bifocal + the assignment-move post-pass (``--improve``; heuristics.placement.improve)
IMPROVED = "bifocal+improve"


def small(args: argparse.Namespace) -> int:
    rows: list[list[Any]] = []
    ratios_new: list[float] = []
    ratios_old: list[float] = []
    bugs = 0
    named: list[tuple[str, Any, int | None]] = []
    for info, inst in instances.iter_instances("placement"):
        if len(inst.layout.formats) == 1:  # P2 optima are not P1 optima
            named.append((info.name, inst, info.optimum))
    seen: set[tuple] = set()
    seed = 1000
    while len([n for n in named if n[0].startswith("gap")]) < args.cases:
        case = gap_case(seed)
        seed += 1
        key = tuple(case.to_dict().values())
        if key in seen:
            continue
        seen.add(key)
        inst = case.build()
        res = solve(inst, "cpsat", time_limit=args.time_limit, num_workers=args.num_workers, seed=0)
        opt = res.objective if res.status == "OPTIMAL" else None
        label = (f"gap{seed - 1} {case.model} {case.platform} p{case.prefill} d{case.decode} "
                 f"b{case.batch}")
        named.append((label, inst, opt))
    for name, inst, opt in named:
        old = placement_lower_bound(inst)
        cert = certified_lower_bound(inst)
        if opt:
            ratios_new.append(cert.value / opt)
            ratios_old.append(old / opt)
            if cert.value > opt:
                bugs += 1
                print(f"BUG: {name}: certified bound {cert.value} > optimum {opt}")
        rows.append([name, inst.n_tasks, opt, old, cert.value,
                     f"{old / opt:.3f}" if opt else "-", f"{cert.value / opt:.3f}" if opt else "-",
                     cert.best, f"{cert.seconds * 1000:.0f}"])
    print(table(["instance", "tasks", "optimum", "old bound", "certified", "old/opt", "cert/opt",
                 "best component", "ms"], rows))
    if ratios_new:
        print(f"\n{len(ratios_new)} instances with a proven optimum: certified/optimum mean "
              f"{statistics.mean(ratios_new):.3f}, min {min(ratios_new):.3f}, "
              f"equal to the optimum on {sum(r == 1.0 for r in ratios_new)}; old/optimum mean "
              f"{statistics.mean(ratios_old):.3f}, min {min(ratios_old):.3f}")
    return 1 if bugs else 0


def dops(args: argparse.Namespace) -> int:
    cat, cards = bundled_catalog(), bundled_cards()
    out = Path(args.out)
    records: list[dict[str, Any]] = []
    workloads = grid(args.models, args.platforms, args.prefill, args.decode, args.batch)
    for i, wl in enumerate(workloads, start=1):
        path = out / wl.model / wl.platform / f"{wl.tag}.json"
        if path.exists() and not args.fresh:
            records.append(read_json(path))
            continue
        print(f"[{i}/{len(workloads)}] {wl.label()}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        inst = build_placement(cards[wl.model], cat.platform(wl.platform), cat,
                               Workload(wl.prefill, wl.decode, wl.batch), BuildOptions())
        build_s = time.perf_counter() - t0
        cert = certified_lower_bound(inst)
        rec: dict[str, Any] = {"model": wl.model, "platform": wl.platform,
                               "prefill": wl.prefill, "decode": wl.decode, "batch": wl.batch,
                               "tasks": inst.n_tasks, "time_unit": inst.time_unit,
                               "build_s": build_s, "bound": cert.to_dict(),
                               "old_bound": cert.component("critical_path").value
                               if cert.component("critical_path").value >=
                               cert.component("work_average").value
                               else cert.component("work_average").value}
        for method in args.methods:
            res = solve(inst, method)
            rec[method] = {"status": res.status, "makespan": res.objective,
                           "lower_bound": res.lower_bound, "gap": res.gap,
                           "runtime_s": res.runtime_s}
            if method == "bifocal" and args.improve and res.solution is not None:
                rec[IMPROVED] = _improved(inst, res.solution, cert.value)
            del res
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(rec, path)
        records.append(rec)
    print(render(records))
    return 0


def _improved(inst: Any, solution: dict[str, Any], bound: int) -> dict[str, Any]:
    """Bifocal's schedule after the assignment-move post-pass (heuristics.placement.improve,
    validated there), its certified gap and the moves' log."""
    from heuristics.placement.improve import attention_moves, improve

    t0 = time.perf_counter()
    best, log = improve(inst, solution, attention_moves(inst))
    span = max(c["end"] for c in best["compute"])
    return {"status": "FEASIBLE", "makespan": span, "lower_bound": bound,
            "gap": (span - bound) / span if span else 0.0,
            "runtime_s": time.perf_counter() - t0, "log": log}


def _methods(records: list[dict[str, Any]]) -> list[str]:
    """The methods present in every record, in a fixed order."""
    return [m for m in (*METHODS, IMPROVED) if records and all(m in r for r in records)]


def render(records: list[dict[str, Any]]) -> str:
    rows = []
    methods = _methods(records)
    for r in records:
        b = r["bound"]
        comp = {c["name"]: c for c in b["components"]}
        gaps = [r[m]["gap"] for m in methods]
        rows.append([r["model"], r["platform"], r["prefill"], r["decode"], r["batch"], r["tasks"],
                     f"{b['lower_bound'] / 1e9:.3f}", b["best"],
                     f"{(b['lower_bound'] - r['old_bound']) / r['old_bound'] * 100:+.1f}%",
                     *[f"{r[m]['makespan'] / 1e9:.3f}" for m in methods],
                     *[f"{g * 100:.1f}%" if g is not None else "-" for g in gaps],
                     *[f"{(r[m]['makespan'] / b['lower_bound'] - 1) * 100:.1f}%"
                       for m in methods if m != "pd"],
                     f"{b['seconds']:.1f}", f"{comp['chain']['seconds']:.1f}"])
    head = ["model", "platform", "prefill", "decode", "batch", "tasks", "bound s", "best",
            "vs old", *[f"{m} s" for m in methods], *[f"{m} gap" for m in methods],
            *[f"{m} ms/lb-1" for m in methods if m != "pd"], "bound time s", "chain s"]
    text = table(head, rows)
    for m in methods:
        gaps = [r[m]["gap"] for r in records if r[m]["gap"] is not None]
        if gaps:
            text += (f"\n{m}: certified gap median {statistics.median(gaps) * 100:.1f}%, "
                     f"min {min(gaps) * 100:.1f}%, max {max(gaps) * 100:.1f}%")
    times = [r["bound"]["seconds"] for r in records]
    if times:
        text += (f"\nbound compute time: median {statistics.median(times):.1f} s, "
                 f"max {max(times):.1f} s over {len(times)} workloads")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("small", help="bound / optimum on small instances")
    s.add_argument("--cases", type=int, default=12, help="generated LLM cases (default 12)")
    s.add_argument("--time-limit", type=float, default=30.0)
    s.add_argument("--num-workers", type=int, default=2)
    s.set_defaults(func=small)
    d = sub.add_parser("dops", help="certified gaps of PD and Bifocal on DOPS workloads")
    d.add_argument("--models", nargs="+", default=["dops-qwen-1.8b"])
    d.add_argument("--platforms", nargs="+", default=["HP32"])
    d.add_argument("--prefill", nargs="+", type=int, default=[128, 512, 1024, 2048])
    d.add_argument("--decode", nargs="+", type=int, default=[128, 256, 512, 1024])
    d.add_argument("--batch", nargs="+", type=int, default=[1, 4, 8, 16])
    d.add_argument("--out", default="results/certified-bounds")
    d.add_argument("--fresh", action="store_true")
    d.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    d.add_argument("--improve", action="store_true",
                   help="also Bifocal + the assignment-move post-pass (improve.py)")
    d.add_argument("--json", action="store_true", help="print the records as JSON")
    d.set_defaults(func=dops)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
