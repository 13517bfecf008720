"""The error a P1 schedule check raises and the readers the rule checks share (problems.md §1.2):
:class:`ScheduleError`, integer times, device names and the first overlap within a group.
Used by :mod:`opt.placement.validator` and its rule modules
(:mod:`opt.placement.compute_transfer_checks`, :mod:`opt.placement.residency_checks`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.solution_tables import MAX_TIME


class ScheduleError(ValueError):
    """A schedule breaks a rule of problems.md §1.2; the message says which and where."""


class Undecided(Exception):
    """The columnar path cannot decide a check in bulk: the row path decides and names it."""



def first_overlap(groups: np.ndarray, start: np.ndarray, end: np.ndarray):
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


def checked_int(value: Any, what: str) -> int:
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


def device_names(inst: PlacementInstance) -> list[str]:
    return [d.name for d in inst.devices]


def device_of(inst: PlacementInstance, name: Any, what: str) -> int:
    """The index of device ``name``; ``what`` names the event in the error."""
    if name not in inst.device_index:
        raise ScheduleError(f"{what}: unknown device {name!r}")
    return inst.device_index[name]
