"""Pyomo MILP of P1 placement (problems.md §1.2) without evictions, solved with HiGHS.

Every block is loaded at most once per device and then stays resident to the end (results say
``"no_evictions": true``). All times are in the instance's integer time unit; ``H`` is a valid
horizon (makespan of the initial solution, capped by that of a serial schedule).

Variables
- ``x[t,d]`` ∈ {0,1} over legal (t, d) only: task t runs on device d;
- ``S[t]`` continuous start in [head_t, H − tail_t] (DAG heads/tails with cheapest durations);
- ``z[e,a,b]`` ∈ [0,1] device pair of edge e = (u, v) in transportation form
  (Σ_b z = x[u,a], Σ_a z = x[v,b]), which is integral whenever x is; the edge's transfer
  duration is then the linear ``c_e = Σ_{a≠b} trans_e(a,b) z[e,a,b]``;
- ``T[e]`` transfer start (only with link contention), ``L[b,d]`` ∈ {0,1} block b loaded on d,
  ``Ls[b,d]`` load start, order binaries ``y`` (tasks), ``w`` (transfers), ``v`` (loads);
- ``Cmax`` makespan (the objective).

Constraints
- Σ_d x[t,d] = 1; precedence S[v] ≥ S[u] + p_u(x) + c_e (no big-M), or with contention
  T[e] ≥ S[u] + p_u(x) and S[v] ≥ T[e] + c_e;
- disjunctive no-overlap per device for task pairs not ordered by a DAG path (one y per pair,
  big-M per device from the time windows); zero-length events never conflict (problems.md §1.3);
- channel disjunctions between transfers that may share a channel (``full``: ordered device pair;
  ``star``: uplink of the source, downlink of the destination);
- loads: L[b,d] ≥ x[t,d] for the block's tasks, L[b,d] ≤ Σ_t x[t,d],
  S[t] ≥ Ls[b,d] + load_b,d − M(1 − x[t,d]), load-port disjunctions, capacity
  Σ_b bytes_b L[b,d] ≤ weight_capacity_d;
- ``load_timing: at_use`` (problems.md §1.2 rule 5): A[t] the arrival of t's inputs (the
  precedences bound A, S[t] ≥ A[t]), f[t,d] t is the user the load of its block on d serves
  (Σ_t f = L, f ≤ x), S[t] = Ls + load when f, Ls ≥ A[t] when f, and in the device
  disjunctions a served task's interval starts at S[t] − load·f (its slot); the retiming pass
  puts each load in its first user's slot;
- ``load_timing: overlap`` (problems.md §1.2 rule 5): the same A and f; a served task's slot
  starts lead = max(0, load − p_t) before it and its load starts with the slot (Ls = S[t] −
  lead when f: every overlap schedule has an equal one so, the load moved within its own slot),
  so the load ends by the task's end; the other users start after the load's end. ``load`` in
  the user, energy and delivery constraints and every head and tail is the prefetch
  relaxation's (``models.placement.overlap``: each load shortened by its longest user), the
  port disjunctions take the real loads;
- Cmax ≥ S[t] + p_t(x) + tail'_t; per device (``opt.placement.lower_bounds.device_heads_tails``: forced
  transfers, per-device load releases, neighbours sharing a device)
  S[t] ≥ Σ_d head[t,d] x[t,d] and Cmax ≥ S[t] + Σ_d tail[t,d] x[t,d]; load-port delivery
  times; redundant cuts Cmax ≥ critical path, Cmax ≥ ⌈Σ min work / D⌉,
  Σ_t p_t,d x[t,d] ≤ Cmax and Σ_b load_b,d L[b,d] ≤ Cmax per device; lexicographic symmetry
  breaking between interchangeable devices; with ``group_energy`` (default on) the heads and
  tails lifted by the identical-device group bounds (``opt.placement.group_bound``: tighter
  windows and big-Ms) and Cmax ≥ the group bound (lifted heads/tails, head–tail energy,
  energetic reasoning).

The solve retimes the MILP's decisions (device, device order, channel order, load-port order) by
a left-justified integer pass, so reported schedules carry no floating-point fuzz.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.version import version as pyomo_version

from models.highs import count_binaries
from models.options import NO_DEADLINE, Deadline, SolveOptions, TimeLimitReached
from models.placement.milp_data import (
    Decisions,
    MilpPrep,
    canonical,
    initial_decisions,
    lift_group_energy,
    prepare,
    serial_horizon,
)
from models.placement.milp_run import (
    TOL,
    Run,
    capacity_may_bind,
    no_schedule_at_all,
    set_warm_start,
    solve_and_extract,
)
from models.placement.milp_time import refusal
from models.placement.milp_time_solve import choose, list_start, solve_chosen
from models.placement.overlap import overlap_relaxation
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.device_symmetry import interchangeable_devices
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError
from opt.placement.slo import decode_steps, objective_value
from opt.placement.validator import validate_placement

EXPORT_SUFFIXES = (".lp", ".mps")
#: Pyomo's hand-over of the built model to HiGHS cannot be interrupted; it takes about this
#: many times the build (measured: 18 s after a 7.8 s build of 413 tasks, 664 edges), so the
#: solve stops before it when less time is left
HANDOVER_PER_BUILD_S = 2.0
#: Absolute MIP gap handed to HiGHS (time units). The optimum is integral (integer data, a
#: difference-constraint LP once binaries are fixed), so a gap below 1 is a proof.
INTEGRAL_ABS_GAP = 0.99


# ---------------------------------------------------------------------------------------------
# the model

@dataclass
class ModelIndex:
    """What the solve needs to read back (kept on the model as ``model._placement``)."""

    prep: MilpPrep
    horizon: int
    task_pairs: dict[tuple[int, int], list[int]]
    edge_pairs: list[tuple[int, int]]
    load_pairs: list[tuple[int, int, int]]
    transfer_edges: list[int]
    symmetry_groups: list[list[int]]
    group_bound: int | None = None


@dataclass
class Windows:
    """Time windows of the model: horizon ``H`` and makespan lower bound ``lb0`` (time units),
    per task the start window [lo, hi]; per transfer edge (with contention) [t_lo, t_hi]."""

    H: int
    lb0: int
    lo: list[int]
    hi: list[int]
    t_lo: dict[int, int]
    t_hi: dict[int, int]


def _windows(prep: MilpPrep, H: int) -> Windows:
    """Start windows from the heads and tails under horizon ``H`` (raised to the makespan
    lower bound: an infeasible instance may have no schedule at all; keep bounds sane)."""
    lb0 = max(prep.critical_path, prep.work_bound)
    H = max(H, lb0)
    n = len(prep.legal)
    hi = [max(prep.head[t], H - prep.tail[t] - prep.pmin[t]) for t in range(n)]
    return Windows(H, lb0, prep.head, hi, {}, {})


def _p_expr(m: pyo.ConcreteModel, prep: MilpPrep, t: int) -> Any:
    """Duration of task t on its chosen device."""
    return sum(prep.dur[t][d] * m.x[t, d] for d in prep.legal[t])


def _c_expr(m: pyo.ConcreteModel, prep: MilpPrep, e: int) -> Any:
    """Transfer duration of edge e for its chosen device pair."""
    return sum(tr * m.z[e, a, b] for (a, b), tr in prep.trans[e].items() if a != b and tr)


def add_task_constraints(m: pyo.ConcreteModel, prep: MilpPrep, win: Windows) -> None:
    """x[t,d] over legal pairs, starts S[t] in their windows, Cmax in [lb0, H]; every task
    runs on exactly one device."""
    n, legal = len(prep.legal), prep.legal
    m.x = pyo.Var([(t, d) for t in range(n) for d in legal[t]], domain=pyo.Binary)
    m.S = pyo.Var(range(n), bounds=lambda _m, t: (win.lo[t], win.hi[t]))
    m.Cmax = pyo.Var(bounds=(win.lb0, win.H))
    m.assign = pyo.Constraint(range(n), rule=lambda _m, t: sum(m.x[t, d] for d in legal[t]) == 1)
    # problems.md §1.2 rule 5 at_use: A[t] the arrival of t's inputs, f[t,d] t is the task its
    # block's load on d serves (add_at_use_constraints)
    users = [t for ts in prep.block_tasks.values() for t in ts] \
        if prep.at_use or prep.overlap else []
    m.A = pyo.Var(users, bounds=lambda _m, t: (0, win.hi[t]))
    m.f = pyo.Var([(t, d) for t in users for d in legal[t]], domain=pyo.Binary)


def add_transfer_constraints(m: pyo.ConcreteModel, inst: PlacementInstance, prep: MilpPrep,
                             win: Windows) -> list[int]:
    """Device pairs z of every edge in transportation form and the precedences (no big-M):
    S[v] ≥ S[u] + p_u(x) + c_e, or with contention T[e] ≥ S[u] + p_u(x), S[v] ≥ T[e] + c_e.
    Returns the edges with a transfer start T (contention and some positive transfer) and
    fills their windows in ``win``."""
    legal = prep.legal
    m.z = pyo.Var([(e, a, b) for e in range(len(prep.src)) for (a, b) in prep.trans[e]],
                  bounds=(0, 1))
    m.z_src = pyo.ConstraintList()
    m.z_dst = pyo.ConstraintList()
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        for a in legal[u]:
            m.z_src.add(sum(m.z[e, a, b] for b in legal[v]) == m.x[u, a])
        for b in legal[v]:
            m.z_dst.add(sum(m.z[e, a, b] for a in legal[u]) == m.x[v, b])
    transfer_edges = [e for e in range(len(prep.src)) if inst.links.contention
                      and any(a != b and tr > 0 for (a, b), tr in prep.trans[e].items())]
    win.t_lo = {e: win.lo[prep.src[e]] + prep.pmin[prep.src[e]] for e in transfer_edges}
    win.t_hi = {e: max(win.t_lo[e], win.hi[prep.dst[e]]) for e in transfer_edges}
    m.T = pyo.Var(transfer_edges, bounds=lambda _m, e: (win.t_lo[e], win.t_hi[e]))
    m.prec = pyo.ConstraintList()
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        sv = m.A[v] if v in m.A else m.S[v]  # at_use: the arrival, ≤ the start
        if e in win.t_lo:
            m.prec.add(m.T[e] >= m.S[u] + _p_expr(m, prep, u))
            m.prec.add(sv >= m.T[e] + _c_expr(m, prep, e))
        else:
            m.prec.add(sv >= m.S[u] + _p_expr(m, prep, u) + _c_expr(m, prep, e))
    return transfer_edges


def add_no_overlap_constraints(m: pyo.ConcreteModel, prep: MilpPrep, win: Windows,
                               clock: Deadline = NO_DEADLINE
                               ) -> dict[tuple[int, int], list[int]]:
    """One task at a time per device: a disjunction (one y per pair, big-M per device from
    the windows) for task pairs that share a device and that neither a DAG path nor the
    windows order; zero-length tasks never conflict. Returns those pairs and devices.
    ``clock``: stop (TimeLimitReached) when it has passed."""
    n, legal, dur, lo, hi = len(prep.legal), prep.legal, prep.dur, win.lo, win.hi
    # at_use: a task's slot on d starts ld[t][d] before it when it is its load's first user
    ld = _slot_loads(prep)
    task_pairs: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        clock.check("no-overlap pairs")
        for j in range(i + 1, n):
            if (prep.reach[i] >> j) & 1 or (prep.reach[j] >> i) & 1:
                continue  # a DAG path already separates them (at_use: a load waits for inputs)
            common = [d for d in legal[i] if dur[j][d] + ld[j].get(d, 0) > 0
                      and dur[i][d] + ld[i].get(d, 0) > 0 and d in legal[j]]
            if not common:
                continue
            if all(hi[i] + dur[i][d] <= lo[j] - ld[j].get(d, 0) for d in common) or \
               all(hi[j] + dur[j][d] <= lo[i] - ld[i].get(d, 0) for d in common):
                continue  # time windows already separate them
            task_pairs[(i, j)] = common
    m.y = pyo.Var(list(task_pairs), domain=pyo.Binary)
    m.no_overlap = pyo.ConstraintList()
    for (i, j), common in task_pairs.items():
        clock.check("no-overlap constraints")
        for d in common:
            li, lj = ld[i].get(d, 0), ld[j].get(d, 0)
            mij = max(0, hi[i] + dur[i][d] - lo[j] + lj)
            mji = max(0, hi[j] + dur[j][d] - lo[i] + li)
            both = m.x[i, d] + m.x[j, d]
            oj = m.S[j] - lj * m.f[j, d] if lj else m.S[j]
            oi = m.S[i] - li * m.f[i, d] if li else m.S[i]
            m.no_overlap.add(oj >= m.S[i] + dur[i][d] - mij * (3 - m.y[i, j] - both))
            m.no_overlap.add(oi >= m.S[j] + dur[j][d] - mji * (2 + m.y[i, j] - both))
    return task_pairs


def _slot_loads(prep: MilpPrep) -> list[dict[int, int]]:
    """Per task and device how long before the task its slot may start
    (:meth:`~models.placement.milp_data.MilpPrep.slot_lead`: at_use its block's load there,
    overlap the part of it the task does not cover; else none)."""
    out: list[dict[int, int]] = [{} for _ in prep.legal]
    if prep.at_use or prep.overlap:
        for b, ts in prep.block_tasks.items():
            for t in ts:
                lead = {d: prep.slot_lead(b, d, t) for d in prep.legal[t]}
                out[t] = {d: v for d, v in lead.items() if v > 0}
    return out


def add_at_use_constraints(m: pyo.ConcreteModel, prep: MilpPrep, win: Windows) -> None:
    """problems.md §1.2 rule 5 at_use: a loaded (b, d) serves exactly one user t there
    (Σ f = L, f ≤ x), which starts when the load ends, and the load starts after t's inputs
    arrive (A[t]); the slot in the no-overlap disjunctions keeps the device free from the
    load's start (add_no_overlap_constraints)."""
    m.at_use = pyo.ConstraintList()
    for t in m.A:
        m.at_use.add(m.S[t] >= m.A[t])
    for (b, d) in m.L:
        users = [t for t in prep.block_tasks[b] if d in prep.legal[t]]
        ld = prep.load[b][d]
        m.at_use.add(sum(m.f[t, d] for t in users) == m.L[b, d])
        for t in users:
            m.at_use.add(m.f[t, d] <= m.x[t, d])
            big = win.hi[t] + ld
            m.at_use.add(m.S[t] <= m.Ls[b, d] + ld + big * (1 - m.f[t, d]))
            m.at_use.add(m.Ls[b, d] >= m.A[t] - win.hi[t] * (1 - m.f[t, d]))


def add_overlap_constraints(m: pyo.ConcreteModel, prep: MilpPrep, win: Windows) -> None:
    """problems.md §1.2 rule 5 overlap: a loaded (b, d) serves exactly one user t there
    (Σ f = L, f ≤ x); the load starts with t's slot, lead = max(0, load − p_t) before t
    (Ls = S[t] − lead when f), so it ends by t's end, and after t's inputs arrive (A[t]);
    every other user there starts after the load's end. The slot in the no-overlap
    disjunctions keeps the device free from the load's start (add_no_overlap_constraints)."""
    m.overlap = pyo.ConstraintList()
    for t in m.A:
        m.overlap.add(m.S[t] >= m.A[t])
    for (b, d) in m.L:
        users = [t for t in prep.block_tasks[b] if d in prep.legal[t]]
        full, ls_hi = prep.port_load[b][d], m.Ls[b, d].ub
        m.overlap.add(sum(m.f[t, d] for t in users) == m.L[b, d])
        for t in users:
            f = m.f[t, d]
            lead = prep.slot_lead(b, d, t)
            big = win.hi[t] + ls_hi + lead
            m.overlap.add(f <= m.x[t, d])
            m.overlap.add(m.Ls[b, d] <= m.S[t] - lead + big * (1 - f))
            m.overlap.add(m.Ls[b, d] >= m.S[t] - lead - big * (1 - f))
            m.overlap.add(m.Ls[b, d] >= m.A[t] - win.hi[t] * (1 - f))
            m.overlap.add(m.S[t] >= m.Ls[b, d] + full - (ls_hi + full) * (1 - m.x[t, d] + f))


def _channel_usage(inst: PlacementInstance, prep: MilpPrep, transfer_edges: list[int]
                   ) -> dict[int, dict[int, list[tuple[int, int]]]]:
    """Per transfer edge: channel id (``Links.channels``) -> the device pairs using it."""
    usage: dict[int, dict[int, list[tuple[int, int]]]] = {}
    for e in transfer_edges:
        uses: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for (a, b), tr in prep.trans[e].items():
            if a != b and tr > 0:
                for c in inst.links.channels(a, b):
                    uses[c].append((a, b))
        usage[e] = uses
    return usage


def add_channel_constraints(m: pyo.ConcreteModel, inst: PlacementInstance, prep: MilpPrep,
                            win: Windows, transfer_edges: list[int],
                            clock: Deadline = NO_DEADLINE) -> list[tuple[int, int]]:
    """One transfer at a time per channel: a disjunction (one w per pair) for transfer pairs
    that may share a channel and that the DAG does not order. Returns those pairs.
    ``clock``: stop (TimeLimitReached) when it has passed."""
    m.channel = pyo.ConstraintList()
    if not transfer_edges:
        m.w = pyo.Var([], domain=pyo.Binary)
        return []
    usage = _channel_usage(inst, prep, transfer_edges)
    pair_chans: dict[tuple[int, int], list[int]] = {}
    for k, e in enumerate(transfer_edges):
        clock.check("channel pairs")
        for f in transfer_edges[k + 1:]:
            ve, uf, vf, ue = prep.dst[e], prep.src[f], prep.dst[f], prep.src[e]
            if ve == uf or (prep.reach[ve] >> uf) & 1 or vf == ue or (prep.reach[vf] >> ue) & 1:
                continue  # one transfer ends before the other can start
            shared = [c for c in usage[e] if c in usage[f]]
            if shared:
                pair_chans[(e, f)] = shared
    m.w = pyo.Var(list(pair_chans), domain=pyo.Binary)
    for (e, f), shared in pair_chans.items():
        clock.check("channel constraints")
        mef = max(0, win.t_hi[e] - win.t_lo[f])
        mfe = max(0, win.t_hi[f] - win.t_lo[e])
        ce, cf = _c_expr(m, prep, e), _c_expr(m, prep, f)
        for c in shared:
            ue_ = sum(m.z[e, a, b] for a, b in usage[e][c])
            uf_ = sum(m.z[f, a, b] for a, b in usage[f][c])
            m.channel.add(m.T[f] >= m.T[e] + ce - mef * (3 - m.w[e, f] - ue_ - uf_))
            m.channel.add(m.T[e] >= m.T[f] + cf - mfe * (2 + m.w[e, f] - ue_ - uf_))
    return list(pair_chans)


def add_load_constraints(m: pyo.ConcreteModel, inst: PlacementInstance, prep: MilpPrep,
                         win: Windows) -> list[tuple[int, int, int]]:
    """Weight loads: L[b,d] ≥ x[t,d] for the block's tasks, L[b,d] ≤ Σ_t x[t,d], the load
    ends before every user starts; one load at a time per port (one v per pair of positive
    loads); capacity Σ_b bytes_b L[b,d] ≤ weight_capacity_d. Returns the port pairs."""
    legal, hi, lo = prep.legal, win.hi, win.lo
    li = [(b, d) for b, ds in sorted(prep.load_devices.items()) for d in ds]
    ls_hi = {}
    for b, d in li:
        users = [t for t in prep.block_tasks[b] if d in legal[t]]
        ls_hi[(b, d)] = max(0, max(hi[t] for t in users) - prep.load[b][d])
    m.L = pyo.Var(li, domain=pyo.Binary)
    m.Ls = pyo.Var(li, bounds=lambda _m, b, d: (0, ls_hi[(b, d)]))
    m.load_use = pyo.ConstraintList()
    for b, d in li:
        users = [t for t in prep.block_tasks[b] if d in legal[t]]
        ld = prep.load[b][d]
        for t in users:
            m.load_use.add(m.L[b, d] >= m.x[t, d])
            big = max(0, ls_hi[(b, d)] + ld - lo[t])
            m.load_use.add(m.S[t] >= m.Ls[b, d] + ld - big * (1 - m.x[t, d]))
        m.load_use.add(m.L[b, d] <= sum(m.x[t, d] for t in users))
    load_pairs: list[tuple[int, int, int]] = []
    by_dev: dict[int, list[int]] = defaultdict(list)
    for b, d in li:
        if prep.port_load[b][d] > 0:
            by_dev[d].append(b)
    for d, bs in by_dev.items():
        load_pairs += [(b1, b2, d) for k, b1 in enumerate(bs) for b2 in bs[k + 1:]]
    m.v = pyo.Var(load_pairs, domain=pyo.Binary)
    m.load_port = pyo.ConstraintList()
    for b1, b2, d in load_pairs:
        l1, l2 = prep.port_load[b1][d], prep.port_load[b2][d]
        both = m.L[b1, d] + m.L[b2, d]
        m.load_port.add(m.Ls[b2, d] >= m.Ls[b1, d] + l1
                        - (ls_hi[(b1, d)] + l1) * (3 - m.v[b1, b2, d] - both))
        m.load_port.add(m.Ls[b1, d] >= m.Ls[b2, d] + l2
                        - (ls_hi[(b2, d)] + l2) * (2 + m.v[b1, b2, d] - both))
    m.capacity = pyo.ConstraintList()
    bbytes = inst.block_bytes.tolist()
    for d, dev in enumerate(inst.devices):
        cap = dev.weight_capacity
        items = [b for b, dd in li if dd == d]
        if cap is not None and sum(bbytes[b] for b in items) > cap:
            m.capacity.add(sum(bbytes[b] * m.L[b, d] for b in items) <= cap)
    return load_pairs


def add_redundant_constraints(m: pyo.ConcreteModel, inst: PlacementInstance,
                              prep: MilpPrep) -> None:
    """The makespan Cmax ≥ S[t] + p_t(x) + tail'_t (its definition, with the tails), the
    per-device heads and tails (S[t] ≥ Σ_d head[t,d] x[t,d], Cmax ≥ S[t] + Σ_d tail[t,d]
    x[t,d]) and per device the work and load energies and the load-port delivery times."""
    n, legal, dur = inst.n_tasks, prep.legal, prep.dur
    m.makespan = pyo.Constraint(
        range(n), rule=lambda _m, t: m.Cmax >= m.S[t] + _p_expr(m, prep, t) + prep.tail[t])
    multi = [t for t in range(n) if len(legal[t]) > 1]
    m.device_head = pyo.Constraint(multi, rule=lambda _m, t: m.S[t] >= sum(
        prep.dev_head[t][d] * m.x[t, d] for d in legal[t]))
    m.device_tail = pyo.Constraint(multi, rule=lambda _m, t: m.Cmax >= m.S[t] + sum(
        prep.dev_tail[t][d] * m.x[t, d] for d in legal[t]))
    m.device_work = pyo.ConstraintList()
    li = [(b, d) for b, ds in sorted(prep.load_devices.items()) for d in ds]
    for d in range(inst.n_devices):
        tasks_d = [t for t in range(n) if d in legal[t] and dur[t][d] > 0]
        if len(tasks_d) > 1:
            m.device_work.add(sum(dur[t][d] * m.x[t, d] for t in tasks_d) <= m.Cmax)
        loads_d = [b for b, dd in li if dd == d and prep.load[b][d] > 0]
        if len(loads_d) > 1:
            m.device_work.add(sum(prep.load[b][d] * m.L[b, d] for b in loads_d) <= m.Cmax)
        # one load port with delivery times: when block k is loaded on d, the loads of all
        # blocks whose users need at least q_k afterwards end no earlier than their total
        # duration, and the last of them is followed by at least q_k
        q = {b: min(prep.dev_tail[t][d] for t in prep.block_tasks[b] if d in legal[t])
             for b in loads_d}
        for bk, qk in q.items():
            group = [b for b, qb in q.items() if qb >= qk]
            if len(group) > 1:
                total = sum(prep.load[b][d] for b in group)
                m.device_work.add(sum(prep.load[b][d] * m.L[b, d] for b in group) + qk
                                  <= m.Cmax + (total + qk) * (1 - m.L[bk, d]))


def add_symmetry_breaking(m: pyo.ConcreteModel, inst: PlacementInstance, prep: MilpPrep
                          ) -> list[list[int]]:
    """Devices of a group of interchangeable ones open in order of their lowest task index.
    Returns the groups."""
    groups = interchangeable_devices(inst)
    m.symmetry = pyo.ConstraintList()
    for g in groups:
        for a, b in zip(g, g[1:]):
            earlier = []
            for t in range(inst.n_tasks):
                if b in prep.legal[t]:
                    m.symmetry.add(m.x[t, b] <= sum(earlier))
                if a in prep.legal[t]:
                    earlier.append(m.x[t, a])
    return groups


def add_service_constraints(m: pyo.ConcreteModel, inst: PlacementInstance, prep: MilpPrep
                            ) -> None:
    """TTFT and the SLO (opt.placement.slo): TTFT ≥ the end of every prefill task, and ≤ the
    end of the last one when the decode time is bounded or minimised (that needs a unique
    last prefill task, which every prefill task precedes); TTFT ≤ ttft, Cmax ≤ e2e,
    Cmax − TTFT ≤ ⌊mean_tpot · decode steps⌋."""
    slo = inst.slo
    if slo is not None and slo.e2e is not None:
        m.slo_e2e = pyo.Constraint(expr=m.Cmax <= slo.e2e)
    if inst.objective == "makespan" and (slo is None or (slo.ttft is None
                                                         and slo.mean_tpot is None)):
        return
    pre = np.flatnonzero(inst.is_prefill()).tolist()
    m.TTFT = pyo.Var(bounds=(0, None))
    m.ttft_ge = pyo.Constraint(pre, rule=lambda _m, t: m.TTFT >= m.S[t] + _p_expr(m, prep, t))
    if inst.objective == "decode_time" or (slo is not None and slo.mean_tpot is not None):
        last = last_prefill_task(inst)
        m.ttft_le = pyo.Constraint(expr=m.TTFT <= m.S[last] + _p_expr(m, prep, last))
    if slo is not None and slo.ttft is not None:
        m.slo_ttft = pyo.Constraint(expr=m.TTFT <= slo.ttft)
    steps = decode_steps(inst)
    if slo is not None and slo.mean_tpot is not None and steps:
        m.slo_tpot = pyo.Constraint(expr=m.Cmax - m.TTFT <= math.floor(slo.mean_tpot * steps))


def last_prefill_task(inst: PlacementInstance) -> int:
    """The one prefill task without a prefill successor (every prefill task precedes it, so its
    end is the TTFT); InputError when there are several."""
    pre = inst.is_prefill()
    has_pre_succ = np.zeros(inst.n_tasks, dtype=bool)
    both = pre[inst.edge_src] & pre[inst.edge_dst]
    has_pre_succ[inst.edge_src[both]] = True
    last = np.flatnonzero(pre & ~has_pre_succ)
    if len(last) != 1:
        raise InputError(f"milp bounds the decode time only when one prefill task ends the "
                         f"prefill; this instance has {len(last)} (use cpsat)", field="slo")
    return int(last[0])


def set_objective(m: pyo.ConcreteModel, objective: str = "makespan") -> None:
    """Minimise the makespan, TTFT or the decode time Cmax − TTFT (opt.placement.slo)."""
    expr = {"ttft": lambda: m.TTFT, "decode_time": lambda: m.Cmax - m.TTFT}.get(
        objective, lambda: m.Cmax)()
    m.obj = pyo.Objective(expr=expr, sense=pyo.minimize)


def build_placement_milp(inst: PlacementInstance, horizon: int | None = None,
                         clock: Deadline = NO_DEADLINE, *, group_energy: bool = True
                         ) -> pyo.ConcreteModel:
    """MILP of problems.md §1.2 without evictions (module docstring). ``horizon``: a known makespan
    upper bound in time units (e.g. the initial solution's; the serial bound caps it);
    ``clock``: the build stops with :class:`~models.options.TimeLimitReached` once it passes
    (checked between constraint families and inside the pair loops); ``group_energy``: the
    group energy bounds (:func:`lift_group_energy`: lifted heads/tails, Cmax ≥ the bound)."""
    prep, group_lb = lift_group_energy(overlap_relaxation(inst), prepare(inst)) if group_energy \
        else (prepare(inst), None)
    H = serial_horizon(inst, prep)
    if horizon is not None:
        H = min(H, int(horizon))
    win = _windows(prep, H)
    m = pyo.ConcreteModel(name="placement_milp")
    add_task_constraints(m, prep, win)
    transfer_edges = add_transfer_constraints(m, inst, prep, win)
    clock.check("transfer constraints")
    task_pairs = add_no_overlap_constraints(m, prep, win, clock)
    edge_pairs = add_channel_constraints(m, inst, prep, win, transfer_edges, clock)
    clock.check("channel constraints")
    load_pairs = add_load_constraints(m, inst, prep, win)
    if prep.at_use:
        add_at_use_constraints(m, prep, win)
    if prep.overlap:
        add_overlap_constraints(m, prep, win)
    clock.check("load constraints")
    add_redundant_constraints(m, inst, prep)
    groups = add_symmetry_breaking(m, inst, prep)
    if group_lb is not None and group_lb > win.lb0:
        m.group_energy = pyo.Constraint(expr=m.Cmax >= group_lb)
    add_service_constraints(m, inst, prep)
    set_objective(m, inst.objective)
    m._placement = ModelIndex(prep, win.H, task_pairs, edge_pairs, load_pairs, transfer_edges,
                              groups, group_lb)
    return m


# ---------------------------------------------------------------------------------------------
# the solve

def solve_placement_milp(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Solve P1 exactly (no evictions) with the MILP and HiGHS; ``options.params`` are HiGHS
    option names passed through untouched, except ``group_energy`` (bool, a model switch). Times in the result are integer time units."""
    t0 = time.perf_counter()
    params = dict(options.params)
    group_energy = bool(params.pop("group_energy", True))
    requested = str(params.pop("formulation", "auto"))
    options = dataclasses.replace(options, params=params)  # the rest are HiGHS options
    export = options.export_path
    if export is not None and Path(export).suffix.lower() not in EXPORT_SUFFIXES:
        raise InputError(f"cannot export the MILP to '{export}': the file name must end in "
                         f"{' or '.join(EXPORT_SUFFIXES)}", field="export_path")
    ws: dict[str, Any] = {"used": False, "source": None}
    warm = initial_decisions(inst, options.initial_solution, ws)
    if warm is not None and (inst.objective != "makespan" or inst.slo is not None):
        # its makespan is no horizon once an SLO or another objective decides
        ws["initial_rejected"] = "the instance has an objective or SLO: no MIP start"
        warm = None
    warm_ms = None if warm is None else max(
        (warm.start[t] + int(inst.cost[t, warm.device[t]]) for t in range(inst.n_tasks)),
        default=0)
    clock = Deadline.after(options.time_limit, t0)
    warm_solution = None if warm is None else options.initial_solution
    if warm is None and requested != "bigm" and refusal(inst) is None:
        warm, warm_solution = list_start(inst, ws)
        warm_ms = None if warm is None else max(
            (warm.start[t] + int(inst.cost[t, warm.device[t]]) for t in range(inst.n_tasks)),
            default=0)
    choice = choose(inst, requested, warm_ms, group_energy)
    if choice.formulation != "bigm":
        return solve_chosen(inst, options, choice, warm, warm_solution, ws, group_energy, t0)
    try:
        model = build_placement_milp(inst, horizon=warm_ms, clock=clock,
                                     group_energy=group_energy)
    except TimeLimitReached as stop:
        return _stopped(options, t0, str(stop), {"no_evictions": True, "mip_start": ws,
                                                 "build_s": time.perf_counter() - t0})
    idx: ModelIndex = model._placement
    stats = _model_stats(inst, model, time.perf_counter() - t0)
    stats.update({"formulation": "bigm", "formulation_reason": choice.reason})
    try:
        _set_mip_start(model, inst, warm, warm_ms, ws, clock)
    except TimeLimitReached as stop:
        return _stopped(options, t0, str(stop), stats)
    stats["mip_start"] = ws  # ("warm_start" is the entry point's name for the source)
    if export is not None:
        Path(export).parent.mkdir(parents=True, exist_ok=True)
        model.write(str(export), io_options={"symbolic_solver_labels": True})
        stats["exported"] = str(export)
    t1 = time.perf_counter()
    left, handover = clock.remaining(), HANDOVER_PER_BUILD_S * stats["build_s"]
    if left is not None and left < handover:
        return _stopped(options, t0, f"the time limit leaves {left:.1f} s, less than handing "
                                     f"the model to HiGHS takes (about {handover:.1f} s)", stats)
    run = _run(inst, model, options, t0, ws)
    stats.update({"solver": "highs", "solver_version": run.version,
                  "interface": "pyomo.contrib.appsi.solvers.Highs",
                  "pyomo_version": pyomo_version, "termination": run.termination,
                  "solve_s": time.perf_counter() - t1, "nodes": run.nodes,
                  "mip_abs_gap": INTEGRAL_ABS_GAP, "milp_objective": run.objective,
                  "dual_bound": run.bound, **run.progress})
    if run.scheduler_reset:
        stats["highs_scheduler_reset"] = True
    if stats["capacity_may_bind"]:
        stats["bound_scope"] = "no_evictions"
    return _result(inst, idx.prep, run, options, stats, t0)


def _stopped(options: SolveOptions, t0: float, why: str, stats: dict[str, Any]) -> Result:
    """TIME_LIMIT_NO_SOLUTION before HiGHS ran (``solvers.solve`` then reports the warm
    start, if any, as the incumbent)."""
    return Result(problem="placement", method="milp", status="TIME_LIMIT_NO_SOLUTION",
                  runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params={"time_limit": options.time_limit,
                          "num_workers": options.num_workers, **options.params},
                  stats={**stats, "message": why})


def _model_stats(inst: PlacementInstance, model: pyo.ConcreteModel, build_s: float
                 ) -> dict[str, Any]:
    """Size and scope facts of a built model."""
    idx: ModelIndex = model._placement
    return {"no_evictions": True, "variables": model.nvariables(),
            "binaries": count_binaries(model), "constraints": model.nconstraints(),
            "horizon": idx.horizon, "task_pairs": len(idx.task_pairs),
            "transfer_pairs": len(idx.edge_pairs), "load_pairs": len(idx.load_pairs),
            "symmetry_groups": [[inst.devices[d].name for d in g]
                                for g in idx.symmetry_groups],
            "group_bound": idx.group_bound,
            "capacity_may_bind": capacity_may_bind(inst, idx.prep), "build_s": build_s}


def _set_mip_start(model: pyo.ConcreteModel, inst: PlacementInstance, warm: Decisions | None,
                   warm_ms: int | None, ws: dict[str, Any], clock: Deadline = NO_DEADLINE
                   ) -> None:
    """MIP start: the initial solution (the only one: without it HiGHS starts cold), unless
    it is longer than the serial horizon; relabelled for the symmetry breaking. Records what
    was used in ``ws``."""
    idx: ModelIndex = model._placement
    if warm is None:
        return
    ws["initial_objective"] = warm_ms
    if warm_ms > idx.horizon:
        return
    ws["source"] = "initial_solution"
    bad = set_warm_start(model, inst, canonical(warm, idx.symmetry_groups), clock)
    ws.update({"used": bad == 0, "objective": warm.makespan(idx.prep),
               "violated_constraints": bad})


def _run(inst: PlacementInstance, model: pyo.ConcreteModel, options: SolveOptions, t0: float,
         ws: dict[str, Any]) -> Run:
    """HiGHS on the model within the time limit (counted from ``t0``), with the MIP start
    when it is usable; re-solved without it when HiGHS returns inconsistent values."""
    deadline = None if options.time_limit is None else t0 + float(options.time_limit)
    highs_options = {"threads": int(options.num_workers), "random_seed": int(options.seed),
                     "mip_abs_gap": INTEGRAL_ABS_GAP, **options.params}
    run = solve_and_extract(inst, model, highs_options, deadline, bool(ws["used"]),
                            options.log, ws.get("objective"))
    if ws["used"]:
        ws["highs_log"] = run.start_log
        ws["accepted_by_highs"] = any("MIP start solution is feasible" in ln
                                      or ln.endswith(": feasible") for ln in run.start_log)
    if run.inconsistent:
        # HiGHS sometimes returns the MIP start's column values together with a better
        # objective found in its presolved space; solve again without the start
        ws["discarded"] = (f"HiGHS reported objective {run.objective} but returned values "
                           f"with Cmax {run.cmax_value}; re-solved without the MIP start")
        again = solve_and_extract(inst, model, highs_options, deadline, False, options.log)
        run = run.merge(again)
    return run


def _result(inst: PlacementInstance, prep: MilpPrep, run: Run, options: SolveOptions,
            stats: dict[str, Any], t0: float) -> Result:
    """The Result of a run: status, validated retimed schedule, proven bound."""
    params_out = {"time_limit": options.time_limit, "num_workers": options.num_workers,
                  **options.params}
    lb = None
    if run.bound is not None and math.isfinite(run.bound):
        lb = float(max(math.ceil(run.bound - TOL), 0))
    solution = None
    objective = None
    if run.infeasible:
        status, lb = "INFEASIBLE", None
        stats["infeasible_scope"] = ("all_schedules" if no_schedule_at_all(inst, prep)
                                     or not stats["capacity_may_bind"] else "no_evictions")
    elif run.schedule is None:
        status = "TIME_LIMIT_NO_SOLUTION" if run.time_limited else "ERROR"
        if status == "ERROR":
            stats["message"] = f"HiGHS ended ({run.termination}) without a solution"
    else:
        solution = run.schedule.to_solution(inst)
        try:
            metrics = validate_placement(inst, solution)
        except ScheduleError as exc:
            return Result(problem="placement", method="milp", status="ERROR",
                          runtime_s=time.perf_counter() - t0, seed=options.seed,
                          params=params_out, solution=None,
                          stats={**stats, "message": f"retimed MILP schedule is invalid: "
                                                     f"{exc}"})
        value = objective_value(inst.objective, metrics)
        objective = None if value is None else float(value)
        status = "OPTIMAL" if lb is not None and objective is not None and lb >= objective \
            else "FEASIBLE"
    return Result(problem="placement", method="milp", status=status, objective=objective,
                  lower_bound=lb, runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params=params_out, solution=solution, stats=stats)
