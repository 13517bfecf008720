"""Summaries of a layout sweep (``hetopt sweep layout``, problems.md §2 strategies over workloads).

Records are those of :mod:`opt.app.runs.sweep` (one per workload × method) with the layout fields the
layout back ends add (``format_mix``, ``storage_bytes``, ``memory_budget``, for WLA
``evaluations``). Speedups are ratios of makespans over the workloads where both methods have
a schedule; their geometric means summarise a sweep. The format mix per regime is the mean
share of blocks in each format, per (batch, decode) over the prefill lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opt.app.runs.sweep import geomean, usable, workload_key
from opt.common.report import table
from opt.common.units import TIME_UNITS
from opt.placement.instance import LAYOUT_FORMATS

#: (numerator method, denominator method): speedup = makespan(num) / makespan(den)
DEFAULT_PAIRS = (("pd/linear", "bifocal/wla"), ("bifocal/linear", "bifocal/wla"),
                 ("bifocal/dual", "bifocal/wla"), ("pd/linear", "bifocal/linear"),
                 ("pd/dual", "bifocal/dual"), ("bifocal/wla", "bifocal/wla+dual"))


def makespans(records: Sequence[dict[str, Any]]) -> dict[tuple, dict[str, float]]:
    """workload key → method → makespan (only usable records: solved, valid, with a
    schedule)."""
    out: dict[tuple, dict[str, float]] = {}
    for r in records:
        if usable(r) and r["makespan"] > 0:
            out.setdefault(workload_key(r), {})[r["method"]] = float(r["makespan"])
    return out


def pair_speedups(records: Sequence[dict[str, Any]],
                  pairs: Sequence[tuple[str, str]] = DEFAULT_PAIRS) -> list[dict[str, Any]]:
    """Per pair (a, b): geomean, min and max of makespan(a)/makespan(b) over shared workloads
    (> 1: b is faster)."""
    ms = makespans(records)
    rows = []
    for a, b in pairs:
        ratios = [m[a] / m[b] for m in ms.values() if a in m and b in m]
        if ratios:
            rows.append({"over": a, "method": b, "workloads": len(ratios),
                         "geomean": geomean(ratios), "min": min(ratios), "max": max(ratios)})
    return rows


def format_shares(records: Sequence[dict[str, Any]], method: str = "bifocal/wla"
                  ) -> list[dict[str, Any]]:
    """Mean share of blocks per format for ``method``, per (batch, decode) regime."""
    groups: dict[tuple[int, int], list[dict[str, int]]] = {}
    for r in records:
        if r["method"] == method and r.get("format_mix"):
            groups.setdefault((r["batch"], r["decode"]), []).append(r["format_mix"])
    rows = []
    for (batch, decode), mixes in sorted(groups.items()):
        shares = {f: 0.0 for f in LAYOUT_FORMATS}
        for mix in mixes:
            total = sum(mix.values())
            for f, c in mix.items():
                shares[f] += c / total / len(mixes)
        dominant = max(("npu_opt", "pim_opt"), key=lambda f: shares[f])
        rows.append({"batch": batch, "decode": decode, "workloads": len(mixes), **shares,
                     "dominant": dominant if shares[dominant] > 0 else "linear"})
    return rows


def render_layout(records: Sequence[dict[str, Any]]) -> str:
    """Per-workload makespans (ms) per method, the speedup geomeans and the format mix."""

    methods = list(dict.fromkeys(r["method"] for r in records))
    unit = {workload_key(r): r.get("time_unit", "ns") for r in records}
    ms = makespans(records)
    rows = []
    for key in dict.fromkeys(workload_key(r) for r in records):
        scale = TIME_UNITS[unit[key]] / 1e-3
        row = [f"p{key[2]}-d{key[3]}-b{key[4]}"]
        row += [ms.get(key, {}).get(m, None) and ms[key][m] * scale for m in methods]
        wla = next((r for r in records if workload_key(r) == key and r["method"] == "bifocal/wla"),
                   None)
        mix = (wla or {}).get("format_mix") or {}
        row.append(" ".join(f"{f}:{c}" for f, c in mix.items()))
        rows.append(row)
    parts = [table(["workload", *[f"{m} ms" for m in methods], "WLA formats"], rows)]
    sp = pair_speedups(records)
    if sp:
        parts += ["", "speedups (makespan of 'over' / makespan of 'method'; > 1: method faster):",
                  table(["method", "over", "workloads", "geomean", "min", "max"],
                        [[x["method"], x["over"], x["workloads"], x["geomean"], x["min"],
                          x["max"]] for x in sp])]
    fs = format_shares(records)
    if fs:
        parts += ["", "bifocal/wla format mix per regime (mean share of blocks):",
                  table(["batch", "decode", "workloads", *LAYOUT_FORMATS, "dominant"],
                        [[x["batch"], x["decode"], x["workloads"],
                          *[x[f] for f in LAYOUT_FORMATS], x["dominant"]] for x in fs])]
    return "\n".join(parts)
