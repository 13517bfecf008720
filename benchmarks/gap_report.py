"""Optimality gap of the placement heuristics against CP-SAT's proven optimum on small LLM slices.

Instances are drawn at random (seeded, reproducible) from 1-layer slices of llama-2-7b,
dops-qwen-1.8b, qwen-1.8b and mixtral-8x7b, mostly on HP32 (NPU + 2 PIM), some on HP0 (NPU only),
prefill 8–32 tokens, 0–2 decode steps, batch 1–4: ≈ 20–57 tasks, which CP-SAT usually proves in
seconds. Each instance is solved with CP-SAT (``--time-limit``, ``--num-workers``) and with every
heuristic of ``--methods`` (default: every registered placement heuristic — HEFT, the static
policies of DOPS Table 1 and Bifocal once it is registered).

Per method it reports, on the instances CP-SAT proved OPTIMAL (how many is printed): mean and max
gap to the optimum ``(makespan − optimum) / optimum``, the share of instances where the method is
optimal, and over all instances the geometric-mean speedup over PD (PD makespan / makespan). A
heuristic below CP-SAT's proven lower bound is impossible and is printed as a ``BUG`` line (exit
status 1). When ``bifocal`` is registered an ablation table follows: EFT only (``window=false
phase=false token=false``), then +window, +phase, +token, cumulatively, on the same instances.

    python benchmarks/gap_report.py [--instances 30] [--time-limit 60] [--num-workers 2]
        [--methods heft pd ...] [--out results/gap-report] [--fresh] [--per-instance]

Results are written per instance (``<out>/<nn>.json``, one record per method) as they finish; a
rerun reuses them (and only computes methods it has not seen; a CP-SAT result that was not
proven is recomputed when the time limit grows). Machines here are shared and noisy: the gaps
are exact, single timings are not.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from heuristics.placement.bifocal import EXTENSIONS_OFF
from instances.generated import LlmCase, gap_case
from opt.common.errors import InputError
from opt.common.jsonio import read_json, write_json_atomic
from opt.common.report import table
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from solvers.api import solve
from solvers.registry import methods as registered
from solvers.registry import names

EXACT = "cpsat"
BASELINE = "pd"
#: Bifocal ablation: (label, params), each step switching one more term on.
ABLATION = (
    ("EFT only", {"window": False, "phase": False, "token": False, **EXTENSIONS_OFF}),
    ("+window", {"window": True, "phase": False, "token": False, **EXTENSIONS_OFF}),
    ("+phase", {"window": True, "phase": True, "token": False, **EXTENSIONS_OFF}),
    ("+token", {"window": True, "phase": True, "token": True, **EXTENSIONS_OFF}),
    ("+copy (extension: the default)", {}),
    ("HEFT's order (ready_set rank, + siblings)", {"ready_set": "rank"}),
    ("+prior (extension)", {"prior": True}),
)


def report_cases(n: int) -> list[dict[str, Any]]:
    """The report's ``n`` distinct instances: seeds 1000, 1001, ... skipping repeated draws."""
    cases: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    seed = 1000
    while len(cases) < n:
        case = gap_case(seed).to_dict()
        key = tuple(sorted(case.items()))
        if key not in seen:
            seen.add(key)
            cases.append({**case, "seed": seed})
        seed += 1
    return cases


def default_methods() -> list[str]:
    """The P1 heuristics (P2 layout strategies are not bounded by P1 optima)."""
    return [m.name for m in registered("placement") if not m.exact]


def ablation_label(label: str) -> str:
    return f"bifocal[{label}]"


def _record(res, params: dict[str, Any]) -> dict[str, Any]:
    return {"status": res.status, "objective": res.objective, "lower_bound": res.lower_bound,
            "runtime_s": res.runtime_s, "params": params}


def run_instance(index: int, case: dict[str, Any], jobs: list[tuple[str, str, dict[str, Any]]],
                 args, catalog, cards) -> dict[str, Any]:
    """Solve (or reuse) every job (label, method, params) of instance ``index``."""
    path = Path(args.out) / f"{index:02d}.json"
    data: dict[str, Any] = {}
    if path.exists() and not args.fresh:
        try:
            data = read_json(path)
        except InputError:
            data = {}
        if data.get("case") != case:
            data = {}  # the generator changed: these results are for another instance
    data.setdefault("case", case)
    results: dict[str, Any] = data.setdefault("results", {})
    old = results.get(EXACT)
    if old and old["status"] != "OPTIMAL" and old.get("time_limit", 0) < args.time_limit:
        del results[EXACT]
    todo = [j for j in jobs if j[0] not in results]
    if not todo:
        return data
    inst = LlmCase(**{k: v for k, v in case.items() if k != "seed"}).build(catalog, cards)
    data["tasks"] = inst.n_tasks
    data["time_unit"] = inst.time_unit
    for label, method, params in todo:
        print(f"  [{index:02d}] {label} ({inst.n_tasks} tasks) ...", file=sys.stderr, flush=True)
        if method == EXACT:
            res = solve(inst, method, time_limit=args.time_limit, num_workers=args.num_workers,
                        seed=0, **params)
            results[label] = {**_record(res, params), "time_limit": args.time_limit,
                              "num_workers": args.num_workers}
        else:
            try:
                results[label] = _record(solve(inst, method, seed=0, **params), params)
            except InputError as exc:  # e.g. an ablation switch the method does not know
                print(f"  [{index:02d}] {label}: {exc}", file=sys.stderr, flush=True)
                results[label] = {"status": "ERROR", "objective": None, "lower_bound": None,
                                  "runtime_s": 0.0, "params": params, "error": str(exc)}
        write_json_atomic(data, path)
    return data


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def summarise(data: list[dict[str, Any]], labels: list[str]) -> tuple[list[list[Any]], int]:
    """One row per label: proven, mean/max gap %, optimal share %, geomean speedup vs PD."""
    proven = [d for d in data if d["results"][EXACT]["status"] == "OPTIMAL"]
    rows = []
    for label in labels:
        gaps, hits = [], 0
        for d in proven:
            opt = d["results"][EXACT]["objective"]
            obj = d["results"][label]["objective"]
            if obj is None:
                continue
            gaps.append(100.0 * (obj - opt) / opt)
            hits += obj == opt
        speed = []
        for d in data:
            base = d["results"].get(BASELINE, {}).get("objective")
            obj = d["results"][label]["objective"]
            if base and obj:
                speed.append(base / obj)
        rt = [d["results"][label]["runtime_s"] for d in data]
        rows.append([label, len(gaps),
                     sum(gaps) / len(gaps) if gaps else None, max(gaps) if gaps else None,
                     100.0 * hits / len(gaps) if gaps else None,
                     geomean(speed), 1000.0 * sum(rt) / len(rt)])
    return rows, len(proven)


SUMMARY_HEADERS = ["method", "proven inst.", "mean gap %", "max gap %", "optimal %",
                   f"geomean speedup vs {BASELINE.upper()}", "mean runtime ms"]


def bugs(data: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """Every heuristic makespan below CP-SAT's proven lower bound (or proven optimum)."""
    out = []
    for i, d in enumerate(data):
        ex = d["results"][EXACT]
        lb = ex["objective"] if ex["status"] == "OPTIMAL" else ex["lower_bound"]
        if lb is None:
            continue
        for label in labels:
            obj = d["results"][label]["objective"]
            if obj is not None and obj < lb:
                what = "proven optimum" if ex["status"] == "OPTIMAL" else "CP-SAT lower bound"
                out.append(f"BUG: {label} on instance {d['index']:02d} ({_case_str(d['case'])}): "
                           f"makespan {obj} < {what} {lb}")
    return out


def _case_str(c: dict[str, Any]) -> str:
    return f"{c['model']} {c['platform']} p{c['prefill']}-d{c['decode']}-b{c['batch']}"


def run(args) -> int:
    catalog, cards = bundled_catalog(), bundled_cards()
    methods = list(dict.fromkeys(args.methods or default_methods()))
    known = names(("placement", "layout"))
    unknown = [m for m in methods + [BASELINE] if m not in known]
    if unknown:
        print(f"gap_report: unknown method(s) {', '.join(unknown)}; known: "
              f"{', '.join(known)}", file=sys.stderr)
        return 2
    if EXACT in methods:
        methods.remove(EXACT)
    jobs = [(EXACT, EXACT, {})] + [(m, m, {}) for m in methods]
    if BASELINE not in methods:
        jobs.append((BASELINE, BASELINE, {}))
    ablation = "bifocal" in known and not args.no_ablation
    if ablation:
        jobs += [(ablation_label(lab), "bifocal", params) for lab, params in ABLATION]
    t0 = time.perf_counter()
    data = []
    for i, case in enumerate(report_cases(args.instances)):
        d = run_instance(i, case, jobs, args, catalog, cards)
        d["index"] = i
        data.append(d)
    elapsed = time.perf_counter() - t0

    if args.per_instance:
        rows = []
        for d in data:
            ex = d["results"][EXACT]
            opt = ex["objective"] if ex["status"] == "OPTIMAL" else None
            row = [d["index"], _case_str(d["case"]), d.get("tasks"), ex["status"],
                   ex["objective"], ex["runtime_s"]]
            for m in methods:
                obj = d["results"][m]["objective"]
                row.append(None if opt is None or obj is None else 100.0 * (obj - opt) / opt)
            rows.append(row)
        print(table(["#", "instance", "tasks", "cpsat", "makespan", "cpsat s"]
                    + [f"{m} gap %" for m in methods], rows))
        print()
    rows, n_proven = summarise(data, methods)
    print(f"{len(data)} instances, {n_proven} proven optimal by CP-SAT "
          f"(time limit {args.time_limit:g} s, {args.num_workers} workers); gaps over the proven ones")
    print(table(SUMMARY_HEADERS, rows))
    labels = list(methods)
    if ablation:
        print()
        print("Bifocal ablation (terms switched on cumulatively):")
        ab_labels = [ablation_label(lab) for lab, _ in ABLATION]
        ab_rows, _ = summarise(data, ab_labels)
        for r, (lab, _) in zip(ab_rows, ABLATION):
            r[0] = lab
        print(table(SUMMARY_HEADERS, ab_rows))
        labels += ab_labels
    found = bugs(data, labels)
    for line in found:
        print(line)
    cp_time = sum(d["results"][EXACT]["runtime_s"] for d in data)
    print(f"{'no heuristic below the optimum; ' if not found else ''}CP-SAT time "
          f"{cp_time:.0f} s in total; this run {elapsed:.0f} s; results in {args.out}/ "
          f"(rerun resumes; --fresh recomputes)")
    return 1 if found else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=30, help="how many (default 30)")
    p.add_argument("--time-limit", type=float, default=60.0, help="CP-SAT seconds per instance")
    p.add_argument("--num-workers", type=int, default=2, help="CP-SAT workers (default 2)")
    p.add_argument("--methods", nargs="+", metavar="METHOD",
                   help="heuristics to compare (default: every registered heuristic: "
                        + ", ".join(default_methods()) + ")")
    p.add_argument("--no-ablation", action="store_true", help="skip the Bifocal ablation")
    p.add_argument("--per-instance", action="store_true", help="also print every instance")
    p.add_argument("--out", default="results/gap-report", help="results folder")
    p.add_argument("--fresh", action="store_true", help="recompute instances already in --out")
    args = p.parse_args(argv)
    if args.instances < 1:
        p.error("--instances must be ≥ 1")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
