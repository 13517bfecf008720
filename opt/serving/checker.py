"""The P3 plan checker (problems.md §3.2): every quantity of a plan recomputed — T_rtt (the
exact period of :mod:`opt.serving.period`, with the old formula beside it as its lower bound),
memory, replicas, GPUs and cost — and the gate every P3 result passes.

The formula terms (integers in the instance's ``time_unit``; per microbatch of owner m,
b̂_m = b_m/μ): ``busy[m]`` = Σ op durations owner m runs per token; ``path`` = Σ_m busy[m] + Σ
transfer durations along the token (K > 1 only); ``net_out[m]``/``net_in[m]`` = serialisation
time of the transfers leaving / entering one replica of owner m per token, at that replica's
own b̂_m, with a crossing's redistribution between different TP degrees (the sender's
all-gather out, the receiver's scatter in; :mod:`opt.serving.crossing`); ``formula = max(path, μ·max busy, μ·max net_out, μ·max net_in)`` ≤ T_rtt. Memory per
replica of owner m: its ops' weights (every block) + b_m · its ops' KV bytes;
``CPT = T_rtt · Σ_m c_m / b_m`` ($ per token), reported in $ per million tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from opt.serving.chain import token_chain
from opt.serving.crossing import crossing_ticks, token_return_ticks
from opt.serving.instance import ServingInstance, lcm_all
from opt.serving.period import chain_period
from opt.serving.plan import (
    PlanError,
    ServingPlan,
    crossings,
    owner_sequence,
    plan_from_solution,
    resident_bytes,
)

#: Relative tolerance when comparing numbers a result reports with the recomputed ones.
REPORT_RTOL = 1e-6


@dataclass
class PlanMetrics:
    """Everything the checker recomputes for a plan (times in ticks of the instance's time
    unit; ``*_s`` seconds). ``t_rtt`` is the exact period (``t_rtt_exact`` as a fraction of
    ticks), ``t_rtt_formula`` the old formula, its lower bound; ``bottleneck`` names the cycle
    that sets the period: one resource's own ("path", "compute", "network") or "coupled" (a
    stage waits for another owner: only a cycle through several resources attains it)."""

    t_rtt: float
    t_rtt_exact: Fraction
    t_rtt_formula: int
    path: int
    busy: list[int]
    net_out: list[int]
    net_in: list[int]
    memory_bytes: list[float]
    memory_capacity_bytes: list[float]
    replicas: list[int]
    gpus: int
    t_rtt_s: float
    cost_usd_per_token: float
    stages_per_token: float
    rate_usd_per_s: float = 0.0  # Σ_m c_m / b_m: cost per token = T_rtt (s) · rate
    cost_formula_usd_per_token: float = 0.0  # the formula's cost, a lower bound ($ per token)
    bottleneck: str = "path"
    violations: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def cost_usd_per_mtok(self) -> float:
        return self.cost_usd_per_token * 1e6


def evaluate_plan(inst: ServingInstance, plan: ServingPlan | dict[str, Any]) -> PlanMetrics:
    """Recompute T_rtt (exact, and the formula beside it), memory, GPUs and cost of a plan;
    rule violations are collected in ``violations`` (empty = feasible). Structural errors (bad
    template, unknown configuration, a batch not divisible by μ, no latency table) raise
    :class:`PlanError`."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    k, mu = plan.owners_count, plan.microbatches
    if k < 1:
        raise PlanError("a plan needs at least one owner")
    if mu < 1:
        raise PlanError(f"microbatches must be ≥ 1, got {mu}")
    owner = owner_sequence(inst.n_ops, plan.template, k)
    cfg_idx, mb_idx = _owner_indices(inst, plan)
    terms = _token_terms(inst, owner, cfg_idx, mb_idx)
    formula = max(terms.path, max(int(mu * b) for b in terms.busy),
                  int(mu * terms.net_out.max()), int(mu * terms.net_in.max()))
    period = chain_period(token_chain(inst, plan), mu, inst.seconds(1))
    if period.formula != formula:  # the two accountings of one plan must agree
        raise AssertionError(f"formula {formula} but the token chain gives {period.formula}")
    t_exact = period.t_rtt
    replicas = _replicas(plan)
    weights, kv = resident_bytes(inst, owner, k)
    memory = [float(weights[m] + plan.owners[m].batch * kv[m]) for m in range(k)]
    capacity = [inst.replica_memory_bytes(inst.configs[c]) for c in cfg_idx]
    use = _resources(inst, plan, cfg_idx, replicas, memory, capacity)
    violations = use.violations + _limit_violations(inst, plan, use.gpus, t_exact)
    t_s = inst.seconds(float(t_exact))
    return PlanMetrics(t_rtt=float(t_exact), t_rtt_exact=t_exact, t_rtt_formula=formula,
                       path=terms.path, busy=terms.busy.tolist(),
                       net_out=terms.net_out.tolist(), net_in=terms.net_in.tolist(),
                       memory_bytes=memory, memory_capacity_bytes=capacity, replicas=replicas,
                       gpus=use.gpus, t_rtt_s=t_s, cost_usd_per_token=t_s * use.rate,
                       rate_usd_per_s=use.rate,
                       cost_formula_usd_per_token=inst.seconds(formula) * use.rate,
                       stages_per_token=plan.stages_per_block * inst.blocks_total,
                       bottleneck=period.binding, violations=violations)


class _TokenTerms(NamedTuple):
    """The formula's terms of one token (ticks; per owner: int64 [K])."""

    path: int  # Σ busy + Σ transfer durations along the token
    busy: np.ndarray  # op (and head) durations each owner runs per token
    net_out: np.ndarray  # serialisation of the transfers leaving one replica of each owner
    net_in: np.ndarray  # serialisation of the transfers entering one replica of each owner


class _Resources(NamedTuple):
    """GPUs, price rate ($ per second per token of batch) and per-owner violations of a plan."""

    gpus: int
    rate: float
    violations: list[str]


def _owner_indices(inst: ServingInstance, plan: ServingPlan) -> tuple[list[int], list[int]]:
    """(configuration index, microbatch-size index) of every owner; PlanError naming the owner
    for an unknown configuration or a batch that is not a positive multiple of μ."""
    mu = plan.microbatches
    cfg_idx, mb_idx = [], []
    for m, o in enumerate(plan.owners):
        try:
            cfg_idx.append(inst.config_index(o.config))
        except ValueError as exc:
            raise PlanError(f"owners[{m}]: {exc}") from None
        if o.batch < 1 or o.batch % mu:
            raise PlanError(f"owners[{m}]: batch {o.batch} is not a positive multiple of "
                            f"μ = {mu}")
        try:
            mb_idx.append(inst.mb_index(o.batch // mu))
        except ValueError as exc:
            raise PlanError(f"owners[{m}]: {exc}") from None
    return cfg_idx, mb_idx


def _token_terms(inst: ServingInstance, owner: np.ndarray, cfg_idx: list[int],
                 mb_idx: list[int]) -> _TokenTerms:
    """Busy time per owner (ops, embedding and LM head), the token's path and each owner's
    network serialisation in and out (every stage crossing and, K > 1, the token's return)."""
    n, k = inst.n_ops, len(cfg_idx)
    dur = inst.op_duration[np.array(cfg_idx)[owner], np.array(mb_idx)[owner], np.arange(n)]
    first, last = int(owner[0]), int(owner[inst.last_op])
    busy = np.zeros(k, dtype=np.int64)
    np.add.at(busy, owner, inst.op_count * dur)
    busy[first] += int(inst.head_duration[cfg_idx[first], mb_idx[first], 0])
    busy[last] += int(inst.head_duration[cfg_idx[last], mb_idx[last], 1])
    path = int(busy.sum())
    net_out = np.zeros(k, dtype=np.int64)
    net_in = np.zeros(k, dtype=np.int64)
    if k > 1:  # each crossing as opt.serving.crossing prices it (network and redistribution)
        for i, snd, rcv, occ in crossings(inst, owner):
            x = crossing_ticks(inst, i, cfg_idx[snd], cfg_idx[rcv], mb_idx[snd], mb_idx[rcv])
            path += occ * x.duration
            net_out[snd] += occ * x.busy_out
            net_in[rcv] += occ * x.busy_in
        if last != first:
            x = token_return_ticks(inst, cfg_idx[last], cfg_idx[first], mb_idx[last],
                                   mb_idx[first])
            path += x.duration
            net_out[last] += x.busy_out
            net_in[first] += x.busy_in
    return _TokenTerms(path, busy, net_out, net_in)


def _replicas(plan: ServingPlan) -> list[int]:
    """Each owner's replicas: as given, else the least common multiple of the batches over its
    batch (every owner serves the same global batch)."""
    total = lcm_all([o.batch for o in plan.owners])
    return [o.replicas or total // o.batch for o in plan.owners]


def _resources(inst: ServingInstance, plan: ServingPlan, cfg_idx: list[int],
               replicas: list[int], memory: list[float], capacity: list[float]) -> _Resources:
    """GPUs and price rate of the plan, with the violations of equal global batches, replica
    memory (bytes) and the replica cap."""
    violations: list[str] = []
    reqs = {r * o.batch for r, o in zip(replicas, plan.owners)}
    if len(reqs) > 1:
        violations.append(f"replicas × batch differ between owners ({sorted(reqs)}): every owner "
                          f"must serve the same global batch")
    gpus = 0
    rate = 0.0
    for m, o in enumerate(plan.owners):
        cfg = inst.configs[cfg_idx[m]]
        if memory[m] > capacity[m]:
            violations.append(f"memory: owner {m + 1} ({cfg.id}, batch {o.batch}) needs "
                              f"{memory[m]:.4g} bytes > {capacity[m]:.4g} per replica")
        if replicas[m] > inst.grid.max_replicas:
            violations.append(f"replicas: owner {m + 1} ({cfg.id}) has {replicas[m]} > "
                              f"{inst.grid.max_replicas}")
        gpus += replicas[m] * cfg.tp
        rate += inst.replica_price_usd_per_s(cfg) / o.batch
    return _Resources(gpus, rate, violations)


def _limit_violations(inst: ServingInstance, plan: ServingPlan, gpus: int,
                      t_exact: Fraction) -> list[str]:
    """The grid's limits (GPUs, owners, μ) and the TPOT SLO (``t_exact`` in ticks) the plan
    breaks."""
    out = []
    if gpus > inst.grid.max_gpus:
        out.append(f"GPUs: the plan uses {gpus} > {inst.grid.max_gpus}")
    if plan.owners_count > inst.grid.max_owners:
        out.append(f"owners: K = {plan.owners_count} > {inst.grid.max_owners}")
    if plan.microbatches > inst.grid.max_microbatches:
        out.append(f"microbatches: μ = {plan.microbatches} > {inst.grid.max_microbatches}")
    if t_exact > inst.tpot_slo:
        out.append(f"SLO: T_rtt {float(t_exact):.6g} {inst.time_unit} > TPOT SLO "
                   f"{inst.tpot_slo} {inst.time_unit}")
    return out


def plan_solution(inst: ServingInstance, plan: ServingPlan) -> dict[str, Any]:
    """The problems.md §3.2 solution object of a plan, with the checker's recomputed numbers."""
    met = evaluate_plan(inst, plan)
    owners = []
    for o, r in zip(plan.owners, met.replicas):
        c = inst.configs[inst.config_index(o.config)]
        owners.append({"config": c.id, "gpu": c.gpu, "tp": c.tp, "ep": c.ep, "batch": o.batch,
                       "replicas": r})
    return {"stages_per_block": plan.stages_per_block, "owners_count": plan.owners_count,
            "template": list(plan.template), "owners": owners, "microbatches": plan.microbatches,
            "stages_per_token": met.stages_per_token, "t_rtt_s": met.t_rtt_s,
            "t_rtt": met.t_rtt, "t_rtt_formula": met.t_rtt_formula,
            "memory_bytes": met.memory_bytes, "gpus": met.gpus,
            "cost_usd_per_mtok": met.cost_usd_per_mtok}


def check_plan(inst: ServingInstance, solution: dict[str, Any]) -> PlanMetrics:
    """The plan checker: recompute everything and raise :class:`PlanError` on the first broken
    rule (memory, replicas, GPUs, owners, μ, SLO) or on a reported number that disagrees with
    the recomputation (``t_rtt``, ``t_rtt_s``, ``cost_usd_per_mtok``, ``stages_per_block``,
    ``stages_per_token``, ``owners_count``, ``gpus``, ``memory_bytes``, each owner's
    ``replicas``)."""
    met = evaluate_plan(inst, solution)
    if met.violations:
        raise PlanError(met.violations[0])
    checks: list[tuple[str, Any]] = [
        ("t_rtt", met.t_rtt), ("t_rtt_formula", met.t_rtt_formula), ("t_rtt_s", met.t_rtt_s),
        ("cost_usd_per_mtok", met.cost_usd_per_mtok),
        ("stages_per_block", len(solution["template"]) - 1),
        ("stages_per_token", met.stages_per_token), ("owners_count", len(solution["owners"])),
        ("gpus", met.gpus), ("memory_bytes", met.memory_bytes)]
    for key, value in checks:
        if solution.get(key) is not None:
            _check_reported(key, solution[key], value)
    for m, (o, r) in enumerate(zip(solution["owners"], met.replicas)):
        if o.get("replicas") not in (None, 0):
            _check_reported(f"owners[{m}].replicas", o["replicas"], r)
    return met


def _check_reported(key: str, got: Any, value: Any) -> None:
    """A reported number (or list of numbers) equals the recomputed one within
    :data:`REPORT_RTOL`; PlanError otherwise."""
    if isinstance(value, list):
        if not isinstance(got, list) or len(got) != len(value):
            raise PlanError(f"reported {key} = {got!r:.80} but the plan gives {value!r}")
        for i, (g, v) in enumerate(zip(got, value)):
            _check_reported(f"{key}[{i}]", g, v)
        return
    if isinstance(got, bool) or not isinstance(got, (int, float)) or \
            abs(got - value) > REPORT_RTOL * max(1.0, abs(value)) or got != got:
        raise PlanError(f"reported {key} = {got!r:.80} but the plan gives {value!r}")
