"""CP-SAT against each P1 MILP formulation: the bundled classic P|prec|Cmax set (40
STG instances of ``benchmarks/classic_exact.py``, 12 hard), the 10 Sinnen graphs and the
bundled Llama-2-7B slice(s) ``p1-llama-2-7b-hp32-*``; 60 s, one thread, seed 0, HEFT warm
start (no start better than HEFT's).

Configurations: ``cpsat``; ``milp-bigm`` (the disjunctive model),
``milp-time-indexed`` and ``milp-bucketed`` (``models.placement.milp_time``) — forced with
``formulation=``; ``milp``, the default (``formulation=auto``), picks one per instance and
records its pick and reason. A formulation that refuses an instance (loads, contention) is
recorded as ``REFUSED`` with the reason. Records (JSON lines, with the load average at the
start of each run) are appended to ``--out`` as they finish; a rerun skips those there.

    nice -n 10 python benchmarks/milp_formulations.py [--out results/milp_formulations.jsonl]
        [--configs ...] [--sets classic sinnen llm] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import instances
from benchmarks.classic_exact import selection
from instances import stg
from opt.common.errors import InputError
from opt.placement.group_bound import trivial_bound
from solvers import solve

LIMIT_S = 60.0
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "cpsat": ("cpsat", {}),
    "milp-bigm": ("milp", {"formulation": "bigm"}),
    "milp-time-indexed": ("milp", {"formulation": "time-indexed"}),
    "milp-bucketed": ("milp", {"formulation": "bucketed"}),
    "milp": ("milp", {}),
}
SETS = ("classic", "sinnen", "llm")


def cases(sets: list[str]) -> list[dict[str, Any]]:
    """(name, set, loader, optimum, hard) of every instance of ``sets``."""
    out = []
    if "classic" in sets:
        for rec in selection():
            inst = stg.load(rec["graph"], rec["processors"])
            opt = rec["optimum"]
            out.append({"name": rec["name"], "set": "classic", "optimum": opt,
                        "hard": opt is None or opt > trivial_bound(inst),
                        "load": (lambda r=rec: stg.load(r["graph"], r["processors"]))})
    for name in instances.names("placement"):
        kind = "sinnen" if name.startswith("sinnen-") else \
            "llm" if name.startswith("p1-llama-2-7b-hp32-") else None
        if kind in sets:
            out.append({"name": name, "set": kind, "optimum": instances.info(name).optimum,
                        "hard": None, "load": (lambda n=name: instances.load(n))})
    return out


def run_one(case: dict[str, Any], config: str) -> dict[str, Any]:
    """One solve as a JSON record."""
    method, params = CONFIGS[config]
    inst = case["load"]()
    load1 = os.getloadavg()[0]
    base = {"name": case["name"], "set": case["set"], "config": config,
            "optimum": case["optimum"], "hard": case["hard"], "load_avg": round(load1, 2)}
    try:
        res = solve(inst, method, time_limit=LIMIT_S, num_workers=1, seed=0,
                    warm_start="heft", **params)
    except InputError as exc:
        return {**base, "status": "REFUSED", "message": str(exc)}
    st = res.stats
    keys = ("formulation", "formulation_reason", "root_bound", "root_bound_nodes",
            "first_better", "build_s", "variables", "constraints", "bucket_ticks",
            "dual_bound", "message")
    return {**base, "status": res.status, "objective": res.objective,
            "lower_bound": res.lower_bound, "runtime_s": round(res.runtime_s, 2),
            "heft": (st.get("mip_start") or {}).get("objective")
            or (st.get("mip_start") or {}).get("initial_objective"),
            **{k: st.get(k) for k in keys if k in st}}


def run(out: Path, configs: list[str], sets: list[str]) -> None:
    """Every (instance, config) not yet in ``out``, one at a time, appended as it finishes."""
    done = set()
    if out.exists():
        done = {(r["name"], r["config"]) for r in map(json.loads, out.read_text().splitlines())}
    out.parent.mkdir(parents=True, exist_ok=True)
    for config in configs:
        for case in cases(sets):
            if (case["name"], config) in done:
                continue
            row = run_one(case, config)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{row['name']:34s} {config:18s} {row['status']:9s} "
                  f"obj {row.get('objective')} lb {row.get('lower_bound')} "
                  f"({row.get('runtime_s')} s, load {row['load_avg']})", flush=True)


def table(out: Path) -> str:
    """Markdown: per instance and config 'obj/lb ✓ s' and, for the MILPs, root bound and
    first incumbent better than HEFT's; then proven / total per set and config."""
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in recs:
        by.setdefault(r["name"], {})[r["config"]] = r
    cfgs = [c for c in CONFIGS if any(c in v for v in by.values())]
    lines = ["| instance | opt | HEFT | " + " | ".join(cfgs) + " |",
             "|---|---|---|" + "---|" * len(cfgs)]
    for name, rs in by.items():
        any_r = next(iter(rs.values()))
        heft = next((r.get("heft") for r in rs.values() if r.get("heft")), None)
        opt = any_r["optimum"]
        cells = []
        for c in cfgs:
            r = rs.get(c)
            if r is None:
                cells.append("–")
            elif r["status"] == "REFUSED":
                cells.append("refused")
            else:
                obj = "–" if r.get("objective") is None else f"{r['objective']:g}"
                lb = "–" if r.get("lower_bound") is None else f"{r['lower_bound']:g}"
                cell = f"{obj}/{lb}" + (f" ✓ {r['runtime_s']:.1f}s"
                                        if r["status"] == "OPTIMAL" else "")
                if c != "cpsat":
                    rb = r.get("root_bound")
                    fb = r.get("first_better")
                    cell += f"; root {rb:g}" if rb is not None else "; root –"
                    cell += f"; 1st<HEFT {fb['objective']:g}@{fb['s']:.1f}s" if fb else ""
                cells.append(cell)
        star = "**" if any_r.get("hard") else ""
        opt = "open" if opt is None else opt
        lines.append(f"| {name.removeprefix('stg-')} | {star}{opt}{star} | {heft} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    for s in SETS:
        for c in cfgs:
            rs = [v[c] for v in by.values() if c in v and v[c]["set"] == s]
            if not rs:
                continue
            prov = sum(r["status"] == "OPTIMAL" for r in rs)
            hard = [r for r in rs if r.get("hard")]
            hp = sum(r["status"] == "OPTIMAL" for r in hard)
            extra = f"; hard {hp}/{len(hard)}" if hard else ""
            runs = [r for r in rs if r["status"] != "REFUSED" and r.get("optimum")]
            searched = [r for r in runs if r.get("root_bound") is not None]
            root = [r for r in searched if r["root_bound"] >= r["optimum"] - 1e-6]
            room = [r for r in runs if (r.get("heft") or 0) > r["optimum"]]
            better = [r for r in room if r.get("first_better")]
            rb = "" if c == "cpsat" else (
                f"; root bound ≥ optimum {len(root)}/{len(searched)} searched "
                f"({len(runs) - len(searched)} without one: start at the bound, or stopped before HiGHS); "
                f"first incumbent better "
                f"than HEFT on {len(better)}/{len(room)} where HEFT is not optimal")
            lines.append(f"- {s} `{c}`: proven {prov}/{len(rs)}{extra}{rb}")
    for r in recs:
        if r["set"] == "llm" and r.get("objective") and r.get("lower_bound") is not None:
            gap = 100 * (r["objective"] - r["lower_bound"]) / r["objective"]
            lines.append(f"- {r['name']} `{r['config']}` ({r.get('formulation') or 'CP-SAT'}): "
                         f"{r['status']} {r['objective']:,.0f} / bound "
                         f"{r['lower_bound']:,.0f}, gap {gap:.2f} %")
    agree = [(n, v) for n, v in by.items() if v.get("cpsat", {}).get("status") == "OPTIMAL"]
    bad = [n for n, v in agree for c, r in v.items() if c != "cpsat"
           and r["status"] == "OPTIMAL" and r["objective"] != v["cpsat"]["objective"]]
    lines.append(f"- CP-SAT = MILP on every instance both prove: {'yes' if not bad else bad}")
    loads = [r["load_avg"] for r in recs]
    lines.append(f"- load average (1 min) at run starts: {min(loads):.1f}–{max(loads):.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/milp_formulations.jsonl"))
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    ap.add_argument("--table", action="store_true", help="print the table from --out")
    args = ap.parse_args(argv)
    if not args.table:
        run(args.out, args.configs, args.sets)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
