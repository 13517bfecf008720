"""Typed, read-only views of a P1 schedule and a P2 layout solution (problems.md §1.2a, §2):
:class:`Schedule` (its compute events as :class:`ScheduledTask` rows, transfers, loads and
evictions as typed rows, per-device sequences, the makespan) and :class:`LayoutSolution` (the
format of every block and its :class:`Schedule`).

A view is built from a result's solution without copying its big columns: a
:class:`~opt.placement.solution_tables.ColumnarSolution` whose rows were never built lends its
arrays as read-only views; a solution in row form (a §1.2a dict) is read into columns once.
Field names are the JSON ones (``task``, ``device``, ``start``, ``end``; a transfer's ``from``
and ``to`` are ``from_device`` and ``to_device``, Python keywords aside); times are integer
ticks of the instance's ``time_unit``. The view checks shapes only: the schedule rules are the
validator's (:mod:`opt.placement.validator`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from opt.common.errors import InputError
from opt.placement.solution_tables import (
    ColumnarSolution,
    ComputeColumns,
    TransferColumns,
    columnar_from_rows,
)


class ScheduledTask(NamedTuple):
    """One compute event: ``task`` runs on ``device`` over [``start``, ``end``) (ticks)."""

    task: str
    device: str
    start: int
    end: int


class ScheduledTransfer(NamedTuple):
    """The activation of edge ``src`` → ``dst`` moving from ``from_device`` to ``to_device``
    over [``start``, ``end``) (ticks)."""

    src: str
    dst: str
    from_device: str
    to_device: str
    start: int
    end: int


class ScheduledLoad(NamedTuple):
    """Weight block ``block`` loaded onto ``device`` in ``format`` over [``start``, ``end``)
    (ticks)."""

    block: str
    device: str
    format: str
    start: int
    end: int


class ScheduledEviction(NamedTuple):
    """Weight block ``block`` evicted from ``device`` at ``time`` (ticks)."""

    block: str
    device: str
    time: int


def _frozen(arr: np.ndarray) -> np.ndarray:
    """A read-only view of ``arr`` (no copy)."""
    view = arr.view()
    view.flags.writeable = False
    return view


class Schedule:
    """A P1 schedule, read-only: ``devices`` (names), ``compute`` (one :class:`ScheduledTask`
    per task, in the solution's order), ``transfers``, ``loads``, ``evictions`` (typed rows),
    ``formats`` (block id → format) and the ``makespan`` (the latest compute end, ticks).
    Build it with :meth:`from_solution`; :meth:`to_dict` gives the §1.2a dict back."""

    def __init__(self, devices: Sequence[str], compute: ComputeColumns,
                 transfers: TransferColumns, events: _BlockEvents):
        self.devices: tuple[str, ...] = tuple(devices)
        self._c = ComputeColumns(tuple(compute.task), *map(_frozen, (
            compute.device, compute.start, compute.end)))
        self._t = TransferColumns(*map(_frozen, (
            transfers.src, transfers.dst, transfers.from_dev, transfers.to_dev,
            transfers.start, transfers.end)))
        self._events = events

    @classmethod
    def from_solution(cls, solution: Mapping[str, Any]) -> Schedule:
        """The schedule of a §1.2a solution (a :class:`ColumnarSolution` or a dict); an
        InputError naming ``solution`` when it is not one."""
        columnar = solution if isinstance(solution, ColumnarSolution) \
            and not solution.rows_built else _columnar(solution)
        return cls(columnar.devices, columnar.compute_columns(),
                   columnar.transfer_columns(), _BlockEvents.of(columnar))

    # ---- compute events -------------------------------------------------------------------

    @property
    def makespan(self) -> int:
        """The latest end of a compute event (0 without any), ticks: the P1 objective."""
        return int(self._c.end.max()) if len(self._c.end) else 0

    def __len__(self) -> int:
        """The number of compute events (tasks)."""
        return len(self._c.task)

    @cached_property
    def compute(self) -> tuple[ScheduledTask, ...]:
        """Every compute event, in the solution's order."""
        c, names = self._c, self.devices
        return tuple(map(ScheduledTask, c.task, map(names.__getitem__, c.device.tolist()),
                         c.start.tolist(), c.end.tolist()))

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self._c.task)}

    def task(self, task: str) -> ScheduledTask:
        """The compute event of task ``task`` (InputError naming ``task`` when the schedule
        has none)."""
        i = self._row_of.get(task)
        if i is None:
            raise InputError(f"the schedule has no task '{task}'", field="task")
        c = self._c
        return ScheduledTask(task, self.devices[int(c.device[i])], int(c.start[i]),
                             int(c.end[i]))

    def device_of(self, task: str) -> str:
        """The device task ``task`` runs on."""
        return self.task(task).device

    def sequence(self, device: str) -> tuple[str, ...]:
        """The tasks ``device`` runs, by start time (ties in the solution's order)."""
        if device not in self.devices:
            raise InputError(f"the schedule has no device '{device}'; it has "
                             f"{', '.join(self.devices)}", field="device")
        c = self._c
        rows = np.flatnonzero(c.device == self.devices.index(device))
        rows = rows[np.argsort(c.start[rows], kind="stable")]
        return tuple(c.task[i] for i in rows.tolist())

    def sequences(self) -> dict[str, tuple[str, ...]]:
        """Every device's :meth:`sequence` (device name → task ids by start time)."""
        return {d: self.sequence(d) for d in self.devices}

    # ---- transfers, loads, evictions, formats -----------------------------------------------

    @cached_property
    def transfers(self) -> tuple[ScheduledTransfer, ...]:
        """Every transfer between devices, in the solution's order."""
        t, ids, names = self._t, self._c.task, self.devices
        return tuple(map(ScheduledTransfer, map(ids.__getitem__, t.src.tolist()),
                         map(ids.__getitem__, t.dst.tolist()),
                         map(names.__getitem__, t.from_dev.tolist()),
                         map(names.__getitem__, t.to_dev.tolist()), t.start.tolist(),
                         t.end.tolist()))

    @property
    def loads(self) -> tuple[ScheduledLoad, ...]:
        """Every weight load."""
        return self._events.loads

    @property
    def evictions(self) -> tuple[ScheduledEviction, ...]:
        """Every eviction."""
        return self._events.evictions

    @property
    def formats(self) -> Mapping[str, str]:
        """The format of every weight block (block id → format), read-only."""
        return self._events.formats

    def to_dict(self) -> dict[str, Any]:
        """The §1.2a solution dict (new plain lists and dicts, JSON field names)."""
        return {"assignment": {e.task: e.device for e in self.compute},
                "compute": [e._asdict() for e in self.compute],
                "transfers": [{"src": e.src, "dst": e.dst, "from": e.from_device,
                               "to": e.to_device, "start": e.start, "end": e.end}
                              for e in self.transfers],
                "loads": [e._asdict() for e in self.loads],
                "evictions": [e._asdict() for e in self.evictions],
                "formats": dict(self.formats)}

    def __repr__(self) -> str:
        return (f"Schedule(makespan={self.makespan}, {len(self)} tasks on "
                f"{len(self.devices)} devices, {len(self._t.src)} transfers, "
                f"{len(self.loads)} loads, {len(self.evictions)} evictions)")


@dataclass(frozen=True)
class _BlockEvents:
    """A schedule's loads, evictions and formats (a few hundred rows: copied)."""

    loads: tuple[ScheduledLoad, ...]
    evictions: tuple[ScheduledEviction, ...]
    formats: Mapping[str, str]

    @classmethod
    def of(cls, solution: Mapping[str, Any]) -> _BlockEvents:
        try:
            loads = tuple(ScheduledLoad(str(e["block"]), str(e["device"]), str(e["format"]),
                                        int(e["start"]), int(e["end"]))
                          for e in solution["loads"])
            evictions = tuple(ScheduledEviction(str(e["block"]), str(e["device"]),
                                                int(e["time"]))
                              for e in solution["evictions"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a placement solution (problems.md §1.2a): a load or "
                             f"eviction lacks {exc}", field="solution") from None
        return cls(loads, evictions, MappingProxyType(dict(solution["formats"])))


def _columnar(solution: Mapping[str, Any]) -> ColumnarSolution:
    """``solution`` (a §1.2a dict, or a columnar one whose rows were built) as columns; the
    ``assignment`` is not read (the compute events say where each task runs)."""
    rows = solution.rows() if isinstance(solution, ColumnarSolution) else solution
    if not isinstance(rows, Mapping):
        raise InputError(f"not a placement solution: expected a mapping, got "
                         f"{type(rows).__name__}", field="solution")
    plain: dict[str, Any] = {k: list(rows.get(k, ())) for k in (
        "compute", "transfers", "loads", "evictions")}
    plain["formats"] = dict(rows.get("formats", {}))
    plain["assignment"] = {e.get("task"): e.get("device") for e in plain["compute"]
                           if isinstance(e, Mapping)}
    columnar = columnar_from_rows(plain)
    if columnar is None:
        raise InputError("not a placement solution (problems.md §1.2a): its compute events or "
                         "transfers do not read as columns", field="solution")
    return columnar


@dataclass(frozen=True)
class LayoutSolution:
    """A P2 solution, read-only: the ``formats`` chosen (block id → format) and the
    ``schedule`` under them (its makespan is the P2 objective, ticks)."""

    schedule: Schedule

    @classmethod
    def from_solution(cls, solution: Mapping[str, Any]) -> LayoutSolution:
        """The layout solution of a §1.2a solution (formats included)."""
        return cls(Schedule.from_solution(solution))

    @property
    def formats(self) -> Mapping[str, str]:
        """The format of every block (block id → format)."""
        return self.schedule.formats

    def format_of(self, block: str) -> str:
        """The format block ``block`` is stored in (InputError naming ``block`` when the
        solution has none)."""
        fmt = self.formats.get(block)
        if fmt is None:
            raise InputError(f"the solution has no block '{block}'", field="block")
        return fmt

    @property
    def makespan(self) -> int:
        """The schedule's makespan (ticks)."""
        return self.schedule.makespan

    def to_dict(self) -> dict[str, Any]:
        """The §1.2a solution dict (formats included)."""
        return self.schedule.to_dict()
