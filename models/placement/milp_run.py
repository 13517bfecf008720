"""Running the P1 MILP (models.placement.milp) with HiGHS: the MIP start, one HiGHS run and
the retimed schedule it gives, and the facts the result reports about capacities."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import pyomo.environ as pyo

from models.highs import mip_progress, run_highs
from models.options import NO_DEADLINE, Deadline
from models.placement.milp_data import Decisions, MilpPrep, retime
from opt.placement.instance import PlacementInstance

#: Tolerance on values read back from HiGHS (time units).
TOL = 1e-6


def set_warm_start(m: pyo.ConcreteModel, inst: PlacementInstance, dec: Decisions,
                   clock: Deadline = NO_DEADLINE) -> int:
    """Give every variable the value of a schedule; return how many constraints it violates
    in the model (0: HiGHS can take it as a MIP start). ``clock``: TimeLimitReached once it
    has passed (the check walks every constraint)."""
    idx = m._placement
    prep = idx.prep
    dev, st = dec.device, dec.start
    tblock = inst.task_block.tolist()
    end = [st[t] + prep.dur[t][dev[t]] for t in range(inst.n_tasks)]
    for (t, d) in m.x:
        m.x[t, d].set_value(int(dev[t] == d))
    for t in m.S:
        m.S[t].set_value(st[t])
    for (e, a, b) in m.z:
        m.z[e, a, b].set_value(int(dev[prep.src[e]] == a and dev[prep.dst[e]] == b))
    tstart = {e: dec.transfer.get(e, end[prep.src[e]]) for e in idx.transfer_edges}
    for e in m.T:
        m.T[e].set_value(tstart[e])
    for (i, j) in m.y:
        m.y[i, j].set_value(int(st[i] <= st[j]))
    for (e, f) in m.w:
        m.w[e, f].set_value(int(tstart[e] <= tstart[f]))
    needed = {(tblock[t], dev[t]) for t in range(inst.n_tasks) if tblock[t] >= 0}
    for (b, d) in m.L:
        m.L[b, d].set_value(int((b, d) in needed))
        m.Ls[b, d].set_value(dec.loads.get((b, d), 0) if (b, d) in needed else 0)
    for (b1, b2, d) in m.v:
        m.v[b1, b2, d].set_value(int(m.Ls[b1, d].value <= m.Ls[b2, d].value))
    if prep.at_use or prep.overlap:
        _warm_at_use(m, prep, dec, tstart, end, tblock)
    m.Cmax.set_value(dec.makespan(prep))
    return _violations(m, clock)


def _warm_at_use(m: pyo.ConcreteModel, prep: MilpPrep, dec: Decisions, tstart: dict[int, int],
                 end: list[int], tblock: list[int]) -> None:
    """The at_use / overlap variables of a schedule: A[t] its inputs' arrival, f[t,d] whether
    t is the first user of its block on d (problems.md §1.2 rule 5); overlap: each load moved
    to the start of its served task's slot, lead = max(0, load − p_t) before the task (the
    model's form: the load stays within that slot, where the device computes nothing else)."""
    dev, st = dec.device, dec.start
    arrive = {t: 0 for t in m.A}
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        if v in arrive:
            a = end[u] if dev[u] == dev[v] else \
                tstart.get(e, end[u]) + prep.trans[e][(dev[u], dev[v])]
            arrive[v] = max(arrive[v], a)
    for t, a in arrive.items():
        m.A[t].set_value(a)
    first: dict[tuple[int, int], int] = {}
    for t in sorted(arrive, key=lambda t: (st[t], t)):
        first.setdefault((tblock[t], dev[t]), t)
    served = set(first.values())
    for (t, d) in m.f:
        m.f[t, d].set_value(int(d == dev[t] and t in served))
    if prep.overlap:
        for (b, d), t in first.items():
            m.Ls[b, d].set_value(st[t] - prep.slot_lead(b, d, t))
        for (b1, b2, d) in m.v:
            m.v[b1, b2, d].set_value(int(m.Ls[b1, d].value <= m.Ls[b2, d].value))


def _violations(m: pyo.ConcreteModel, clock: Deadline) -> int:
    """Variable bounds and constraints the model's current values violate (beyond TOL)."""
    bad = 0
    for v in m.component_data_objects(pyo.Var, active=True):
        if (v.lb is not None and v.value < v.lb - TOL) or (v.ub is not None
                                                           and v.value > v.ub + TOL):
            bad += 1
    for k, c in enumerate(m.component_data_objects(pyo.Constraint, active=True)):
        if k % 256 == 0:
            clock.check("checking the MIP start")
        body = pyo.value(c.body)
        if (c.has_lb() and body < pyo.value(c.lower) - TOL) or \
           (c.has_ub() and body > pyo.value(c.upper) + TOL):
            bad += 1
    return bad


def capacity_may_bind(inst: PlacementInstance, prep: MilpPrep) -> bool:
    """True when some device cannot hold every block it might load: then schedules with
    evictions may beat (or exist where there is no) eviction-free schedule."""
    per_dev: dict[int, int] = defaultdict(int)
    for b, ds in prep.load_devices.items():
        for d in ds:
            per_dev[d] += int(inst.block_bytes[b])
    return any(dv.weight_capacity is not None and per_dev[d] > dv.weight_capacity
               for d, dv in enumerate(inst.devices))


def no_schedule_at_all(inst: PlacementInstance, prep: MilpPrep) -> bool:
    """True when some task has no legal device that can hold its block (even alone)."""
    tblock = inst.task_block.tolist()
    for t, b in enumerate(tblock):
        if b < 0:
            continue
        if all(inst.devices[d].weight_capacity is not None
               and int(inst.block_bytes[b]) > inst.devices[d].weight_capacity
               for d in prep.legal[t]):
            return True
    return False


@dataclass
class Run:
    """Outcome of one HiGHS run: the retimed schedule (if any), bound and solver facts."""

    schedule: Decisions | None
    makespan: int | None
    objective: float | None
    bound: float | None
    cmax_value: float | None
    infeasible: bool
    time_limited: bool
    inconsistent: bool
    termination: str
    nodes: int
    version: str
    start_log: list[str]
    scheduler_reset: bool
    progress: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: Run) -> Run:
        """Best schedule and strongest bound of two runs on the same model."""
        best = self if other.makespan is None or (
            self.makespan is not None and self.makespan <= other.makespan) else other
        bounds = [b for b in (self.bound, other.bound) if b is not None and math.isfinite(b)]
        return replace(other, schedule=best.schedule, makespan=best.makespan,
                       bound=max(bounds) if bounds else None, inconsistent=False,
                       nodes=self.nodes + other.nodes, start_log=self.start_log,
                       scheduler_reset=self.scheduler_reset or other.scheduler_reset)


def solve_and_extract(inst: PlacementInstance, model: pyo.ConcreteModel,
                      highs_options: dict[str, Any], deadline: float | None,
                      warmstart: bool, stream: bool = False,
                      start_objective: float | None = None) -> Run:
    """Run HiGHS (resetting its thread pool if ``threads`` changed) and retime its incumbent;
    ``stream``: HiGHS' log also goes to stderr; ``start_objective``: the MIP start's, for
    the first better incumbent in ``Run.progress`` (``models.highs.mip_progress``)."""
    from pyomo.contrib.appsi.base import TerminationCondition as TC

    solver, res, log, reset = run_highs(model, highs_options, deadline, warmstart, stream)
    tc = res.termination_condition
    info = solver._solver_model.getInfo()  # appsi exposes no public accessor for node counts
    prep = model._placement.prep
    schedule, cmax = None, None
    obj = res.best_feasible_objective
    infeasible = tc in (TC.infeasible, TC.infeasibleOrUnbounded)
    if obj is not None and not infeasible:
        solver.load_vars()
        cmax = float(model.Cmax.value)
        schedule = _retimed(inst, model, prep)
    start_log = [ln.strip() for ln in log if "MIP start" in ln
                 or "feasibility of MIP solution" in ln]
    return Run(schedule=schedule,
               makespan=schedule.makespan(prep) if schedule is not None else None,
               objective=obj, bound=res.best_objective_bound, cmax_value=cmax,
               infeasible=infeasible,
               time_limited=tc in (TC.maxTimeLimit, TC.maxIterations, TC.interrupted),
               inconsistent=(warmstart and cmax is not None and obj is not None
                             and cmax > obj + TOL * max(1.0, abs(obj))),
               termination=str(tc.name), nodes=int(info.mip_node_count),
               version=".".join(map(str, solver.version())), start_log=start_log,
               scheduler_reset=reset, progress=mip_progress(log, start_objective))


def _retimed(inst: PlacementInstance, model: pyo.ConcreteModel, prep: MilpPrep) -> Decisions:
    """The integer schedule of the model's loaded solution (devices and orders kept)."""
    device = [0] * inst.n_tasks
    for (t, d), var in model.x.items():
        if var.value is not None and var.value > 0.5:
            device[t] = d
    return retime(inst, prep, device, [float(model.S[t].value) for t in range(inst.n_tasks)],
                  {e: float(model.T[e].value) for e in model.T},
                  {k: float(model.Ls[k].value) for k in model.Ls})
