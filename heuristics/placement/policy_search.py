"""Policy search: the best operator-kind → device-class mapping by local search (beyond DOPS).

DOPS' static policies (Table 1) each fix the device class of every (operator kind, phase); the
device within the class is chosen by EFT in HEFT order. Policy search treats that mapping as
the decision: every (kind, phase) pair — kinds of routed/shared experts grouped by their role,
``expert{e}_up`` → ``expert*_up`` — takes one of ``npu``, ``pim`` or ``any`` (EFT among all
legal devices, i.e. HEFT's choice). It starts from the best of HEFT and the five static
policies, then hill-climbs: pairs in decreasing order of their tasks' total work, each tried
with the other values, a change kept when the makespan drops (first improvement), passes
repeated until one changes nothing or the budget (``max_evaluations``, ``time_limit``) is
spent. Every evaluation is a full list schedule (:func:`heuristics.placement.list_scheduler.list_schedule`,
LRU evictions and the instance's load timing — like the static policies; a mapping that puts
a block on a class with no device large enough for it is infeasible and skipped), so the
result is a valid schedule of that mapping,
and the mapping itself is reported (``stats["mapping"]``): it answers DOPS' question "which
operators should run where" for the instance at hand.

Deterministic (no randomness; ties keep the incumbent).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heuristics.placement.list_scheduler import (
    DeviceClasses,
    check_device_choice,
    heft_priority_order,
    list_schedule,
)
from heuristics.placement.static_policies import CLASSES, POLICIES, class_members, policy_classes
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement

ANY = "any"
VALUES = ("npu", "pim", ANY)
_EXPERT = re.compile(r"(expert|shared)\d+_(\w+)")


def kind_group(kind: str) -> str:
    """Experts share a group per role: ``expert3_up`` → ``expert*_up``."""
    m = _EXPERT.fullmatch(kind)
    return f"{m.group(1)}*_{m.group(2)}" if m else kind


@dataclass
class PolicySearchParams:
    """Budget of the search: schedule evaluations and seconds (None = unlimited); the list
    scheduler's ``device_choice`` (:data:`heuristics.placement.list_scheduler.DEVICE_CHOICES`)."""

    max_evaluations: int = 200
    time_limit: float | None = 60.0
    device_choice: str = "fit_in_class"

    @classmethod
    def from_dict(cls, params: dict[str, Any] | None) -> PolicySearchParams:
        params = dict(params or {})
        out = cls()
        for key, value in params.items():
            if key == "max_evaluations":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise InputError(f"max_evaluations must be an integer ≥ 1, got {value!r}",
                                     field="params.max_evaluations")
                out.max_evaluations = value
            elif key == "device_choice":
                check_device_choice(value)
                out.device_choice = value
            else:
                raise InputError(f"unknown policy-search parameter '{key}'; known: "
                                 f"max_evaluations, device_choice", field=f"params.{key}")
        return out


@dataclass
class _Search:
    inst: PlacementInstance
    order: np.ndarray  # HEFT order (int64 task indices)
    keys: list[tuple[str, int]]  # the distinct (kind group, phase) pairs
    key_code: np.ndarray  # int64 [n]: each task's position in keys (−1: none)
    members: np.ndarray  # bool [len(CLASSES), nd]
    device_choice: str = "fit_in_class"
    evaluations: int = 0
    trajectory: list[int] = field(default_factory=list)

    def classes(self, mapping: dict[tuple[str, int], str]) -> DeviceClasses:
        """``mapping`` as data: each task's class id in CLASSES (−1: ANY, every legal device)."""
        table = np.array([-1 if (c := mapping.get(k, ANY)) == ANY else CLASSES.index(c)
                          for k in self.keys] + [-1], dtype=np.int64)
        return DeviceClasses(table[self.key_code], self.members, "search")  # −1 → last

    def evaluate(self, mapping: dict[tuple[str, int], str]) -> tuple[float, dict | None]:
        """(makespan, schedule) of ``mapping``; (inf, None) when a block is larger than every
        device of the class the mapping gives its task."""
        try:
            sol = list_schedule(self.inst, self.order, insertion=True,
                                classes=self.classes(mapping),
                                device_choice=self.device_choice)
        except InputError as exc:
            if exc.field != "policy":
                raise
            self.evaluations += 1
            return float("inf"), None
        ms = validate_placement(self.inst, sol).makespan
        self.evaluations += 1
        self.trajectory.append(ms)
        return ms, sol


def policy_search(inst: PlacementInstance, params: dict[str, Any] | PolicySearchParams | None = None,
                  *, time_limit: float | None = None, stats: dict[str, Any] | None = None
                  ) -> dict:
    """The best schedule found (problems.md §1.2a solution dict); see the module docstring."""
    p = params if isinstance(params, PolicySearchParams) else PolicySearchParams.from_dict(params)
    limit = time_limit if time_limit is not None else p.time_limit
    deadline = None if limit is None else time.perf_counter() + limit
    t0 = time.perf_counter()
    order = heft_priority_order(inst)
    kinds = inst.kind or (None,) * inst.n_tasks
    phases = inst.phase.tolist() if inst.phase is not None else [-1] * inst.n_tasks
    keys = [None if k is None or ph not in (0, 1) else (kind_group(k), ph)
            for k, ph in zip(kinds, phases)]
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    pos = {k: i for i, k in enumerate(distinct)}
    key_code = np.array([-1 if k is None else pos[k] for k in keys], dtype=np.int64)
    s = _Search(inst, order, distinct, key_code, class_members(inst), p.device_choice)
    legal_cls = dict(zip(CLASSES, s.members))

    # variables: (kind group, phase) pairs with a choice (both classes present and legal)
    work: dict[tuple[str, int], float] = {}
    cheapest = np.where(inst.cost >= 0, inst.cost, np.iinfo(np.int64).max).min(axis=1)
    choice: dict[tuple[str, int], bool] = {}
    for t, k in enumerate(keys):
        if k is None:
            continue
        work[k] = work.get(k, 0.0) + float(cheapest[t])
        row = inst.cost[t] >= 0
        both = all((row & legal_cls[c]).any() for c in CLASSES)
        choice[k] = choice.get(k, False) or both
    variables = sorted((k for k in work if choice[k]), key=lambda k: (-work[k], k))

    # starting points: HEFT (all "any") and the static policies
    starts: list[tuple[str, dict]] = [("heft", {})]
    for name, pol in POLICIES.items():
        cls = policy_classes(inst, pol)
        mapping: dict[tuple[str, int], str] = {}
        for t, k in enumerate(keys):
            if k is not None and cls[t] is not None:
                mapping[k] = cls[t]
        starts.append((name, mapping))
    best_ms: float = math.inf
    best_sol: dict | None = None
    best_map: dict[tuple[str, int], str] = {}
    start_name = ""
    for name, mapping in starts:
        ms, sol = s.evaluate(mapping)
        if best_sol is None or ms < best_ms:
            best_ms, best_sol, best_map, start_name = ms, sol, dict(mapping), name

    improved, passes, stop = True, 0, False
    while improved and variables and not stop:
        improved = False
        passes += 1
        for k in variables:
            for v in VALUES:
                if v == best_map.get(k, ANY):
                    continue
                if s.evaluations >= p.max_evaluations or \
                        (deadline is not None and time.perf_counter() > deadline):
                    stop = True
                    break
                trial = {**best_map, k: v}
                ms, sol = s.evaluate(trial)
                if ms < best_ms:
                    best_ms, best_sol, best_map, improved = ms, sol, trial, True
            if stop:
                break
    if stats is not None:
        stats.update({"start": start_name, "evaluations": s.evaluations, "passes": passes,
                      "variables": len(variables), "trajectory": s.trajectory,
                      "mapping": {f"{k}@{'prefill' if ph == 0 else 'decode'}": v
                                  for (k, ph), v in sorted(best_map.items())},
                      "time_s": time.perf_counter() - t0})
    if best_sol is None:
        raise InputError("policy search: no mapping is feasible (a block is larger than every "
                         "device where its task may run)", field="capacity")
    return best_sol
