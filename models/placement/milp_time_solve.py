"""Solving the time-indexed / bucketed P1 MILP (``models.placement.milp_time``) with HiGHS:
the arrays go to highspy directly (no Pyomo hand-over: the Pyomo build of the same model,
``milp_time.to_pyomo``, takes longer than HiGHS needs on the classic set), the HEFT/initial
schedule is the MIP start, the incumbent is retimed and validated, the bound scaled by Δ."""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np

from models.highs import SCHEDULER_CLASH, mip_progress
from models.options import SolveOptions
from models.placement.milp_data import (
    Decisions,
    MilpPrep,
    canonical,
    initial_decisions,
    lift_group_energy,
    prepare,
    retime,
    serial_horizon,
)
from models.placement.milp_time import (
    Choice,
    TimeModel,
    build_time_model,
    choose_formulation,
    decisions,
    start_values,
)
from opt.common.result import Result
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement

#: HiGHS' absolute gap on the bucket objective (integral): below 1 is a proof
INTEGRAL_ABS_GAP = 0.99
#: share of the time left that the exact model's first run gets; the rest goes to the
#: destructive descent (:func:`_descend`)
DESCENT_SHARE = 0.5
TOL = 1e-6


def _highs(tm: TimeModel, options: dict[str, Any], log_path: str) -> Any:
    """A highspy.Highs holding the model, with its options set."""
    import highspy

    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = tm.num_col, tm.num_row
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = tm.cost, tm.col_lower, tm.col_upper
    lp.row_lower_, lp.row_upper_ = tm.row_lower, tm.row_upper
    lp.offset_ = float(tm.top)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = tm.num_col, tm.num_row
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = tm.starts, tm.index, tm.value
    lp.integrality_ = [highspy.HighsVarType.kInteger if k else highspy.HighsVarType.kContinuous
                       for k in tm.integrality.tolist()]
    h = highspy.Highs()
    h.setOptionValue("output_flag", True)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("log_file", log_path)
    for key, value in options.items():
        h.setOptionValue(key, value)
    h.passModel(lp)
    return h


def run_time_model(tm: TimeModel, options: dict[str, Any], start: np.ndarray | None,
                   stream: bool = False) -> dict[str, Any]:
    """One HiGHS run (again after a thread-pool reset when HiGHS asks for one). Returns the
    column values (None without an incumbent), objective, bound, status and log lines;
    ``stream``: HiGHS' log lines also go to stderr as they come (``--log``)."""
    import highspy

    for attempt in range(2):
        fd, log_path = tempfile.mkstemp(suffix=".log", prefix="hetopt-highs-")
        os.close(fd)
        try:
            h = _highs(tm, options, log_path)
            if stream:
                h.cbLogging.subscribe(lambda event: sys.stderr.write(event.message))
            accepted = None
            if start is not None:
                sol = highspy.HighsSolution()
                sol.col_value = start.tolist()
                sol.value_valid = True
                accepted = h.setSolution(sol) == highspy.HighsStatus.kOk
            h.run()
            with open(log_path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        finally:
            os.unlink(log_path)
        if attempt == 0 and any(SCHEDULER_CLASH in ln for ln in lines):
            highspy.Highs.resetGlobalScheduler(True)
            continue
        break
    info = h.getInfo()
    status = h.modelStatusToString(h.getModelStatus())
    has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
    values = np.asarray(h.getSolution().col_value) if has_sol else None
    return {"values": values, "objective": info.objective_function_value if has_sol else None,
            "bound": info.mip_dual_bound, "status": status, "nodes": int(info.mip_node_count),
            "log": lines, "start_accepted": accepted}


def _schedule(inst: PlacementInstance, prep: MilpPrep, tm: TimeModel, values: np.ndarray
              ) -> tuple[Decisions, dict[str, Any], int] | None:
    """The retimed, validated schedule of the model's values (None when invalid)."""
    device, start = decisions(tm, values, prep)
    try:
        dec = retime(inst, prep, device, [float(s) for s in start], {}, {})
        sol = dec.to_solution(inst)
        metrics = validate_placement(inst, sol)
    except (RuntimeError, ScheduleError):
        return None
    return dec, sol, int(metrics.makespan)


def solve_time_indexed(inst: PlacementInstance, prep: MilpPrep, options: SolveOptions,
                       warm: Decisions | None, warm_solution: dict[str, Any] | None,
                       horizon: int, lb: int, delta: int, stats: dict[str, Any], t0: float
                       ) -> Result:
    """Build and solve the model with buckets of ``delta`` ticks; ``horizon`` and ``lb`` in
    ticks (the warm start's makespan, the model-independent bound); ``stats`` is extended."""
    tb = time.perf_counter()
    tm = build_time_model(inst, prep, horizon, lb, delta)
    stats.update({"build_s": time.perf_counter() - tb, "variables": tm.num_col,
                  "binaries": int(tm.integrality.sum()), "constraints": tm.num_row,
                  "nonzeros": int(len(tm.value)), "horizon": horizon, "bucket_ticks": delta,
                  "resources": [[inst.devices[d].name for d in r] for r in tm.res],
                  "symmetry_groups": [[inst.devices[tm.res[r][0]].name for r in g]
                                      for g in tm.sym]})
    if options.export_path is not None:
        from pathlib import Path
        Path(options.export_path).parent.mkdir(parents=True, exist_ok=True)
        _highs(tm, {}, os.devnull).writeModel(str(options.export_path))
        stats["exported"] = str(options.export_path)
    warm_ms = None
    start = None
    if warm is not None:
        warm_ms = warm.makespan(prep)
        groups = [[tm.res[r][0] for r in g] for g in tm.sym]
        start = start_values(tm, canonical(warm, groups), warm_ms)
    left = None if options.time_limit is None else \
        max(0.0, float(options.time_limit) - (time.perf_counter() - t0))
    hopts: dict[str, Any] = {"threads": int(options.num_workers),
                             "random_seed": int(options.seed), "mip_rel_gap": 0.0,
                             "mip_abs_gap": INTEGRAL_ABS_GAP, **options.params}
    if left is not None:
        hopts["time_limit"] = left * (DESCENT_SHARE if delta == 1 else 1.0)
    ts = time.perf_counter()
    if warm_ms is not None and warm_ms <= lb:
        # the start meets the model's bound (critical path, work, group bound): nothing to
        # search (HiGHS' presolve alone takes seconds on the wide windows of such instances)
        run: dict[str, Any] = {
            "values": None, "objective": None, "bound": -math.inf, "nodes": 0, "log": [],
            "status": "not run: the MIP start meets the lower bound", "start_accepted": None}
    else:
        run = run_time_model(tm, hopts, start, options.log)
    scale = float(delta)
    prog = mip_progress(run["log"], None if warm_ms is None else warm_ms / scale)
    stats.update({"solver": "highs", "interface": "highspy (arrays; Pyomo model: "
                  "models.placement.milp_time.to_pyomo)", "termination": run["status"],
                  "solve_s": time.perf_counter() - ts, "nodes": run["nodes"],
                  "milp_objective": None if run["objective"] is None
                  else run["objective"] * scale,
                  "dual_bound": run["bound"] * scale if math.isfinite(run["bound"]) else None,
                  "root_bound_nodes": prog["root_bound_nodes"],
                  "root_bound": None if prog["root_bound"] is None
                  else prog["root_bound"] * scale,
                  "first_better": None if prog["first_better"] is None else
                  {"objective": prog["first_better"]["objective"] * scale,
                   "s": prog["first_better"]["s"]},
                  "mip_start": {**stats.pop("mip_start_given", {}), "used": start is not None, "objective": warm_ms,
                                "accepted_by_highs": run["start_accepted"],
                                "source": None if warm is None
                                else stats.get("horizon_source") or "initial_solution"}})
    res = _result(inst, prep, tm, run, options, stats, t0, warm_solution, warm_ms, lb)
    if delta == 1 and res.status == "FEASIBLE":
        res = _descend(inst, prep, res, hopts, options, lb, t0)
    return res


def _descend(inst: PlacementInstance, prep: MilpPrep, res: Result, hopts: dict[str, Any],
             options: SolveOptions, lb0: int, t0: float) -> Result:
    """Destructive descent with the time left: the exact model again under horizon U − 1
    (U the incumbent's makespan) and no start. Infeasible proves U optimal; a schedule lowers
    U (and the descent goes on); at the limit, min(⌈its bound⌉, U) still bounds every schedule
    (those longer than U − 1 end at U or later). Steps go to ``stats.descent``."""
    steps = res.stats.setdefault("descent", [])
    while res.status == "FEASIBLE" and res.objective is not None:
        left = None if options.time_limit is None else \
            float(options.time_limit) - (time.perf_counter() - t0)
        if left is not None and left < 0.5:
            break
        top = int(res.objective) - 1
        if top < lb0:
            res = replace(res, status="OPTIMAL", lower_bound=float(res.objective))
            break
        ts = time.perf_counter()
        tm = build_time_model(inst, prep, top, lb0)
        run = run_time_model(tm, {**hopts, **({} if left is None else {"time_limit": left})},
                             None, options.log)
        steps.append({"horizon": top, "termination": run["status"],
                      "s": round(time.perf_counter() - ts, 3)})
        bound = float(top + 1) if run["status"] == "Infeasible" else \
            min(float(top + 1), math.ceil(run["bound"] - TOL)) \
            if math.isfinite(run["bound"]) else None
        got = None if run["values"] is None else _schedule(inst, prep, tm, run["values"])
        if got is not None and (res.objective is None or got[2] < res.objective):
            res = replace(res, solution=got[1], objective=float(got[2]))
            res.stats["incumbent"] = "descent"
        if bound is not None and bound > (res.lower_bound or 0):
            res = replace(res, lower_bound=float(bound))
        if res.lower_bound is not None and res.objective is not None and \
                res.lower_bound >= res.objective:
            res = replace(res, status="OPTIMAL")
        if got is None:
            break  # infeasible (then proven above) or stopped without a schedule
    return replace(res, runtime_s=time.perf_counter() - t0)


def _result(inst: PlacementInstance, prep: MilpPrep, tm: TimeModel, run: dict[str, Any],
            options: SolveOptions, stats: dict[str, Any], t0: float,
            warm_solution: dict[str, Any] | None, warm_ms: int | None, lb0: int) -> Result:
    """Best validated schedule (retimed incumbent or the warm start), the bound Δ·⌈bound⌉."""
    params_out = {"time_limit": options.time_limit, "num_workers": options.num_workers,
                  **options.params}
    solution, objective = None, None
    if run["values"] is not None:
        got = _schedule(inst, prep, tm, run["values"])
        if got is None:
            stats["message"] = "retimed MILP schedule is invalid"
        else:
            solution, objective = got[1], got[2]
    if warm_solution is not None and warm_ms is not None and \
            (objective is None or warm_ms < objective):
        solution, objective = warm_solution, warm_ms
        stats["incumbent"] = "warm start"
    lb = float(lb0)
    if math.isfinite(run["bound"]):
        lb = max(lb, float(tm.delta * max(0, math.ceil(run["bound"] - TOL))))
    if solution is None:
        status = "TIME_LIMIT_NO_SOLUTION" if run["status"] == "Time limit reached" else "ERROR"
    else:
        status = "OPTIMAL" if objective is not None and lb >= objective else "FEASIBLE"
    return Result(problem="placement", method="milp", status=status,
                  objective=None if objective is None else float(objective),
                  lower_bound=lb if solution is not None else None,
                  runtime_s=time.perf_counter() - t0, seed=options.seed, params=params_out,
                  solution=solution, stats=stats)


# ---------------------------------------------------------------------------------------------
# the choice and its inputs (called by models.placement.milp.solve_placement_milp)

def prep_of(inst: PlacementInstance, group_energy: bool) -> tuple[MilpPrep, int | None]:
    """The model data, with the group-lifted heads and tails when ``group_energy``."""
    return lift_group_energy(inst, prepare(inst)) if group_energy else (prepare(inst), None)


def choose(inst: PlacementInstance, requested: str, warm_ms: int | None,
            group_energy: bool) -> Choice:
    """The formulation (``models.placement.milp_time.choose_formulation``) under the
    horizon of the warm start (capped by a serial schedule)."""
    def horizon(prep: MilpPrep) -> int:
        h = serial_horizon(inst, prep)
        return h if warm_ms is None else min(h, int(warm_ms))

    return choose_formulation(inst, requested, lambda: prep_of(inst, group_energy)[0], horizon)


def solve_chosen(inst: PlacementInstance, options: SolveOptions, choice: Choice,
                  warm: Decisions | None, warm_solution: dict[str, Any] | None,
                  ws: dict[str, Any], group_energy: bool, t0: float) -> Result:
    """The time-indexed or bucketed model (``models.placement.milp_time``) under the horizon
    of ``warm`` (capped by a serial schedule's)."""
    prep, group_lb = prep_of(inst, group_energy)
    h = serial_horizon(inst, prep)
    warm_ms = None if warm is None else warm.makespan(prep)
    if warm_ms is not None and warm_ms <= h:
        h = int(warm_ms)
    else:
        warm = None
    # the certified bound (opt.placement.certified_bounds; cached, and solve computes it for
    # every result anyway) joins the model's own: it fixes E below it and can close the gap
    cert = certified_lower_bound(inst)
    lb = max(prep.critical_path, prep.work_bound, group_lb or 0, int(cert.value))
    stats: dict[str, Any] = {"no_evictions": True, "formulation": choice.formulation,
                             "formulation_reason": choice.reason, "group_bound": group_lb,
                             "initial_rejected": ws.get("initial_rejected"),
                             "horizon_source": ws.get("source"), "mip_start_given": dict(ws)}
    return solve_time_indexed(inst, prep, options, warm,
                              None if warm is None else warm_solution, h, max(lb, 0),
                              choice.delta, stats, t0)


def list_start(inst: PlacementInstance, ws: dict[str, Any]
                ) -> tuple[Decisions | None, dict[str, Any] | None]:
    """Horizon and MIP start of the time-indexed models when no initial solution is given
    (their size grows with the horizon): every task on a cheapest legal device, rotating
    among equally cheap ones, in topological order, left-justified (``milp_data.retime``)."""
    prep = prepare(inst)
    turn: dict[tuple[int, ...], int] = defaultdict(int)
    device = [0] * inst.n_tasks
    for t in prep.topo:
        cheapest = tuple(d for d in prep.legal[t] if prep.dur[t][d] == prep.pmin[t])
        device[t] = cheapest[turn[cheapest] % len(cheapest)]
        turn[cheapest] += 1
    dec = retime(inst, prep, device, [float(p) for p in prep.topo_pos], {}, {})
    ws["source"] = "list schedule (no initial solution given: horizon and MIP start)"
    solution = dec.to_solution(inst)
    return initial_decisions(inst, solution, ws), solution
