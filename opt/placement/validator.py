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
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.load_timing import at_use_violation
from opt.placement.solution_tables import MAX_TIME, ColumnarSolution, EventRows, LazyAssignment


class ScheduleError(ValueError):
    """A schedule breaks a rule of problems.md §1.2; the message says which and where."""


class _Undecided(Exception):
    """The columnar path cannot decide a check in bulk: the row path decides and names it."""


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
    positive = end > start
    if positive.all():  # no zero-length event to drop (the usual case): no gathers
        order = _group_order(groups, start) if len(start) > 1 else None
    else:
        keep = np.flatnonzero(positive)
        order = keep[_group_order(groups[keep], start[keep])] if len(keep) > 1 else None
    if order is None:
        return None
    g, s, e = groups[order], start[order], end[order]
    bad = np.flatnonzero((g[1:] == g[:-1]) & (s[1:] < e[:-1]))
    if len(bad) == 0:
        return None
    return int(order[bad[0]]), int(order[bad[0] + 1])


def _int(value: Any, what: str) -> int:
    """``value`` as an integer time in [−MAX_TIME, MAX_TIME] (integral floats accepted)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if not (isinstance(value, float) and value.is_integer()):
            raise ScheduleError(f"{what} must be an integer, got {value!r}")
    if not -MAX_TIME <= value <= MAX_TIME:
        raise ScheduleError(f"{what} = {value!r} is out of range (|t| ≤ 2^62)")
    return int(value)


def _group_order(groups: np.ndarray, start: np.ndarray) -> np.ndarray:
    """``np.lexsort((start, groups))``: by group, then start, ties in index order. Two stable
    sorts when the groups fit in int16 (numpy's radix sort then orders the groups in linear
    time; several times faster than lexsort on a million events)."""
    if len(groups) and 0 <= int(groups.min()) and int(groups.max()) < 2 ** 15:
        by_start = np.argsort(start, kind="stable")
        return by_start[np.argsort(groups[by_start].astype(np.int16), kind="stable")]
    return np.lexsort((start, groups))


#: Keys of a problems.md §1.2a solution holding lists of events / objects of names.
EVENT_KEYS = ("compute", "transfers", "loads", "evictions")
MAP_KEYS = ("assignment", "formats")


#: event fields that must be strings (names of tasks, devices, blocks, formats)
_NAME_FIELDS = frozenset({"task", "src", "dst", "device", "from", "to", "block", "format"})


def _names_are_strings(events: list) -> bool:
    """Fast check of a well-formed event list: every event a plain dict, every name field
    that any event has present in all of them, and a string (False: the per-event loop
    decides and names it; True only where that loop passes too)."""
    if set(map(type, events)) - {dict}:
        return False
    names = _NAME_FIELDS.intersection(set().union(*events))
    try:
        return all(not (set(map(type, map(itemgetter(name), events))) - {str})
                   for name in names)
    except KeyError:  # a name field missing from some event
        return False


def _all_strings(values) -> bool:
    """Every value is a string (the exact type checked in bulk first)."""
    return not set(map(type, values)) - {str} or all(isinstance(v, str) for v in values)


def _check_shape(solution: Any) -> None:
    """The solution is an object whose event lists hold objects and whose maps map names to
    names: anything else is a :class:`ScheduleError` naming the key, never a crash."""
    if not isinstance(solution, dict):
        raise ScheduleError(f"solution must be an object, got {type(solution).__name__}")
    for key in EVENT_KEYS:
        events = solution.get(key, [])
        if not isinstance(events, list):
            raise ScheduleError(f"solution.{key} must be a list, got {type(events).__name__}")
        if not events or _names_are_strings(events):
            continue
        for k, ev in enumerate(events):
            if not isinstance(ev, dict):
                raise ScheduleError(f"solution.{key}[{k}] must be an object, got "
                                    f"{type(ev).__name__}")
            for name, value in ev.items():
                if name in _NAME_FIELDS and not isinstance(value, str):
                    raise ScheduleError(f"solution.{key}[{k}].{name} must be a string, got "
                                        f"{value!r}")
    for key in MAP_KEYS:
        mapping = solution.get(key) or {}
        if not isinstance(mapping, dict) or not _all_strings(mapping.values()):
            raise ScheduleError(f"solution.{key} must map names to names, got {mapping!r:.80}")


def validate_placement(inst: PlacementInstance, solution: Mapping[str, Any]
                       ) -> PlacementMetrics:
    """Check ``solution`` (problems.md §1.2a shape) against ``inst``; return the recomputed metrics.

    The rules are checked in order (1 compute events, 2 device overlap, 3 transfers, 4 channels,
    formats and the memory budget, 5 loads and evictions, 6 capacity); the first violation
    raises :class:`ScheduleError`. A :class:`ColumnarSolution` is checked on its columns; when
    any check fails there, or its rows were built (and may have been edited), its rows are
    checked as a dict's, so the message is the same."""
    if isinstance(solution, ColumnarSolution):
        try:
            if not solution.rows_built:
                return _validate_columns(inst, solution)
        except (_Undecided, ScheduleError):
            pass
        solution = solution.rows()
    elif isinstance(solution, dict):
        solution = _lazy_parts_built(solution)
    _check_shape(solution)
    task_dev, start, end = _check_compute(inst, solution)
    _check_device_overlap(inst, task_dev, start, end)
    channel_use = _check_transfers(inst, solution, task_dev, start, end)
    return _check_blocks(inst, solution, task_dev, start, end, channel_use)


def _lazy_parts_built(solution: dict[str, Any]) -> dict[str, Any]:
    """``solution`` with the lazy event lists and assignment of a columnar solution (a dict
    made as ``{**columnar, "formats": …}``) as the list and dict they stand for."""
    if not any(isinstance(v, (EventRows, LazyAssignment)) for v in solution.values()):
        return solution
    return {k: v.json_value() if isinstance(v, (EventRows, LazyAssignment)) else v
            for k, v in solution.items()}


def _check_blocks(inst: PlacementInstance, solution: Mapping[str, Any], task_dev: np.ndarray,
                  start: np.ndarray, end: np.ndarray, channel_use: _ChannelUse
                  ) -> PlacementMetrics:
    """Rules 4–6 (rule 5 with the instance's load timing) and the metrics, once rules 1–3
    hold."""
    _check_channels(inst, channel_use)
    fmt_of = _check_formats(inst, solution)
    loads = _check_loads(inst, solution, fmt_of)
    if inst.load_timing == "at_use":
        msg = at_use_violation(inst, task_dev, start, end, channel_use.edge, channel_use.end,
                               loads.block, loads.device, loads.start, loads.end)
        if msg:
            raise ScheduleError(msg)
    resid = _residencies(inst, solution, loads)
    _check_blocks_resident(inst, resid, task_dev, start)
    _check_capacity(inst, resid)
    return _metrics(inst, task_dev, start, end, len(solution.get("evictions", ())))


# ---- the columnar path ------------------------------------------------------------------------

def _validate_columns(inst: PlacementInstance, sol: ColumnarSolution) -> PlacementMetrics:
    """:func:`validate_placement` on the columns: the same rules in bulk. Raises
    :class:`_Undecided` or :class:`ScheduleError` on anything off (the caller then checks
    the rows, which names the violation)."""
    _check_shape({k: sol[k] for k in ("loads", "evictions", "formats")})
    times = (sol.start, sol.end, sol.t_start, sol.t_end)
    if any(len(a) and (int(a.min()) < -MAX_TIME or int(a.max()) > MAX_TIME) for a in times):
        raise _Undecided
    row_task = _row_tasks(inst, sol.task)
    dmap = np.fromiter(map(_device_lookup(inst), sol.devices), dtype=np.int64,
                       count=len(sol.devices))
    compute = _compute_arrays(inst, row_task, dmap[sol.device], sol.start, sol.end)
    if compute is None:
        raise _Undecided
    task_dev, start, end = compute
    _check_device_overlap(inst, task_dev, start, end)
    u, v = ((sol.src, sol.dst) if row_task is None
            else (row_task[sol.src], row_task[sol.dst]))
    use = _transfer_arrays(inst, u, v, dmap[sol.from_dev], dmap[sol.to_dev], sol.t_start,
                           sol.t_end, task_dev, start, end)
    if use is None:
        raise _Undecided
    return _check_blocks(inst, sol, task_dev, start, end, use)


def _row_tasks(inst: PlacementInstance, task: tuple) -> np.ndarray | None:
    """The instance index of the task of each compute row (None when row i is task i;
    :class:`_Undecided` when a name is unknown or not a string)."""
    if task is inst.task_ids or task == inst.task_ids:
        return None
    try:
        return np.fromiter(map(inst.task_index.__getitem__, task), dtype=np.int64,
                           count=len(task))
    except (KeyError, TypeError):
        raise _Undecided from None


def _device_lookup(inst: PlacementInstance):
    """name → device index, :class:`_Undecided` for an unknown name."""
    def look(name: str) -> int:
        if name not in inst.device_index:
            raise _Undecided
        return inst.device_index[name]
    return look


def _names(inst: PlacementInstance) -> list[str]:
    return [d.name for d in inst.devices]


def _dev(inst: PlacementInstance, name: Any, what: str) -> int:
    """The index of device ``name``; ``what`` names the event in the error."""
    if name not in inst.device_index:
        raise ScheduleError(f"{what}: unknown device {name!r}")
    return inst.device_index[name]


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
    return _compute_arrays(inst, t, d, s, e)


def _compute_arrays(inst: PlacementInstance, t: np.ndarray | None, d: np.ndarray,
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


def _check_compute(inst: PlacementInstance, solution: Mapping[str, Any]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(device, start, end) of every task from the compute events (and ``assignment``)."""
    events = list(solution.get("compute", ()))
    fast = _fast_compute(inst, events)
    if fast is not None:
        if not _assignment_mirrors(solution.get("assignment") or {}, events):
            _check_assignment(inst, solution, fast[0])
        return fast
    n, names, tindex = inst.n_tasks, _names(inst), inst.task_index
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
        d = _dev(inst, ev.get("device"), f"rule 1: compute event of task '{tid}'")
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
    _check_assignment(inst, solution, task_dev)
    return task_dev, start, end


def _check_assignment(inst: PlacementInstance, solution: Mapping[str, Any],
                      task_dev: np.ndarray) -> None:
    """The optional ``assignment`` map agrees with the compute events."""
    names, tindex = _names(inst), inst.task_index
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

def _check_device_overlap(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                          end: np.ndarray) -> None:
    hit = _overlaps(task_dev, start, end)
    if hit:
        i, j = hit
        raise ScheduleError(f"rule 2: tasks '{inst.task_ids[i]}' [{start[i]}, {end[i]}) and "
                            f"'{inst.task_ids[j]}' [{start[j]}, {end[j]}) overlap on "
                            f"'{_names(inst)[task_dev[i]]}'")


# ---- rule 3: precedence and transfers ---------------------------------------------------------

@dataclass(frozen=True)
class _ChannelUse:
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
        transfers[key] = (_dev(inst, ev.get("from"), f"rule 3: transfer[{k}]"),
                          _dev(inst, ev.get("to"), f"rule 3: transfer[{k}]"),
                          _int(ev.get("start"), f"transfer[{k}].start"),
                          _int(ev.get("end"), f"transfer[{k}].end"))
    return transfers


def _fast_transfers(inst: PlacementInstance, events: list, task_dev: np.ndarray,
                    start: np.ndarray, end: np.ndarray) -> _ChannelUse | None:
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
    return _transfer_arrays(inst, u, v, f, t, ts, te, task_dev, start, end)


def _transfer_arrays(inst: PlacementInstance, u: np.ndarray, v: np.ndarray, f: np.ndarray,
                     t: np.ndarray, ts: np.ndarray, te: np.ndarray, task_dev: np.ndarray,
                     start: np.ndarray, end: np.ndarray) -> _ChannelUse | None:
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
    return _ChannelUse(f, t, ts, te, e)


def _ends_devices(inst: PlacementInstance, events: list, key: str, expected: np.ndarray
                  ) -> np.ndarray:
    """The device index of every event's ``key`` ("from" / "to"): ``expected`` (its task's
    devices) when every event names exactly those, compared by name (cheaper than a lookup
    per event); else by lookup (KeyError / TypeError when a name is off)."""
    names = _names(inst)
    given = list(map(itemgetter(key), events))
    if given == list(map(names.__getitem__, expected.tolist())):
        return expected
    return np.fromiter(map(inst.device_index.__getitem__, given), dtype=np.int64,
                       count=len(given))


def _check_transfers(inst: PlacementInstance, solution: Mapping[str, Any], task_dev: np.ndarray,
                     start: np.ndarray, end: np.ndarray) -> _ChannelUse:
    """Same-device edges wait for their source; cross-device edges have exactly one transfer
    of the right devices and duration between the source's end and the destination's start."""
    fast = _fast_transfers(inst, list(solution.get("transfers", ())), task_dev, start, end)
    if fast is not None:
        return fast
    names = _names(inst)
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
    return _ChannelUse(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3],
                       np.array([u[4] for u in uses], dtype=np.int64))


# ---- rule 4: channel contention ---------------------------------------------------------------

def _check_channels(inst: PlacementInstance, use: _ChannelUse) -> None:
    """No two transfers overlap on a channel (:meth:`Links.channel_ids`: ``full`` the ordered
    device pair; ``star`` the source's uplink, then the destination's downlink)."""
    if not inst.links.contention or not len(use.edge):
        return
    src, dst = inst.edge_src, inst.edge_dst
    cs, ce = use.start, use.end
    for g in inst.links.channel_ids(use.src_dev, use.dst_dev):
        hit = _overlaps(g, cs, ce)
        if hit:
            label = inst.links.channel_label(int(g[hit[0]])).split()[0]
            a, b = (use.edge[x] for x in hit)
            raise ScheduleError(
                f"rule 4: transfers of edges {inst.task_ids[src[a]]}->{inst.task_ids[dst[a]]}"
                f" [{cs[hit[0]]}, {ce[hit[0]]}) and {inst.task_ids[src[b]]}->"
                f"{inst.task_ids[dst[b]]} [{cs[hit[1]]}, {ce[hit[1]]}) share a {label}")


# ---- formats (P1 fixed, P2 decided) and the memory budget -------------------------------------

def _check_formats(inst: PlacementInstance, solution: Mapping[str, Any]) -> list[str]:
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


def _check_loads(inst: PlacementInstance, solution: Mapping[str, Any], fmt_of: list[str]) -> _Loads:
    """Every load names a known block in its stored format, lasts its load duration, and the
    loads of one device do not overlap on its load port."""
    names, bindex = _names(inst), inst.block_index
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
        d = _dev(inst, ev.get("device"), f"rule 5: load of '{bid}'")
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
    return _Loads(ld_b, ld_d, ld_s, ld_e)


Residencies = dict[tuple[int, int], list[tuple[int, int, float]]]


def _residencies(inst: PlacementInstance, solution: Mapping[str, Any], loads: _Loads
                 ) -> Residencies:
    """(block, device) -> residency intervals [load start, load end, eviction or +inf),
    pairing each device's loads of a block in time order with its evictions."""
    names = _names(inst)
    bindex = inst.block_index
    ev_by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k, ev in enumerate(solution.get("evictions", ())):
        bid = ev.get("block")
        if bid not in bindex:
            raise ScheduleError(f"evictions[{k}] names unknown block {bid!r}")
        ev_by[(bindex[bid], _dev(inst, ev.get("device"), f"eviction of '{bid}'"))].append(
            _int(ev.get("time"), f"evictions[{k}].time"))
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


def _check_blocks_resident(inst: PlacementInstance, resid: Residencies, task_dev: np.ndarray,
                           start: np.ndarray) -> None:
    """A task with a block starts while the block is resident (loaded, not yet evicted)."""
    if _all_resident(inst, resid, task_dev, start):
        return
    names = _names(inst)
    for t in np.flatnonzero(inst.task_block >= 0).tolist():
        b, d, s = int(inst.task_block[t]), int(task_dev[t]), int(start[t])
        ok = any(le <= s < stop for _, le, stop in resid.get((b, d), ()))
        if not ok:
            spans = [(ls, le, stop) for ls, le, stop in resid.get((b, d), ())]
            raise ScheduleError(f"rule 5: task '{inst.task_ids[t]}' starts at {s} on "
                                f"'{names[d]}' but block '{inst.block_ids[b]}' is not resident "
                                f"then (loaded by the start and not evicted; residencies "
                                f"[start, ready, evicted): {spans[:4]})")


def _all_resident(inst: PlacementInstance, resid: Residencies, task_dev: np.ndarray,
                  start: np.ndarray) -> bool:
    """Vectorised :func:`_check_blocks_resident` (False: some task is not covered; the loop
    names it). The residencies of one (block, device) are disjoint and in time order, so the
    one that can cover a start s is the last whose ready time is ≤ s: residencies and starts
    are merged in (key, time) order, residencies first at equal times."""
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
    q_time = start[tasks]
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
    ok &= (r_key[cand] == q_key[q]) & (q_time[q] < r_stop[cand])
    return bool(ok.all())


# ---- rule 6: capacity -------------------------------------------------------------------------

def _check_capacity(inst: PlacementInstance, resid: Residencies) -> None:
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


# ---- metrics ----------------------------------------------------------------------------------

def _distinct(values: np.ndarray) -> int:
    """How many distinct values (``len(np.unique(values))`` without its import of numpy.ma,
    0.2–0.4 s the first time)."""
    if len(values) == 0:
        return 0
    if 0 <= int(values.min()) and int(values.max()) < 1 << 24:
        return int(np.count_nonzero(np.bincount(values)))
    v = np.sort(values)
    return int(np.count_nonzero(v[1:] != v[:-1])) + 1


def _metrics(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray, end: np.ndarray,
             evictions: int) -> PlacementMetrics:
    n, names = inst.n_tasks, _names(inst)
    makespan = int(end.max()) if n else 0
    pre, dec = inst.is_prefill(), inst.is_decode()
    ttft = int(end[pre].max()) if pre.any() else None
    steps = _distinct(inst.step[dec]) if dec.any() and inst.step is not None else 0
    decode_time = makespan - ttft if (ttft is not None and dec.any()) else None
    busy = np.bincount(task_dev, weights=(end - start), minlength=inst.n_devices)
    util = {names[d]: (float(busy[d]) / makespan if makespan else 0.0)
            for d in range(inst.n_devices)}
    return PlacementMetrics(makespan=makespan, ttft=ttft, decode_time=decode_time,
                            decode_steps=steps,
                            mean_tpot=(decode_time / steps if decode_time is not None and steps
                                       else None),
                            utilisation=util, evictions=evictions)
