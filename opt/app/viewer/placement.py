"""A validated P1 schedule → the viewer's payload (header + columnar blob, :mod:`opt.app.viewer.payload`).

Lanes, top to bottom: per device its compute lane, then (when it has any) its weight-load lane
(loads as boxes, each with the task it serves — problems.md §1.2 rule 5, under ``load_timing:
at_use`` drawn in that task's slot before its compute, under ``overlap`` beside it — and
evictions as ticks); then one lane per link channel that carries a transfer
(problems.md §1.2 rule 4, :meth:`opt.placement.instance.Links.channels`: ``full`` one per
ordered pair, ``star`` a source's uplink and a destination's downlink — a star transfer is drawn
on both). Each event layer is stored sorted by (lane, start) with per-lane offsets, so the page
finds the visible events of a lane by binary search and never sorts.

Utilisation uses :mod:`opt.placement.utilisation`'s definitions: per-device busy time is the
union of its compute events (disjoint, rule 2), class busy the union over a class's devices
(:func:`class_intervals`), co-utilisation their NPU ∩ PIM intersection; the page integrates the
embedded intervals over any window, so its numbers over [0, makespan) are the module's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opt.app.viewer.payload import Blob, segments
from opt.common.units import TIME_UNITS
from opt.placement.instance import PHASES, PlacementInstance
from opt.placement.load_timing import served_by_rule
from opt.placement.utilisation import (
    PAIR,
    class_intervals,
    compute_events,
    intersection,
    utilisation,
)
from opt.placement.validator import PlacementMetrics, validate_placement


def _lanes(inst: PlacementInstance, load_dev: np.ndarray, channels: list[int]
           ) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, dict[int, int]]:
    """Lane list, compute lane per device, load lane per device (-1: none), channel → lane."""
    lanes: list[dict[str, Any]] = []
    comp = np.empty(inst.n_devices, dtype=np.int64)
    load = np.full(inst.n_devices, -1, dtype=np.int64)
    has_load = set(np.asarray(load_dev).tolist())
    for d, dev in enumerate(inst.devices):
        comp[d] = len(lanes)
        lanes.append({"label": dev.name, "type": "compute", "device": d,
                      "cls": dev.device_class})
        if d in has_load:
            load[d] = len(lanes)
            lanes.append({"label": f"{dev.name} loads", "type": "load", "device": d,
                          "cls": dev.device_class})
    chan = {}
    for c in channels:
        chan[c] = len(lanes)
        lanes.append({"label": _channel_label(inst, c), "type": "channel", "device": -1,
                      "cls": "link"})
    return lanes, comp, load, chan


def _channel_label(inst: PlacementInstance, channel: int) -> str:
    d = inst.n_devices
    names = [x.name for x in inst.devices]
    if channel < d * d:
        return f"{names[channel // d]}→{names[channel % d]}"
    if channel < d * d + d:
        return f"{names[channel - d * d]} uplink"
    return f"{names[channel - d * d - d]} downlink"


def _sorted_layer(blob: Blob, prefix: str, lane: np.ndarray, start: np.ndarray,
                  n_lanes: int) -> np.ndarray:
    """Write ``prefix.off`` (per-lane offsets) and return the (lane, start) order."""
    order = np.lexsort((start, lane))
    off = segments(lane[order], n_lanes)
    blob.ints(f"{prefix}.off", off)
    return order


def _tasks(blob: Blob, inst: PlacementInstance, task_dev: np.ndarray) -> list[str]:
    """Per-task columns (task-index order) and the tables they index; returns the kind table."""
    n = inst.n_tasks
    kinds = inst.kind or (None,) * n
    table = sorted({k or "task" for k in kinds})
    index = {k: i for i, k in enumerate(table)}
    blob.ints("task.kind", [index[k or "task"] for k in kinds])
    blob.ints("task.dev", task_dev)
    for key in ("phase", "step", "layer", "shard"):
        arr = getattr(inst, key)
        blob.ints(f"task.{key}", np.full(n, -1) if arr is None else arr)
    blob.strings("task.ids", list(inst.task_ids))
    return table


def _edges(blob: Blob, inst: PlacementInstance) -> None:
    order = np.argsort(inst.edge_src, kind="stable")
    src, dst = inst.edge_src[order], inst.edge_dst[order]
    blob.times("edge.src", src, "edge.seg", np.array([0, len(src)]))
    blob.ints("edge.seg", [0, len(src)])
    blob.ints("edge.ddst", dst - src)


def _transfers(inst: PlacementInstance, solution: dict[str, Any]
               ) -> tuple[np.ndarray, ...]:
    """(src task, dst task, from dev, to dev, start, end) int64 arrays of the transfers."""
    ev = solution.get("transfers") or ()
    ti, di = inst.task_index, inst.device_index
    cols = np.array([(ti[e["src"]], ti[e["dst"]], di[e["from"]], di[e["to"]], e["start"],
                      e["end"]) for e in ev], dtype=np.int64).reshape(-1, 6)
    return tuple(cols.T)


def _write_transfers(blob: Blob, inst: PlacementInstance, tr: tuple[np.ndarray, ...],
                     chan_lane: dict[int, int], n_lanes: int) -> int:
    src, dst, fdev, tdev, start, end = tr
    ids = inst.links.channel_ids(fdev, tdev)
    reps = len(ids)
    lane = np.concatenate([np.array([chan_lane[int(c)] for c in ch], dtype=np.int64)
                           for ch in ids]) if len(src) else np.zeros(0, dtype=np.int64)
    src, dst = np.tile(src, reps), np.tile(dst, reps)
    start, end = np.tile(start, reps), np.tile(end, reps)
    order = _sorted_layer(blob, "t", lane, start, n_lanes)
    off = segments(lane[order], n_lanes)
    blob.ints("t.src", src[order])
    blob.ints("t.dst", dst[order])
    blob.times("t.start", start[order], "t.off", off)
    blob.ints("t.dur", (end - start)[order])
    return len(order)


def _loads(blob: Blob, inst: PlacementInstance, solution: dict[str, Any],
           load_lane: np.ndarray, n_lanes: int, formats: list[str], task_dev: np.ndarray,
           task_start: np.ndarray, task_end: np.ndarray) -> tuple[int, int]:
    """The load layer (block, format, start, duration, the task it serves under the
    instance's ``load_timing`` or −1) and the eviction layer; (loads, evictions)."""
    bi, di = inst.block_index, inst.device_index
    fi = {f: i for i, f in enumerate(formats)}
    ld = solution.get("loads") or ()
    a = np.array([(bi[e["block"]], di[e["device"]], fi[e["format"]], e["start"], e["end"])
                  for e in ld], dtype=np.int64).reshape(-1, 5)
    lane = load_lane[a[:, 1]] if len(a) else np.zeros(0, dtype=np.int64)
    order = _sorted_layer(blob, "l", lane, a[:, 3], n_lanes)
    off = segments(lane[order], n_lanes)
    blob.ints("l.block", a[order, 0])
    blob.ints("l.fmt", a[order, 2])
    blob.times("l.start", a[order, 3], "l.off", off)
    blob.ints("l.dur", (a[:, 4] - a[:, 3])[order])
    blob.ints("l.task", served_by_rule(inst, task_dev, task_start, task_end, a[:, 0], a[:, 1],
                                       a[:, 4])[order])
    ev = solution.get("evictions") or ()
    e = np.array([(bi[x["block"]], di[x["device"]], x["time"]) for x in ev],
                 dtype=np.int64).reshape(-1, 3)
    elane = load_lane[e[:, 1]] if len(e) else np.zeros(0, dtype=np.int64)
    order = _sorted_layer(blob, "e", elane, e[:, 2], n_lanes)
    blob.ints("e.block", e[order, 0])
    blob.times("e.time", e[order, 2], "e.off", segments(elane[order], n_lanes))
    return len(a), len(e)


def _intervals(blob: Blob, name: str, iv: tuple[np.ndarray, np.ndarray]) -> None:
    seg = np.array([0, len(iv[0])])
    blob.ints(f"{name}.seg", seg)
    blob.times(f"{name}.start", iv[0], f"{name}.seg", seg)
    blob.ints(f"{name}.dur", iv[1] - iv[0])


def placement_payload(inst: PlacementInstance, solution: dict[str, Any], *,
                      metrics: PlacementMetrics | None = None, title: str | None = None
                      ) -> tuple[dict[str, Any], Blob]:
    """Header and blob of a P1 schedule's view. The schedule is validated first (a
    :class:`opt.placement.schedule_error.ScheduleError` on a broken rule) unless ``metrics`` (the
    validator's result) is given."""
    if metrics is None:
        metrics = validate_placement(inst, solution)
    util = utilisation(inst, solution, metrics)
    blob = Blob()
    dev, start, end, task = compute_events(inst, solution)
    task_dev = np.empty(inst.n_tasks, dtype=np.int64)
    task_dev[task] = dev
    tr = _transfers(inst, solution)
    channels = sorted({int(c) for ch in inst.links.channel_ids(tr[2], tr[3]) for c in ch})
    load_dev = [inst.device_index[e["device"]] for e in (solution.get("loads") or ())] + \
        [inst.device_index[e["device"]] for e in (solution.get("evictions") or ())]
    lanes, comp_lane, load_lane, chan_lane = _lanes(inst, np.array(load_dev, dtype=np.int64),
                                                    channels)
    n_lanes = len(lanes)
    lane = comp_lane[dev]
    order = _sorted_layer(blob, "c", lane, start, n_lanes)
    blob.ints("c.task", task[order])
    blob.times("c.start", start[order], "c.off", segments(lane[order], n_lanes))
    blob.ints("c.dur", (end - start)[order])
    kinds = _tasks(blob, inst, task_dev)
    _edges(blob, inst)
    n_tr = _write_transfers(blob, inst, tr, chan_lane, n_lanes)
    formats = sorted(set(inst.layout.formats) | {e["format"] for e in solution.get("loads") or ()})
    task_start = np.empty(inst.n_tasks, dtype=np.int64)
    task_start[task] = start
    task_end = np.empty(inst.n_tasks, dtype=np.int64)
    task_end[task] = end
    n_ld, n_ev = _loads(blob, inst, solution, load_lane, n_lanes, formats, task_dev, task_start,
                        task_end)
    blob.strings("block.ids", list(inst.block_ids))
    classes = class_intervals(inst, solution)
    for c, iv in classes.items():
        _intervals(blob, f"u.{c}", iv)
    has_pair = all(c in classes for c in PAIR)
    if has_pair:
        _intervals(blob, "u.co", intersection(classes[PAIR[0]], classes[PAIR[1]]))
    extent = max([metrics.makespan, int(tr[5].max(initial=0))] +
                 [int(e["end"]) for e in (solution.get("loads") or ())])
    header = {
        "kind": "placement", "title": title or inst.meta.get("name") or inst.source or "schedule",
        "time_unit": inst.time_unit, "seconds_per_tick": TIME_UNITS[inst.time_unit],
        "load_timing": inst.load_timing, "extent": [0, int(extent)],
        "lanes": lanes,
        "devices": [{"name": d.name, "cls": d.device_class} for d in inst.devices],
        "classes": list(classes), "pair": list(PAIR) if has_pair else None,
        "tables": {"kind": kinds, "phase": list(PHASES), "format": formats},
        "counts": {"tasks": inst.n_tasks, "edges": inst.n_edges, "transfers": len(tr[0]),
                   "transfer_lanes": n_tr, "loads": n_ld, "evictions": n_ev},
        "metrics": {**metrics.to_dict(), "utilisation": util.to_dict()},
        "has": {**{k: getattr(inst, k) is not None and bool(np.any(getattr(inst, k) >= 0))
                   for k in ("phase", "step", "layer", "shard")},
                "kind": any(k is not None for k in inst.kind)},
    }
    return header, blob
