"""Exact strength on classic P|prec|Cmax cases: Kasahara's STG random graphs
(50 and 100 tasks, identical processors, no communication; ``instances/stg.py``, licence and
source in ``instances/data/stg/README.md``) with their published optima.

Per instance: n, p, the published optimum (or open range), the trivial bound
max(critical path, ⌈work / p⌉), the static group bound of ``opt.placement.group_bound``, and
- CP-SAT (30 s wall clock, num_workers=1, seed 0, HEFT warm start) with the identical-device
  structure on (``group_cumulative`` and ``group_energy``, the defaults), with only the
  cumulative (``group_energy=False``) and with both off;
  symmetry breaking and the redundant cuts stay on in all three; and the full model without
  symmetry breaking (``cpsat-nosym``: is the existing symmetry breaking effective here?);
- the MILP (HiGHS, 15 s, HEFT MIP start) with ``group_energy`` off and on.

Records are appended to ``--out`` (JSON lines) as they finish and a rerun skips the records
already there; ``--table`` prints the markdown table and summary of ``docs/placement_exact.md``.

    nice python benchmarks/classic_exact.py [--out results/classic_exact.jsonl] [--table]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from instances import stg
from opt.api import solve
from opt.placement.group_bound import group_bounds, trivial_bound
from opt.placement.lower_bounds import heads_tails

#: (method, time limit in s, switches) per configuration
CONFIGS: dict[str, tuple[str, float, dict[str, Any]]] = {
    "cpsat": ("cpsat", 30.0, {}),
    "cpsat-cumulative": ("cpsat", 30.0, {"group_energy": False}),
    "cpsat-off": ("cpsat", 30.0, {"group_cumulative": False, "group_energy": False}),
    "cpsat-nosym": ("cpsat", 30.0, {"symmetry_breaking": False}),
    "milp-off": ("milp", 15.0, {"group_energy": False}),
    "milp": ("milp", 15.0, {}),
}


def selection() -> list[dict[str, Any]]:
    """The benchmark's instances: every bundled record of the first ten 50-task graphs, and
    every bundled record whose published optimum exceeds the trivial bound or is open."""
    out = []
    for rec in stg.records():
        first_ten = rec["graph"].startswith("50/") and int(rec["graph"][-4:]) < 10
        inst = stg.load(rec["graph"], rec["processors"])
        hard = rec["optimum"] is None or rec["optimum"] > trivial_bound(inst)
        if first_ten or hard:
            out.append(rec)
    return out


def static_bounds(rec: dict[str, Any]) -> dict[str, Any]:
    """n, p, the trivial bound and the group bound (with its parts) of one record."""
    inst = stg.load(rec["graph"], rec["processors"])
    head, tail = heads_tails(inst)
    gb = group_bounds(inst, head, tail - inst.cost.min(axis=1))
    return {"n": inst.n_tasks, "p": rec["processors"], "trivial": trivial_bound(inst),
            "group_bound": None if gb is None else gb.cmax_lb,
            "group_parts": None if gb is None else gb.parts}


def run_one(rec: dict[str, Any], config: str) -> dict[str, Any]:
    """One solve of ``rec`` under ``config``, as a JSON record."""
    method, limit, switches = CONFIGS[config]
    inst = stg.load(rec["graph"], rec["processors"])
    res = solve(inst, method, time_limit=limit, num_workers=1, seed=0, warm_start="heft",
                **switches)
    return {"name": rec["name"], "config": config, "status": res.status,
            "objective": res.objective, "lower_bound": res.lower_bound,
            "runtime_s": round(res.runtime_s, 2),
            "deterministic_time": res.stats.get("deterministic_time"),
            "model_bound": res.stats.get("group_bound"), "message": res.stats.get("message"),
            **static_bounds(rec),
            "optimum": rec["optimum"], "published": [rec["lower_bound"], rec["upper_bound"]]}


def run(out: Path, configs: list[str]) -> None:
    """Every (instance, config) not yet in ``out``, appended as it finishes."""
    done = set()
    if out.exists():
        done = {(r["name"], r["config"]) for r in map(json.loads, out.read_text().splitlines())}
    out.parent.mkdir(parents=True, exist_ok=True)
    for rec in selection():
        for config in configs:
            if (rec["name"], config) in done:
                continue
            row = run_one(rec, config)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{row['name']:24s} {config:17s} {row['status']:9s} obj {row['objective']} "
                  f"lb {row['lower_bound']} ({row['runtime_s']} s)", flush=True)


def _cell(r: dict[str, Any] | None) -> str:
    """'obj/lb ✓ s' (proven, with the wall time) or 'obj/lb' for one CP-SAT record."""
    if r is None:
        return "–"
    obj = "–" if r["objective"] is None else f"{r['objective']:g}"
    lb = "–" if r["lower_bound"] is None else f"{r['lower_bound']:g}"
    return f"{obj}/{lb}" + (f" ✓ {r['runtime_s']:.1f}" if r["status"] == "OPTIMAL" else "")


def table(out: Path) -> str:
    """The markdown table and the proven/total summaries from the records in ``out``."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for r in map(json.loads, out.read_text().splitlines()):
        rows.setdefault(r["name"], {})[r["config"]] = r
    lines = ["| instance | n | p | optimum | trivial | group bound | CP-SAT on | CP-SAT "
             "cumulative only | CP-SAT off | CP-SAT on, no symmetry | MILP lb off → on (obj) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    proven = {c: [0, 0, 0, 0] for c in CONFIGS}  # all proven, all, hard proven, hard
    for name, by in rows.items():
        any_r = next(iter(by.values()))
        opt = any_r["optimum"]
        hard = opt is None or opt > any_r["trivial"]
        for c, r in by.items():
            proven[c][0] += r["status"] == "OPTIMAL"
            proven[c][1] += 1
            if hard:
                proven[c][2] += r["status"] == "OPTIMAL"
                proven[c][3] += 1
        mo, mn = by.get("milp-off"), by.get("milp")
        milp = "–" if mo is None or mn is None else \
            f"{mo['lower_bound']:g} → {mn['lower_bound']:g} ({mn['objective']:g})"
        optimum = f"{opt}" if opt is not None else \
            f"open [{any_r['published'][0]}, {any_r['published'][1]}]"
        lines.append(f"| {name.removeprefix('stg-')} | {any_r['n']} | {any_r['p']} | "
                     f"{'**' + optimum + '**' if hard else optimum} | {any_r['trivial']} | "
                     f"{any_r['group_bound']} | {_cell(by.get('cpsat'))} | "
                     f"{_cell(by.get('cpsat-cumulative'))} | {_cell(by.get('cpsat-off'))} | "
                     f"{_cell(by.get('cpsat-nosym'))} | {milp} |")
    lines.append("")
    raised = [n for n, by in rows.items() if "milp" in by and "milp-off" in by
              and (by["milp"]["lower_bound"] or 0) > (by["milp-off"]["lower_bound"] or 0)]
    both = sum("milp" in by and "milp-off" in by for by in rows.values())
    lines.append(f"- MILP bound higher with `group_energy` than without: {len(raised)}/{both}")
    for c, (a, b, h, hb) in proven.items():
        if not b:
            continue
        lines.append(f"- `{c}`: proven {a}/{b}; on optimum > trivial bound (or open): {h}/{hb}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/classic_exact.jsonl"))
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--table", action="store_true", help="print the table from --out")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.out))
        return 0
    run(args.out, args.configs)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
