"""P3 serving-plan cases of the default ``hetopt bench`` suite: exactness on tiny instances,
the planner ablation (OpWeave §6 setting) and a sample of the cost table (Fig. 9/13)."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from opt.app.bench.checks import (
    EXACT,
    Check,
    agrees,
    invariant,
    notes_text,
    paper_figure,
    stopped_by_clock,
)
from opt.app.bench.runner import BenchCase, CaseResult
from opt.app.viewer.html import write_view
from opt.common.report import fmt
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.serving.builder import ServingWorkload, build_serving_plan
from opt.serving.instance import ServingGrid, ServingInstance
from solvers.api import solve

SUITE = "serving"
SWITCHES = ((True, True), (True, False), (False, True), (False, False))
#: wall-clock seconds the searches (enum, bnb, baselines) may take before they stop: a safety
#: limit, hundreds of times what they need; a search it stops (``timed_out``) makes its checks
#: notes, never failures (opt.app.bench.checks.stopped_by_clock)
SEARCH_SAFETY_S = 1800.0


def search(inst: ServingInstance, method: str, **params: Any) -> Any:
    """``method`` on ``inst`` under :data:`SEARCH_SAFETY_S`."""
    return solve(inst, method, time_limit=SEARCH_SAFETY_S, **params)


def timed_out(*results: Any) -> str:
    """A note naming the results the wall clock stopped (``""`` when none did)."""
    cut = [r.method for r in results if stopped_by_clock(r)]
    return f"{', '.join(cut)} stopped by the wall clock: not checked" if cut else ""


def tiny_serving_instance(model: str = "gemma-3-27b", layers: int = 4,
                          pattern: tuple[str, ...] = ("sliding", "full"),
                          gpus: tuple[str, ...] = ("H100",), context: int = 32768,
                          slo_ms: float = 10.0, batches: tuple[int, ...] = (1, 2, 4, 8)
                          ) -> ServingInstance:
    """A real model card cut to ``layers`` layers with a short attention pattern, a small grid
    (TP 1/2, batches 1–8 by default, K ≤ 2, μ ≤ 2): small enough for exhaustive enumeration."""
    card = replace(bundled_cards()[model], layers=layers, layer_pattern=pattern)
    grid = ServingGrid(max_gpus=8, max_owners=2, max_replicas=4, max_microbatches=2,
                       batches=batches)
    return build_serving_plan(card, bundled_catalog(), list(gpus),
                              ServingWorkload(context, slo_ms / 1e3), grid=grid,
                              tp_degrees=(1, 2), gpu_cost="roofline")  # sized for 20 s MILPs


def exact_case() -> CaseResult:
    """Tiny instances: the exhaustive enumeration's exact optimum over the full template space
    (exact periods, problems.md §3.2) between the MILP's bound (the old formula's optimum) and
    the MILP plan's exact cost (the MILP has a wall-clock limit: a bound or plan it did not
    reach in time is a note); B&B with every switch setting = its own exhaustive optimum;
    exhaustive optimum ≤ B&B (regularity's cost). The searches run under
    :data:`SEARCH_SAFETY_S`; one it stops turns its checks into notes."""
    cases = [("gemma-like 4L (sliding, full), H100", tiny_serving_instance()),
             ("gemma-like 4L (sliding, full), A100+L40S, 64K",
              tiny_serving_instance(gpus=("A100", "L40S"), context=65536, slo_ms=6.0,
                                    batches=(8, 16, 32, 64))),
             ("gemma-like 3L, truncated block", tiny_serving_instance(layers=3)),
             ("qwen3-next-like 4L (linear, full), H100+A100",
              tiny_serving_instance("qwen3-next-80b-a3b", 4, ("linear", "full"),
                                    ("H100", "A100"), slo_ms=20.0))]
    rows, checks, notes = [], [], []
    for name, inst in cases:
        enum = search(inst, "enum")
        milp = solve(inst, "milp", time_limit=60, num_workers=1, seed=0)
        bnbs = [search(inst, "bnb", frontier=fr, bounds=bd) for fr, bd in SWITCHES]
        plain = search(inst, "bnb", frontier=False, bounds=False)
        tiled_ref = plain.objective
        rows.append([name, inst.n_ops, enum.objective, milp.lower_bound, milp.objective,
                     milp.status, milp.runtime_s, bnbs[0].objective, enum.runtime_s,
                     bnbs[0].runtime_s,
                     None if enum.objective is None or bnbs[0].objective is None
                     else 100 * (bnbs[0].objective / enum.objective - 1)])
        opt = enum.objective
        cut = timed_out(enum, *bnbs, plain)
        if cut:  # a reference the clock stopped: nothing to compare with
            notes.append(f"{name}: {cut}")
            continue
        checks.append(invariant(f"{name}: exhaustive search proves an optimum",
                                [enum.status, opt], "OPTIMAL",
                                enum.status == "OPTIMAL" and opt is not None))
        if opt is not None:
            check, note = agrees(f"{name}: MILP", milp, opt, rel=1e-9)
            checks.append(check)
            notes.append(note)
        checks.append(invariant(f"{name}: B&B, 4 switch settings = its exhaustive optimum",
                                [b.objective for b in bnbs], tiled_ref,
                                all(abs(b.objective - tiled_ref) <= 1e-12 * tiled_ref
                                    for b in bnbs)))
        checks.append(invariant(f"{name}: exhaustive optimum <= B&B", opt,
                                f"<= {bnbs[0].objective}",
                                opt is not None and bnbs[0].objective is not None
                                and opt <= bnbs[0].objective * (1 + 1e-12)))
    return CaseResult("P3 exactness on tiny instances ($ per million tokens, exact periods)",
                      ["instance", "ops/block", "enum", "milp bound", "milp plan", "status",
                       "milp s", "bnb", "enum s", "bnb s", "regularity cost %"], rows, checks,
                      notes=notes_text(*notes))


def _ablation_instance(model: str, gpus: tuple[str, ...], context: int, slo_ms: float):
    return build_serving_plan(bundled_cards()[model], bundled_catalog(), list(gpus),
                              ServingWorkload(context, slo_ms / 1e3))


def planner_ablation(model: str = "gemma-3-27b", gpus: tuple[str, ...] = ("H100",),
                     context: int = 32768, slo_ms: float = 60.0, repeats: int = 3,
                     sub_block_layers: int | None = 1) -> CaseResult:
    """OpWeave's planner ablation: the four frontier/bound settings on the paper's grid (≤ 32
    GPUs, ≤ 3 owners, ≤ 4 replicas, ≤ 4 microbatches) over the space of ``sub_block_layers``
    (None: every length, the default planner); wall time median of ``repeats`` runs and its
    ratio to the plain search (no frontier, no bounds) measured in the same run."""
    inst = _ablation_instance(model, gpus, context, slo_ms)
    space: dict[str, Any] = ({} if sub_block_layers is None
                             else {"sub_block_layers": sub_block_layers})
    results, times = [], []
    for fr, bd in SWITCHES:
        runs = []
        for _ in range(repeats if (fr or bd) else 1):
            t0 = time.perf_counter()
            res = search(inst, "bnb", frontier=fr, bounds=bd, **space)
            runs.append(time.perf_counter() - t0)
        results.append(res)
        times.append(statistics.median(runs))
    plain = times[-1]
    rows = []
    for (fr, bd), res, t in zip(SWITCHES, results, times):
        s = res.stats["search"]
        rows.append([fr, bd, s["space"], s["candidates"], s["nodes"], s["evaluations"], t,
                     plain / t if t > 0 else None, res.objective])
    objs = [r.objective for r in results]
    cut = timed_out(*results)
    checks = [] if cut else [
        invariant("all four settings find the same plan cost", objs, objs[-1],
                  all(o is not None and abs(o - objs[-1]) <= 1e-12 * objs[-1] for o in objs),
                  source="OpWeave §6 planner ablation (every variant, the same plan)")]
    return CaseResult(f"planner ablation: {model}, {'+'.join(gpus)}, {context // 1024}K, "
                      f"{slo_ms:g} ms, 1-layer templates (times: median, shared machine)",
                      ["frontier", "bounds", "space", "candidates", "nodes", "evaluations",
                       "wall s", "speed-up vs plain", "$/Mtok"], rows, checks,
                      notes=cut, data={"solution": results[0].solution})


def default_planner_rows(cases) -> list[list]:
    """The default planner (every sub-block length, frontiers and bounds) on each case: its
    time (target < 60 s, reported, not asserted: wall time on a shared machine
    is not a correctness property), plan cost, stages per token and search counts."""
    rows = []
    for model, gpus, context, slo_ms in cases:
        inst = _ablation_instance(model, gpus, context, slo_ms)
        t0 = time.perf_counter()
        res = search(inst, "bnb")
        wall = time.perf_counter() - t0
        s = res.stats["search"]
        sol = res.solution or {}
        rows.append([model, "+".join(gpus), context, slo_ms, s["sequences"],
                     s["sequences_pruned"], s["exact_evaluations"], wall, res.objective,
                     sol.get("stages_per_token")])
    return rows


def ablation_case() -> CaseResult:
    res = planner_ablation()
    mixed = planner_ablation(gpus=("H100", "A100"), repeats=1)
    res.rows += [["H100+A100", *r[1:]] if i == 0 else r for i, r in enumerate(mixed.rows)]
    res.checks += [replace(c, name=f"H100+A100: {c.name}") for c in mixed.checks]
    rows = default_planner_rows([("gemma-3-27b", ("H100",), 32768, 60.0),
                                 ("gemma-3-27b", ("H100", "A100"), 32768, 60.0)])
    res.data["default_planner"] = {"headers": ["model", "GPUs", "context", "SLO ms",
                                               "sequences", "pruned", "exact evaluations",
                                               "wall s", "$/Mtok", "stages/token"],
                                   "rows": rows}
    res.notes = notes_text(res.notes, mixed.notes and f"H100+A100: {mixed.notes}",
                           "rows 5-8: the same on H100 + A100; the default planner (every "
                           "sub-block length, frontiers + bounds): " + "; ".join(
                               f"{r[1]} {fmt(r[7])} s, {fmt(r[8])} $/Mtok, {fmt(r[9])} "
                               f"stages/token" for r in rows))
    return res


#: The cell whose B&B plan the bench draws in the viewer: a disaggregated plan (24 stages per
#: token, OpWeave Fig. 10's structure) that is 1.6x cheaper than the best baseline.
VIEWED_CELL = ("qwen3-next-80b-a3b", ("H100",), 40.0)


def costs_case(root: Path | None = None) -> CaseResult:
    """A sample of the cost table: COL / AFD / CAD / B&B at 32K, both SLOs, H100 and
    H100 + A100 (the full grid: ``hetopt sweep serving``); AFD/CAD stage counts (OpWeave
    Fig. 10). With ``root``, the B&B plan of :data:`VIEWED_CELL` is written as a viewer page
    (``<root>/viewer/serving-plan.html``)."""
    cat, cards = bundled_catalog(), bundled_cards()
    rows: list[list] = []
    checks: list[Check] = []
    artifacts: dict[str, str] = {}
    notes: list[str] = []
    for model, slos, stages in (("gemma-3-27b", (25.0, 60.0), 124),
                                ("qwen3-next-80b-a3b", (40.0, 80.0), 96)):
        for gpus in (("H100",), ("H100", "A100")):
            for slo in slos:
                inst = build_serving_plan(cards[model], cat, list(gpus),
                                          ServingWorkload(32768, slo / 1e3))
                res = {m: search(inst, m) for m in ("col", "afd", "cad", "bnb")}
                costs = {m: r.objective for m, r in res.items()}
                base = [c for m, c in costs.items() if m != "bnb" and c is not None]
                rows.append([model, "+".join(gpus), slo, *costs.values(),
                             min(base) / costs["bnb"] if base and costs["bnb"] else None])
                cell = f"{model} {'+'.join(gpus)} {slo:g} ms"
                if stopped_by_clock(res["bnb"]):  # a cut B&B may miss what it would find
                    notes.append(f"{cell}: {timed_out(res['bnb'])}")
                else:
                    checks.append(invariant(f"{cell}: B&B <= baselines", costs["bnb"],
                                            f"<= {min(base):.6g}" if base else None,
                                            costs["bnb"] is not None and
                                            all(costs["bnb"] <= b * (1 + 1e-12)
                                                for b in base)))
                if gpus == ("H100",) and slo == slos[-1]:
                    for m in ("afd", "cad"):
                        checks.append(paper_figure(
                            f"{model}: {m.upper()} stages per token",
                            float(res[m].solution["stages_per_token"]), float(stages), EXACT,
                            "OpWeave Fig. 10"))
                if root is not None and (model, gpus, slo) == VIEWED_CELL:
                    artifacts.update(plan_view(inst, res["bnb"], root,
                                               f"{model} H100 32K {slo:g} ms, B&B"))
    return CaseResult("P3 cost per token, $ per million output tokens (32K context)",
                      ["model", "GPUs", "SLO ms", "col", "afd", "cad", "bnb",
                       "best baseline / bnb"], rows, checks, notes=notes_text(*notes),
                      artifacts=artifacts)


#: The serving plan's page in the bench report.
PLAN_PAGE = "viewer/serving-plan.html"


def plan_view(inst: ServingInstance, res: Any, root: Path, title: str, *,
              page: str = PLAN_PAGE) -> dict[str, str]:
    """Write the viewer page of a certified serving plan to ``root / page``; label → page."""

    (root / page).parent.mkdir(parents=True, exist_ok=True)
    write_view(inst, res.solution, root / page, title=title)
    return {f"serving plan ({title})": page}


def serving_cases(root: Path | None = None) -> list[BenchCase]:
    """The serving cases in print order; with ``root`` (the bench folder) the cost case also
    writes the viewer page of one B&B plan there."""
    return [BenchCase(SUITE, "serving-exact", exact_case),
            BenchCase(SUITE, "serving-ablation", ablation_case),
            BenchCase(SUITE, "serving-costs", lambda: costs_case(root))]
