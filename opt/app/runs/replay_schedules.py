"""Scheduling glue of the request replay (:mod:`opt.app.runs.replay`): build a padded shape's P1
instance and schedule it with a placement heuristic, validated, as :class:`ShapeTimes`.

Methods: ``bifocal`` (DOPS §5.1 *without* the token-amortisation term ``B_token``: output
lengths are unknown when a request is admitted; every other term at its default) and the
static policies ``pd``, ``af``, ``pd+linear``, ``pd+attn``, ``pd+ffn``, plus ``heft``. Every
schedule passes the independent validator (:func:`opt.placement.validator.validate_placement`); the
certified lower bound of ``solvers.solve`` is skipped (it is not needed for latencies and
costs more than the schedule itself at full size).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from models.options import SolveOptions
from opt.app.runs.replay import Shape, ShapeTimes
from opt.common.errors import InputError, UnknownNameError
from opt.common.result import Result
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement
from solvers.certify import certify
from solvers.registry import get_method

#: Bifocal as in DOPS' request replay: no token-amortisation term, and no copy cost (an
#: extension): both look at the uses still to come, which depend on the decode length, so a
#: shorter decode's schedule would no longer be a prefix of a longer one's.
REPLAY_BIFOCAL = {"token": False, "copy_cost": 0.0}
REPLAY_METHODS = ("bifocal", "pd", "af", "pd+linear", "pd+attn", "pd+ffn", "heft")


def _backend_result(inst: PlacementInstance, method: str,
                    params: dict[str, Any] | None = None) -> Result:
    """The registry back end of placement heuristic ``method`` run on ``inst`` (no bound:
    ``solvers.solve`` would add one, which latency studies do not need)."""
    spec = get_method(method, "placement")
    if spec.exact:
        raise InputError(f"'{method}' is an exact method; latency studies take a placement "
                         f"heuristic", field="method")
    return spec.backend(inst, SolveOptions(time_limit=None, params=dict(params or {})))


def _scheduler(method: str) -> Callable[[PlacementInstance], dict[str, Any]]:
    if method not in REPLAY_METHODS:
        raise UnknownNameError("replay method", method, REPLAY_METHODS)
    params = REPLAY_BIFOCAL if method == "bifocal" else {}

    def run(inst: PlacementInstance) -> dict[str, Any]:
        solution = _backend_result(inst, method, params).solution
        if solution is None:  # a heuristic always schedules (or raises InputError)
            raise RuntimeError(f"placement heuristic '{method}' returned no schedule")
        return solution

    return run


def check_methods(methods) -> list[str]:
    """The methods, deduplicated; unknown names raise :class:`InputError`."""
    out = list(dict.fromkeys(methods))
    bad = [m for m in out if m not in REPLAY_METHODS]
    if bad:
        raise InputError(f"unknown replay method(s) {', '.join(bad)}; known: "
                         f"{', '.join(REPLAY_METHODS)}", field="methods")
    return out


def token_times(inst: PlacementInstance, solution: dict[str, Any]) -> tuple[list[int], int]:
    """End of each step's ``lm_head`` (ticks, step order) and the makespan."""
    kinds = np.asarray(inst.kind)
    lm = np.flatnonzero(kinds == "lm_head")
    index = {tid: i for i, tid in enumerate(inst.task_ids)}
    ends = np.zeros(inst.n_tasks, dtype=np.int64)
    for ev in solution["compute"]:
        ends[index[ev["task"]]] = ev["end"]
    steps = np.asarray(inst.step)[lm]
    order = np.argsort(steps)
    return [int(x) for x in ends[lm][order]], int(ends.max())


def schedule_shape(inst: PlacementInstance, method: str) -> ShapeTimes:
    """Schedule ``inst`` with ``method``, validate it, return its token times."""
    run = _scheduler(method)
    t0 = time.perf_counter()
    solution = run(inst)
    runtime = time.perf_counter() - t0
    metrics = validate_placement(inst, solution)
    ticks, makespan = token_times(inst, solution)
    if makespan != metrics.makespan:
        raise RuntimeError("token times disagree with the validator's makespan")
    return ShapeTimes(token_ticks=ticks, makespan=makespan, time_unit=inst.time_unit,
                      runtime_s=runtime, tasks=inst.n_tasks,
                      extra={"params": REPLAY_BIFOCAL if method == "bifocal" else {},
                             "evictions": metrics.evictions})


def shape_builder(card, platform, catalog, *, layers: int | None = None,
                  options: BuildOptions | None = None) -> Callable[[Shape], PlacementInstance]:
    """``build(shape)`` for :func:`opt.app.runs.replay.run_replay` (``layers`` overrides options')."""
    base = options or BuildOptions()
    if layers is not None:
        from dataclasses import replace

        base = replace(base, layers=layers)

    def build(shape: Shape) -> PlacementInstance:
        return build_placement(card, platform, catalog,
                               Workload(shape.prefill, shape.decode, shape.batch), base)

    return build


def validated_heuristic(inst: PlacementInstance, method: str,
                        params: dict[str, Any] | None = None) -> Any:
    """``method``'s schedule as a certified :class:`opt.common.result.Result` *without* the certified
    lower bound (``lower_bound`` None): the validator recomputes makespan and metrics. For
    studies that need latencies only (hardware scaling, replay); ``solvers.solve`` adds the
    bound. ``method``: a placement heuristic of the registry; ``params`` its parameters
    (bifocal's default: every term on, problems.md §6 defaults). An invalid schedule is an
    ``ERROR`` result (:func:`solvers.certify.certify`)."""
    res = _backend_result(inst, method, params)
    res.stats["lower_bound_kind"] = None
    return certify(inst, res)
