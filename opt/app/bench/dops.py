"""The ``dops`` bench suite: DOPS' §6.2 scheduling grid over its seven models on their platforms
under the platform rules (the builder's defaults: ``load_timing: overlap``, DOPS §6.1; LRU
residency for every policy), with the paper's figures side by side (:mod:`opt.app.reproduction.dops_tables`).

Cases: one per model — the full 4 × 4 × 4 grid (prefill {128, 512, 1024, 2048} × decode {128,
256, 512, 1024} × batch {1, 4, 8, 16}) with Bifocal, HEFT, PD and the four static policies of
DOPS Table 1, each model in DOPS' precision; then Fig. 7 (HP32), Fig. 10 (Llama-2-7B's grid) and
``grid-table``, which writes the per-workload CSV (:func:`opt.app.reproduction.dops_tables.grid_csv`,
docs/data/dops_grid.csv) and the geomean verdict table from the
records. The records live in ``<out>/dops/cache/dops-paper-rules`` (a folder only records of these
rules are written to); every finished record is kept, so a rerun continues, and a
record of other method settings (e.g. a new Bifocal default) is recomputed. The grids are 3,136
solves over 293 M tasks (wall time: docs/dops_analyses.md "Grid wall time and certified gaps"; the
default, one worker, runs the same solves as ``--jobs 2`` in one process). A model's verdict
is given from its full grid only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from opt.app.bench.checks import EXACT, RATIO, Check, paper_figure
from opt.app.bench.runner import BenchCase, CaseResult
from opt.app.reproduction.dops_tables import (
    GRID_AXES,
    GRID_METHODS,
    GRID_SIZE,
    PAPER_FIG7,
    PAPER_GEOMEAN,
    SLOWER_THAN_PD,
    fig7,
    fig10,
    fig10_claims,
    geomean_table,
    grid_csv,
)
from opt.app.runs.executor import jobs_executor
from opt.app.runs.sweep import Progress, SweepOptions, grid, run_sweep, speedups, workload_key
from opt.app.runs.sweep_calls import SolveCall
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

#: The methods of every DOPS workload.
METHODS = GRID_METHODS
FULL = GRID_AXES
#: The records' folder under the bench folder.
CACHE = Path("dops") / "cache" / "dops-paper-rules"
#: The platform rules the records are made under (the builder's defaults).
RULES = ("load_timing overlap (DOPS §6.1, problems.md §1.2 rule 5), LRU residency for every "
         "policy, static policies inside their Table 1 classes on the least-available device "
         "(the DOPS authors' baseline), Mixtral's tokens through experts 0 and 1 (the authors' "
         "routing), Bifocal at the authors' released configuration, each model in DOPS' "
         "precision (--paper-precision); docs/departures.md lists where these depart from the "
         "paper or the authors' code")


def _records(cache: Path, workloads, jobs: int = 1) -> list[dict]:
    """The records of ``workloads`` × the seven methods in ``cache`` (finished ones reused,
    the rest solved by ``jobs`` sweep workers: 1 in this process, more a process pool), with the
    sweep's progress line on stderr."""
    import sys


    progress = Progress(len(workloads) * len(METHODS), stream=sys.stderr)
    with jobs_executor(jobs) as executor:
        done = run_sweep(workloads, list(METHODS), cache, SolveCall(time_limit=60.0),
                         catalog=bundled_catalog(), cards=bundled_cards(),
                         options=SweepOptions(paper_precision=True, progress=progress,
                                              executor=executor))
    return [r for r, _ in done]


def _grid_records(cache: Path, jobs: int = 1) -> list[dict]:
    """Every model's grid on its platform (resumable) and Fig. 7's Llama-7B HP32 workloads, in
    one sweep (one worker pool)."""

    workloads = [w for model, (platform, _) in PAPER_GEOMEAN.items()
                 for w in grid([model], [platform], *FULL)]
    return _records(cache, workloads + _fig7_workloads(), jobs)


def _fig7_workloads() -> list:
    """Fig. 7's workloads on HP32 (each model at its batch)."""

    return [w for model, batch, prefills, decodes, _ in PAPER_FIG7
            for w in grid([model], ["HP32"], prefills, decodes, [batch])]


def geomean_checks(row: dict) -> list[Check]:
    """The paper figure of one :func:`geomean_table` row (full grid only)."""
    if row["bifocal"] is None:
        return []
    reason = f"{row['cause']} (evidence: {row['evidence']})"
    return [paper_figure(f"{row['model']} {row['platform']}: Bifocal over PD, geomean of the "
                         f"{GRID_SIZE} grid workloads", row["bifocal"], row["paper"], RATIO,
                         row["source"], reason)]


def _model_case(cache: Path, model: str, jobs: int = 1) -> CaseResult:
    platform, _ = PAPER_GEOMEAN[model]
    records = _records(cache, grid([model], [platform], *FULL), jobs)
    sp = speedups(records)
    keys = sorted({workload_key(r) for r in records})
    rows = [[*k[2:], *(sp.get((k, m)) for m in METHODS)] for k in keys]
    (geo,) = [g for g in geomean_table(records) if g["model"] == model]
    return CaseResult(f"DOPS grid: {model} on {platform}, speed-up over PD (overlap)",
                      ["prefill", "decode", "batch", *METHODS], rows, geomean_checks(geo),
                      notes=f"verdict: {geo['verdict']}; Bifocal/PD max {geo['max_bifocal']}; "
                            f"workloads > 2 % slower than PD: {geo['slower_2pct']}")


def _fig7_case(cache: Path, jobs: int = 1) -> CaseResult:
    records = _records(cache, _fig7_workloads(), jobs)
    rows, checks = [], []
    for f in fig7(records):
        rows += [[f["model"], f["batch"], p, d, v] for (p, d), v in f["speedups"].items()]
        rng = f["range"]
        if rng is None:
            continue
        for side, ours, paper in (("lowest", rng[0], f["paper"][0]),
                                  ("highest", rng[1], f["paper"][1])):
            checks.append(paper_figure(f"Fig. 7 {f['model']} batch {f['batch']}: {side} "
                                       f"Bifocal over PD", ours, paper, RATIO,
                                       "DOPS §6.2 Fig. 7",
                                       f"{f['cause']} (evidence: {f['evidence']})"
                                       if f["cause"] else "docs/dops_analyses.md §5 Fig. 7"))
    return CaseResult("DOPS Fig. 7 (HP32): Bifocal over PD (overlap)",
                      ["model", "batch", "prefill", "decode", "Bifocal / PD"], rows, checks)


def _fig10_case(cache: Path, jobs: int = 1) -> CaseResult:
    records = _records(cache, grid(["llama-2-7b"], ["HP64"], *FULL), jobs)
    found = fig10(records)
    rows = [[r["method"], r["workloads"], r["median"], r["p90"], r["u_npu"], r["u_pim"],
             r["u_co"]] for r in found]
    done = max((r["workloads"] for r in found if r["method"] == "bifocal"), default=0)
    full = done == GRID_SIZE
    claims = fig10_claims(found) if full else {}
    checks = [paper_figure(f"Fig. 10: DOPS' {len(claims)} claims that hold for Bifocal "
                           "(highest median and p90 speed-up, highest U_co)",
                           sum(claims.values()), float(len(claims)), EXACT, "DOPS §6.2 Fig. 10",
                           "docs/dops_analyses.md §5 Fig. 10: claims not holding: "
                           + ", ".join(k for k, ok in claims.items() if not ok))] if full else []
    return CaseResult("DOPS Fig. 10 (Llama-2-7B, HP64): speed-up over PD and NPU-PIM "
                      "co-utilisation (Eq. 5), overlap",
                      ["method", "workloads", "median speed-up", "p90 speed-up", "median U_npu",
                       "median U_pim", "median U_co"], rows, checks,
                      notes="DOPS: Bifocal highest median, p90 and U_co" + ("" if full else
                                                "; verdict pending (the grid is unfinished)"))


def _grid_table_case(cache: Path, out: Path, jobs: int = 1) -> CaseResult:
    """The per-workload CSV of every finished grid workload and the geomean verdicts."""
    records = _grid_records(cache, jobs)
    path = out / "dops" / "dops_grid.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(grid_csv(records, {
        "rules": RULES, "records": str(cache),
        "command": f"hetopt bench --suite dops --out {out}"}))
    geo = geomean_table(records)
    rows = [[g["model"], g["platform"], f"{g['workloads']}/{GRID_SIZE}", g["paper"], g["bifocal"],
             f"±{100 * g['tolerance']:g} %", g["verdict"], g["max_bifocal"], g["slower_2pct"],
             g["source"], g["cause"]] for g in geo]
    return CaseResult("DOPS §6.2 grid: geomean Bifocal/PD per model beside the paper (overlap)",
                      ["model", "platform", "finished", "paper", "ours", "tolerance", "verdict",
                       "Bifocal/PD max", f"workloads > {100 * (SLOWER_THAN_PD - 1):g} % slower "
                       "than PD", "source", "cause"], rows,
                      [c for g in geo for c in geomean_checks(g)],
                      artifacts={"per-workload grid (CSV)": str(path.relative_to(out))})


def _model_runner(cache: Path, model: str, jobs: int) -> Callable[[], CaseResult]:
    return lambda: _model_case(cache, model, jobs)


def dops_cases(out: Path, jobs: int = 1) -> list[BenchCase]:
    """The suite's cases; ``jobs``: sweep workers (``hetopt bench --jobs``; the grid's wall time
    with 2 on 2 cores: docs/dops_analyses.md "Grid wall time")."""
    cache = Path(out) / CACHE
    cases: list[tuple[str, Callable[[], CaseResult]]] = [
        (model, _model_runner(cache, model, jobs)) for model in PAPER_GEOMEAN]
    cases += [("fig7", lambda: _fig7_case(cache, jobs)),
              ("fig10", lambda: _fig10_case(cache, jobs)),
              ("grid-table", lambda: _grid_table_case(cache, Path(out), jobs))]
    return [BenchCase("dops", name, run) for name, run in cases]
