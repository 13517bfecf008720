"""MILP of P3 serving-plan partitioning (problems.md §3.2) over the full template space, solved
with Pyomo + HiGHS (appsi), one MILP per outer choice (K, μ, B).

What it proves. The MILP models T_rtt by the old formula ``max(path, μ·busy, μ·NIC)``, a lower
bound on the exact period (:mod:`opt.serving.period`): its optimum is a *lower bound* on the
exact optimum over the full template space. Every plan it returns is re-evaluated by the plan
checker with the exact period (cost, SLO); the best exactly-feasible plan is the incumbent,
and an outer choice whose formula-optimal plan costs more under the exact period (or misses the
SLO) stays open at its formula optimum. The result is OPTIMAL only when the lower bound meets
the best exact cost.

The plan semantics are those of :func:`opt.serving.checker.evaluate_plan`: a cyclic owner sequence
over the block's N ops whose changes go to the next owner (mod K), the embedding on the owner of
op 0, the LM head on the owner of op ``inst.last_op``, op i counted ``op_count[i]`` times,
boundary i < N−1 counted ``op_count[i+1]`` times and boundary N−1 ``blocks_run − 1`` times,
the token-id return transfer when the LM-head owner is not the embedding owner.

Outer loop (enumerated in increasing order of a cheap lower bound, pruned against the incumbent):

- K ∈ 1..min(max_owners, N) owners, μ ∈ 1..max_microbatches;
- the global batch B. For a plan, B = lcm(b_m) and its replicas are B/b_m; B is always one of
  the values ``b·r`` (b a grid batch, r ≤ max_replicas). For fixed B an owner may only take a
  batch b with b | B and B/b ≤ max_replicas, and the GPU count Σ_m tp_m·B/b_m is *linear*.
  A plan solved under a B that is a common multiple of its batches but larger than their lcm
  is only over-charged in GPUs (B/b_m ≥ lcm/b_m), so it stays feasible for the true rules;
  every plan is solved exactly under B = its lcm. B values whose admissible batches have an
  lcm smaller than B are therefore skipped (their plans are all covered by that smaller B).

Cheap bound of an outer choice (used for ordering and pruning): with ``W`` = Σ_i op_count_i ·
min_(c,b) duration + the cheapest embedding and LM head, ``T_rtt ≥ max(W, μ·⌈W/K⌉)`` and the
rate Σ_m c_m/b_m ≥ K·min c/b; moreover ``CPT = Σ_m T·r_m ≥ Σ_m μ·busy_m·r_m ≥ μ·Σ_i min_j
(op_count_i·duration·r_j)`` (+ the heads likewise), r_j = c_j/b_j; the larger bound counts. A
choice with that bound ≥ the incumbent is pruned, one with ``T_LB > SLO`` or no admissible
(config, batch) is skipped as infeasible. The incumbent's objective is handed to HiGHS as
``objective_bound`` (a cutoff: only strictly better plans; HiGHS 1.16 then reports "optimal"
with a solution at or above the cutoff when nothing beats it, which is recognised and ignored).

Inner MILP for (K, μ, B); J = admissible choices j = (config c_j, batch b_j) (memory-feasible
for at least one op, tp_j·B/b_j ≤ max GPUs). Times are the instance's integer ticks scaled by
1000/SLO (T ∈ [0, 1000] model units, good conditioning for HiGHS); T in ticks = T / scale.

- ``y[i,m]`` ∈ {0,1}: owner m owns op i; Σ_m y[i,m] = 1; ``y[0,0] = 1`` (owner 0 is the
  embedding owner: fixes the K rotations of a plan); every owner owns ≥ 1 op; round-robin
  cyclic consistency ``y[i+1,m] ≤ y[i,m] + y[i,m−1 mod K]`` for every i incl. the wrap
  N−1 → 0 (K ≥ 3; for K = 2 every change is to the other owner). Cyclicity makes the number of
  changes a multiple of K, so every feasible y is an owner sequence of some template;
- ``z[m,j]`` ∈ {0,1} one-hot: owner m's configuration and per-replica batch;
- ``x[i,m,j]`` ∈ [0,1] = y[i,m] ∧ z[m,j] via Σ_j x[i,m,j] = y[i,m], x[i,m,j] ≤ z[m,j] (exact
  for binary y, z); cut Σ_i x[i,m,j] ≥ z[m,j];
- ``e[i,m,b]`` ∈ [0,1] ≥ Σ_{j: b_j=b} x[i,m,j] − y[i+1,m]: owner m sends the boundary
  activation after op i at its microbatch b/μ (boundaries with zero occurrences omitted; K ≥ 2).
  Only lower-bounded: every e appears with non-negative coefficients in ``T ≥ …`` rows, so the
  minimal T equals the true T_rtt; ``g[i,m,b]`` ≥ Σ_{j: b_j=b} x[i+1,m,j] − y[i,m] likewise
  marks owner m *receiving* that boundary at its own microbatch (NIC-in is charged per
  receiving replica), and ``h[b]`` ≥ Σ_{j: b_j=b} x[0,0,j] − y[last_op,0] the token ids
  reaching owner 0 from another LM-head owner; with several networks (a crossing's network
  follows its endpoints' GPU types, problems.md §3.1) each mark also carries the two
  endpoints' GPU types (:mod:`models.serving.milp_networks`); a crossing between owners of
  different TP degrees adds its redistribution (the sender's all-gather on its path and
  NIC-out, the receiver's scatter on its NIC-in; marks ``ro`` / ``ri``,
  :func:`models.serving.milp_networks.add_reshard_terms`);
- busy_m = Σ_j busy_mj, busy_mj = Σ_i op_count_i·op_duration[c_j, b_j/μ, i]·x[i,m,j] +
  embedding (owner 0, via z[0,j]) + LM head (via x[last_op, m, j]); the receiver of owner
  m's boundary transfers is m+1 mod K, the token ids go from the LM-head owner (m ≠ 0, via
  x[last_op, m, j]) to owner 0;
- ``T`` ∈ [T_LB, SLO] ≥ path = Σ_m busy_m + Σ transfer durations + token transfer,
  T ≥ μ·busy_m, T ≥ μ·NIC-out_m, T ≥ μ·NIC-in_m;
- memory (GB): weights of owned ops × op_count + embedding (owner 0) + LM head (owner of
  last_op; not again on owner 0 with tied embeddings) + Σ_j b_j·KV·x ≤ Σ_j capacity_j·z[m,j];
- GPUs: Σ_{m,j} tp_j·(B/b_j)·z[m,j] ≤ max_gpus (replicas ≤ max by the choice of J);
- cost: the bilinear T·Σ_m c_m/b_m is linearised exactly by the disaggregation
  ``Σ_j v[m,j] = T``, ``0 ≤ v[m,j] ≤ SLO·z[m,j]`` (v[m,j] = T for the chosen j, 0 otherwise),
  with the valid cuts ``v[m,j] ≥ μ·busy_mj`` and ``Σ_{j: b_j=b} v[m,j] ≥ μ·NIC-out_m,b``
  (on a 10-op, K = 3 instance they lift the root bound from ~20 % to ~94 % of the optimum);
  objective Σ_{m,j} (c_j/b_j / r_ref)·v[m,j] with r_ref the smallest rate of J (scaling only).

The optimum's plan (built with :func:`opt.serving.plan.template_from_sequence`) is re-evaluated
with :func:`opt.serving.plan.evaluate_plan`; at a proven optimum its integer T_rtt must equal
the MILP's T (±0.5 tick) and its cost the MILP's objective (relative 1e-6), otherwise a
:class:`ServingMilpError` is raised; reported costs and T_rtt are the checker's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo

from models.highs import count_binaries, run_highs
from models.options import SolveOptions
from models.serving.milp_networks import add_reshard_terms, add_transfer_constraints_networks
from models.serving.outer import Outer, outer_choices
from opt.common.result import Result
from opt.serving.checker import REPORT_RTOL, PlanMetrics, evaluate_plan, plan_solution
from opt.serving.instance import ServingInstance, microbatch_counts
from opt.serving.plan import (
    Owner,
    PlanError,
    ServingPlan,
    boundary_occurrences,
    plan_from_solution,
    template_from_sequence,
)

#: HiGHS tolerances: an owner's busy time reaches ~SLO, so y within the default 1e-6 integrality
#: tolerance could move a T term by 1e-6·SLO; these keep the MILP's T on the integer plan's T.
_TOLERANCES = {"mip_feasibility_tolerance": 1e-9, "mip_rel_gap": 1e-9, "mip_abs_gap": 0.0}
_GB = 1e-9
#: Model time units per SLO: T ∈ [0, _T_RANGE] inside the MILP (good scaling for HiGHS).
_T_RANGE = 1000.0
_REL = 1e-9  # relative slack when comparing costs of outer choices with the incumbent


class ServingMilpError(RuntimeError):
    """The MILP's optimum disagrees with the plan checker's recomputation (a model bug)."""


@dataclass
class ServingMilpResult:
    """Outcome of :func:`solve_serving_milp`.

    status: OPTIMAL / FEASIBLE / INFEASIBLE / TIME_LIMIT_NO_SOLUTION; plan: the best plan found
    that is feasible under the exact period; cost ($ per token) and t_rtt (the exact period,
    ticks of ``inst.time_unit``) as recomputed by ``evaluate_plan``; lower_bound: proven lower
    bound on the exact optimal cost ($ per token; equal to the cost when OPTIMAL, None when
    INFEASIBLE); stats: MILPs solved, pruned outer choices, outer choices left open by the
    exact period (``exact_open``), size of the largest model, times (s) and one row per outer
    choice."""

    status: str
    plan: ServingPlan | None
    cost: float | None
    t_rtt: float | None  # the exact period (ticks)
    lower_bound: float | None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def cost_usd_per_mtok(self) -> float | None:
        return None if self.cost is None else self.cost * 1e6


# ---------------------------------------------------------------------------------------------
# the inner model

@dataclass
class _Coefficients:
    """The data of one inner MILP in model units (module docstring): k owners, μ
    microbatches, global batch B, the admissible choices j = (config ``cfg[j]``, batch
    ``bat[j]``); ``ts`` model units per tick; durations per choice and op (× op count),
    heads, capacities (GB), weights and KV per request (GB, × op count), rates ($/s per
    request) and the batches' choices and microbatch indices."""

    inst: ServingInstance
    k: int
    mu: int
    total_batch: int
    t_lb: int
    ts: float
    cfg: list[Any]
    bat: list[int]
    rates: list[float]
    dur: list[list[float]]
    head0: list[float]
    head1: list[float]
    cap: list[float]
    w_cnt: list[float]
    kv_cnt: list[float]
    batch_vals: list[int]
    j_of_b: dict[int, list[int]]
    mb_of_b: dict[int, int]

    @property
    def rate_ref(self) -> float:
        return min(self.rates)


def _coefficients(inst: ServingInstance, k: int, mu: int, total_batch: int,
                  choices: list[tuple[int, int]], t_lb: int) -> _Coefficients:
    n = inst.n_ops
    cnt = [int(v) for v in inst.op_count]
    ts = _T_RANGE / int(inst.tpot_slo)
    nj = len(choices)
    cfg = [inst.configs[c] for c, _ in choices]
    bat = [b for _, b in choices]
    mbi = [inst.mb_index(b // mu) for b in bat]
    dur = [[ts * cnt[i] * int(inst.op_duration[choices[j][0], mbi[j], i]) for i in range(n)]
           for j in range(nj)]
    batch_vals = sorted(set(bat))
    return _Coefficients(
        inst=inst, k=k, mu=mu, total_batch=total_batch, t_lb=t_lb, ts=ts, cfg=cfg, bat=bat,
        rates=[inst.replica_price_usd_per_s(c) / b for c, b in zip(cfg, bat)], dur=dur,
        head0=[ts * int(inst.head_duration[choices[j][0], mbi[j], 0]) for j in range(nj)],
        head1=[ts * int(inst.head_duration[choices[j][0], mbi[j], 1]) for j in range(nj)],
        cap=[inst.replica_memory_bytes(c) * _GB for c in cfg],
        w_cnt=[cnt[i] * inst.ops[i].weight_bytes * _GB for i in range(n)],
        kv_cnt=[cnt[i] * inst.ops[i].kv_bytes_per_request * _GB for i in range(n)],
        batch_vals=batch_vals, j_of_b={b: [j for j in range(nj) if bat[j] == b]
                                       for b in batch_vals},
        mb_of_b={b: inst.mb_index(b // mu) for b in batch_vals})


def _xb(md: pyo.ConcreteModel, co: _Coefficients, i: int, mm: int, b: int) -> Any:
    """Owner m owns op i with a choice of batch b."""
    return sum(md.x[i, mm, j] for j in co.j_of_b[b])


def add_variables(md: pyo.ConcreteModel, co: _Coefficients) -> None:
    """y (owner per op; owner 0 owns op 0), z (choice per owner), x = y ∧ z, v (T per chosen
    choice) and T ∈ [T_LB, SLO] in model units."""
    n, k, nj = co.inst.n_ops, co.k, len(co.bat)
    I, M, J = range(n), range(k), range(nj)
    md.y = pyo.Var(I, M, domain=pyo.Binary)
    md.z = pyo.Var(M, J, domain=pyo.Binary)
    md.x = pyo.Var(I, M, J, bounds=(0, 1))
    md.v = pyo.Var(M, J, bounds=(0, _T_RANGE))
    md.T = pyo.Var(bounds=(min(co.t_lb, int(co.inst.tpot_slo)) * co.ts, _T_RANGE))
    md.y[0, 0].fix(1)
    for mm in range(1, k):
        md.y[0, mm].fix(0)


def add_owner_constraints(md: pyo.ConcreteModel, co: _Coefficients) -> None:
    """Owner sequence: one owner per op, every owner used, changes go to the next owner
    (round robin, K ≥ 3)."""
    n, k = co.inst.n_ops, co.k
    I, M = range(n), range(k)
    md.assign = pyo.Constraint(I, rule=lambda mod, i: sum(mod.y[i, mm] for mm in M) == 1)
    md.used = pyo.Constraint(M, rule=lambda mod, mm: sum(mod.y[i, mm] for i in I) >= 1)
    if k >= 3:
        md.round_robin = pyo.Constraint(
            I, M, rule=lambda mod, i, mm:
            mod.y[(i + 1) % n, mm] <= mod.y[i, mm] + mod.y[i, (mm - 1) % k])


def add_choice_constraints(md: pyo.ConcreteModel, co: _Coefficients) -> None:
    """One choice per owner, x = y ∧ z (with the cut Σ_i x ≥ z) and the busy time
    ``md.busy[m, j]`` of owner m under choice j (0 for other choices)."""
    I, M, J = range(co.inst.n_ops), range(co.k), range(len(co.bat))
    last = co.inst.last_op
    md.one_choice = pyo.Constraint(M, rule=lambda mod, mm: sum(mod.z[mm, j] for j in J) == 1)
    md.x_sum = pyo.Constraint(
        I, M, rule=lambda mod, i, mm: sum(mod.x[i, mm, j] for j in J) == mod.y[i, mm])
    md.x_le_z = pyo.Constraint(I, M, J, rule=lambda mod, i, mm, j: mod.x[i, mm, j] <= mod.z[mm, j])
    md.x_used = pyo.Constraint(
        M, J, rule=lambda mod, mm, j: sum(mod.x[i, mm, j] for i in I) >= mod.z[mm, j])

    def busy_j(mod: pyo.ConcreteModel, mm: int, j: int) -> Any:
        """Owner m's busy time if its choice is j (0 otherwise), model time units."""
        expr = sum(co.dur[j][i] * mod.x[i, mm, j] for i in I if co.dur[j][i])
        expr += co.head1[j] * mod.x[last, mm, j]
        if mm == 0:
            expr += co.head0[j] * mod.z[0, j]
        return expr

    md.busy = pyo.Expression(M, J, rule=busy_j)


@dataclass
class _Transfers:
    """Per owner: what it sends on the path (model time), its NIC-out busy time by batch
    and its NIC-in busy time (all 0 for K = 1)."""

    send: list[Any]
    out_by_b: dict[tuple[int, int], Any]
    nic_in: list[Any]


def add_transfer_constraints(md: pyo.ConcreteModel, co: _Coefficients) -> _Transfers:
    """Boundary transfers (K ≥ 2): e (owner m sends boundary i at batch b), g (owner m
    receives it), h (token ids reach owner 0); returns the transfer terms per owner."""
    inst, k, n, ts = co.inst, co.k, co.inst.n_ops, co.ts
    I, M, batch_vals, last = range(n), range(k), co.batch_vals, inst.last_op
    tr = _Transfers([0 for _ in M], {(mm, b): 0 for mm in M for b in batch_vals},
                    [0 for _ in M])
    if k == 1:
        return tr
    if inst.n_networks > 1:  # a crossing's network follows its endpoints' GPU types
        return add_transfer_constraints_networks(md, co, tr)
    occ = [boundary_occurrences(inst, i) for i in range(n)]
    bidx = [i for i in I if occ[i] > 0]
    md.e = pyo.Var(bidx, M, batch_vals, bounds=(0, 1))
    md.e_def = pyo.Constraint(
        bidx, M, batch_vals, rule=lambda mod, i, mm, b:
        mod.e[i, mm, b] >= _xb(mod, co, i, mm, b) - mod.y[(i + 1) % n, mm])
    # receiving side: owner m receives boundary i at its own batch b (its replica's b̂)
    md.g = pyo.Var(bidx, M, batch_vals, bounds=(0, 1))
    md.g_def = pyo.Constraint(
        bidx, M, batch_vals, rule=lambda mod, i, mm, b:
        mod.g[i, mm, b] >= _xb(mod, co, (i + 1) % n, mm, b) - mod.y[i, mm])
    # token ids reach owner 0 (embedding) at its batch when the LM-head owner is another
    md.h = pyo.Var(batch_vals, bounds=(0, 1))
    md.h_def = pyo.Constraint(
        batch_vals, rule=lambda mod, b: mod.h[b] >= _xb(mod, co, 0, 0, b) - mod.y[last, 0])
    for mm in M:
        for b in batch_vals:
            mb = co.mb_of_b[b]
            tr.nic_in[mm] = tr.nic_in[mm] + sum(
                ts * occ[i] * int(inst.transfer_busy[0, mb, i]) * md.g[i, mm, b] for i in bidx)
    for b in batch_vals:
        tr.nic_in[0] = tr.nic_in[0] + ts * int(inst.token_transfer_busy[0, co.mb_of_b[b]]) * md.h[b]
    for mm in M:
        for b in batch_vals:
            mb = co.mb_of_b[b]
            s_b = sum(ts * occ[i] * int(inst.transfer_duration[0, mb, i]) * md.e[i, mm, b]
                      for i in bidx)
            o_b = sum(ts * occ[i] * int(inst.transfer_busy[0, mb, i]) * md.e[i, mm, b]
                      for i in bidx)
            if mm != 0:  # token ids from the LM-head owner back to owner 0
                s_b = s_b + ts * int(inst.token_transfer_duration[0, mb]) * _xb(md, co, last, mm, b)
                tok = ts * int(inst.token_transfer_busy[0, mb]) * _xb(md, co, last, mm, b)
                o_b = o_b + tok
            tr.send[mm] = tr.send[mm] + s_b
            tr.out_by_b[mm, b] = o_b
    return tr


def add_time_constraints(md: pyo.ConcreteModel, co: _Coefficients, tr: _Transfers) -> None:
    """T_rtt ≥ every term: the path (busy times and transfers), μ·busy, μ·NIC out/in."""
    M, J, mu = range(co.k), range(len(co.bat)), co.mu
    md.t_path = pyo.Constraint(expr=md.T >= sum(md.busy[mm, j] for mm in M for j in J)
                               + sum(tr.send))
    md.t_busy = pyo.Constraint(
        M, rule=lambda mod, mm: mod.T >= mu * sum(mod.busy[mm, j] for j in J))
    if co.k > 1:
        md.t_out = pyo.Constraint(
            M, rule=lambda mod, mm: mod.T >= mu * sum(tr.out_by_b[mm, b]
                                                      for b in co.batch_vals))
        md.t_in = pyo.Constraint(M, rule=lambda mod, mm: mod.T >= mu * tr.nic_in[mm])


def add_resource_constraints(md: pyo.ConcreteModel, co: _Coefficients) -> None:
    """Memory per replica (GB: owned weights × op count, KV per request × batch, the
    embedding on owner 0, the LM head on its owner) and the GPU budget."""
    inst = co.inst
    I, M, J, last = range(inst.n_ops), range(co.k), range(len(co.bat)), inst.last_op

    def memory(mod: pyo.ConcreteModel, mm: int) -> Any:
        expr = sum(co.w_cnt[i] * mod.y[i, mm] for i in I if co.w_cnt[i])
        expr += sum(co.bat[j] * co.kv_cnt[i] * mod.x[i, mm, j] for i in I for j in J
                    if co.kv_cnt[i])
        if mm == 0:
            expr += inst.embed_weight_bytes * _GB
        if mm != 0 or not inst.tied_embeddings:
            expr += inst.lm_head_weight_bytes * _GB * mod.y[last, mm]
        return expr <= sum(co.cap[j] * mod.z[mm, j] for j in J)

    md.memory = pyo.Constraint(M, rule=memory)
    md.gpus = pyo.Constraint(expr=sum(co.cfg[j].tp * (co.total_batch // co.bat[j]) * md.z[mm, j]
                                      for mm in M for j in J) <= inst.grid.max_gpus)


def add_cost_constraints(md: pyo.ConcreteModel, co: _Coefficients, tr: _Transfers) -> None:
    """v[m,j] = T·z[m,j] (disaggregation), plus its perspective cuts v ≥ μ·busy, μ·NIC out."""
    M, J, mu = range(co.k), range(len(co.bat)), co.mu
    md.v_sum = pyo.Constraint(M, rule=lambda mod, mm: sum(mod.v[mm, j] for j in J) == mod.T)
    md.v_le = pyo.Constraint(M, J, rule=lambda mod, mm, j: mod.v[mm, j] <= _T_RANGE * mod.z[mm, j])
    md.v_busy = pyo.Constraint(M, J, rule=lambda mod, mm, j: mod.v[mm, j] >= mu * mod.busy[mm, j])
    if co.k > 1:
        md.v_out = pyo.Constraint(
            M, co.batch_vals, rule=lambda mod, mm, b:
            sum(mod.v[mm, j] for j in co.j_of_b[b]) >= mu * tr.out_by_b[mm, b])


def set_objective(md: pyo.ConcreteModel, co: _Coefficients) -> None:
    """Minimise Σ_{m,j} (rate_j / rate_ref)·v[m,j] (cost per token up to scaling)."""
    M, J, rate_ref = range(co.k), range(len(co.bat)), co.rate_ref
    md.cost = pyo.Objective(expr=sum(co.rates[j] / rate_ref * md.v[mm, j] for mm in M for j in J),
                            sense=pyo.minimize)


def build_serving_milp(inst: ServingInstance, k: int, mu: int, total_batch: int,
                       choices: list[tuple[int, int]], t_lb: int = 0) -> pyo.ConcreteModel:
    """The MILP for one outer choice (module docstring). ``choices``: admissible
    (config index, per-replica batch) pairs; ``t_lb``: a valid lower bound on T (ticks).

    Times inside the model are in units of SLO/1000 (``model._time_scale`` = 1000/SLO model
    units per tick) so that T ∈ [0, 1000]; the objective is in model-time × rate/``_rate_ref``.
    """
    co = _coefficients(inst, k, mu, total_batch, choices, t_lb)
    md = pyo.ConcreteModel(name=f"serving_K{k}_mu{mu}_B{total_batch}")
    add_variables(md, co)
    add_owner_constraints(md, co)
    add_choice_constraints(md, co)
    tr = add_reshard_terms(md, co, add_transfer_constraints(md, co))
    add_time_constraints(md, co, tr)
    add_resource_constraints(md, co)
    add_cost_constraints(md, co, tr)
    set_objective(md, co)
    md._rate_ref = co.rate_ref
    md._time_scale = co.ts
    md._choices = list(choices)
    md._k = k
    md._mu = mu
    return md


def _extract_plan(inst: ServingInstance, model: pyo.ConcreteModel) -> ServingPlan:
    """The plan of the MILP's loaded solution (owner 0 = owner of op 0; problems.md §3.2 owner order)."""
    k, n = model._k, inst.n_ops
    owner = np.array([max(range(k), key=lambda mm: model.y[i, mm].value or 0.0)
                      for i in range(n)], dtype=np.int64)
    nj = len(model._choices)
    pick = [model._choices[max(range(nj), key=lambda j: model.z[mm, j].value or 0.0)]
            for mm in range(k)]
    template, perm = template_from_sequence(owner, k)
    owners = tuple(Owner(inst.configs[pick[p][0]].id, pick[p][1]) for p in perm)
    return ServingPlan(template, owners, model._mu)


# ---------------------------------------------------------------------------------------------
# the solve

@dataclass
class _Solved:
    """One HiGHS run: termination, the plan (if any, only when strictly below the cutoff), its
    MILP objective ($/token) and T (ticks), the dual bound ($/token); ``finished``: the outer
    choice is settled (optimum found, infeasible, or proven no better than the cutoff)."""

    termination: str
    plan: ServingPlan | None
    objective: float | None
    t_value: float | None
    bound: float | None
    finished: bool
    optimal: bool


def _solve_one(inst: ServingInstance, model: pyo.ConcreteModel, highs_options: dict[str, Any],
               deadline: float | None, stream: bool = False) -> _Solved:
    """Solve one outer choice's MILP. With ``objective_bound`` (the incumbent, model units)
    HiGHS prunes against it; when nothing beats it, HiGHS 1.16 may still report "optimal"
    with a solution at or above the bound, which is discarded here."""
    from pyomo.contrib.appsi.base import TerminationCondition as TC

    solver, res, _, _ = run_highs(model, highs_options, deadline, False, stream)
    tc = res.termination_condition
    scale = model._rate_ref * inst.seconds(1) / model._time_scale
    cutoff = highs_options.get("objective_bound", math.inf)
    raw_bound = res.best_objective_bound
    if raw_bound is None or not math.isfinite(raw_bound):
        raw_bound = None
    plan, obj, t_val = None, None, None
    raw_obj = res.best_feasible_objective
    if raw_obj is not None and raw_obj < cutoff * (1 - _REL):
        solver.load_vars()
        plan = _extract_plan(inst, model)
        obj = float(raw_obj) * scale
        t_val = float(model.T.value) / model._time_scale
    if tc in (TC.infeasible, TC.infeasibleOrUnbounded, TC.objectiveLimit):
        finished = True
    elif tc == TC.optimal:
        finished = plan is not None or (raw_bound is not None
                                        and raw_bound >= cutoff * (1 - _REL))
    else:
        finished = False
    return _Solved(termination=str(tc.name), plan=plan, objective=obj, t_value=t_val,
                   bound=None if raw_bound is None else raw_bound * scale, finished=finished,
                   optimal=tc == TC.optimal and plan is not None)


def solve_serving_milp(inst: ServingInstance, *, time_limit: float | None = 60.0,
                       num_workers: int = 1, seed: int = 0,
                       owners: list[int] | None = None, microbatches: list[int] | None = None,
                       initial_solution: ServingPlan | dict[str, Any] | None = None,
                       log: bool = False, **highs_params: Any) -> ServingMilpResult:
    """Minimise the cost per token of a P3 plan exactly (module docstring).

    time_limit: wall-clock limit for the whole outer loop (s; None = none); num_workers:
    HiGHS threads; seed: HiGHS random seed; owners / microbatches: restrict K / μ (default:
    the grid's 1..max); initial_solution: a feasible plan (or solution dict) whose cost serves
    as the first incumbent (only strictly better plans are then searched; it is returned when
    none is better); log: stream HiGHS' log to stderr; highs_params: HiGHS options passed
    through untouched."""
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    ks = list(owners) if owners else list(range(1, inst.grid.max_owners + 1))
    mus = list(microbatches) if microbatches else microbatch_counts(inst.grid)
    highs_options = {"threads": int(num_workers), "random_seed": int(seed), **_TOLERANCES,
                     **highs_params}
    stats: dict[str, Any] = {"milps_solved": 0, "pruned_by_bound": 0, "cutoff_no_better": 0,
                             "max_variables": 0, "max_binaries": 0, "max_constraints": 0,
                             "build_s": 0.0, "solve_s": 0.0, "outer": []}
    best = _initial_incumbent(inst, initial_solution, stats)
    outers, skipped = outer_choices(inst, ks, mus)
    stats["outer_choices"] = len(outers) + skipped
    stats["skipped_infeasible"] = skipped
    open_bounds: list[float] = []   # bounds of outer choices not solved to completion
    for o in outers:
        row: dict[str, Any] = {"K": o.k, "mu": o.mu, "B": o.total_batch,
                               "choices": len(o.choices), "lb": o.lb}
        stats["outer"].append(row)
        if o.lb >= best.cost * (1 - _REL):
            stats["pruned_by_bound"] += 1
            row["result"] = "pruned"
            continue
        if deadline is not None and time.perf_counter() >= deadline:
            open_bounds.append(o.lb)
            row["result"] = "not_started"
            continue
        bound = _solve_outer(inst, o, highs_options, deadline, best, stats, row, log)
        if bound is not None:  # time limit (or a solver failure): only its bound is proven
            open_bounds.append(bound)
    stats["runtime_s"] = time.perf_counter() - t0
    finished = not open_bounds
    if best.plan is None:
        status = "INFEASIBLE" if finished else "TIME_LIMIT_NO_SOLUTION"
        lb = None if finished else min(open_bounds)
        return ServingMilpResult(status, None, None, None, lb, stats)
    lb = min([best.cost] + open_bounds)
    status = "OPTIMAL" if lb >= best.cost * (1 - REPORT_RTOL) else "FEASIBLE"
    return ServingMilpResult(status, best.plan, best.cost, best.t_rtt, min(lb, best.cost), stats)


@dataclass
class _Incumbent:
    """The best plan so far, its cost ($/token; inf without a plan) and T_rtt (ticks)."""

    plan: ServingPlan | None = None
    cost: float = math.inf
    t_rtt: float | None = None


def _initial_incumbent(inst: ServingInstance, initial: ServingPlan | dict[str, Any] | None,
                       stats: dict[str, Any]) -> _Incumbent:
    """The initial solution as the first incumbent when it is a feasible plan (why not goes
    to ``stats["initial_rejected"]``)."""
    if initial is None:
        return _Incumbent()
    try:
        plan0 = plan_from_solution(inst, initial) if isinstance(initial, dict) else initial
        met0 = evaluate_plan(inst, plan0)
    except PlanError as exc:
        stats["initial_rejected"] = str(exc)
        return _Incumbent()
    if not met0.feasible:
        stats["initial_rejected"] = met0.violations[0]
        return _Incumbent()
    stats["initial_cost_usd_per_token"] = met0.cost_usd_per_token
    return _Incumbent(plan0, met0.cost_usd_per_token, met0.t_rtt)


def _solve_outer(inst: ServingInstance, o: Outer, highs_options: dict[str, Any],
                 deadline: float | None, best: _Incumbent, stats: dict[str, Any],
                 row: dict[str, Any], stream: bool = False) -> float | None:
    """Build and solve the MILP of outer choice ``o`` with the incumbent's cost as cutoff;
    update ``best``, ``stats`` and the choice's ``row`` (``stream``: HiGHS' log to stderr).
    Returns the choice's proven bound when it is not settled (time limit), else None."""
    tb = time.perf_counter()
    model = build_serving_milp(inst, o.k, o.mu, o.total_batch, o.choices, o.t_lb)
    stats["build_s"] += time.perf_counter() - tb
    stats["max_variables"] = max(stats["max_variables"], model.nvariables())
    stats["max_binaries"] = max(stats["max_binaries"], count_binaries(model, free_only=True))
    stats["max_constraints"] = max(stats["max_constraints"], model.nconstraints())
    opts = dict(highs_options)
    if math.isfinite(best.cost):
        opts["objective_bound"] = best.cost * model._time_scale / (model._rate_ref
                                                                   * inst.seconds(1))
    ts = time.perf_counter()
    run = _solve_one(inst, model, opts, deadline, stream)
    stats["solve_s"] += time.perf_counter() - ts
    stats["milps_solved"] += 1
    row["result"] = run.termination
    if run.plan is not None:
        met = evaluate_plan(inst, run.plan)
        _check_agreement(inst, run, met)
        row["cost"] = met.cost_usd_per_token
        row["cost_formula"] = run.objective
        if met.feasible and met.cost_usd_per_token < best.cost:
            best.plan, best.cost, best.t_rtt = run.plan, met.cost_usd_per_token, met.t_rtt
        if run.optimal and run.objective is not None and \
                (not met.feasible or met.cost_usd_per_token > run.objective * (1 + REPORT_RTOL)):
            # the formula's optimum of this choice is only a lower bound on its exact optimum
            row["exact_open"] = True
            stats["exact_open"] = stats.get("exact_open", 0) + 1
            return run.objective
    elif run.finished and "objective_bound" in opts:
        stats["cutoff_no_better"] += 1
    if run.finished:
        return None
    return max(o.lb, run.bound if run.bound is not None else o.lb)


def _check_agreement(inst: ServingInstance, run: _Solved, met: PlanMetrics) -> None:
    """Raise :class:`ServingMilpError` when the checker's recomputation of the MILP's plan
    disagrees with the MILP, which models the old T_rtt formula: at a proven optimum T must
    equal the plan's formula (±0.5 tick) and the MILP objective the formula's cost
    (REPORT_RTOL relative); an intermediate solution (time limit) may carry slack in T, so its
    formula cost must only not exceed the MILP objective. Rules other than the SLO must hold,
    and the SLO under the formula; the exact period may still miss it (the caller's concern)."""
    other = [v for v in met.violations if not v.startswith("SLO:")]
    if other:
        raise ServingMilpError(f"MILP plan {run.plan} breaks a rule: {other[0]}")
    if met.t_rtt_formula > inst.tpot_slo:
        raise ServingMilpError(f"MILP plan {run.plan} misses the SLO under its own formula")
    if run.objective is None or run.t_value is None:
        raise ServingMilpError(f"MILP plan {run.plan} without objective or T")
    cost = met.cost_formula_usd_per_token
    tol = REPORT_RTOL * abs(cost)
    if run.optimal:
        if abs(run.t_value - met.t_rtt_formula) > 0.5:
            raise ServingMilpError(f"MILP T = {run.t_value} ticks but the plan's formula is "
                                   f"{met.t_rtt_formula} ({run.plan})")
        if abs(run.objective - cost) > tol:
            raise ServingMilpError(f"MILP cost {run.objective} $/token but the plan's formula "
                                   f"costs {cost} ({run.plan})")
    elif cost > run.objective + tol or met.t_rtt_formula > run.t_value + 0.5:
        raise ServingMilpError(f"MILP solution cost {run.objective} $/token, T {run.t_value} "
                               f"but the plan's formula gives {cost}, {met.t_rtt_formula} "
                               f"({run.plan})")


def solve_serving_milp_result(inst: ServingInstance, options: SolveOptions, *,
                              initial_plan: ServingPlan | None = None,
                              **highs_params: Any) -> Result:
    """:func:`solve_serving_milp` as a back end returns it: the :class:`Result` every model
    returns (problem ``serving``; lower bound in $ per million output tokens; the plan as a
    problems.md §3.2 solution; the objective is recomputed by ``solvers.certify``).
    ``options``: time limit (s), HiGHS threads, seed, log; ``initial_plan``: a checked plan
    to start from; ``highs_params``: the method's typed params (owners, microbatches, HiGHS
    options)."""
    t0 = time.perf_counter()
    out = solve_serving_milp(inst, time_limit=options.time_limit,
                             num_workers=options.num_workers, seed=options.seed,
                             log=options.log, initial_solution=initial_plan, **highs_params)
    lb = None if out.lower_bound is None else out.lower_bound * 1e6
    return Result(problem="serving", method="milp", status=out.status, lower_bound=lb,
                  runtime_s=time.perf_counter() - t0,
                  solution=None if out.plan is None else plan_solution(inst, out.plan),
                  stats={"space": "full template space", **dict(out.stats)})
