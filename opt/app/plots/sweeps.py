"""Plots of sweep records: speedup heat maps (like DOPS Fig. 14) and OpWeave cost bars.

* :func:`plot_speedup_heatmap` — from ``hetopt sweep placement`` (or ``layout``) records:
  speedup of a method over a baseline (default PD) = makespan(baseline) / makespan(method), one
  heat map per (model, platform) × batch with prefill L_in across and decode L_out down; cells
  without both schedules are grey.
* :func:`plot_serving_costs` — from ``hetopt sweep serving`` records: $ per million output
  tokens per method, grouped per cell (model, GPU mix, context, SLO); an infeasible method is
  an × at the bottom with "infeasible", an ERROR record "ERROR".

Only records that pass :func:`opt.app.runs.sweep.usable` (solved, not marked invalid) give a number;
matplotlib (the ``plot`` extra) is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opt.app.plots.common import _pyplot, _save
from opt.app.runs.sweep import BASELINE, geomean, speedups, usable
from opt.common.errors import InputError
from opt.common.jsonio import read_json


def load_records(folder: str | Path, kind: str = "placement") -> list[dict[str, Any]]:
    """The records (``*.json``, not temporary files) under ``folder`` of a ``placement`` sweep
    (they have a ``platform`` and ``makespan``) or a ``serving`` sweep (``gpus`` and
    ``cost_usd_per_mtok``); unreadable files are skipped. Sorted by path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"no such results folder: {folder}", field="results")
    need = {"placement": ("platform", "makespan"), "serving": ("gpus", "cost_usd_per_mtok")}
    if kind not in need:
        raise InputError(f"unknown record kind {kind!r}; known: {', '.join(need)}",
                         field="kind")
    out = []
    for p in sorted(folder.rglob("*.json")):
        try:
            rec = read_json(p)
        except InputError:
            continue
        if isinstance(rec, dict) and all(k in rec for k in need[kind]) and "method" in rec:
            out.append(rec)
    if not out:
        raise InputError(f"no {kind} sweep records under {folder}", field="results")
    return out


def plot_speedup_heatmap(records: Sequence[dict[str, Any]], path: str | Path, *,
                         method: str = "bifocal", baseline: str = BASELINE) -> dict[str, Any]:
    """:func:`figure_speedup_heatmap` written to ``path`` (PNG); returns its numbers and the
    path."""
    fig, info = figure_speedup_heatmap(records, method=method, baseline=baseline)
    return {"path": _save(fig, path), **info}


def figure_speedup_heatmap(records: Sequence[dict[str, Any]], *, method: str = "bifocal",
                           baseline: str = BASELINE) -> tuple[Any, dict[str, Any]]:
    """Speedup of ``method`` over ``baseline`` per (prefill, decode), one panel per
    (model, platform) × batch: the matplotlib Figure and the panels' matrices with the geomean
    per panel."""
    methods = {r["method"] for r in records}
    for m in (method, baseline):
        if m not in methods:
            raise InputError(f"method '{m}' is not in the sweep records (have: "
                             f"{', '.join(sorted(methods))})", field="method")
    plt = _pyplot()
    sp = speedups(records, baseline)
    rows = sorted({(r["model"], r["platform"]) for r in records})
    batches = sorted({r["batch"] for r in records})
    fig, axes = plt.subplots(len(rows), len(batches), squeeze=False,
                             figsize=(max(6.5, 1.0 + 3.6 * len(batches)),
                                      0.9 + 3.2 * len(rows)))
    panels = []
    im = None
    finite = [v for (k, m), v in sp.items() if m == method and v]
    vmax = max([1.05] + [abs(np.log2(v)) for v in finite])
    for i, (model, platform) in enumerate(rows):
        for j, batch in enumerate(batches):
            ax = axes[i][j]
            recs = [r for r in records if (r["model"], r["platform"], r["batch"]) ==
                    (model, platform, batch)]
            pre = sorted({r["prefill"] for r in recs})
            dec = sorted({r["decode"] for r in recs})
            grid = np.full((len(dec), len(pre)), np.nan)
            for r in recs:
                if r["method"] == method:
                    v = sp.get(((model, platform, r["prefill"], r["decode"], batch), method))
                    if v:
                        grid[dec.index(r["decode"]), pre.index(r["prefill"])] = v
            cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#dddddd")
            im = ax.imshow(np.log2(grid), cmap=cmap, vmin=-vmax, vmax=vmax, aspect="auto",
                           origin="lower")
            for (y, x), v in np.ndenumerate(grid):
                ax.text(x, y, "–" if np.isnan(v) else f"{v:.2f}", ha="center", va="center",
                        fontsize=8)
            ax.set_xticks(range(len(pre)))
            ax.set_xticklabels(pre, fontsize=8)
            ax.set_yticks(range(len(dec)))
            ax.set_yticklabels(dec, fontsize=8)
            ax.set_xlabel("prefill L_in (tokens)")
            ax.set_ylabel("decode L_out (steps)")
            g = geomean([v for v in grid.ravel() if np.isfinite(v)])
            ax.set_title(f"{model} {platform} batch {batch}\ngeomean "
                         f"{'–' if g is None else f'{g:.2f}'}×", fontsize=9)
            panels.append({"model": model, "platform": platform, "batch": batch,
                           "prefill": pre, "decode": dec,
                           "speedup": [[None if np.isnan(v) else float(v) for v in row]
                                       for row in grid], "geomean": g})
    fig.suptitle(f"speedup of {method} over {baseline.upper()}\n"
                 f"(makespan {baseline} / makespan {method}; grey: no schedule)", fontsize=10)
    fig.tight_layout()
    cb = fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, pad=0.02)
    cb.set_label("log₂ speedup (> 0: faster than the baseline)", fontsize=8)
    return fig, {"method": method, "baseline": baseline, "panels": panels}


def plot_serving_costs(records: Sequence[dict[str, Any]], path: str | Path, *,
                       methods: Sequence[str] | None = None) -> dict[str, Any]:
    """:func:`figure_serving_costs` written to ``path`` (PNG); returns its numbers and the
    path."""
    fig, info = figure_serving_costs(records, methods=methods)
    return {"path": _save(fig, path), **info}


def figure_serving_costs(records: Sequence[dict[str, Any]], *,
                         methods: Sequence[str] | None = None) -> tuple[Any, dict[str, Any]]:
    """Grouped bars: $ per million output tokens per method for every cell of a serving sweep
    (COL / AFD / CAD / B&B ...); infeasible and ERROR records are marked, not drawn as bars.
    The matplotlib Figure and the cells with their costs (None where no valid plan)."""
    plt = _pyplot()
    order = ("col", "afd", "cad", "bnb", "milp", "enum")
    have = list(dict.fromkeys(r["method"] for r in records))
    methods = list(methods) if methods else sorted(have, key=lambda m: (
        order.index(m) if m in order else len(order), m))
    cells: dict[tuple, dict[str, dict]] = {}
    for r in records:
        key = (r["model"], "+".join(r["gpus"]), r["context"], r["slo_ms"])
        cells.setdefault(key, {})[r["method"]] = r
    keys = sorted(cells)
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 + 0.45 * len(keys) * len(methods)), 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    table = []
    top = max([r["cost_usd_per_mtok"] for r in records
               if usable(r, "cost_usd_per_mtok")] + [1e-9])
    marks = 0
    for j, m in enumerate(methods):
        xs = np.arange(len(keys)) + (j - (len(methods) - 1) / 2) * width
        vals = []
        for x, key in zip(xs, keys):
            r = cells[key].get(m)
            v = r["cost_usd_per_mtok"] if r is not None and usable(r, "cost_usd_per_mtok") \
                else None
            vals.append(v)
            if r is not None and v is None:
                text = "ERROR" if r.get("status") == "ERROR" or r.get("invalid") \
                    else "infeasible"
                ax.plot([x], [top * 0.02], marker="x", color=colours[j % len(colours)], ms=7)
                ax.text(x, top * 0.05, text, rotation=90, ha="center", va="bottom", fontsize=7)
                marks += 1
        ax.bar(xs, [np.nan if v is None else v for v in vals], width,
               color=colours[j % len(colours)], label=m)
        for key, v in zip(keys, vals):
            table.append({"cell": list(key), "method": m, "cost_usd_per_mtok": v})
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{mo}\n{g}\n{c // 1024}K, {s:g} ms" for mo, g, c, s in keys],
                       fontsize=7)
    ax.set_ylabel("$ per million output tokens")
    ax.set_title("serving-plan cost per token (× = no valid plan: infeasible under the SLO, "
                 "or ERROR)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig, {"methods": methods, "cells": len(keys), "marked": marks, "costs": table}
