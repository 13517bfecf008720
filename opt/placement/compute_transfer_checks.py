"""Rules 1–4 of the P1 validator (problems.md §1.2): one compute event per task on a legal
device with its exact duration, one task at a time per device, precedence and transfers,
channel contention. Each check raises :class:`~opt.placement.schedule_error.ScheduleError`
naming the rule, the task or edge and the times; the vectorised paths return None where the
checked path must decide (:mod:`opt.placement.validator` runs them in order)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
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
from opt.placement.solution_tables import MAX_TIME

# ---- rule 1: one compute event per task, legal device, exact duration -------------------------

def _int_column(values: list) -> np.ndarray | None:
    """``values`` as int64 when every one is a plain integer within ±MAX_TIME, else None."""
    if not values or set(map(type, values)) - {int}:
        return None
    if min(values) < -MAX_TIME or max(values) > MAX_TIME:
        return None
    return np.array(values, dtype=np.int64)


def _index_column(index: dict[str, int], events: list, key: str) -> np.ndarray:
    """``index[ev[key]]`` of every event as int64 (KeyError / TypeError when one is off)."""
    return np.fromiter(map(index.__getitem__, map(itemgetter(key), events)), dtype=np.int64,
                       count=len(events))


def _fast_compute(inst: PlacementInstance, events: list
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rule 1 vectorised for a well-formed event list: (device, start, end) per task when
    every check holds, None otherwise (the checked path then names the violation)."""
    n, tindex, dindex = inst.n_tasks, inst.task_index, inst.device_index
    if len(events) != n:
        return None
    try:
        t = _index_column(tindex, events, "task")
        d = _index_column(dindex, events, "device")
        s, e = (_int_column(list(map(itemgetter(k), events))) for k in ("start", "end"))
    except (KeyError, TypeError):
        return None
    if s is None or e is None:
        return None
    return compute_arrays(inst, t, d, s, e)


def compute_arrays(inst: PlacementInstance, t: np.ndarray | None, d: np.ndarray,
                    s: np.ndarray, e: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rule 1 on event columns (task index — None: row i is task i —, device index, start,
    end): (device, start, end) per task when every task has exactly one legal event of its
    exact duration from a start ≥ 0, None otherwise."""
    n = inst.n_tasks
    if len(d) != n:
        return None
    if t is None:
        c = inst.cost[np.arange(n), d]
        if (c < 0).any() or (s < 0).any() or (e - s != c).any():
            return None
        return d, s, e
    if (np.bincount(t, minlength=n) != 1).any():
        return None
    c = inst.cost[t, d]
    if (c < 0).any() or (s < 0).any() or (e - s != c).any():
        return None
    task_dev, start, end = (np.empty(n, dtype=np.int64) for _ in range(3))
    task_dev[t], start[t], end[t] = d, s, e
    return task_dev, start, end


def check_compute(inst: PlacementInstance, solution: Mapping[str, Any]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(device, start, end) of every task from the compute events (and ``assignment``)."""
    events = list(solution.get("compute", ()))
    fast = _fast_compute(inst, events)
    if fast is not None:
        if not _assignment_mirrors(solution.get("assignment") or {}, events):
            _check_assignment(inst, solution, fast[0])
        return fast
    n, names, tindex = inst.n_tasks, device_names(inst), inst.task_index
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
        d = device_of(inst, ev.get("device"), f"rule 1: compute event of task '{tid}'")
        s = checked_int(ev.get("start"), f"start of '{tid}'")
        e = checked_int(ev.get("end"), f"end of '{tid}'")
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
    _check_assignment(inst, solution, task_dev)
    return task_dev, start, end


def _check_assignment(inst: PlacementInstance, solution: Mapping[str, Any],
                      task_dev: np.ndarray) -> None:
    """The optional ``assignment`` map agrees with the compute events."""
    names, tindex = device_names(inst), inst.task_index
    assignment = solution.get("assignment") or {}
    if _assignment_agrees(inst, assignment, task_dev):
        return
    for tid, dname in assignment.items():
        if tid not in tindex:
            raise ScheduleError(f"rule 1: assignment names unknown task {tid!r}")
        if dname != names[task_dev[tindex[tid]]]:
            raise ScheduleError(f"rule 1: assignment puts '{tid}' on {dname!r} but its compute "
                                f"event is on '{names[task_dev[tindex[tid]]]}'")


def _assignment_mirrors(assignment: dict, events: list) -> bool:
    """True when ``assignment`` lists exactly the compute events' tasks, in their order, each
    with its event's device (then it agrees with the events, which rule 1 has checked);
    False: :func:`_check_assignment` decides."""
    if not assignment:
        return True
    return (len(assignment) == len(events)
            and list(assignment) == list(map(itemgetter("task"), events))
            and list(assignment.values()) == list(map(itemgetter("device"), events)))


def _assignment_agrees(inst: PlacementInstance, assignment: dict, task_dev: np.ndarray) -> bool:
    """Vectorised: every task of ``assignment`` is known and on its compute event's device
    (False: the checked loop names the first disagreement)."""
    if not assignment:
        return True
    try:
        t = np.fromiter(map(inst.task_index.__getitem__, assignment), dtype=np.int64,
                        count=len(assignment))
        d = np.fromiter(map(inst.device_index.__getitem__, assignment.values()),
                        dtype=np.int64, count=len(assignment))
    except (KeyError, TypeError):
        return False
    return bool((task_dev[t] == d).all())


# ---- rule 2: one task at a time per device ----------------------------------------------------

def check_device_overlap(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                          end: np.ndarray) -> None:
    hit = first_overlap(task_dev, start, end)
    if hit:
        i, j = hit
        raise ScheduleError(f"rule 2: tasks '{inst.task_ids[i]}' [{start[i]}, {end[i]}) and "
                            f"'{inst.task_ids[j]}' [{start[j]}, {end[j]}) overlap on "
                            f"'{device_names(inst)[task_dev[i]]}'")


# ---- rule 3: precedence and transfers ---------------------------------------------------------

@dataclass(frozen=True)
class ChannelUse:
    """The transfer events of the cross-device edges: devices, times and the edge index."""

    src_dev: np.ndarray
    dst_dev: np.ndarray
    start: np.ndarray
    end: np.ndarray
    edge: np.ndarray


def _transfer_events(inst: PlacementInstance, solution: Mapping[str, Any]
                     ) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    """(src task, dst task) -> (from device, to device, start, end); unknown tasks are −1."""
    tindex = inst.task_index
    transfers: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for k, ev in enumerate(solution.get("transfers", ())):
        key = (tindex.get(ev.get("src"), -1), tindex.get(ev.get("dst"), -1))
        if key in transfers:
            raise ScheduleError(f"rule 3: edge {ev.get('src')}->{ev.get('dst')} has more than "
                                f"one transfer")
        transfers[key] = (device_of(inst, ev.get("from"), f"rule 3: transfer[{k}]"),
                          device_of(inst, ev.get("to"), f"rule 3: transfer[{k}]"),
                          checked_int(ev.get("start"), f"transfer[{k}].start"),
                          checked_int(ev.get("end"), f"transfer[{k}].end"))
    return transfers


def _fast_transfers(inst: PlacementInstance, events: list, task_dev: np.ndarray,
                    start: np.ndarray, end: np.ndarray) -> ChannelUse | None:
    """Rule 3 vectorised for a well-formed transfer list: the channel use when every check
    holds, None otherwise (the checked path then names the violation)."""
    tindex = inst.task_index
    src, dst = inst.edge_src, inst.edge_dst
    if len(events) != int(np.count_nonzero(task_dev[src] != task_dev[dst])):
        return None
    try:
        u, v = (_index_column(tindex, events, k) for k in ("src", "dst"))
        f, t = (_ends_devices(inst, events, k, task_dev[w]) for k, w in (("from", u),
                                                                           ("to", v)))
        ts, te = (_int_column(list(map(itemgetter(k), events))) for k in ("start", "end"))
    except (KeyError, TypeError):
        return None
    if ts is None or te is None:
        return None
    return transfer_arrays(inst, u, v, f, t, ts, te, task_dev, start, end)


def transfer_arrays(inst: PlacementInstance, u: np.ndarray, v: np.ndarray, f: np.ndarray,
                     t: np.ndarray, ts: np.ndarray, te: np.ndarray, task_dev: np.ndarray,
                     start: np.ndarray, end: np.ndarray) -> ChannelUse | None:
    """Rule 3 on transfer columns (source and destination task, from and to device, start,
    end): the channel use when same-device edges keep precedence and every cross-device edge
    has exactly one transfer of the right devices and duration between its tasks, None
    otherwise."""
    n, src, dst = inst.n_tasks, inst.edge_src, inst.edge_dst
    du, dv = task_dev[src], task_dev[dst]
    same = du == dv
    cross = np.flatnonzero(~same)
    ready, begin = end[src], start[dst]  # per edge: its source's end, its target's start
    if (same & (begin < ready)).any() or len(u) != len(cross):
        return None
    ek, ck = u * n + v, src[cross] * n + dst[cross]
    if not (np.array_equal(ek, ck) and (ck[1:] > ck[:-1]).all()):  # else in edge order
        oe, oc = np.argsort(ek, kind="stable"), np.argsort(ck, kind="stable")
        if not np.array_equal(ek[oe], ck[oc]) or (np.diff(ck[oc]) == 0).any():
            return None  # unmatched, duplicated or parallel edges: the checked path decides
        j = np.empty(len(cross), dtype=np.int64)
        j[oc] = oe  # event index of each cross edge, in edge order
        f, t, ts, te = f[j], t[j], ts[j], te[j]
    e = cross
    links, nd = inst.links, inst.n_devices
    if (f != du[e]).any() or (t != dv[e]).any():
        return None
    pair = f * nd + t  # the link of each transfer (flat indexing: one gather per table)
    need = links.latency.ravel()[pair] + np.ceil(
        inst.edge_bytes[e] / links.bandwidth.ravel()[pair]).astype(np.int64)
    if (te - ts != need).any() or (ts < ready[e]).any() or (begin[e] < te).any():
        return None
    return ChannelUse(f, t, ts, te, e)


def _ends_devices(inst: PlacementInstance, events: list, key: str, expected: np.ndarray
                  ) -> np.ndarray:
    """The device index of every event's ``key`` ("from" / "to"): ``expected`` (its task's
    devices) when every event names exactly those, compared by name (cheaper than a lookup
    per event); else by lookup (KeyError / TypeError when a name is off)."""
    names = device_names(inst)
    given = list(map(itemgetter(key), events))
    if given == list(map(names.__getitem__, expected.tolist())):
        return expected
    return np.fromiter(map(inst.device_index.__getitem__, given), dtype=np.int64,
                       count=len(given))


def check_transfers(inst: PlacementInstance, solution: Mapping[str, Any], task_dev: np.ndarray,
                     start: np.ndarray, end: np.ndarray) -> ChannelUse:
    """Same-device edges wait for their source; cross-device edges have exactly one transfer
    of the right devices and duration between the source's end and the destination's start."""
    fast = _fast_transfers(inst, list(solution.get("transfers", ())), task_dev, start, end)
    if fast is not None:
        return fast
    names = device_names(inst)
    transfers = _transfer_events(inst, solution)
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
    uses: list[tuple[int, int, int, int, int]] = []
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
        uses.append((f, t, ts, te, e))
    if used != len(transfers):
        edge_keys = set(zip(src[~same].tolist(), dst[~same].tolist()))
        extra = next(k for k in transfers if k not in edge_keys)
        raise ScheduleError(f"rule 3: transfer for {extra} is not a cross-device edge of the "
                            f"schedule (unknown edge or both tasks on one device)")
    cols = np.array([u[:4] for u in uses], dtype=np.int64).reshape(-1, 4)
    return ChannelUse(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3],
                       np.array([u[4] for u in uses], dtype=np.int64))


# ---- rule 4: channel contention ---------------------------------------------------------------

def check_channels(inst: PlacementInstance, use: ChannelUse) -> None:
    """No two transfers overlap on a channel (:meth:`Links.channel_ids`: ``full`` the ordered
    device pair; ``star`` the source's uplink, then the destination's downlink)."""
    if not inst.links.contention or not len(use.edge):
        return
    src, dst = inst.edge_src, inst.edge_dst
    cs, ce = use.start, use.end
    for g in inst.links.channel_ids(use.src_dev, use.dst_dev):
        hit = first_overlap(g, cs, ce)
        if hit:
            label = inst.links.channel_label(int(g[hit[0]])).split()[0]
            a, b = (use.edge[x] for x in hit)
            raise ScheduleError(
                f"rule 4: transfers of edges {inst.task_ids[src[a]]}->{inst.task_ids[dst[a]]}"
                f" [{cs[hit[0]]}, {ce[hit[0]]}) and {inst.task_ids[src[b]]}->"
                f"{inst.task_ids[dst[b]]} [{cs[hit[1]]}, {ce[hit[1]]}) share a {label}")
