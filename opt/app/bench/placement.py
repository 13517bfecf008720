"""Placement cases of the default ``hetopt bench`` suite (exact models, HEFT, builder scale)."""

from __future__ import annotations

import tempfile
import time
import tracemalloc
from pathlib import Path

import instances
from heuristics.placement.bifocal import BifocalParams, bifocal_schedule
from instances.generated import gap_case
from opt.app.bench.checks import (
    EXACT,
    RATIO,
    agrees,
    invariant,
    notes_text,
    paper_figure,
    proves,
    stopped_by_clock,
)
from opt.app.bench.runner import BenchCase, CaseResult
from opt.app.runs.sweep import geomean_speedups, grid, run_sweep, speedups, workload_key
from opt.app.viewer.html import write_page
from opt.app.viewer.placement import placement_payload
from opt.common.report import fmt
from opt.common.units import TIME_UNITS
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.io import read_instance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement
from solvers.api import solve
from solvers.registry import methods, names, parsed_params

SUITE = "placement"


#: seconds for cpsat-blocks on entries whose optimum it proved (provenance ``best_by``)
BLOCKS_TIME_LIMIT_S = 300.0
#: CP-SAT's limit in deterministic time (about seconds on a quiet machine, the same work on a
#: loaded one): the proofs of the bench run single-worker under it, so they are repeatable; its
#: wall-clock backstop (models.placement.cpsat_run.DETERMINISTIC_BACKSTOP times this) only stops a
#: run that hangs, and a run it stops is a note, not a failure
CPSAT_DET_LIMIT = 30.0
#: wall-clock seconds of the MILP: its outcome depends on the machine's load, so it is checked
#: against the optimum (bound <= optimum <= objective) and "not proven" is a note
MILP_TIME_LIMIT_S = 30.0


def exact_cpsat(inst, workers: int = 1):
    """CP-SAT under :data:`CPSAT_DET_LIMIT` deterministic seconds (repeatable: one worker, or
    several interleaved)."""
    return solve(inst, "cpsat", time_limit=CPSAT_DET_LIMIT, num_workers=workers, seed=0,
                 deterministic=True)


def references_case() -> CaseResult:
    """Every bundled instance with a known optimum: CP-SAT (deterministic limit: it must prove
    the optimum), the MILP (wall-clock limit: bound <= optimum <= objective, not proving it in
    time is a note) and HEFT. Optima proven by the block-branching search (``cpsat-blocks``,
    2 workers, wall-clock limit) are checked the same way by it; the monolithic models then
    must bracket the optimum."""
    rows, checks, notes = [], [], []
    for name in instances.names("placement"):
        inst, info = instances.load(name), instances.info(name)
        best_by = (info.provenance or {}).get("best_by")
        if info.optimum is None or best_by in names("layout"):
            continue  # best-known entries and P2 entries: no P1 optimum to reproduce
        blocks = best_by == "cpsat-blocks"
        # on the block search's entries CP-SAT only brackets the optimum: a wall-clock limit
        cp = solve(inst, "cpsat", time_limit=MILP_TIME_LIMIT_S, num_workers=1, seed=0) \
            if blocks else exact_cpsat(inst)
        mi = solve(inst, "milp", time_limit=MILP_TIME_LIMIT_S, num_workers=1, seed=0)
        he = solve(inst, "heft")
        ex = solve(inst, "cpsat-blocks", time_limit=BLOCKS_TIME_LIMIT_S, num_workers=2,
                   seed=0) if blocks else None
        rows.append([name, inst.n_tasks, info.optimum, cp.objective, cp.status, cp.runtime_s,
                     mi.objective, mi.status, mi.runtime_s,
                     None if ex is None else ex.status, None if ex is None else ex.runtime_s,
                     he.objective, 100 * (he.objective / info.optimum - 1)])
        known = f"instances/ index ({best_by or 'known optimum'})"
        found = [agrees(f"{name}: MILP", mi, info.optimum, source=known)]
        if ex is not None:  # a proof that needs the wall clock: agreement, and a note
            found += [agrees(f"{name}: cpsat-blocks", ex, info.optimum, source=known),
                      agrees(f"{name}: CP-SAT", cp, info.optimum, source=known)]
        else:
            found.append(proves(f"{name}: CP-SAT", cp, info.optimum, source=known))
        checks += [c for c, _ in found]
        notes += [n for _, n in found]
        checks.append(invariant(f"{name}: HEFT >= optimum", he.objective, f">= {info.optimum}",
                                he.objective >= info.optimum, source=known))
        if name == "heft-topcuoglu-2002":
            checks.append(paper_figure("HEFT makespan on the HEFT paper's example",
                                       he.objective, 80.0, EXACT,
                                       "Topcuoglu, Hariri, Wu, IEEE TPDS 2002, Fig. 2 example"))
    return CaseResult("bundled placement instances: exact optima and HEFT's gap",
                      ["instance", "tasks", "optimum", "cpsat", "status", "s", "milp", "status",
                       "s", "cpsat-blocks", "s", "heft", "heft gap %"], rows, checks,
                      notes=notes_text(*notes))


def small_llm_case() -> CaseResult:
    """A 1-layer Llama-2-7B slice on HP32 (prefill 16 + 1 decode step): CP-SAT proves its
    optimum under a deterministic limit; the MILP (wall-clock limit) agrees with it."""
    cat, cards = bundled_catalog(), bundled_cards()
    inst = build_placement(cards["llama-2-7b"], cat.platform("HP32"), cat, Workload(16, 1, 1),
                           BuildOptions(layers=1))
    res = {"cpsat": exact_cpsat(inst),
           "milp": solve(inst, "milp", time_limit=60, num_workers=2, seed=0),
           "heft": solve(inst, "heft")}
    rows = [[m, r.status, r.objective, r.lower_bound, r.gap, r.runtime_s]
            for m, r in res.items()]
    cp = res["cpsat"]
    proven = not stopped_by_clock(cp) and cp.status == "OPTIMAL"
    checks = [invariant("CP-SAT proves an optimum (deterministic limit)",
                        [cp.status, cp.objective], "OPTIMAL",
                        proven or stopped_by_clock(cp))]
    note = "" if proven else f"CP-SAT stopped by its wall-clock backstop ({cp.status})"
    if proven:  # the MILP against CP-SAT's optimum: its proof needs the clock
        check, milp_note = agrees("MILP", res["milp"], cp.objective)
        checks.append(check)
        note = notes_text(note, milp_note)
    floor = cp.objective if proven else cp.lower_bound
    checks.append(invariant("HEFT >= optimum" if proven else "HEFT >= CP-SAT's bound",
                            res["heft"].objective, f">= {floor}",
                            floor is not None and res["heft"].objective >= floor))
    return CaseResult(f"small LLM instance ({inst.n_tasks} tasks, time unit ns)",
                      ["method", "status", "objective", "lower bound", "gap", "time s"], rows,
                      checks, notes=note)


def heuristic_gap_case(n: int = 6) -> CaseResult:
    """Every heuristic against CP-SAT on seeded small LLM instances (the first ``n`` of the gap
    report's family; ``benchmarks/gap_report.py`` runs 30): no heuristic schedule below CP-SAT's
    lower bound on any instance (a bound is valid whenever the solve stopped); gaps to the
    optima CP-SAT proves within its wall-clock limit (which ones depends on the machine's load:
    a note lists the others). Under a deterministic limit CP-SAT's proofs here take minutes on
    a loaded machine, so the proofs are not what the case checks."""

    # P1 heuristics only: layout strategies choose formats, so P1 optima do not bound them
    heuristics = [m.name for m in methods("placement") if not m.exact]
    gaps: dict[str, list[float]] = {m: [] for m in heuristics}
    below: list[str] = []
    unproven: list[str] = []
    for seed in range(1000, 1000 + n):
        inst = gap_case(seed).build()
        cp = solve(inst, "cpsat", time_limit=30, num_workers=2, seed=0)
        if cp.status != "OPTIMAL":
            unproven.append(f"seed {seed} ({cp.status}, gap {fmt(cp.gap)})")
        for m in heuristics:
            r = solve(inst, m)
            if cp.status == "OPTIMAL":
                gaps[m].append(r.objective / cp.objective - 1)
            if cp.lower_bound is None or r.objective < cp.lower_bound:
                below.append(f"seed {seed}: {m} {r.objective} < CP-SAT's bound "
                             f"{cp.lower_bound}")
    checks = [invariant(f"no heuristic below CP-SAT's lower bound ({n} instances)", below,
                        [], not below)]
    rows = [[m, len(g), 100 * sum(g) / len(g) if g else None, 100 * max(g) if g else None,
             sum(x == 0 for x in g)] for m, g in gaps.items()]
    proven = n - len(unproven)
    return CaseResult(f"heuristic gaps to proven optima ({proven} of {n} small LLM instances)",
                      ["method", "instances", "mean gap %", "max gap %", "optimal"], rows, checks,
                      notes=notes_text("not proven by CP-SAT within 30 s (wall clock): "
                                       + ", ".join(unproven) if unproven else ""))


#: Where the DOPS Bifocal-over-PD figures come from.
DOPS_FIG7 = "DOPS §6.2, Fig. 7"
#: Why our Bifocal-over-PD speed-ups fall short of DOPS' Fig. 7: not yet measured under the
#: current rules (docs/departures.md); the evidence measured under the earlier ones
#: (docs/dops_analyses.md "Loads at use" and §6, the PIM cost study) is quoted as such.
DOPS_SPEEDUP_REASON = (
    "docs/departures.md: below DOPS' range; the cause is not yet measured under the current "
    "rules (overlap loads, Bifocal at the authors' configuration); under the earlier at_use "
    "rules (Bifocal/PD 1.28 on 128/128/8) the evidence pointed to the PIM cost input: ours is "
    "the AiM roofline of docs/problems.md §5.2 where DOPS Table 2 uses an operator model, and "
    "PIM GEMVs 3-4x slower than our roofline's put Bifocal/PD inside 1.89-2.43 "
    "(docs/dops_analyses.md §6)")


def full_size_case(root: Path | None = None) -> CaseResult:
    """Build, write and read the DOPS full-size workload (Llama-2-7B, HP64, 1024/1024, b16);
    with ``root``, schedule it with Bifocal (validated) and write its viewer page
    (``<root>/viewer/flagship-schedule.html``)."""
    cat, cards = bundled_catalog(), bundled_cards()
    tracemalloc.start()
    t0 = time.perf_counter()
    inst = build_placement(cards["llama-2-7b"], cat.platform("HP64"), cat,
                           Workload(1024, 1024, 16))
    build_s = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "full.json.gz"
        t0 = time.perf_counter()
        inst.write(path)
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
        t0 = time.perf_counter()
        back = read_instance(path)
        read_s = time.perf_counter() - t0
    rows = [[inst.n_tasks, inst.n_edges, len(inst.block_ids), build_s, peak / 2**20, write_s,
             read_s, size / 2**20]]
    # problems.md §1.4: 515 tasks per step with one KV home; head-sharded KV over HP64's four
    # PIM devices splits each layer's kv_write, qk, softmax, sv into 4 groups (+12 per layer).
    # One home cannot hold this workload's 34 GB of KV in 16 GB, so the task count of DOPS'
    # layout is taken without the KV's memory share (kv_memory=False, the former model)
    single = build_placement(cards["llama-2-7b"], cat.platform("HP64"), cat,
                             Workload(1024, 1024, 16),
                             BuildOptions(kv_layout="single", kv_memory=False)).n_tasks
    checks = [invariant("full-size workload, KV head-sharded over 4 PIM devices: tasks",
                        inst.n_tasks, "1025 × (515 + 32 × 12) = 921,475",
                        inst.n_tasks == 1025 * (515 + 32 * 12), source="problems.md §1.4"),
              invariant("full-size workload, one KV home: tasks", single,
                        "1025 × 515 = 527,875", single == 1025 * 515,
                        source="problems.md §1.4"),
              invariant("written and read back unchanged", back.n_edges, inst.n_edges,
                        back.n_tasks == inst.n_tasks and back.n_edges == inst.n_edges
                        and bool((back.cost == inst.cost).all()))]
    res = CaseResult("builder at DOPS full size (one core; shared machine: times are noisy)",
                     ["tasks", "edges", "blocks", "build s", "build peak MiB", "write s",
                      "read s", "file MiB"], rows, checks)
    if root is not None:
        schedule_view(inst, root, res)
    return res


#: The flagship schedule's page and label in the bench report.
FLAGSHIP_PAGE = "viewer/flagship-schedule.html"
FLAGSHIP_TITLE = "Llama-2-7B HP64 1024/1024/16, Bifocal"


def schedule_view(inst, root: Path, res: CaseResult, *, page: str = FLAGSHIP_PAGE,
                  title: str = FLAGSHIP_TITLE) -> None:
    """Schedule ``inst`` with Bifocal (no certified bound: the viewer needs the schedule
    only), validate it and write its viewer page to ``root / page``; adds a note, a check and
    the page to ``res``."""

    t0 = time.perf_counter()
    solution = bifocal_schedule(inst, BifocalParams(**parsed_params("bifocal", "placement",
                                                                    {})))
    solve_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        metrics = validate_placement(inst, solution)
    except ScheduleError as exc:
        res.checks.append(invariant(f"{title}: schedule passes the validator", str(exc),
                                    "valid", False))
        return
    validate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    (root / page).parent.mkdir(parents=True, exist_ok=True)
    header, blob = placement_payload(inst, solution, metrics=metrics, title=title)
    size = write_page(header, blob, root / page)
    res.checks.append(invariant(f"{title}: schedule passes the validator", metrics.makespan,
                                "valid", True))
    res.artifacts[f"schedule ({title})"] = page
    seconds = metrics.makespan * TIME_UNITS[inst.time_unit]
    res.notes = (f"{title}: makespan {seconds:.4g} s, scheduled in {solve_s:.0f} s, "
                 f"validated in {validate_s:.0f} s; viewer page {size / 1e6:.1f} MB "
                 f"in {time.perf_counter() - t0:.0f} s")


def _speedup_rows(records, workloads, methods) -> list[list]:
    """Per workload: tag, tasks, each method's speed-up over PD, Bifocal's certified gap."""

    sp = speedups(records)
    rows = []
    for wl in workloads:
        recs = [r for r in records if (r["prefill"], r["decode"], r["batch"]) ==
                (wl.prefill, wl.decode, wl.batch)]
        by = {r["method"]: r for r in recs}
        rows.append([wl.tag, recs[0]["tasks"]]
                    + [sp.get((workload_key(by[m]), m)) if m in by else None
                       for m in methods[1:]]
                    + [by["bifocal"]["lower_bound"] and
                       1 - by["bifocal"]["lower_bound"] / by["bifocal"]["makespan"]])
    return rows


def _sweep(workloads, methods) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        done = run_sweep(workloads, methods, Path(tmp), lambda inst, m: solve(inst, m),
                         catalog=bundled_catalog(), cards=bundled_cards())
    return [r for r, _ in done]


def dops_sweep_case() -> CaseResult:
    """A DOPS-style sweep sample: dops-qwen-1.8b on HP32, prefill {128, 512} × decode 32 ×
    batch {1, 8} at full depth (28 layers), every P1 heuristic; speedup over PD per workload
    and geomean (the full grid: ``hetopt sweep placement``, ``hetopt bench --suite dops``).
    Then two of DOPS Fig. 7's Qwen-1.8B configurations (batch 8, prefill {128, 1024}, decode
    128), PD and Bifocal only, compared with the paper's 1.89–2.43×."""

    methods = ["pd", "af", "pd+linear", "pd+attn", "pd+ffn", "heft", "bifocal"]
    workloads = grid(["dops-qwen-1.8b"], ["HP32"], [128, 512], [32], [1, 8])
    records = _sweep(workloads, methods)
    rows = _speedup_rows(records, workloads, methods)
    geo = {g["method"]: g["geomean_speedup"] for g in geomean_speedups(records)}
    rows.append(["geomean", None] + [geo.get(m) for m in methods[1:]] + [None])
    fig7 = grid(["dops-qwen-1.8b"], ["HP32"], [128, 1024], [128], [8])
    fig7_records = _sweep(fig7, ["pd", "bifocal"])
    rows += _speedup_rows(fig7_records, fig7, methods)
    every = records + fig7_records
    below = [r for r in every if r["lower_bound"] is not None and r["makespan"] is not None
             and r["makespan"] < r["lower_bound"]]
    checks = [invariant("every schedule valid (solve certifies it)",
                        sorted({r["status"] for r in every}), ["FEASIBLE"],
                        all(r["status"] == "FEASIBLE" for r in every)),
              invariant("no makespan below its certified lower bound", len(below), 0,
                        not below)]
    sp = speedups(fig7_records)
    for r in fig7_records:
        if r["method"] == "bifocal":
            checks.append(paper_figure(
                f"Bifocal over PD, {r['prefill']}/{r['decode']}/b{r['batch']} (DOPS Fig. 7, "
                f"Qwen-1.8B batch 8: 1.89-2.43x over 6 configurations)",
                sp.get((workload_key(r), "bifocal")), (1.89, 2.43), RATIO, DOPS_FIG7,
                DOPS_SPEEDUP_REASON))
    return CaseResult("DOPS sweep sample: dops-qwen-1.8b, HP32, speedup over PD (last two "
                      "rows: DOPS Fig. 7 workloads, PD and Bifocal only)",
                      ["workload", "tasks", *methods[1:], "bifocal certified gap"], rows, checks)


def placement_cases(root: Path | None = None) -> list[BenchCase]:
    """The placement cases in print order; with ``root`` (the bench folder) the full-size case
    also schedules the flagship and writes its viewer page there."""
    return [BenchCase(SUITE, "references", references_case),
            BenchCase(SUITE, "small-llm-exact", small_llm_case),
            BenchCase(SUITE, "heuristic-gaps", heuristic_gap_case),
            BenchCase(SUITE, "full-size-build", lambda: full_size_case(root)),
            BenchCase(SUITE, "dops-sweep-sample", dops_sweep_case)]
