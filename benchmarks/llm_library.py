"""The library of LLM placement slices (:mod:`instances.llm`): build its files, solve each slice
with every exact method, write its index and print the table of which method proves which.

    python benchmarks/llm_library.py build                     # instances/data/llm/*.json.gz
    python benchmarks/llm_library.py solve --out R [--time-limit 60] [--num-workers 1]
        [--methods cpsat milp cpsat-blocks] [--names NAME ...]  # resumable, one record per solve
    python benchmarks/llm_library.py index --out R             # instances/data/llm/index.json
    python benchmarks/llm_library.py table                     # Markdown, from the index

``solve`` writes ``R/<name>/<method>.json`` as each solve ends (sealed; a record of another
instance — its fingerprint —, method, limit or seed, or an edited one, is solved again). Every
result comes from :func:`solvers.api.solve`: the schedule validated, the makespan recomputed,
the bound at least the certified one. ``index`` takes per slice the least makespan (best
known), the greatest bound and the optimum when a method proved it or the two meet.
"""

from __future__ import annotations

import argparse
import gzip
import math
import sys
from pathlib import Path
from typing import Any

from instances import llm
from opt.common.errors import InputError
from opt.common.fingerprint import seal, seal_error
from opt.common.jsonio import json_bytes, read_json, write_json_atomic
from opt.common.outpath import FOLDER, check_output
from solvers.api import solve

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "instances" / llm.DIR
METHODS = ("cpsat", "milp", "cpsat-blocks")


def build(names: list[str]) -> None:
    """Write each slice's instance file (gzip with a zero timestamp: the same bytes on every
    machine for the same instance)."""
    DATA.mkdir(parents=True, exist_ok=True)
    lib = llm.library()
    for name in names:
        inst = lib[name].build()
        data = gzip.compress(json_bytes(inst.to_dict()), compresslevel=9, mtime=0)
        (ROOT / "instances" / llm.file_of(name)).write_bytes(data)
        print(f"{name}: {inst.n_tasks} tasks, {len(data):,} bytes", flush=True)


def _slot(name: str, method: str, args: argparse.Namespace, fingerprint: str) -> dict:
    return {"name": name, "method": method, "time_limit_s": args.time_limit,
            "num_workers": args.num_workers, "seed": args.seed,
            "instance_fingerprint": fingerprint}


def _cached(path: Path, slot: dict) -> dict | None:
    """The record at ``path`` when it is sealed and belongs to ``slot``."""
    if not path.exists():
        return None
    try:
        rec = read_json(path)
    except Exception:  # a broken record is solved again
        return None
    if seal_error(rec) is not None or any(rec.get(k) != v for k, v in slot.items()):
        return None
    return rec


def solve_all(args: argparse.Namespace) -> None:
    """Solve every (slice, method) without a record in ``args.out``."""
    out = Path(args.out)
    for name in args.names or llm.names():
        inst = llm.load(name)
        for method in args.methods:
            path = out / name / f"{method}.json"
            slot = _slot(name, method, args, inst.fingerprint)
            rec = _cached(path, slot)
            if rec is None:
                res = solve(inst, method, time_limit=args.time_limit,
                            num_workers=args.num_workers, seed=args.seed)
                rec = seal({**slot, "status": res.status, "objective": res.objective,
                            "lower_bound": res.lower_bound, "runtime_s": res.runtime_s})
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(rec, path)
            print(f"{name} {method}: {rec['status']} {rec['objective']} "
                  f"(bound {rec['lower_bound']}, {rec['runtime_s']:.1f} s)", flush=True)


def _entry(name: str, recs: dict[str, dict]) -> dict[str, Any]:
    objs = [r["objective"] for r in recs.values() if r["objective"] is not None]
    bounds = [r["lower_bound"] for r in recs.values() if r["lower_bound"] is not None]
    upper = min(objs) if objs else None
    lower = math.ceil(max(bounds) - 1e-9) if bounds else None  # makespans are integers
    proven = [m for m, r in recs.items() if r["status"] == "OPTIMAL"]
    optimum = upper if (proven or (upper is not None and lower == upper)) else None
    best_by = proven[0] if proven else (min(recs, key=lambda m: recs[m]["objective"]
                                            if recs[m]["objective"] is not None else 1e30)
                                        if objs else None)
    first = next(iter(recs.values()))
    return {"name": name, "case": llm.library()[name].to_dict(), "optimum": optimum,
            "lower_bound": lower, "upper_bound": upper, "best_by": best_by,
            "methods": {m: {k: r[k] for k in ("status", "objective", "lower_bound",
                                                "runtime_s")} for m, r in recs.items()},
            "provenance": {"time_limit_s": first["time_limit_s"],
                           "num_workers": first["num_workers"], "seed": first["seed"],
                           "instance_fingerprint": first["instance_fingerprint"]}}


def index(args: argparse.Namespace) -> None:
    """Write ``instances/data/llm/index.json`` from the records in ``args.out`` (slices with a
    record of every method only)."""
    out = Path(args.out)
    entries = []
    for name in llm.names():
        fp = llm.load(name).fingerprint
        recs = {}
        for method in args.methods:
            path = out / name / f"{method}.json"
            if path.exists():
                rec = read_json(path)
                if seal_error(rec) is None and rec.get("instance_fingerprint") == fp:
                    recs[method] = rec
        if len(recs) == len(args.methods):
            entries.append(_entry(name, recs))
    if not entries:  # never replace the bundled index with an empty one
        raise InputError(f"no slice has a sealed record of every method of "
                         f"{', '.join(args.methods)}", source=str(out))
    write_json_atomic(entries, DATA / "index.json")
    print(f"{len(entries)} of {len(llm.names())} slices indexed", file=sys.stderr)


def print_table(_: argparse.Namespace) -> None:
    """The library table (Markdown): per slice, each method's status and makespan, the bound."""
    recs = llm.records()
    methods = sorted({m for r in recs for m in r["methods"]})
    rows = []
    for r in recs:
        cells = []
        for m in methods:
            x = r["methods"].get(m)
            cells.append("—" if x is None else
                         f"{'**opt**' if x['status'] == 'OPTIMAL' else x['status'].lower()}"
                         f" {x['objective']:,}" if x["objective"] is not None else
                         x["status"].lower())
        gap = (None if r["upper_bound"] is None or not r["lower_bound"] else
               r["upper_bound"] / r["lower_bound"] - 1.0)
        rows.append([r["name"][len(llm.PREFIX):], *cells,
                     "—" if r["lower_bound"] is None else f"{r['lower_bound']:,.0f}",
                     "proven" if r["optimum"] is not None else
                     ("—" if gap is None else f"{100 * gap:.2f} %")])
    head = ["slice", *methods, "bound", "gap"]
    print("\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                     *("| " + " | ".join(map(str, r)) + " |" for r in rows)]))
    proven = {m: sum(r["methods"].get(m, {}).get("status") == "OPTIMAL" for r in recs)
              for m in methods}
    print(f"\n{len(recs)} slices; optimum known for {sum(r['optimum'] is not None for r in recs)};"
          f" proven by method: " + ", ".join(f"{m} {n}" for m, n in proven.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=("build", "solve", "index", "table"))
    p.add_argument("--out", default="results/llm-library")
    p.add_argument("--time-limit", type=float, default=60.0)
    p.add_argument("--num-workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--names", nargs="+")
    args = p.parse_args(argv)
    unknown = sorted(set(args.names or ()) - set(llm.names()))
    if unknown:
        print(f"llm_library: error: --names: unknown slice '{unknown[0]}'", file=sys.stderr)
        return 2
    if args.command in ("solve", "index"):
        check_output(args.out, "--out", FOLDER)
    try:
        {"build": lambda a: build(a.names or llm.names()), "solve": solve_all, "index": index,
         "table": print_table}[args.command](args)
    except InputError as exc:
        print(f"llm_library: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
