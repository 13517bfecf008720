"""Assignment-move post-pass for P1 schedules: the replay that ``local-search``
(:mod:`heuristics.placement.local_search`) evaluates its moves with, and the fixed moves
``benchmarks/certified_bounds.py`` tries.

Diagnosis it acts on: on head-sharded decode attention Bifocal in HEFT's order (``siblings``
off) runs q_proj, k_proj and v_proj one after another on the NPU (each is locally the earliest
finish), while a schedule that runs q_proj on a PIM in parallel with k/v on the NPU ends the
attention ~11 % sooner (the certified segment bound shows it is possible). Bifocal's sibling
order (``ready_set: rank``, ``siblings``) finds that schedule by itself; the post-pass is kept
as a check of it. A move re-assigns every task of one kind (in one phase) to
a device chosen by its layer, then *replays* the schedule: tasks in the original start order
(ties by topological position, so every predecessor comes first) are committed on their
(moved) devices by the list scheduler's own loop (:func:`heuristics.placement.list_scheduler.list_schedule`
with each task's candidates narrowed to its device: insertion, channel contention, one load
port per device, LRU evictions). The replay is validated by :mod:`opt.placement.validator` and
kept only when shorter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from heuristics.placement.list_scheduler import DeviceClasses, list_schedule
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.solution_tables import ColumnarSolution
from opt.placement.validator import validate_placement


@dataclass(frozen=True)
class Move:
    """Every task of ``kind`` in ``phase`` (0 prefill, 1 decode, None both) goes to
    ``devices[layer % len(devices)]`` (device indices; legal ones only, others stay)."""

    kind: str
    devices: tuple[int, ...]
    phase: int | None = 1

    def label(self, inst: PlacementInstance) -> str:
        names = "/".join(inst.devices[d].name for d in self.devices)
        return f"{self.kind}->{names}" + ("" if self.phase is None else f"@phase{self.phase}")


def _columns(inst: PlacementInstance, solution: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, device index) int64 [n] of every task, read from a list schedule's columns
    (:class:`opt.placement.solution_tables.ColumnarSolution` whose rows were never built, in
    the instance's task order); None for any other solution (read its rows)."""
    if not isinstance(solution, ColumnarSolution) or solution.rows_built \
            or solution.task != inst.task_ids:
        return None
    idx = {d.name: i for i, d in enumerate(inst.devices)}
    if any(name not in idx for name in solution.devices):
        return None
    code = np.array([idx[name] for name in solution.devices], dtype=np.int64)
    return solution.start, code[solution.device]


def replay(inst: PlacementInstance, solution: dict, device: Sequence[int] | np.ndarray
           ) -> dict:
    """The schedule of ``solution``'s task order (start times, ties by topological position)
    with each task t committed on ``device[t]``, a legal device of t (a solution dict, not yet
    validated): the list schedule of that order with one device class per device and task t
    in class ``device[t]``."""
    cols = _columns(inst, solution)
    start = cols[0] if cols is not None else \
        np.array([c["start"] for c in solution["compute"]], dtype=np.int64)
    pos = np.empty(inst.n_tasks, dtype=np.int64)
    pos[np.asarray(inst.topological_order)] = np.arange(inst.n_tasks)
    order = np.lexsort((pos, start))
    own = DeviceClasses(np.asarray(device, dtype=np.int64), np.eye(inst.n_devices, dtype=bool),
                        "replay")
    return list_schedule(inst, order, insertion=True, classes=own, device_choice="eft")


def assignment(inst: PlacementInstance, solution: dict) -> np.ndarray:
    """int64 [n]: the device index of every task in ``solution``."""
    cols = _columns(inst, solution)
    if cols is not None:
        return cols[1].copy()
    idx = {d.name: i for i, d in enumerate(inst.devices)}
    return np.array([idx[c["device"]] for c in solution["compute"]], dtype=np.int64)


def moved(inst: PlacementInstance, device: np.ndarray, move: Move) -> np.ndarray:
    """``device`` with ``move`` applied (tasks whose target is illegal keep their device)."""
    kinds = np.array(inst.kind if inst.kind else [None] * inst.n_tasks, dtype=object)
    sel = kinds == move.kind
    if move.phase is not None and inst.phase is not None:
        sel &= inst.phase == move.phase
    layer = inst.layer if inst.layer is not None else np.zeros(inst.n_tasks, dtype=np.int64)
    tasks = np.flatnonzero(sel)
    target = np.asarray(move.devices)[np.maximum(layer[tasks], 0) % len(move.devices)]
    ok = inst.cost[tasks, target] >= 0
    out = device.copy()
    out[tasks[ok]] = target[ok]
    return out


def improve(inst: PlacementInstance, solution: dict, moves: Sequence[Move]
            ) -> tuple[dict, list[dict]]:
    """(best solution, log): each move is applied to the best assignment so far and replayed;
    a validated shorter replay becomes the best. The log has one entry per move (label,
    makespan or the validator's error)."""
    best = solution
    best_span = validate_placement(inst, solution).makespan
    log: list[dict] = [{"move": "start", "makespan": int(best_span)}]
    for mv in moves:
        cand_dev = moved(inst, assignment(inst, best), mv)
        cand = replay(inst, best, cand_dev)
        try:
            span = validate_placement(inst, cand).makespan
        except ScheduleError as exc:
            log.append({"move": mv.label(inst), "error": str(exc)})
            continue
        log.append({"move": mv.label(inst), "makespan": int(span), "kept": span < best_span})
        if span < best_span:
            best, best_span = cand, span
    return best, log


def attention_moves(inst: PlacementInstance) -> list[Move]:
    """The moves tried by the benchmark: decode q_proj (then k_proj) onto the PIM-class
    devices, rotating over layers, and onto the first of them."""
    pims = tuple(i for i, d in enumerate(inst.devices) if d.device_class == "pim")
    if not pims:
        return []
    return [Move("q_proj", pims), Move("q_proj", pims[:1])]
