"""Independent validator of P1 schedules (problems.md §1.2, §1.3).

Checks rules 1–6 (and the P2 memory budget), recomputes the makespan and the other metrics, and
raises :class:`ScheduleError` on the first violation with the rule, the task/edge/block and the
times. Imports nothing from ``models``, ``solvers`` or ``heuristics``.

Residency of a block on a device runs from its load's start to its eviction (or the end); a task
using the block needs a load on its device that ended by the task's start and a residency still
open at the start (eviction strictly after the start).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.common.result import Result, gap_of


class ScheduleError(ValueError):
    """A schedule breaks a rule of problems.md §1.2; the message says which and where."""


@dataclass(frozen=True)
class PlacementMetrics:
    """Recomputed metrics, in the instance's time unit (utilisation is busy time / makespan)."""

    makespan: int
    ttft: int | None
    decode_time: int | None
    decode_steps: int
    mean_tpot: float | None
    utilisation: dict[str, float]
    evictions: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _overlaps(groups: np.ndarray, start: np.ndarray, end: np.ndarray):
    """First (i, j) with the same group and overlapping [start, end), else None.
    Zero-length events never overlap anything."""
    keep = np.flatnonzero(end > start)
    if len(keep) < 2:
        return None
    order = keep[np.lexsort((start[keep], groups[keep]))]
    g, s, e = groups[order], start[order], end[order]
    bad = np.flatnonzero((g[1:] == g[:-1]) & (s[1:] < e[:-1]))
    if len(bad) == 0:
        return None
    return int(order[bad[0]]), int(order[bad[0] + 1])


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ScheduleError(f"{what} must be an integer, got {value!r}")
    return int(value)


def validate_placement(inst: PlacementInstance, solution: dict[str, Any]) -> PlacementMetrics:
    """Check ``solution`` (problems.md §1.2a shape) against ``inst``; return the recomputed metrics."""
    if not isinstance(solution, dict):
        raise ScheduleError("solution must be an object")
    n, names = inst.n_tasks, [d.name for d in inst.devices]
    tindex, dindex, bindex = inst.task_index, inst.device_index, inst.block_index

    def dev(name: Any, what: str) -> int:
        if name not in dindex:
            raise ScheduleError(f"{what}: unknown device {name!r}")
        return dindex[name]

    # ---- rule 1: one compute event per task, legal device, exact duration -------------------
    task_dev = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    for k, ev in enumerate(solution.get("compute", ())):
        tid = ev.get("task")
        if tid not in tindex:
            raise ScheduleError(f"rule 1: compute[{k}] names unknown task {tid!r}")
        t = tindex[tid]
        if task_dev[t] >= 0:
            raise ScheduleError(f"rule 1: task '{tid}' has more than one compute event")
        d = dev(ev.get("device"), f"rule 1: compute event of task '{tid}'")
        s, e = _int(ev.get("start"), f"start of '{tid}'"), _int(ev.get("end"), f"end of '{tid}'")
        c = int(inst.cost[t, d])
        if c < 0:
            raise ScheduleError(f"rule 1: task '{tid}' is not legal on '{names[d]}' (legal: "
                                f"{[names[i] for i in np.flatnonzero(inst.cost[t] >= 0)]})")
        if s < 0 or e - s != c:
            raise ScheduleError(f"rule 1: task '{tid}' on '{names[d]}' runs [{s}, {e}) but "
                                f"must last {c} from a start ≥ 0")
        task_dev[t], start[t], end[t] = d, s, e
    missing = np.flatnonzero(task_dev < 0)
    if len(missing):
        raise ScheduleError(f"rule 1: task '{inst.task_ids[missing[0]]}' has no compute event "
                            f"({len(missing)} tasks missing)")
    for tid, dname in (solution.get("assignment") or {}).items():
        if tid not in tindex:
            raise ScheduleError(f"rule 1: assignment names unknown task {tid!r}")
        if dname != names[task_dev[tindex[tid]]]:
            raise ScheduleError(f"rule 1: assignment puts '{tid}' on {dname!r} but its compute "
                                f"event is on '{names[task_dev[tindex[tid]]]}'")

    # ---- rule 2: one task at a time per device ------------------------------------------------
    hit = _overlaps(task_dev, start, end)
    if hit:
        i, j = hit
        raise ScheduleError(f"rule 2: tasks '{inst.task_ids[i]}' [{start[i]}, {end[i]}) and "
                            f"'{inst.task_ids[j]}' [{start[j]}, {end[j]}) overlap on "
                            f"'{names[task_dev[i]]}'")

    # ---- rule 3: precedence and transfers ------------------------------------------------------
    transfers: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for k, ev in enumerate(solution.get("transfers", ())):
        key = (tindex.get(ev.get("src"), -1), tindex.get(ev.get("dst"), -1))
        if key in transfers:
            raise ScheduleError(f"rule 3: edge {ev.get('src')}->{ev.get('dst')} has more than "
                                f"one transfer")
        transfers[key] = (dev(ev.get("from"), f"rule 3: transfer[{k}]"),
                          dev(ev.get("to"), f"rule 3: transfer[{k}]"),
                          _int(ev.get("start"), f"transfer[{k}].start"),
                          _int(ev.get("end"), f"transfer[{k}].end"))
    src, dst, nbytes = inst.edge_src, inst.edge_dst, inst.edge_bytes
    du, dv = task_dev[src], task_dev[dst]
    same = du == dv
    bad = np.flatnonzero(same & (start[dst] < end[src]))
    if len(bad):
        e = bad[0]
        raise ScheduleError(f"rule 3: '{inst.task_ids[dst[e]]}' starts at {start[dst[e]]} before "
                            f"its predecessor '{inst.task_ids[src[e]]}' ends at {end[src[e]]} "
                            f"on the same device")
    used = 0
    ch_group, ch_start, ch_end, ch_edge = [], [], [], []
    for e in np.flatnonzero(~same).tolist():
        u, v = int(src[e]), int(dst[e])
        tr = transfers.get((u, v))
        un, vn = inst.task_ids[u], inst.task_ids[v]
        if tr is None:
            raise ScheduleError(f"rule 3: edge {un}->{vn} crosses '{names[du[e]]}'->"
                                f"'{names[dv[e]]}' but has no transfer event")
        used += 1
        f, t, ts, te = tr
        if (f, t) != (du[e], dv[e]):
            raise ScheduleError(f"rule 3: transfer of edge {un}->{vn} goes '{names[f]}'->"
                                f"'{names[t]}' but the tasks run on '{names[du[e]]}' and "
                                f"'{names[dv[e]]}'")
        need = inst.links.transfer(f, t, int(nbytes[e]))
        if te - ts != need:
            raise ScheduleError(f"rule 3: transfer of edge {un}->{vn} ({int(nbytes[e])} bytes) "
                                f"lasts {te - ts}, must last {need}")
        if ts < end[u]:
            raise ScheduleError(f"rule 3: transfer of edge {un}->{vn} starts at {ts} before "
                                f"'{un}' ends at {end[u]}")
        if start[v] < te:
            raise ScheduleError(f"rule 3: '{vn}' starts at {start[v]} before the transfer of "
                                f"edge {un}->{vn} ends at {te}")
        ch_group.append((f, t))
        ch_start.append(ts)
        ch_end.append(te)
        ch_edge.append(e)
    if used != len(transfers):
        edge_keys = set(zip(src[~same].tolist(), dst[~same].tolist()))
        extra = next(k for k in transfers if k not in edge_keys)
        raise ScheduleError(f"rule 3: transfer for {extra} is not a cross-device edge of the "
                            f"schedule (unknown edge or both tasks on one device)")

    # ---- rule 4: channel contention -------------------------------------------------------------
    if inst.links.contention and ch_group:
        cs, ce = np.array(ch_start), np.array(ch_end)
        pairs = np.array(ch_group, dtype=np.int64)
        d_n = inst.n_devices
        if inst.links.topology == "full":
            groups = [(pairs[:, 0] * d_n + pairs[:, 1], "channel")]
        else:
            groups = [(pairs[:, 0], "uplink"), (pairs[:, 1] + d_n, "downlink")]
        for g, label in groups:
            hit = _overlaps(g, cs, ce)
            if hit:
                a, b = (ch_edge[x] for x in hit)
                raise ScheduleError(
                    f"rule 4: transfers of edges {inst.task_ids[src[a]]}->{inst.task_ids[dst[a]]}"
                    f" [{cs[hit[0]]}, {ce[hit[0]]}) and {inst.task_ids[src[b]]}->"
                    f"{inst.task_ids[dst[b]]} [{cs[hit[1]]}, {ce[hit[1]]}) share a {label}")

    # ---- formats (P1 fixed, P2 decided) and the memory budget ------------------------------------
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

    # ---- rule 5: loads before use, one load port per device ------------------------------------
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
        d = dev(ev.get("device"), f"rule 5: load of '{bid}'")
        s, e = _int(ev.get("start"), f"load[{k}].start"), _int(ev.get("end"), f"load[{k}].end")
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
    hit = _overlaps(ld_d, ld_s, ld_e)
    if hit:
        i, j = hit
        raise ScheduleError(f"rule 5: loads of '{inst.block_ids[ld_b[i]]}' [{ld_s[i]}, {ld_e[i]}) "
                            f"and '{inst.block_ids[ld_b[j]]}' [{ld_s[j]}, {ld_e[j]}) overlap on "
                            f"the load port of '{names[ld_d[i]]}'")
    evictions = solution.get("evictions", ())
    ev_by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, ev in enumerate(evictions):
        bid = ev.get("block")
        if bid not in bindex:
            raise ScheduleError(f"evictions[{k}] names unknown block {bid!r}")
        ev_by[(bindex[bid], dev(ev.get("device"), f"eviction of '{bid}'"))].append(
            _int(ev.get("time"), f"evictions[{k}].time"))
    # residency intervals per (block, device): [load start, load end, eviction or +inf)
    resid: dict[tuple[int, int], list[tuple[int, int, float]]] = defaultdict(list)
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
    for t in np.flatnonzero(inst.task_block >= 0).tolist():
        b, d, s = int(inst.task_block[t]), int(task_dev[t]), int(start[t])
        ok = any(le <= s < stop for _, le, stop in resid.get((b, d), ()))
        if not ok:
            spans = [(ls, le, stop) for ls, le, stop in resid.get((b, d), ())]
            raise ScheduleError(f"rule 5: task '{inst.task_ids[t]}' starts at {s} on "
                                f"'{names[d]}' but block '{inst.block_ids[b]}' is not resident "
                                f"then (loaded by the start and not evicted; residencies "
                                f"[start, ready, evicted): {spans[:4]})")

    # ---- rule 6: capacity -----------------------------------------------------------------------
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

    # ---- metrics --------------------------------------------------------------------------------
    makespan = int(end.max()) if n else 0
    pre, dec = inst.is_prefill(), inst.is_decode()
    ttft = int(end[pre].max()) if pre.any() else None
    steps = int(len(np.unique(inst.step[dec]))) if dec.any() and inst.step is not None else 0
    decode_time = makespan - ttft if (ttft is not None and dec.any()) else None
    busy = np.bincount(task_dev, weights=(end - start), minlength=inst.n_devices)
    util = {names[d]: (float(busy[d]) / makespan if makespan else 0.0)
            for d in range(inst.n_devices)}
    return PlacementMetrics(makespan=makespan, ttft=ttft, decode_time=decode_time,
                            decode_steps=steps,
                            mean_tpot=(decode_time / steps if decode_time is not None and steps
                                       else None),
                            utilisation=util, evictions=len(evictions))


def certify_placement(inst: PlacementInstance, result: Result) -> Result:
    """The one gate every placement result passes: validate its schedule, recompute the
    objective (makespan) and the gap, and attach the metrics. A result without a solution is
    returned with objective None. Raises :class:`ScheduleError` on an invalid schedule."""
    if result.solution is None:
        return replace(result, objective=None, gap=None)
    metrics = validate_placement(inst, result.solution)
    lb = result.lower_bound
    if lb is not None and lb > metrics.makespan:
        raise ScheduleError(f"lower bound {lb} exceeds the validated makespan "
                            f"{metrics.makespan}: the bound or the schedule is wrong")
    stats = {**result.stats, "metrics": metrics.to_dict()}
    return replace(result, objective=metrics.makespan, gap=gap_of(metrics.makespan, lb),
                   stats=stats)
