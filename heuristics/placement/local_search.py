"""Local search over device assignments, replayed (problems.md §6 "Local search"; beyond DOPS).

Start: the shortest validated schedule of a fixed set of constructive heuristics
(:data:`STARTS`, in that order; ties keep the earlier one): HEFT (its default
``fit_in_class``), the five static policies of DOPS Table 1, each with its default device
inside the class (``least_available``) and with ``fit_in_class`` (the capacity-aware choice,
problems.md §6 "Device inside the class"), then Bifocal (the paper's heuristic, its
defaults). Each is one list schedule, so the set costs about a dozen schedules — a small part
of a time limit that :func:`solvers.registry.size_error` lets start at all. The first start
(HEFT, a plain list schedule: the rate ``size_error`` assumes) is always built; a further
start, or a replay, only while the time left exceeds the latest one's duration (consecutive
list schedules, and consecutive replays, of one instance cost about the same; a one-off
cost such as numba's first compilation of a kernel does not stop the search for good), so
the limit holds at every size up to one start's or replay's overrun. Bifocal comes
last: its loop costs several list schedules (about 14 HEFTs measured on llama-2-7b HP64
512/128/4), so under a short limit it is the start left out.

Moves: a *group* is the tasks of one (operator kind, phase) — routed/shared experts grouped
by role as in policy search (:func:`heuristics.placement.policy_search.kind_group`) — and a
*pattern* gives each task of the group a device: one device for all of them, or a round-robin
over the devices of one class by the task's layer or by its KV head group (``@g<k>`` in the
task id). A task whose pattern device is illegal for it keeps its device. The moved
assignment is *replayed*: the current best schedule's tasks in their start order (ties by
topological position) committed on their devices by the list scheduler's own loop
(:func:`heuristics.placement.improve.replay`: insertion, channel contention, load ports, LRU
evictions), then validated (:mod:`opt.placement.validator`); it replaces the best when its
makespan is strictly shorter.

Search: first-improvement hill climbing. Groups in decreasing order of their tasks' total
cheapest duration (ties by name), each with its patterns in a fixed order (single devices in
instance order, then per class the layer and head-group round-robins); a move that leaves the
assignment unchanged is skipped without an evaluation. Passes repeat until one accepts no
move, ``max_evaluations`` replays have been made, or the time limit has passed. Nothing is
random: for a given instance and budget the result is the same on every run (the clock acts
only through the time limit).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from heuristics.placement.improve import assignment, replay
from heuristics.placement.policy_search import kind_group
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement

#: The constructive starts, in the order they are built: (label, method, device_choice)
STARTS: tuple[tuple[str, str, str | None], ...] = (
    ("heft", "heft", "fit_in_class"),
    *((f"{p}", p, "least_available") for p in ("pd", "af", "pd+linear", "pd+attn", "pd+ffn")),
    *((f"{p}:fit_in_class", p, "fit_in_class")
      for p in ("pd", "af", "pd+linear", "pd+attn", "pd+ffn")),
    ("bifocal", "bifocal", None),
)
_HEAD = re.compile(r"@g(\d+)$")


@dataclass(frozen=True)
class LocalSearchParams:
    """The search's budget: replays evaluated (the time limit is the solve's)."""

    max_evaluations: int = 1000


@dataclass(frozen=True)
class Pattern:
    """A device for each task: ``devices[0]`` (``key`` None), or ``devices[i % len]`` with i
    the task's layer (``key`` "layer") or KV head group (``key`` "head")."""

    devices: tuple[int, ...]
    key: str | None = None

    def label(self, inst: PlacementInstance) -> str:
        names = "/".join(inst.devices[d].name for d in self.devices)
        return names if self.key is None else f"{names} by {self.key}"


def start_schedule(inst: PlacementInstance, method: str, device_choice: str | None) -> dict:
    """The schedule of constructive start ``method`` (see :data:`STARTS`)."""
    if method == "bifocal":
        from heuristics.placement.bifocal import bifocal_schedule

        return bifocal_schedule(inst)
    if method == "heft":
        from heuristics.placement.list_scheduler import heft

        return heft(inst, device_choice=device_choice or "fit_in_class")
    from heuristics.placement.static_policies import static_schedule

    return static_schedule(inst, method, device_choice=device_choice or "least_available")


def head_groups(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: each task's KV head group (``@g<k>`` at the end of its id), −1 if none."""
    out = np.full(inst.n_tasks, -1, dtype=np.int64)
    for t, tid in enumerate(inst.task_ids):
        m = _HEAD.search(tid)
        if m:
            out[t] = int(m.group(1))
    return out


def groups(inst: PlacementInstance) -> list[tuple[str, np.ndarray]]:
    """(label, task indices) of every (kind group, phase) with tasks, in decreasing order of
    their total cheapest legal duration (ties by label)."""
    if not inst.kind:
        return []
    phases = inst.phase.tolist() if inst.phase is not None else [-1] * inst.n_tasks
    members: dict[str, list[int]] = {}
    for t, (k, ph) in enumerate(zip(inst.kind, phases)):
        if k is None:
            continue
        label = kind_group(k) + {0: "@prefill", 1: "@decode"}.get(ph, "")
        members.setdefault(label, []).append(t)
    cheapest = np.where(inst.cost >= 0, inst.cost, np.iinfo(np.int64).max).min(axis=1)
    work = {g: int(cheapest[ts].sum()) for g, ts in members.items()}
    return [(g, np.array(members[g], dtype=np.int64))
            for g in sorted(members, key=lambda g: (-work[g], g))]


def patterns(inst: PlacementInstance, has_heads: bool) -> list[Pattern]:
    """Every single device (instance order), then per class of more than one device (classes
    in order of first appearance) its round-robin by layer and, when tasks carry head groups,
    by head group."""
    out = [Pattern((d,)) for d in range(inst.n_devices)]
    classes: dict[str, list[int]] = {}
    for d, dev in enumerate(inst.devices):
        classes.setdefault(dev.device_class, []).append(d)
    for devs in classes.values():
        if len(devs) > 1:
            out.append(Pattern(tuple(devs), "layer"))
            if has_heads:
                out.append(Pattern(tuple(devs), "head"))
    return out


def apply(inst: PlacementInstance, device: np.ndarray, tasks: np.ndarray, pattern: Pattern,
          layer: np.ndarray, head: np.ndarray) -> np.ndarray:
    """``device`` with ``tasks`` moved by ``pattern`` (a task whose target is illegal for it
    keeps its device)."""
    devs = np.asarray(pattern.devices, dtype=np.int64)
    if pattern.key is None:
        target = np.full(len(tasks), devs[0], dtype=np.int64)
    else:
        idx = (layer if pattern.key == "layer" else head)[tasks]
        target = devs[np.maximum(idx, 0) % len(devs)]
    ok = inst.cost[tasks, target] >= 0
    out = device.copy()
    out[tasks[ok]] = target[ok]
    return out


def local_search(inst: PlacementInstance, params: LocalSearchParams | None = None, *,
                 time_limit: float | None = None, stats: dict[str, Any] | None = None) -> dict:
    """The best schedule found (problems.md §1.2a solution dict); see the module docstring.
    ``stats`` (when given) receives ``start``, ``starts`` (label → makespan, or the reason it
    failed), ``evaluations``, ``passes``, ``accepted`` (move labels) and ``accepted_at`` (the
    evaluation that found each), ``trajectory`` (the best makespan after the start and after
    each accepted move), ``stopped`` (``local optimum``, ``max_evaluations`` or ``time limit``)
    and ``time_s``."""
    p = params or LocalSearchParams()
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit

    last = 0.0  # the latest schedule or replay (s): the next one's estimate

    def out_of_time() -> bool:
        return deadline is not None and time.perf_counter() + last > deadline

    best: dict | None = None
    best_span = 0
    start_name = ""
    starts: dict[str, Any] = {}
    for label, method, choice in STARTS:
        if best is not None and out_of_time():
            starts[label] = "skipped (time limit)"
            continue
        t1 = time.perf_counter()
        try:
            sol = start_schedule(inst, method, choice)
            span = int(validate_placement(inst, sol).makespan)
        except (InputError, ScheduleError) as exc:
            starts[label] = f"failed: {exc}"
            continue
        finally:
            last = time.perf_counter() - t1
        starts[label] = span
        if best is None or span < best_span:
            best, best_span, start_name = sol, span, label
    if best is None:
        raise InputError("local search: no constructive start gave a schedule "
                         f"({'; '.join(f'{k}: {v}' for k, v in starts.items())})",
                         field="capacity")

    layer = inst.layer if inst.layer is not None else np.zeros(inst.n_tasks, dtype=np.int64)
    head = head_groups(inst)
    grps = groups(inst)
    pats = patterns(inst, bool((head >= 0).any()))
    device = assignment(inst, best)
    evaluations, passes = 0, 0
    accepted: list[str] = []
    accepted_at: list[int] = []
    trajectory = [best_span]
    stopped = "local optimum"
    improved = True
    while improved:
        improved = False
        passes += 1
        for glabel, tasks in grps:
            for pat in pats:
                cand_dev = apply(inst, device, tasks, pat, layer, head)
                if np.array_equal(cand_dev, device):
                    continue
                if evaluations >= p.max_evaluations:
                    stopped = "max_evaluations"
                elif out_of_time():
                    stopped = "time limit"
                if stopped != "local optimum":
                    break
                evaluations += 1
                t1 = time.perf_counter()
                cand: dict | None = None
                span = 0
                try:
                    cand = replay(inst, best, cand_dev)
                    span = int(validate_placement(inst, cand).makespan)
                except ScheduleError:
                    cand = None
                except InputError as exc:  # a block larger than its device
                    if exc.field != "policy":
                        raise
                    cand = None
                last = time.perf_counter() - t1
                if cand is None:
                    continue
                if span < best_span:
                    best, best_span, device = cand, span, cand_dev
                    accepted.append(f"{glabel}->{pat.label(inst)}")
                    accepted_at.append(evaluations)
                    trajectory.append(span)
                    improved = True
            if stopped != "local optimum":
                break
        if stopped != "local optimum":
            break
    if stats is not None:
        stats.update({"start": start_name, "starts": starts, "evaluations": evaluations,
                      "passes": passes, "accepted": accepted, "accepted_at": accepted_at,
                      "trajectory": trajectory,
                      "stopped": stopped, "max_evaluations": p.max_evaluations,
                      "time_s": time.perf_counter() - t0})
    return best
