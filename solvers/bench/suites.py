"""Benchmark suites of ``hetopt bench --suite NAME``: the default suite (about ten minutes on
two cores) and the large ones, which run the papers' full grids through the resumable sweeps
(their per-record caches live under ``<out>/<suite>/cache/``, so an interrupted suite resumes
inside a case too).

=============  ==============================================================================
suite          cases
=============  ==============================================================================
``default``    core (cards, OpWeave closed forms, PIM calibration, theorems), placement
               (reference optima, exact models, heuristic gaps, full-size build, DOPS sweep
               sample), serving plans (exactness, planner ablation, cost sample)
``opweave``    the full OpWeave cost table (Gemma-3-27B 25/60 ms and Qwen3-Next-80B-A3B 40/80
               ms × 8K/32K/128K × H100, H100+L40S, H100+A100 × COL/AFD/CAD/B&B) and the
               detailed-cost-model theorem check
``dops``       DOPS' scheduling sweep over its seven models on their platforms (the full grid
               for dops-qwen-1.8b and Llama-2-7B, corners for the rest; Bifocal, HEFT, PD,
               4 static policies), Fig. 7 and Fig. 10 beside the paper (solvers.bench.dops)
=============  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from opt.common.errors import UnknownNameError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.runs.bench import BenchCase, CaseResult
from opt.runs.bench_checks import invariant


def default_suite(out: Path) -> list[BenchCase]:
    """Core, placement and serving cases; the viewer pages go to ``<out>/viewer/``."""
    from opt.runs.bench_cases import core_cases
    from solvers.bench.placement import placement_cases
    from solvers.bench.serving import serving_cases

    return core_cases() + placement_cases(out) + serving_cases(out)


def _opweave_records(cache: Path) -> list[dict]:
    """The 36 cells × COL / AFD / CAD / B&B of OpWeave's cost table (resumable sweep)."""
    from opt.runs.serving_sweep import cells, run_serving_sweep
    from solvers.sweep_calls import SolveCall

    records = []
    for model, slos in (("gemma-3-27b", (25.0, 60.0)), ("qwen3-next-80b-a3b", (40.0, 80.0))):
        todo = cells([model], ["H100", "H100,L40S", "H100,A100"], [8192, 32768, 131072], slos)
        done = run_serving_sweep(todo, ["col", "afd", "cad", "bnb"], cache / "serving",
                                 SolveCall(time_limit=600.0), catalog=bundled_catalog(),
                                 cards=bundled_cards())
        records += [r for r, _ in done]
    return records


def _opweave_table(cache: Path) -> CaseResult:
    from solvers.bench.opweave_figures import METHODS, Cells, opweave_checks

    by_cell: Cells = {}
    for r in _opweave_records(cache):
        by_cell.setdefault((r["model"], "+".join(r["gpus"]), r["context"], r["slo_ms"]),
                           {})[r["method"]] = r
    rows, worse = [], []
    for (model, gpus, ctx, slo), recs in by_cell.items():
        costs = {m: recs[m]["cost_usd_per_mtok"] for m in METHODS}
        base = [c for m, c in costs.items() if m != "bnb" and c is not None]
        rows.append([model, gpus, f"{ctx // 1024}K", slo, *costs.values(),
                     min(base) / costs["bnb"] if base and costs["bnb"] else None])
        if costs["bnb"] is not None and any(costs["bnb"] > b * (1 + 1e-12) for b in base):
            worse.append(f"{model} {gpus} {ctx} {slo}")
    checks = [invariant("B&B <= every baseline in every cell", worse, [], not worse),
              *opweave_checks(by_cell)]
    return CaseResult("OpWeave cost table, $ per million output tokens (full grid)",
                      ["model", "GPUs", "context", "SLO ms", *METHODS,
                       "best baseline / bnb"], rows, checks,
                      notes=f"{len(rows)} cells; '-' marks a method with no plan meeting the "
                            f"SLO; per-record files under {cache / 'serving'}")


def _theorems_detailed(cache: Path) -> CaseResult:
    from solvers.serving.detailed_gains import DETAILED_CLAIMS, verify_detailed

    res = verify_detailed(catalog=bundled_catalog(), cards=bundled_cards(),
                          out=cache / "verify-detailed", progress=False)
    rows = [[c.claim, c.samples, c.passed, c.failed, c.worst_margin, DETAILED_CLAIMS[c.claim]]
            for c in res["claims"]]
    checks = [invariant(f"{c.claim} (structural): {DETAILED_CLAIMS[c.claim]}", c.failed, 0,
                        c.ok, source="OpWeave Theorems 3.1/3.2 (docs/bounds.md)")
              for c in res["claims"] if c.claim in ("D3.1a", "D3.2a")]
    return CaseResult("Theorems 3.1/3.2 in the detailed cost model (failures of the idealised "
                      "claims are findings, docs/bounds.md)",
                      ["claim", "samples", "hold", "fail", "worst margin", "statement"], rows,
                      checks)


def opweave_suite(out: Path) -> list[BenchCase]:
    cache = out / "opweave" / "cache"
    return [BenchCase("opweave", "cost-table", lambda: _opweave_table(cache)),
            BenchCase("opweave", "theorems-detailed", lambda: _theorems_detailed(cache))]


def dops_suite(out: Path) -> list[BenchCase]:
    from solvers.bench.dops import dops_cases

    return dops_cases(out)


SUITES: dict[str, Callable[[Path], list[BenchCase]]] = {
    "default": default_suite,
    "opweave": opweave_suite,
    "dops": dops_suite,
}


def suite_cases(name: str, out: Path) -> list[BenchCase]:
    """The cases of suite ``name`` (:class:`UnknownNameError` listing the suites)."""
    if name not in SUITES:
        raise UnknownNameError("bench suite", name, SUITES)
    return SUITES[name](Path(out))
