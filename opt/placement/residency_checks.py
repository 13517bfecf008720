"""Formats, the memory budget and rules 5–6 of the P1 validator (problems.md §1.2, §2): each
block's storage format, loads in that format on one load port per device, residencies from
load to eviction, blocks resident when their tasks start, capacity. Each check raises
:class:`~opt.placement.schedule_error.ScheduleError` naming the rule, the block, the device
and the times (:mod:`opt.placement.validator` runs them after rules 1–4)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import (
    ScheduleError,
    checked_int,
    device_names,
    device_of,
    first_overlap,
)

# ---- formats (P1 fixed, P2 decided) and the memory budget -------------------------------------

def check_formats(inst: PlacementInstance, solution: Mapping[str, Any]) -> list[str]:
    """Each block's storage format (the solution's ``formats`` over the P1 defaults)."""
    bindex = inst.block_index
    fmt_of = list(inst.block_format)
    for bid, fmt in (solution.get("formats") or {}).items():
        if bid not in bindex:
            raise ScheduleError(f"formats: unknown block {bid!r}")
        if fmt not in inst.layout.formats:
            raise ScheduleError(f"formats: block '{bid}' in format {fmt!r} not in "
                                f"{list(inst.layout.formats)}")
        if bid in inst.layout.fixed and inst.layout.fixed[bid] != fmt:
            raise ScheduleError(f"formats: block '{bid}' is fixed to "
                                f"'{inst.layout.fixed[bid]}', schedule uses {fmt!r}")
        fmt_of[bindex[bid]] = fmt
    budget = inst.layout.memory_budget
    if budget is not None and len(inst.block_ids):
        mult = np.array([inst.layout.storage_multiplier[f] for f in fmt_of])
        used_bytes = float(np.sum(inst.block_bytes * mult))
        if used_bytes > budget:
            raise ScheduleError(f"memory budget: formats store {used_bytes:.0f} bytes > budget "
                                f"{budget}")
    return fmt_of


# ---- rule 5: loads before use, one load port per device ---------------------------------------

@dataclass(frozen=True)
class _Loads:
    """The load events as columns: block, device, start, end."""

    block: np.ndarray
    device: np.ndarray
    start: np.ndarray
    end: np.ndarray


def check_loads(inst: PlacementInstance, solution: Mapping[str, Any], fmt_of: list[str]) -> _Loads:
    """Every load names a known block in its stored format, lasts its load duration, and the
    loads of one device do not overlap on its load port."""
    names, bindex = device_names(inst), inst.block_index
    loads = solution.get("loads", ())
    ld_b = np.empty(len(loads), dtype=np.int64)
    ld_d = np.empty(len(loads), dtype=np.int64)
    ld_s = np.empty(len(loads), dtype=np.int64)
    ld_e = np.empty(len(loads), dtype=np.int64)
    for k, ev in enumerate(loads):
        bid = ev.get("block")
        if bid not in bindex:
            raise ScheduleError(f"rule 5: load[{k}] names unknown block {bid!r}")
        b = bindex[bid]
        d = device_of(inst, ev.get("device"), f"rule 5: load of '{bid}'")
        s = checked_int(ev.get("start"), f"load[{k}].start")
        e = checked_int(ev.get("end"), f"load[{k}].end")
        fmt = ev.get("format", fmt_of[b])
        if fmt != fmt_of[b]:
            raise ScheduleError(f"rule 5: load of '{bid}' on '{names[d]}' uses format {fmt!r} "
                                f"but the block is stored as '{fmt_of[b]}'")
        need = int(inst.block_load[fmt][b, d]) if fmt in inst.block_load else -1
        if need < 0:
            raise ScheduleError(f"rule 5: block '{bid}' cannot be loaded on '{names[d]}' in "
                                f"format '{fmt}'")
        if s < 0 or e - s != need:
            raise ScheduleError(f"rule 5: load of '{bid}' on '{names[d]}' runs [{s}, {e}), must "
                                f"last {need} from a start ≥ 0")
        ld_b[k], ld_d[k], ld_s[k], ld_e[k] = b, d, s, e
    hit = first_overlap(ld_d, ld_s, ld_e)
    if hit:
        i, j = hit
        raise ScheduleError(f"rule 5: loads of '{inst.block_ids[ld_b[i]]}' [{ld_s[i]}, {ld_e[i]}) "
                            f"and '{inst.block_ids[ld_b[j]]}' [{ld_s[j]}, {ld_e[j]}) overlap on "
                            f"the load port of '{names[ld_d[i]]}'")
    return _Loads(ld_b, ld_d, ld_s, ld_e)


Residencies = dict[tuple[int, int], list[tuple[int, int, float]]]


def residencies(inst: PlacementInstance, solution: Mapping[str, Any], loads: _Loads
                 ) -> Residencies:
    """(block, device) -> residency intervals [load start, load end, eviction or +inf),
    pairing each device's loads of a block in time order with its evictions."""
    names = device_names(inst)
    bindex = inst.block_index
    ev_by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, ev in enumerate(solution.get("evictions", ())):
        bid = ev.get("block")
        if bid not in bindex:
            raise ScheduleError(f"evictions[{k}] names unknown block {bid!r}")
        ev_by[(bindex[bid], device_of(inst, ev.get("device"), f"eviction of '{bid}'"))].append(
            checked_int(ev.get("time"), f"evictions[{k}].time"))
    ld_b, ld_d, ld_s, ld_e = loads.block, loads.device, loads.start, loads.end
    resid: Residencies = defaultdict(list)
    ld_order = np.lexsort((ld_s, ld_d, ld_b)).tolist()
    by_key: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k in ld_order:
        by_key[(int(ld_b[k]), int(ld_d[k]))].append(k)
    for key in set(by_key) | set(ev_by):
        b, d = key
        evs = sorted(ev_by.get(key, ()))
        ks = by_key.get(key, [])
        if len(evs) > len(ks):
            raise ScheduleError(f"evictions: block '{inst.block_ids[b]}' is evicted from "
                                f"'{names[d]}' more often than it is loaded")
        for i, k in enumerate(ks):
            stop = float(evs[i]) if i < len(evs) else float("inf")
            if stop < ld_e[k]:
                raise ScheduleError(f"evictions: block '{inst.block_ids[b]}' evicted from "
                                    f"'{names[d]}' at {int(stop)} before its load ends at "
                                    f"{ld_e[k]}")
            if i + 1 < len(ks) and ld_s[ks[i + 1]] < stop:
                raise ScheduleError(f"rule 5: block '{inst.block_ids[b]}' is loaded on "
                                    f"'{names[d]}' at {ld_s[ks[i + 1]]} while still resident "
                                    f"(no eviction in between)")
            resid[key].append((int(ld_s[k]), int(ld_e[k]), stop))
    return resid


def check_blocks_resident(inst: PlacementInstance, resid: Residencies, task_dev: np.ndarray,
                           start: np.ndarray, ready_by: np.ndarray | None = None) -> None:
    """A task with a block starts while the block is resident (not yet evicted) and its load
    has ended by the task's time in ``ready_by`` (default its start; under ``load_timing:
    overlap`` the end of a task a load serves)."""
    ready_by = start if ready_by is None else ready_by
    if _all_resident(inst, resid, task_dev, start, ready_by):
        return
    names = device_names(inst)
    for t in np.flatnonzero(inst.task_block >= 0).tolist():
        b, d, s = int(inst.task_block[t]), int(task_dev[t]), int(start[t])
        r = int(ready_by[t])
        ok = any(le <= r and s < stop for _, le, stop in resid.get((b, d), ()))
        if not ok:
            spans = [(ls, le, stop) for ls, le, stop in resid.get((b, d), ())]
            raise ScheduleError(f"rule 5: task '{inst.task_ids[t]}' starts at {s} on "
                                f"'{names[d]}' but block '{inst.block_ids[b]}' is not resident "
                                f"then (loaded by the start and not evicted; residencies "
                                f"[start, ready, evicted): {spans[:4]})")


def _all_resident(inst: PlacementInstance, resid: Residencies, task_dev: np.ndarray,
                  start: np.ndarray, ready_by: np.ndarray) -> bool:
    """Vectorised :func:`check_blocks_resident` (False: some task is not covered; the loop
    names it). The residencies of one (block, device) are disjoint and in time order, so the
    one that can cover a task is the last whose ready time is ≤ its ``ready_by`` time r:
    residencies and tasks are merged in (key, time) order, residencies first at equal times,
    and that residency must still be open at the task's start."""
    tasks = np.flatnonzero(inst.task_block >= 0)
    if len(tasks) == 0:
        return True
    nd = inst.n_devices
    spans = [(b * nd + d, le, stop) for (b, d), sp in resid.items() for _, le, stop in sp]
    if not spans:
        return False
    r_key = np.array([k for k, _, _ in spans], dtype=np.int64)
    r_ready = np.array([le for _, le, _ in spans], dtype=np.int64)
    r_stop = np.array([stop for _, _, stop in spans], dtype=np.float64)
    q_key = inst.task_block[tasks] * nd + task_dev[tasks]
    q_time = ready_by[tasks]
    q_start = start[tasks]
    m = len(spans)
    key = np.concatenate([r_key, q_key])
    when = np.concatenate([r_ready, q_time])
    kind = np.concatenate([np.zeros(m, np.int8), np.ones(len(tasks), np.int8)])
    order = np.lexsort((kind, when, key))
    # position (in the merged order) of the latest residency at or before each position
    is_res = order < m
    last = np.maximum.accumulate(np.where(is_res, np.arange(len(order)), -1))
    pos = last[~is_res]
    q = order[~is_res] - m
    ok = pos >= 0
    cand = np.where(ok, order[np.maximum(pos, 0)], 0)  # its index (0 when there is none)
    ok &= (r_key[cand] == q_key[q]) & (q_start[q] < r_stop[cand])
    return bool(ok.all())


# ---- rule 6: capacity -------------------------------------------------------------------------

def check_capacity(inst: PlacementInstance, resid: Residencies) -> None:
    """The blocks resident on a device (from load start to eviction) fit its capacity."""
    for d, device in enumerate(inst.devices):
        cap = device.weight_capacity
        if cap is None:
            continue
        events = []
        for (b, dd), spans in resid.items():
            if dd != d:
                continue
            for ls, _, stop in spans:
                events.append((ls, 1, int(inst.block_bytes[b]), b))
                if stop != float("inf"):
                    events.append((int(stop), 0, -int(inst.block_bytes[b]), b))
        events.sort()  # at equal times evictions (0) free space before loads (1) take it
        level = 0
        for time, _, delta, b in events:
            level += delta
            if level > cap:
                raise ScheduleError(f"rule 6: at {time} the blocks resident on '{device.name}' "
                                    f"take {level} bytes > capacity {cap} (loading "
                                    f"'{inst.block_ids[b]}')")
