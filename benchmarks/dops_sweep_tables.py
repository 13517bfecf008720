"""The DOPS side-by-side tables (docs/dops_analyses.md §5) from sweep records:
the verdict table (per-model geomean Bifocal/PD over the 64 §6.2 grid workloads beside the
paper's seven values, Fig. 7 ranges, Fig. 10's claims: paper value, ours, tolerance, verdict,
source, cause with evidence), the geomean details (HEFT, best static policy, Bifocal/PD min and
max, workloads where Bifocal is more than 2 % slower than PD, per batch), Fig. 7's workloads,
the winning static policy, Fig. 10 and the worst Bifocal/PD workloads. A model with fewer than
64 finished workloads is ``pending (n/64)``, never a verdict. One command regenerates all of it
(after a change of a method's default, e.g. Bifocal's λ, the older records are left out and
counted, and ``--run`` recomputes them):

    python benchmarks/dops_sweep_tables.py RECORDS [RECORDS ...]          # print the tables
    python benchmarks/dops_sweep_tables.py RECORDS ... --csv docs/data/dops_grid_at_use.csv \\
        --docs docs/dops_analyses.md                                       # rewrite both
    python benchmarks/dops_sweep_tables.py --run results/dops-grid ...    # run missing cells first
    python benchmarks/dops_sweep_tables.py --from-csv docs/data/dops_grid_at_use.csv

RECORDS: folders of ``hetopt sweep placement --paper-precision`` records (default: the ``dops``
bench suite's, results/bench/dops/cache/dops-at-use); the first record of a (workload, method)
wins. ``--run`` runs the missing cells (the seven grids and Fig. 7's Llama-7B HP32 workloads,
resumable, ``--jobs``) into the first folder. ``--scaling FOLDER`` adds Insights 1–4 from the
records of ``hetopt scaling``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

from opt.app.bench.dops import RULES
from opt.app.reproduction.dops_tables import (
    GRID_AXES,
    GRID_METHODS,
    GRID_SIZE,
    PAPER_FIG7,
    PAPER_GEOMEAN,
    SLOWER_THAN_PD,
    by_batch,
    by_workload,
    co_utilisation_wins,
    fig7,
    fig10,
    fig10_claims,
    finished,
    geomean_table,
    grid_csv,
    insights,
    read_grid_csv,
    static_winners,
    wla_table,
)
from opt.app.runs.sweep import same_settings, speedups, workload_key
from opt.app.runs.sweep_calls import SolveCall
from opt.common.errors import InputError
from opt.common.jsonio import read_json
from opt.common.outpath import FOLDER, NEW_FILE, check_output
from opt.common.report import markdown_table

BEGIN, END = "<!-- dops-sweep-tables:begin -->", "<!-- dops-sweep-tables:end -->"
DEFAULT = "results/bench/dops/cache/dops-at-use"


def current(rec: dict, settings: dict[str, dict | None]) -> bool:
    """A record of the current build: KV reserved and the method's current settings
    (``settings``: method -> its settings, filled on first use)."""
    m = rec["method"]
    if m not in settings:
        settings[m] = SolveCall().settings(m)
    return bool(rec.get("kv_reserved")) and same_settings(rec, settings[m])


def load(folders: list[str]) -> tuple[list[dict], int]:
    """The records of the current build under ``folders`` and the count of older ones."""
    records = [read_json(p) for f in folders for p in sorted(Path(f).rglob("*.json"))]
    records = [r for r in records if isinstance(r, dict) and "method" in r and "prefill" in r]
    settings: dict[str, dict | None] = {}
    fresh = [r for r in records if current(r, settings)]
    return fresh, len(records) - len(fresh)


def run_missing(folder: str, jobs: int) -> None:
    """Run the missing cells of the seven grids and of Fig. 7's HP32 workloads into
    ``folder`` (resumable ``hetopt sweep placement``, nice 10)."""
    axes = [f"--prefill {' '.join(map(str, GRID_AXES[0]))}",
            f"--decode {' '.join(map(str, GRID_AXES[1]))}",
            f"--batch {' '.join(map(str, GRID_AXES[2]))}"]
    runs = [f"--models {m} --platforms {p} {' '.join(axes)}" for m, (p, _) in PAPER_GEOMEAN.items()]
    runs += [f"--models {m} --platforms HP32 --prefill {' '.join(map(str, ps))} "
             f"--decode {' '.join(map(str, ds))} --batch {b}" for m, b, ps, ds, _ in PAPER_FIG7]
    for extra in runs:
        cmd = ["nice", "-n", "10", sys.executable, "-m", "opt", "sweep", "placement",
               "--paper-precision", "--methods", *GRID_METHODS, "--out", folder,
               "--jobs", str(jobs), *extra.split()]
        subprocess.run(cmd, check=True)


def _md(headers: list[str], rows: list[list]) -> str:
    return markdown_table(headers, rows, 3)


def verdict_rows(records: list[dict]) -> list[list]:
    """The side-by-side rows: figure, paper, ours, tolerance, verdict, source, cause."""
    rows = []
    for g in geomean_table(records):
        ours = g["bifocal"] if g["bifocal"] is not None else (
            f"({g['partial_bifocal']:.3g} over {g['workloads']})" if g["workloads"] else "–")
        rows.append([f"geomean Bifocal/PD, {g['model']} {g['platform']}", g["paper"], ours,
                     f"±{100 * g['tolerance']:g} %", g["verdict"], g["source"],
                     f"{g['cause']} ({g['evidence']})" if g["cause"] else ""])
    for f in fig7(records):
        rng = f["range"]
        rows.append([f"Fig. 7 range, {f['model']} HP32 batch {f['batch']}",
                     f"{f['paper'][0]}–{f['paper'][1]}",
                     f"{rng[0]:.3f}–{rng[1]:.3f}" if rng else "–", "±5 % (range widened)",
                     f["verdict"], f["source"],
                     f"{f['cause']} ({f['evidence']})" if f["cause"] else ""])
    found = fig10(records)
    done = max((r["workloads"] for r in found if r["method"] == "bifocal"), default=0)
    claims = fig10_claims(found) if done == GRID_SIZE else {}
    wins, total = co_utilisation_wins(records)
    rows.append(["Fig. 10 claims for Bifocal (highest median and p90 speedup, highest U_co), "
                 "Llama-2-7B HP64", "3 of 3",
                 f"{sum(claims.values())} of 3 (highest U_co on {wins} of {total} workloads)"
                 if claims else "–", "exact",
                 ("reproduced" if all(claims.values()) else "differs") if claims
                 else f"pending ({done}/{GRID_SIZE})", "DOPS §6.2 Fig. 10",
                 ", ".join(f"{k} not highest" for k, ok in claims.items() if not ok)])
    return rows


def wla_rows(layout: list[dict]) -> list[list]:
    """The §6.5 rows of the verdict table (:func:`opt.app.reproduction.dops_tables.wla_table`)."""
    rows = []
    for w in wla_table(layout):
        paper = w["paper"]
        ours = w["ours"] if w["ours"] is not None else (
            f"({w['partial']:.3g} over {w['workloads']})" if w["workloads"] else "–")
        rows.append([f"WLA: {w['method']} over {w['over']}, {w['model']} HP32",
                     f"{paper[0]}–{paper[1]}" if isinstance(paper, tuple) else paper, ours,
                     f"±{100 * w['tolerance']:g} %", w["verdict"], w["source"],
                     f"{w['cause']} ({w['evidence']})" if w["cause"] else ""])
    return rows


def load_layout(folder: str | None) -> list[dict]:
    """The records of a ``hetopt sweep layout`` folder of the current build (KV reserved, the
    method's current settings: a WLA record of an older Bifocal revision is left out)."""
    if not folder:
        return []
    recs = [read_json(p) for p in sorted(Path(folder).rglob("*.json"))]
    settings: dict[str, dict | None] = {}
    return [r for r in recs if isinstance(r, dict) and "method" in r and current(r, settings)]


def main(records: list[dict], stale: int, scaling: str | None = None,
         layout: list[dict] | None = None) -> None:
    """Print every table of docs/dops_analyses.md §5 from ``records`` (and ``layout``: the
    §6.5 sweep's records)."""
    print(f"{len(records)} records of the current build ({stale} older ones left out)\n")
    print("### Verdicts beside the paper\n")
    print(_md(["figure", "paper", "ours", "tolerance", "verdict", "source", "cause (evidence)"],
              verdict_rows(records) + wla_rows(layout or []) + insight_rows(scaling)))
    if layout:
        print("\n### WLA on the §6.5 sweep (HP32; finished workloads)\n")
        print(_md(["model", "method", "over", "workloads", "geomean", "min", "max",
                   "WLA evaluations", "WLA stop reasons", "paper", "verdict"],
                  [[w["model"], w["method"], w["over"], f"{w['workloads']}/{w['total']}",
                    w["ours"] if w["ours"] is not None else w["partial"], w["min"], w["max"],
                    ", ".join(map(str, w["evaluations"])), "; ".join(w["stop_reasons"]),
                    w["paper"], w["verdict"]] for w in wla_table(layout) if w["workloads"]]))
        print("\n(geomean over all 75 workloads only when the verdict is not pending; else "
              "over the finished ones, for orientation.)")
    print("\n### Geomean speedup over PD per model (finished grid workloads)\n")
    geo = geomean_table(records)
    batches = GRID_AXES[2]
    print(_md(["model", "platform", "finished (Bifocal, PD)", "all 7 methods", "Bifocal",
               "HEFT", "best static",
               "Bifocal/PD min", "Bifocal/PD max",
               f"> {100 * (SLOWER_THAN_PD - 1):g} % slower than PD",
               *(f"Bifocal B={b}" for b in batches), "paper", "verdict"],
              [[g["model"], g["platform"], f"{g['workloads']}/{GRID_SIZE}",
                f"{g['all_methods']}/{GRID_SIZE}", g["bifocal"],
                g["heft"], g["best_static"], g["min_bifocal"], g["max_bifocal"],
                g["slower_2pct"], *by_batch(records, g["model"], g["platform"]).values(),
                g["paper"], g["verdict"]] for g in geo]))
    print("\n(Bifocal is the geomean over the full grid only, HEFT and best static over the "
          "full grid with all seven methods; min, max, the count and the per-batch geomeans "
          "are over the workloads finished for Bifocal and PD.)")
    print("\n### DOPS Fig. 7 (HP32)\n")
    for f in fig7(records):
        print(f"{f['model']} batch {f['batch']}: range {f['range'] and tuple(round(x, 3) for x in f['range'])} "
              f"vs paper {f['paper']} → {f['verdict']}; static policies below PD somewhere: "
              f"{', '.join(f['static_below_pd']) or 'none'}\n")
        print(_md(["prefill", "decode", "Bifocal / PD"],
                  [[p, d, v] for (p, d), v in f["speedups"].items()]) + "\n")
    index = by_workload(records)
    every = [r for r in records if finished(index, workload_key(r), GRID_METHODS)]
    done = [r for r in records if finished(index, workload_key(r))]
    print("### Winning static policy per workload with all seven methods (count per model)\n")
    per_model = Counter((k[0], k[1], m) for k, m in static_winners(every).items())
    print(_md(["model", "platform", "winner", "workloads"],
              [[a, b, c, n] for (a, b, c), n in sorted(per_model.items())]))
    print("\n### DOPS Fig. 10 (Llama-2-7B, HP64, finished grid workloads)\n")
    print(_md(["method", "workloads", "median speedup", "p90 speedup", "median U_npu",
               "median U_pim", "median U_co"],
              [[r["method"], r["workloads"], r["median"], r["p90"], r["u_npu"], r["u_pim"],
                r["u_co"]] for r in fig10(records)]))
    if scaling:
        _insights(scaling)
    sp = speedups(done)
    worst = sorted((v, k) for (k, m), v in sp.items() if m == "bifocal" and v is not None)
    print("\n### Worst Bifocal / PD workloads\n")
    print(_md(["workload", "Bifocal / PD", "HEFT / PD"],
              [[" ".join(map(str, k)), v, sp.get((k, "heft"))] for v, k in worst[:8]]))
    bad = [k for v, k in worst if v < 1 / SLOWER_THAN_PD]
    print(f"\nworkloads where Bifocal is more than 2 % slower than PD: {len(bad)} of {len(worst)}")


def _scaling_records(folder: str) -> list[dict]:
    recs = [read_json(p) for p in sorted(Path(folder).rglob("*.json"))]
    return [r for r in recs if isinstance(r, dict) and r.get("kv_reserved") is not False
            and "method" in r]


def insight_rows(folder: str | None) -> list[list]:
    """The Insights 1–4 rows of the verdict table (none without ``--scaling``)."""
    if not folder:
        return []
    from opt.costlib.hardware import bundled_catalog

    return [[f"Insight {i['insight']}: {i['workloads']}", " → ".join(i["paper"]),
             " → ".join(str(o) for o in i["ours"]), "exact increment", i["verdict"],
             i["source"], f"{i['cause']} ({i['evidence']})" if i["cause"] else ""]
            for i in insights(_scaling_records(folder), bundled_catalog())]


def _insights(folder: str) -> None:
    from opt.costlib.hardware import bundled_catalog

    recs = _scaling_records(folder)
    print("\n### DOPS Insights 1–4 (Bifocal, HP0 → HP32 → HP64 → HP128): the increment with "
          "the largest marginal gain\n")
    print(_md(["insight", "workloads", "paper (first → last)",
               "ours (each workload: increment, its gain per 32 GB)", "verdict"],
              [[i["insight"], i["workloads"], " → ".join(i["paper"]),
                "; ".join(f"{o} ({g:.3g})" if g is not None else str(o)
                          for o, g in zip(i["ours"], i["largest_gain"])), i["verdict"]]
               for i in insights(recs, bundled_catalog())]))


def rewrite_docs(doc: Path, body: str, command: str) -> None:
    """Replace the text between the markers of ``doc`` with ``body``."""
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + f"\n\n_Generated by `{command}`._\n\n" + body + END + tail)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def check_outputs(args: argparse.Namespace) -> None:
    """Every path the command writes, checked before any work (opt.common.outpath): the
    record folder of ``--run``, the CSV (its folder is created), the doc with its markers."""
    if args.run:
        check_output(args.folders[0], "folders", FOLDER)
    if args.csv:
        check_output(args.csv, "--csv", NEW_FILE)
    if args.docs:
        check_output(args.docs, "--docs")
        text = args.docs.read_text() if args.docs.is_file() else ""
        if BEGIN not in text or END not in text:
            raise InputError(f"'{args.docs}' has no {BEGIN} … {END} section to rewrite",
                             source=str(args.docs), field="--docs")


def cli(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", default=[DEFAULT])
    ap.add_argument("--run", action="store_true", help="run the missing cells first")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--csv", type=Path, help="write the per-workload CSV here")
    ap.add_argument("--from-csv", type=Path, help="read the records from this CSV instead")
    ap.add_argument("--records-commit", default=None,
                    help="the commit the records were computed at (default: this checkout's)")
    ap.add_argument("--docs", type=Path, help="rewrite the marked section of this file")
    ap.add_argument("--scaling", help="records of `hetopt scaling` for Insights 1-4")
    ap.add_argument("--wla", help="records of `hetopt sweep layout` (§6.5) for the WLA rows")
    args = ap.parse_args(argv)
    try:
        check_outputs(args)
    except InputError as exc:
        print(f"dops_sweep_tables: error: {exc}", file=sys.stderr)
        return 2
    command = "python benchmarks/dops_sweep_tables.py " + shlex.join(
        sys.argv[1:] if argv is None else argv)
    if args.run:
        run_missing(args.folders[0], args.jobs)
    if args.from_csv:
        records, stale = read_grid_csv(args.from_csv.read_text()), 0
    else:
        records, stale = load(args.folders)
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        args.csv.write_text(grid_csv(records, {
            "rules": RULES, "records": " ".join(args.folders),
            "commit": args.records_commit or _commit(), "command": command,
            "columns": "times in ns of model time (ticks of the cost library); speedup_over_pd"
                       " = PD makespan / the method's; u_* = DOPS Eq. 5 busy fractions; "
                       f"only workloads with all {len(GRID_METHODS)} methods recorded"}))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(records, stale, args.scaling, load_layout(args.wla))
    if args.docs:
        rewrite_docs(args.docs, buf.getvalue(), command)
    else:
        print(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(cli())
