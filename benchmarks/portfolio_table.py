"""The exact portfolio (``solvers.placement.portfolio``) against its two back ends, one worker.

Two tables (``docs/placement_exact.md``, "Portfolio"):

* ``default``: every bundled placement instance with a recorded optimum solved as
  ``hetopt solve NAME --time-limit 60 --num-workers 1`` (the default route, or the method the
  index records as having proved the optimum): optimum reproduced or not;
* ``methods``: the STG instances whose published optimum exceeds max(critical path,
  ⌈work / p⌉) or is open (``benchmarks/classic_exact.py``'s hard set) and the three STG
  instances the default route left unproven (:data:`EXTRA`), each solved by ``cpsat``,
  ``milp`` and ``portfolio`` within 60 s on one worker: proven or not, objective, bound,
  seconds.

Records are appended to ``--out`` (JSON lines) as they finish; a rerun skips those already
there; ``--table`` prints both tables from the records.

    python benchmarks/portfolio_table.py [--part default|methods] [--out FILE] [--table]
"""

from __future__ import annotations

import argparse
import io
import json
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import instances
from instances import stg
from opt.app.cli import main as cli
from opt.placement.group_bound import trivial_bound

TIME_LIMIT_S = 60.0
METHODS = ("cpsat", "milp", "portfolio")
#: the STG instances the default route left unproven in 60 s (``default`` part), for the
#: comparison of the three methods there
EXTRA = ("stg-100-rand0007-p4", "stg-100-rand0000-p4", "stg-100-rand0008-p4")


def hard_stg() -> list[str]:
    """The hard STG names (optimum above the trivial bound, or open) and :data:`EXTRA`."""
    out = []
    for rec in stg.records():
        inst = stg.load(rec["graph"], rec["processors"])
        if rec["optimum"] is None or rec["optimum"] > trivial_bound(inst):
            out.append(rec["name"])
    return out + [n for n in EXTRA if n not in out]


def run(name: str, method: str | None) -> dict[str, Any]:
    """``hetopt solve NAME [--method M] --time-limit 60 --num-workers 1`` as a record."""
    argv = ["solve", name, "--time-limit", str(TIME_LIMIT_S), "--num-workers", "1",
            "--json", "--no-solution"] + ([] if method is None else ["--method", method])
    buf = io.StringIO()
    t0 = time.perf_counter()
    with redirect_stdout(buf):
        code = cli(argv)
    wall = time.perf_counter() - t0
    try:
        res = json.loads(buf.getvalue())
    except json.JSONDecodeError:
        res = {}
    info = instances.info(name)
    return {"name": name, "asked": method, "method": res.get("method"), "code": code,
            "status": res.get("status"), "objective": res.get("objective"),
            "lower_bound": res.get("lower_bound"), "optimum": info.optimum,
            "wall_s": round(wall, 2),
            "incumbent_by": (res.get("stats") or {}).get("incumbent_by"),
            "bound_by": (res.get("stats") or {}).get("bound_by")}


def cases(part: str) -> list[tuple[str, str | None]]:
    if part == "default":
        return [(r.name, None) for r in instances.bundled()
                if r.problem == "placement" and r.optimum is not None]
    return [(n, m) for n in hard_stg() for m in METHODS]


def table(records: list[dict[str, Any]]) -> str:
    lines = []
    default = [r for r in records if r["asked"] is None]
    if default:
        ok = [r for r in default if r["objective"] == r["optimum"] and r["status"] == "OPTIMAL"]
        lines.append(f"default route: optimum proven on {len(ok)}/{len(default)}")
        for r in default:
            if r not in ok:
                lines.append(f"  not proven: {r['name']} ({r['method']}): {r['status']} "
                             f"{r['objective']} / bound {r['lower_bound']} (optimum "
                             f"{r['optimum']}), {r['wall_s']} s")
        slow = sorted(default, key=lambda r: -r["wall_s"])[:5]
        lines.append("  slowest: " + ", ".join(f"{r['name']} {r['wall_s']} s" for r in slow))
    rows = [r for r in records if r["asked"] is not None]
    if rows:
        names = list(dict.fromkeys(r["name"] for r in rows))
        lines += ["", "| instance | optimum | " + " | ".join(METHODS) + " |",
                  "|---|---|" + "---|" * len(METHODS)]
        proven = dict.fromkeys(METHODS, 0)
        for n in names:
            cells = []
            opt = None
            for m in METHODS:
                r = next((x for x in rows if x["name"] == n and x["asked"] == m), None)
                if r is None:
                    cells.append("–")
                    continue
                opt = r["optimum"]
                mark = "✓" if r["status"] == "OPTIMAL" else ""
                proven[m] += r["status"] == "OPTIMAL"
                lb = r["lower_bound"]
                cells.append(f"{r['objective']:g}/{lb:g} {mark} {r['wall_s']:.1f} s"
                             if r["objective"] is not None and lb is not None
                             else f"{r['status']} {r['wall_s']:.1f} s")
            shown = "open" if opt is None else f"{opt:g}"
            lines.append(f"| {n} | {shown} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("proven: " + ", ".join(f"{m} {proven[m]}/{len(names)}" for m in METHODS))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("default", "methods", "both"), default="both")
    ap.add_argument("--out", default="results/portfolio_table.jsonl")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    done = [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []
    if args.table:
        print(table(done))
        return
    seen = {(r["name"], r["asked"]) for r in done}
    parts = ("default", "methods") if args.part == "both" else (args.part,)
    out.parent.mkdir(parents=True, exist_ok=True)
    for part in parts:
        for name, method in cases(part):
            if (name, method) in seen:
                continue
            rec = run(name, method)
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
