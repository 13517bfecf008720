"""``hetopt sweep serving``: cost per token of COL / AFD / CAD / B&B plans over models × GPU
mixes × contexts × TPOT SLOs (OpWeave Fig. 9/13).

Each (model, GPU mix, context, SLO) instance is built once (:mod:`opt.serving_builder`) and
solved with every method; one JSON record per (cell, method) is written as soon as it finishes,
to ``<out>/<model>/<gpus>/s<context>-slo<ms>/<method>.json``, so a rerun skips finished cells.
The caller passes ``solve(instance, method) -> Result`` (the core never imports solvers).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.errors import InputError
from opt.jsonio import read_json, write_json
from opt.report import table
from opt.serving import ServingGrid
from opt.serving_builder import DEFAULT_TP, ServingWorkload, build_serving_plan
from opt.sweep import Progress

BASELINES = ("col", "afd", "cad")


@dataclass(frozen=True)
class ServingCell:
    model: str
    gpus: tuple[str, ...]
    context: int
    slo_ms: float

    @property
    def gpu_tag(self) -> str:
        return "+".join(self.gpus)

    def folder(self, out: Path) -> Path:
        return Path(out) / self.model / self.gpu_tag / f"s{self.context}-slo{self.slo_ms:g}"

    def label(self) -> str:
        return f"{self.model} {self.gpu_tag} {self.context // 1024}K {self.slo_ms:g}ms"


def cells(models: Sequence[str], gpu_mixes: Sequence[str], contexts: Sequence[int],
          slos_ms: Sequence[float]) -> list[ServingCell]:
    """Every combination; a GPU mix is a comma-separated list of GPU types."""
    mixes = [tuple(g.strip() for g in mix.split(",") if g.strip()) for mix in gpu_mixes]
    return [ServingCell(m, g, c, s) for m, g, c, s in
            itertools.product(dict.fromkeys(models), dict.fromkeys(mixes),
                              dict.fromkeys(contexts), dict.fromkeys(slos_ms))]


def make_record(cell: ServingCell, method: str, result: Any, wall_s: float) -> dict[str, Any]:
    sol = result.solution
    return {"model": cell.model, "gpus": list(cell.gpus), "context": cell.context,
            "slo_ms": cell.slo_ms, "method": method, "status": result.status,
            "cost_usd_per_mtok": result.objective, "lower_bound": result.lower_bound,
            "t_rtt_ms": result.stats.get("t_rtt_ms"),
            "tightest_t_rtt_ms": result.stats.get("tightest_t_rtt_ms"),
            "bottleneck": result.stats.get("bottleneck"), "gpus_used": result.stats.get("gpus"),
            "stages_per_token": None if sol is None else sol["stages_per_token"],
            "plan": None if sol is None else {k: sol[k] for k in
                                              ("template", "owners", "microbatches")},
            "search": result.stats.get("search"), "message": result.stats.get("message"),
            "runtime_s": result.runtime_s, "wall_s": wall_s}


def run_serving_sweep(todo: Sequence[ServingCell], methods: Sequence[str], out: Path,
                      solve: Callable[[Any, str], Any], *, catalog, cards,
                      grid: ServingGrid | None = None, tp_degrees: Sequence[int] = DEFAULT_TP,
                      resume: bool = True, progress: Progress | None = None
                      ) -> list[tuple[dict[str, Any], bool]]:
    """Solve every cell with every method; (record, was_cached) pairs in grid order."""
    for cell in todo:  # bad names fail before any solving
        cards[cell.model]
        for g in cell.gpus:
            catalog.device(g)
        if cell.context < 1 or cell.slo_ms <= 0:
            raise InputError(f"context must be ≥ 1 and SLO > 0, got {cell.context} tokens, "
                             f"{cell.slo_ms} ms", field="contexts/slo")
    done: list[tuple[dict[str, Any], bool]] = []
    try:
        for cell in todo:
            inst = None
            for method in dict.fromkeys(methods):
                path = cell.folder(out) / f"{method}.json"
                if progress:
                    progress.start(f"{cell.label()} {method}")
                if resume and path.exists():
                    try:
                        done.append((read_json(path), True))
                        if progress:
                            progress.finish_item(None)
                        continue
                    except InputError:
                        pass  # torn file: recompute
                t0 = time.perf_counter()
                if inst is None:
                    inst = build_serving_plan(cards[cell.model], catalog, cell.gpus,
                                              ServingWorkload(cell.context, cell.slo_ms / 1e3),
                                              grid=grid, tp_degrees=tp_degrees)
                rec = make_record(cell, method, solve(inst, method), time.perf_counter() - t0)
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + ".tmp")
                write_json(rec, tmp)
                tmp.replace(path)
                done.append((rec, False))
                if progress:
                    progress.finish_item(time.perf_counter() - t0)
    except BaseException:
        if progress:
            progress.abort()
        raise
    if progress:
        progress.close()
    return done


def render(records: Sequence[dict[str, Any]]) -> str:
    """One row per cell: $ per million tokens per method (INFEASIBLE marked '-- (x ms)' with the
    tightest T_rtt), and the best baseline's cost over the best other plan's."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    by_cell: dict[tuple, dict[str, dict]] = {}
    for r in records:
        by_cell.setdefault((r["model"], "+".join(r["gpus"]), r["context"], r["slo_ms"]),
                           {})[r["method"]] = r
    rows = []
    for (model, gpus, ctx, slo), recs in by_cell.items():
        row: list[Any] = [model, gpus, f"{ctx // 1024}K", slo]
        for m in methods:
            r = recs.get(m)
            if r is None:
                row.append("")
            elif r["cost_usd_per_mtok"] is None:
                tight = r.get("tightest_t_rtt_ms")
                row.append("infeasible" + (f" ({tight:.0f} ms)" if tight else ""))
            else:
                row.append(f"{r['cost_usd_per_mtok']:.4f}")
        base = [recs[m]["cost_usd_per_mtok"] for m in BASELINES
                if m in recs and recs[m]["cost_usd_per_mtok"] is not None]
        others = [recs[m]["cost_usd_per_mtok"] for m in recs
                  if m not in BASELINES and recs[m]["cost_usd_per_mtok"] is not None]
        row.append(f"{min(base) / min(others):.3f}" if base and others else "")
        rows.append(row)
    return table(["model", "GPUs", "context", "SLO ms", *[f"{m} $/Mtok" for m in methods],
                  "best baseline / best"], rows)
