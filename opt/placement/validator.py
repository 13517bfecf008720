"""Independent validator of P1 schedules (problems.md §1.2, §1.3).

Checks rules 1–6 (and the P2 memory budget), recomputes the makespan and the other metrics, and
raises :class:`ScheduleError` on the first violation with the rule, the task/edge/block and the
times. Imports nothing from ``models``, ``solvers`` or ``heuristics``.

Residency of a block on a device runs from its load's start to its eviction (or the end); a task
using the block needs a load on its device that ended by the task's start (under ``load_timing:
overlap`` by the task's end when a load serves the task) and a residency still open at the
start (eviction strictly after the start).

This module holds the entry point, the columnar path and the metrics; the rules live in
:mod:`opt.placement.compute_transfer_checks` (rules 1–4) and
:mod:`opt.placement.residency_checks` (formats, the memory budget, rules 5–6), the error in
:mod:`opt.placement.schedule_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from opt.placement.compute_transfer_checks import (
    ChannelUse,
    check_channels,
    check_compute,
    check_device_overlap,
    check_transfers,
    compute_arrays,
    transfer_arrays,
)
from opt.placement.instance import PlacementInstance
from opt.placement.load_timing import at_use_violation, overlap_ready_by, overlap_violation
from opt.placement.residency_checks import (
    check_blocks_resident,
    check_capacity,
    check_formats,
    check_loads,
    residencies,
)
from opt.placement.schedule_error import ScheduleError, Undecided, device_names
from opt.placement.solution_tables import MAX_TIME, ColumnarSolution, EventRows, LazyAssignment


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
        except (Undecided, ScheduleError):
            pass
        solution = solution.rows()
    elif isinstance(solution, dict):
        solution = _lazy_parts_built(solution)
    _check_shape(solution)
    task_dev, start, end = check_compute(inst, solution)
    check_device_overlap(inst, task_dev, start, end)
    channel_use = check_transfers(inst, solution, task_dev, start, end)
    return _check_blocks(inst, solution, task_dev, start, end, channel_use)


def _lazy_parts_built(solution: dict[str, Any]) -> dict[str, Any]:
    """``solution`` with the lazy event lists and assignment of a columnar solution (a dict
    made as ``{**columnar, "formats": …}``) as the list and dict they stand for."""
    if not any(isinstance(v, (EventRows, LazyAssignment)) for v in solution.values()):
        return solution
    return {k: v.json_value() if isinstance(v, (EventRows, LazyAssignment)) else v
            for k, v in solution.items()}


def _check_blocks(inst: PlacementInstance, solution: Mapping[str, Any], task_dev: np.ndarray,
                  start: np.ndarray, end: np.ndarray, channel_use: ChannelUse
                  ) -> PlacementMetrics:
    """Rules 4–6 (rule 5 with the instance's load timing) and the metrics, once rules 1–3
    hold."""
    check_channels(inst, channel_use)
    fmt_of = check_formats(inst, solution)
    loads = check_loads(inst, solution, fmt_of)
    check = {"at_use": at_use_violation, "overlap": overlap_violation}.get(inst.load_timing)
    if check is not None:
        msg = check(inst, task_dev, start, end, channel_use.edge, channel_use.end,
                    loads.block, loads.device, loads.start, loads.end)
        if msg:
            raise ScheduleError(msg)
    resid = residencies(inst, solution, loads)
    ready_by = start
    if inst.load_timing == "overlap":
        ready_by = overlap_ready_by(inst, task_dev, start, end, loads.block, loads.device,
                                    loads.end)
    check_blocks_resident(inst, resid, task_dev, start, ready_by)
    check_capacity(inst, resid)
    return _metrics(inst, task_dev, start, end, len(solution.get("evictions", ())))


# ---- the columnar path ------------------------------------------------------------------------

def _validate_columns(inst: PlacementInstance, sol: ColumnarSolution) -> PlacementMetrics:
    """:func:`validate_placement` on the columns: the same rules in bulk. Raises
    :class:`Undecided` or :class:`ScheduleError` on anything off (the caller then checks
    the rows, which names the violation)."""
    _check_shape({k: sol[k] for k in ("loads", "evictions", "formats")})
    times = (sol.start, sol.end, sol.t_start, sol.t_end)
    if any(len(a) and (int(a.min()) < -MAX_TIME or int(a.max()) > MAX_TIME) for a in times):
        raise Undecided
    row_task = _row_tasks(inst, sol.task)
    dmap = np.fromiter(map(_device_lookup(inst), sol.devices), dtype=np.int64,
                       count=len(sol.devices))
    compute = compute_arrays(inst, row_task, dmap[sol.device], sol.start, sol.end)
    if compute is None:
        raise Undecided
    task_dev, start, end = compute
    check_device_overlap(inst, task_dev, start, end)
    u, v = ((sol.src, sol.dst) if row_task is None
            else (row_task[sol.src], row_task[sol.dst]))
    use = transfer_arrays(inst, u, v, dmap[sol.from_dev], dmap[sol.to_dev], sol.t_start,
                           sol.t_end, task_dev, start, end)
    if use is None:
        raise Undecided
    return _check_blocks(inst, sol, task_dev, start, end, use)


def _row_tasks(inst: PlacementInstance, task: tuple) -> np.ndarray | None:
    """The instance index of the task of each compute row (None when row i is task i;
    :class:`Undecided` when a name is unknown or not a string)."""
    if task is inst.task_ids or task == inst.task_ids:
        return None
    try:
        return np.fromiter(map(inst.task_index.__getitem__, task), dtype=np.int64,
                           count=len(task))
    except (KeyError, TypeError):
        raise Undecided from None


def _device_lookup(inst: PlacementInstance):
    """name → device index, :class:`Undecided` for an unknown name."""
    def look(name: str) -> int:
        if name not in inst.device_index:
            raise Undecided
        return inst.device_index[name]
    return look


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
    n, names = inst.n_tasks, device_names(inst)
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
