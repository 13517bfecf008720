"""Weight Layout Arbiter (DOPS §5.2, problems.md §6): choose each weight block's storage format by
observing where the scheduler loads it, re-scheduling with Bifocal after each change.

A reimplementation from the paper's description; this docstring fixes the interpretation.

Evaluation
    One *evaluation* = the Bifocal schedule of the instance with blocks stored as φ
    (:func:`opt.placement.layout.with_formats`), exactly as ``bifocal/<format>`` would schedule
    it (Bifocal's own default task order on that instance: HEFT's with sibling groups), and its
    makespan; so WLA's all-linear start is Bifocal/Linear's schedule. The trajectory (makespan
    per evaluation, DOPS Fig. 16(b)) is reported.

Load pressure
    From the last accepted schedule, per block b and device class c: the total duration of b's
    load events on devices of class c divided by the number of devices of c (time per load
    port, :func:`opt.placement.layout.load_pressure`). NPU and GPU devices count as the NPU side.

Outer dominance stage (one *pass*, §5.2.2 "for each block b, the dominance relation … is used
to determine a promising format for b")
    Each non-fixed block with any load gets the format favoured by its pressure: ``npu_opt``
    when its NPU-side pressure exceeds its PIM-side pressure, ``pim_opt`` otherwise (with the
    ``dual`` extension on: ``dual`` when the smaller side is at least ``dual_ratio`` of the
    larger). Blocks whose format already is the favoured one are left alone; the others change,
    taken by the margin |p_npu − p_pim| (largest first) so that a change that would exceed the
    memory budget is the one skipped. Rule ``wla_rule="paper"`` (default): every such block
    changes, and the pass is kept as the current map whatever its makespan ("although latency
    is not strictly monotonic", §6.5) — the best map seen is what WLA returns. Rule
    ``"incremental"`` (the former rule, a named deviation): at most ``share`` of all blocks
    (default 20 %, at least one) change in a pass, and a pass whose makespan is above the
    current one *regresses* — it is reverted and WLA stops.

Inner targeted refinement
    In the accepted schedule, blocks whose format *disagrees with the observed loading* — their
    format is not the one their pressure now favours (a ``pim_opt`` block loaded only by the
    NPU, a ``linear`` block loaded by one side only, …) — are taken by margin (largest first),
    at most ``refine`` per pass. For each, every other allowed format that fits the budget is
    evaluated; the best flip is kept only if it lowers the makespan by more than ``eps`` ×
    the current makespan.

Stop (§5.2.2: "when the outer stage does not produce further format changes, when the
iteration budget is reached, or when the tolerance criterion of early-stop ε is activated")
    when the outer stage proposes no change, when ``budget`` evaluations are spent, or — rule
    ``paper`` — when a whole pass (outer stage and refinement) moves the makespan by at most
    ``eps`` × the previous pass's (converged), or when the outer stage proposes a map it has
    already proposed (Bifocal is deterministic, so the passes would repeat); rule
    ``incremental`` — when a pass regresses (reverted). The result is φ_best, the best map
    evaluated ("the final output is the best blockwise map φ_best"), so it never exceeds the
    all-linear Bifocal makespan (the first evaluation).

Formats: the paper's WLA chooses among ``linear``, ``npu_opt``, ``pim_opt``; ``dual=True``
(the memory-budgeted extension) adds ``dual``, whose storage multiplier counts against
``layout.memory_budget``. Deterministic (Bifocal is).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from heuristics.layout.wla_params import WLA_RULES, WlaParams  # noqa: F401 (re-exported)
from heuristics.placement.bifocal import BifocalParams, bifocal_schedule
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.placement.layout import (
    NATIVE_FORMAT,
    WLA_FORMATS,
    allowed_formats,
    fits_budget,
    load_pressure,
    storage_bytes,
    with_formats,
)
from opt.placement.solution import compute_end

#: Version of WLA's evaluation, part of its recorded settings (the ``revision`` field of a sweep
#: record; a record of another version is recomputed): each evaluation is the standalone
#: Bifocal schedule of the map. Raised whenever a change here changes a WLA result.
WLA_VERSION = 2


@dataclass
class WlaOutcome:
    """The chosen formats, their Bifocal schedule and makespan, the trajectory and counters."""

    formats: dict[str, str]
    solution: dict[str, Any]
    makespan: int
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""
    passes: int = 0
    time_s: float = 0.0

    def stats(self) -> dict[str, Any]:
        return {"trajectory": self.trajectory, "evaluations": len(self.trajectory),
                "stop_reason": self.stop_reason, "passes": self.passes,
                "wla_time_s": self.time_s}


def _side(device_class: str) -> str | None:
    return {"npu": "npu", "gpu": "npu", "pim": "pim"}.get(device_class)


def wla(inst: PlacementInstance, params: WlaParams | None = None,
        bifocal: BifocalParams | None = None) -> WlaOutcome:
    """Run WLA on the P2 instance ``inst`` (see the module docstring). Raises InputError when
    the all-linear start does not fit the memory budget and no other start is possible."""
    p = params or WlaParams()
    t0 = time.perf_counter()
    formats = tuple(f for f in allowed_formats(inst) if f in WLA_FORMATS or
                    (p.dual and f == "dual"))
    if "linear" not in formats:
        raise InputError(f"WLA starts all-linear but 'linear' is not among the instance's "
                         f"formats {list(inst.layout.formats)}", field="layout.formats")
    fixed = inst.layout.fixed
    free = [b for b in inst.block_ids if b not in fixed]
    phi = {b: fixed.get(b, "linear") for b in inst.block_ids}
    if not fits_budget(inst, phi):
        raise InputError(f"the all-linear layout needs {storage_bytes(inst, phi):.0f} bytes > "
                         f"memory budget {inst.layout.memory_budget}", field="memory_budget")
    if p.wla_rule not in WLA_RULES:
        raise InputError(f"WLA parameter 'wla_rule' must be one of {', '.join(WLA_RULES)}, got "
                         f"{p.wla_rule!r}", field="params.wla_rule")
    ev = _Evaluator(inst, bifocal or BifocalParams())
    sol, ms = ev(phi, "start", 0)
    ev.trajectory[-1]["accepted"] = True
    search = _search_paper if p.wla_rule == "paper" else _search_incremental
    phi, sol, ms, stop, passes = search(inst, phi, sol, ms, free, formats, p, ev)
    held = None
    for row in ev.trajectory:  # the makespan of φ_best after each evaluation
        if row["accepted"]:
            held = row["makespan"] if held is None else min(held, row["makespan"])
        row["best"] = held
    return WlaOutcome(formats=phi, solution=sol, makespan=ms, trajectory=ev.trajectory,
                      stop_reason=stop, passes=passes, time_s=time.perf_counter() - t0)


def _search_paper(inst: PlacementInstance, phi: dict[str, str], sol: dict, ms: int,
                  free: list[str], formats: tuple[str, ...], p: WlaParams, ev: _Evaluator
                  ) -> tuple[dict[str, str], dict, int, str, int]:
    """DOPS §5.2.2: every block re-assigned by dominance in each pass, the pass kept whatever
    its makespan, then the targeted refinement; returns (φ_best, its schedule, its makespan,
    stop reason, passes)."""
    best = (phi, sol, ms)
    seen = {tuple(sorted(phi.items()))}
    passes, stop, prev = 0, "budget", ms
    while len(ev.trajectory) < p.budget:
        new, changed = _outer_pass(inst, phi, _favoured(inst, sol, free, formats, p), None)
        if changed == 0:
            stop = "outer stage changed nothing"
            break
        key = tuple(sorted(new.items()))
        if key in seen:
            stop = "outer stage repeated a map"
            break
        seen.add(key)
        passes += 1
        sol, ms = ev(new, "outer", changed)
        ev.trajectory[-1]["accepted"] = True
        phi = new
        phi, sol, ms = _refine(inst, phi, sol, ms, _favoured(inst, sol, free, formats, p),
                               formats, p, ev)
        seen.add(tuple(sorted(phi.items())))
        if ms < best[2]:
            best = (phi, sol, ms)
        if len(ev.trajectory) >= p.budget:
            break
        if abs(ms - prev) <= p.eps * prev:
            stop = "converged (a pass moved the makespan by at most eps)"
            break
        prev = ms
    return (*best, stop, passes)


def _search_incremental(inst: PlacementInstance, phi: dict[str, str], sol: dict, ms: int,
                        free: list[str], formats: tuple[str, ...], p: WlaParams,
                        ev: _Evaluator) -> tuple[dict[str, str], dict, int, str, int]:
    """The former rule: at most ``share`` of the blocks per pass, stop and revert at the first
    pass slower than the current map; returns (map, schedule, makespan, stop reason, passes)."""
    cap = max(1, math.ceil(p.share * len(inst.block_ids)))
    passes, stop = 0, "budget"
    while len(ev.trajectory) < p.budget:
        new, changed = _outer_pass(inst, phi, _favoured(inst, sol, free, formats, p), cap)
        if changed == 0:
            stop = "outer stage changed nothing"
            break
        passes += 1
        sol_o, ms_o = ev(new, "outer", changed)
        if ms_o > ms:
            stop = "pass regressed (reverted)"
            break
        ev.trajectory[-1]["accepted"] = True
        phi, sol, ms = new, sol_o, ms_o
        phi, sol, ms = _refine(inst, phi, sol, ms, _favoured(inst, sol, free, formats, p),
                               formats, p, ev)
    return phi, sol, ms, stop, passes


class _Evaluator:
    """One evaluation = the Bifocal schedule of ``inst`` with the blocks stored as given
    (Bifocal's default order on that instance, as a standalone run); every evaluation is
    appended to ``trajectory``."""

    def __init__(self, inst: PlacementInstance, bifocal: BifocalParams):
        self.inst, self.bifocal = inst, bifocal
        self.trajectory: list[dict[str, Any]] = []

    def __call__(self, assign: dict[str, str], stage: str, changed: int) -> tuple[dict, int]:
        sol = bifocal_schedule(with_formats(self.inst, assign), self.bifocal)
        ms = compute_end(sol)
        self.trajectory.append({"evaluation": len(self.trajectory) + 1, "stage": stage,
                                "changed": changed, "makespan": int(ms), "accepted": False})
        return sol, int(ms)


def _favoured(inst: PlacementInstance, solution: dict, free: list[str],
              formats: tuple[str, ...], p: WlaParams) -> dict[str, tuple[str, float]]:
    """block -> (favoured format, margin) from the solution's load pressure."""
    pres = load_pressure(inst, solution)
    out = {}
    for b in free:
        per = pres.get(b)
        if not per:
            continue
        pn = sum(v for c, v in per.items() if _side(c) == "npu")
        pp = sum(v for c, v in per.items() if _side(c) == "pim")
        if pn == 0 and pp == 0:
            continue
        hi, lo = max(pn, pp), min(pn, pp)
        if p.dual and "dual" in formats and lo > 0 and lo >= p.dual_ratio * hi:
            fav = "dual"
        else:
            fav = NATIVE_FORMAT["npu"] if pn > pp else NATIVE_FORMAT["pim"]
        if fav in formats:
            out[b] = (fav, abs(pn - pp))
    return out


def _outer_pass(inst: PlacementInstance, phi: dict[str, str],
                fav: dict[str, tuple[str, float]], cap: int | None
                ) -> tuple[dict[str, str], int]:
    """(new formats, blocks changed): up to ``cap`` (None = every one) blocks not in their
    favoured format move to it, largest margin first, skipping moves that break the memory
    budget."""
    ranked = sorted(((m, b, f) for b, (f, m) in fav.items() if phi[b] != f),
                    key=lambda x: (-x[0], x[1]))
    new = dict(phi)
    changed = 0
    for _, b, f in ranked:
        if cap is not None and changed >= cap:
            break
        trial = {**new, b: f}
        if fits_budget(inst, trial):
            new = trial
            changed += 1
    return new, changed


def _refine(inst: PlacementInstance, phi: dict[str, str], sol: dict, ms: int,
            fav: dict[str, tuple[str, float]], formats: tuple[str, ...], p: WlaParams,
            ev: _Evaluator) -> tuple[dict[str, str], dict, int]:
    """Inner targeted refinement: for up to ``refine`` blocks whose format disagrees with the
    observed loading (largest margin first) try every other format within the budget; keep
    the best flip when it lowers the makespan by more than ``eps``."""
    traj = ev.trajectory
    disagree = sorted(((m, b) for b, (f, m) in fav.items() if phi[b] != f),
                      key=lambda x: (-x[0], x[1]))[:p.refine]
    for _, b in disagree:
        best = None
        for f in formats:
            if f == phi[b] or len(traj) >= p.budget:
                continue
            trial = {**phi, b: f}
            if not fits_budget(inst, trial):
                continue
            sol_f, ms_f = ev(trial, "refine", 1)
            if best is None or ms_f < best[2]:
                best = (trial, sol_f, ms_f, len(traj) - 1)
        if best is not None and best[2] < ms * (1.0 - p.eps):
            phi, sol, ms = best[0], best[1], best[2]
            traj[best[3]]["accepted"] = True
    return phi, sol, ms
