"""Predicted against measured latency of a P1 schedule (docs/measurements.md, DOPS Fig. 8):
per op class and overall, the instance's cost of each scheduled task on its device against the
measured-latency table's entry for that operator, and DOPS' signed gap
Δ = (S_sim − S_ver)/S_ver of the end-to-end latency when the table has an ``end_to_end`` row
of the instance's workload (S_sim: the validated makespan; S_ver: the measured latency).

A task's shape comes from the builder's meta (step 0: tokens = context = L_in; decode step i:
tokens 1, context L_in + i; batch B) and its share from the meta's tp and KV head groups
(1/tp for a TP shard; the cell's heads / H_kv for kv_write, qk, softmax, sv). Per-op gaps use
the same sign: (predicted − measured)/measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.units import TIME_UNITS
from opt.costlib.fit import CELL_KINDS, op_work
from opt.costlib.hardware import Catalog
from opt.costlib.latency import regime_class
from opt.costlib.measured import EXACT, INTERPOLATED, MeasuredTable
from opt.costlib.modelcard import CardSet, ModelCard
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement


@dataclass(frozen=True)
class ClassGap:
    """Matched ops of one class (or ``all``): summed predicted and measured seconds, the gap
    of the sums and the median per-op gap; ``unmatched`` ops had no table entry."""

    op_class: str
    matched: int
    interpolated: int
    unmatched: int
    predicted_s: float
    measured_s: float
    delta: float | None
    median_op_delta: float | None


@dataclass(frozen=True)
class EndToEnd:
    """DOPS' Δ = (S_sim − S_ver)/S_ver of the whole workload."""

    s_sim_s: float
    s_ver_s: float
    delta: float
    source: str


@dataclass(frozen=True)
class CompareReport:
    """Per-class gaps, the end-to-end gap (None without an ``end_to_end`` row)."""

    classes: tuple[ClassGap, ...]
    end_to_end: EndToEnd | None
    makespan_s: float
    table: str

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "makespan_s": self.makespan_s,
                "classes": [vars(c) for c in self.classes],
                "end_to_end": None if self.end_to_end is None else vars(self.end_to_end)}


def builder_meta(inst: PlacementInstance) -> tuple[str, str, Mapping[str, Any]]:
    """(model, platform, workload) of an instance of ``hetopt build placement``."""
    meta = inst.meta
    if not all(k in meta for k in ("model", "platform", "workload")):
        raise InputError("the instance has no builder meta (model, platform, workload); only "
                         "instances of hetopt build placement can be compared",
                         source=inst.source, field="meta")
    return str(meta["model"]), str(meta["platform"]), meta["workload"]


def task_share(name: str, kind: str, shard: int, tp: int, kv_heads: list[float],
               layout: str) -> float:
    """The share of its layer's operator a builder task computes (see the module docstring)."""
    if kind in CELL_KINDS and layout == "heads":
        group = re.search(r"@g(\d+)$", name)
        g = int(group.group(1)) if group else 0
        bounds = np.concatenate([[0.0], np.cumsum(kv_heads)])
        total = float(bounds[-1])
        lo, hi = (0.0, total) if shard < 0 else (shard * total / tp, (shard + 1) * total / tp)
        return float((min(hi, bounds[g + 1]) - max(lo, bounds[g])) / total)
    return 1.0 / tp if shard >= 0 else 1.0


def _class_of(card: ModelCard, kind: str, decode: bool) -> str:
    probe_kind = re.sub(r"^(expert|shared)\d+", r"\g<1>0", kind)
    if kind.startswith("allreduce"):
        return "collective"
    for k in (kind, probe_kind):
        try:
            op, _ = op_work(card, k, 1, 2, 1)
            return regime_class(op.op_class, decode)
        except InputError:
            continue
    return "other"


def compare_measured(inst: PlacementInstance, solution: dict[str, Any], table: MeasuredTable,
                     catalog: Catalog, cards: CardSet) -> CompareReport:
    """The predicted-versus-measured report of the validated schedule ``solution``."""
    model, platform, wl = builder_meta(inst)
    metrics = validate_placement(inst, solution)
    tick = TIME_UNITS[inst.time_unit]
    card = cards[model]
    plat = catalog.platform(platform)
    dev_type = {**dict(plat.device_names()), "HOST": plat.host}  # the builder's host (tp > 1)
    builder = inst.meta.get("builder", {})
    tp, layout = int(builder.get("tp", 1)), str(inst.meta.get("kv_layout", "single"))
    kv_heads = [float(h) for h in inst.meta.get("kv_heads", [card.kv_heads])]
    prefill, batch, n_steps = int(wl["prefill"]), int(wl["batch"]), int(wl["decode"]) + 1
    tokens = np.where(np.arange(n_steps) == 0, prefill, 1)
    ctx = prefill + np.arange(n_steps)
    ctx[0] = prefill
    memo: dict[tuple[str, str, float], tuple[np.ndarray, np.ndarray]] = {}
    classes: dict[tuple[str, bool], str] = {}
    rows: list[tuple[str, float, float | None, bool]] = []  # class, predicted, measured, interp
    for ev in solution["compute"]:
        i, d = inst.task_index[ev["task"]], inst.device_index[ev["device"]]
        kind = str(inst.kind[i]) if inst.kind else ""
        step = int(inst.step[i]) if inst.step is not None else 0
        shard = int(inst.shard[i]) if inst.shard is not None else -1
        key = (dev_type[ev["device"]], kind,
               task_share(inst.task_ids[i], kind, shard, tp, kv_heads, layout))
        if key not in memo:
            memo[key] = table.lookup_s(key[0], kind, tokens=tokens, context=ctx, batch=batch,
                                       share=key[2], model=model)
        if (kind, step > 0) not in classes:
            classes[(kind, step > 0)] = _class_of(card, kind, step > 0)
        lat, code = memo[key][0][step], int(memo[key][1][step])
        found = code in (EXACT, INTERPOLATED)
        rows.append((classes[(kind, step > 0)], float(inst.cost[i, d]) * tick,
                     float(lat) if found else None, code == INTERPOLATED))
    e2e = table.end_to_end_s(platform, model, prefill, int(wl["decode"]), batch)
    s_sim = float(metrics.makespan) * tick
    end = None if e2e is None else EndToEnd(s_sim, e2e.latency_s,
                                            (s_sim - e2e.latency_s) / e2e.latency_s, e2e.source)
    gaps = [_gap(c, [r for r in rows if r[0] == c]) for c in sorted({r[0] for r in rows})]
    gaps.append(_gap("all", rows))
    return CompareReport(tuple(gaps), end, s_sim, table.path)


def _gap(cls: str, rows: list[tuple[str, float, float | None, bool]]) -> ClassGap:
    matched = [(p, m, it) for _, p, m, it in rows if m is not None]
    pred = float(sum(p for p, _, _ in matched))
    meas = float(sum(m for _, m, _ in matched))
    per_op = [(p - m) / m for p, m, _ in matched]
    return ClassGap(cls, len(matched), sum(it for _, _, it in matched), len(rows) - len(matched),
                    pred, meas, (pred - meas) / meas if matched else None,
                    float(np.median(per_op)) if per_op else None)

