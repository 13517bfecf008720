"""A compact CSV of ``hetopt sweep serving`` records: one row per cell and method, enough to
check docs/serving.md's OpWeave tables without solving again.

    python benchmarks/opweave_cells_csv.py RECORDS_DIR... --rule eq39 --commit abc1234
        [--command "hetopt sweep serving ..."]... [--note TEXT]...
        [--out docs/data/opweave_cells_eq39.csv]

The records hold neither the crossing rule nor the code's commit, so both are given (the
rule of the code the sweeps ran on, and its commit). The file starts with ``#`` lines naming
the commands and the commit, then a header row. ``stopped_at_limit`` is ``yes`` when the
search hit its time limit: its cost is an incumbent, an upper bound on the optimum.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.app.reproduction.opweave_tables import load_records
from opt.common.errors import InputError
from opt.common.outpath import FILE, check_output

COLUMNS = ("model", "gpus", "ctx", "slo_ms", "method", "usd_per_mtok", "stages_per_token",
           "t_rtt_ms", "stopped_at_limit", "plan_gpus", "crossing_rule", "commit")
METHOD_ORDER = {"col": 0, "afd": 1, "cad": 2, "bnb": 3, "milp": 4}


def _num(x: Any, digits: int = 6) -> str:
    return f"{float(x):.{digits}g}" if isinstance(x, (int, float)) else ""


def plan_gpus(rec: dict[str, Any]) -> str:
    """The plan's GPUs per type, e.g. ``A100x16+H100x2`` (empty without a plan)."""
    owners = ((rec.get("plan") or {}).get("owners")) or []
    count: dict[str, int] = {}
    for o in owners:
        n = int(o.get("tp", 1)) * int(o.get("ep", 1)) * int(o.get("replicas", 1))
        count[str(o["gpu"])] = count.get(str(o["gpu"]), 0) + n
    return "+".join(f"{g}x{n}" for g, n in sorted(count.items()))


def cell_rows(records: Sequence[dict[str, Any]], rule: str, commit: str) -> list[list[str]]:
    rows = []
    for r in records:
        rows.append([r["model"], "+".join(r["gpus"]), str(int(r["context"])),
                     f"{float(r['slo_ms']):g}", r["method"], _num(r.get("cost_usd_per_mtok")),
                     _num(r.get("stages_per_token")), _num(r.get("t_rtt_ms")),
                     "yes" if (r.get("search") or {}).get("timed_out") else "no",
                     plan_gpus(r), rule, commit])
    rows.sort(key=lambda x: (x[0], x[1].count("+"), x[1], int(x[2]), float(x[3]),
                             METHOD_ORDER.get(x[4], 9)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+")
    p.add_argument("--rule", required=True, help="crossing rule of the code the sweeps ran on")
    p.add_argument("--commit", required=True, help="commit of that code")
    p.add_argument("--command", action="append", default=[],
                   help="a command that produced the records (repeatable)")
    p.add_argument("--note", action="append", default=[],
                   help="a line of explanation for the header (repeatable)")
    p.add_argument("--out", default=None, help="CSV path (default: stdout)")
    args = p.parse_args(argv)
    try:
        if args.out:
            check_output(args.out, "--out", FILE)
        missing = [r for r in args.records if not Path(r).is_dir()]
        if missing:
            raise InputError("not a folder of sweep records", source=missing[0])
        rows = cell_rows(load_records(args.records), args.rule, args.commit)
        if not rows:
            raise InputError("no serving sweep records", source=", ".join(args.records))
    except InputError as exc:
        print(f"opweave_cells_csv: error: {exc}", file=sys.stderr)
        return 2
    fh = open(args.out, "w", newline="") if args.out else sys.stdout
    try:
        fh.write(f"# crossing rule {args.rule}, commit {args.commit}; commands:\n")
        for c in args.command:
            fh.write(f"# {c}\n")
        for n in args.note:
            fh.write(f"# {n}\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows(rows)
    finally:
        if args.out:
            fh.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
