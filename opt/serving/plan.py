"""P3 plans and the independent plan checker (problems.md §3.2).

A plan ``(template q_0 < … < q_S, owners m = 1..K, μ)`` cuts the block's op sequence cyclically
into S stages (stage j covers block positions q_{j−1} … q_j − 1, positions ≥ N wrapping into
the next block) owned round-robin by ``σ(j) = ((j − 1) mod K) + 1``. The ops before q_0 in the
first block belong to stage S of the (absent) previous block. Over a token the op sequence is
``embed, block 1, …, block B, final norm + LM head``: the embedding gather runs on the owner of
the first op, the LM head on the owner of the last op, and when those differ the sampled token
ids travel back over the network (one more transfer in the round trip).

Quantities (integers in the instance's ``time_unit``; per microbatch of owner m, b̂_m = b_m/μ):

- ``busy[m]`` = Σ op durations owner m runs per token (its share of one round trip);
- ``path`` = Σ_m busy[m] + Σ transfer durations along the token (K > 1 only);
- ``net_out[m]``/``net_in[m]`` = serialisation time of the transfers leaving / entering one
  replica of owner m per token, at that replica's own b̂_m (full duplex: the two directions are
  separate endpoints; a replica sends and receives the activations of its own b̂_m requests
  whatever the other owners' batches — an owner with a larger batch aggregates several
  senders' microbatches);
- ``T_rtt = max(path, μ·max busy, μ·max net_out, μ·max net_in)`` — problems.md §3.2;
- memory per replica of owner m: its ops' weights (every block) + b_m · its ops' KV bytes;
- ``CPT = T_rtt · Σ_m c_m / b_m`` ($ per token), reported in $ per million tokens.

A truncated last block (layers not a multiple of the block period, e.g. Gemma-3's 62 = 10·6 + 2)
runs the template's first ops only; every quantity counts each op's real executions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opt.serving.instance import ServingInstance, lcm_all

#: Relative tolerance when comparing numbers a result reports with the recomputed ones.
REPORT_RTOL = 1e-6


class PlanError(ValueError):
    """A plan that breaks a rule of problems.md §3.2 (message names the rule, owner and numbers)."""


@dataclass(frozen=True)
class Owner:
    """One device-group type of a plan: its configuration, per-replica batch and replicas."""

    config: str
    batch: int
    replicas: int = 0  # 0: derive the smallest consistent count (lcm of the batches / batch)


@dataclass(frozen=True)
class ServingPlan:
    template: tuple[int, ...]
    owners: tuple[Owner, ...]
    microbatches: int

    @property
    def stages_per_block(self) -> int:
        return len(self.template) - 1

    @property
    def owners_count(self) -> int:
        return len(self.owners)


@dataclass
class PlanMetrics:
    """Everything the checker recomputes for a plan (times in the instance's time unit)."""

    t_rtt: int
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
    bottleneck: str = "path"  # the T_rtt term that binds: path, compute or network
    violations: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def cost_usd_per_mtok(self) -> float:
        return self.cost_usd_per_token * 1e6



def boundary_occurrences(inst: ServingInstance, i: int) -> int:
    """How many times per token the boundary after block op i is crossed: the times op i + 1
    runs, and for the block boundary (i = N − 1) the times op 0 runs after a previous block."""
    cnt = inst.op_count
    return int(cnt[i + 1]) if i < inst.n_ops - 1 else int(cnt[0]) - 1


def crossings(inst: ServingInstance, owner: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Every stage boundary a token crosses under the owner sequence ``owner``: (block op i
    after which it falls, sender, receiver, occurrences per token). The token-id return from
    the LM-head owner to the embedding owner is not included (see the module docstring)."""
    n = inst.n_ops
    out = []
    for i in range(n):
        nxt = (i + 1) % n
        if owner[i] == owner[nxt]:
            continue
        occ = boundary_occurrences(inst, i)
        if occ > 0:
            out.append((i, int(owner[i]), int(owner[nxt]), occ))
    return out


def resident_bytes(inst: ServingInstance, owner: np.ndarray, k: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(weights [k], KV per request [k]) each owner holds per replica: its ops' weights and KV
    in every block they run in, the embedding on the first op's owner and the LM head on the
    last op's owner (stored once when tied and both are the same owner)."""
    cnt = inst.op_count
    weights = np.zeros(k, dtype=np.float64)
    kv = np.zeros(k, dtype=np.float64)
    np.add.at(weights, owner, cnt * np.array([o.weight_bytes for o in inst.ops], dtype=np.float64))
    np.add.at(kv, owner, cnt * np.array([o.kv_bytes_per_request for o in inst.ops],
                                        dtype=np.float64))
    first, last = int(owner[0]), int(owner[inst.last_op])
    weights[first] += inst.embed_weight_bytes
    if not (inst.tied_embeddings and last == first):
        weights[last] += inst.lm_head_weight_bytes
    return weights, kv


def owner_sequence(n_ops: int, template: tuple[int, ...], k: int) -> np.ndarray:
    """int64 [i]: 0-based owner of block op i under the cyclic template (rules in the module
    docstring). Raises PlanError on a malformed template."""
    q = [int(x) for x in template]
    s = len(q) - 1
    if s < 1:
        raise PlanError(f"template {q}: needs at least two entries (q_0 < … < q_S)")
    if not 0 <= q[0] < n_ops:
        raise PlanError(f"template {q}: q_0 = {q[0]} must be in 0..{n_ops - 1}")
    if any(b <= a for a, b in zip(q, q[1:])):
        raise PlanError(f"template {q}: entries must increase strictly")
    if q[-1] != q[0] + n_ops:
        raise PlanError(f"template {q}: q_S − q_0 = {q[-1] - q[0]} must equal the block's "
                        f"{n_ops} ops")
    if k > 1 and s % k:
        raise PlanError(f"template {q}: S = {s} stages is not a multiple of K = {k} owners")
    owner = np.empty(n_ops, dtype=np.int64)
    for j in range(s):
        for p in range(q[j], q[j + 1]):
            owner[p % n_ops] = j % k
    return owner


def template_from_sequence(owner: np.ndarray, k: int) -> tuple[tuple[int, ...], list[int]]:
    """Inverse of :func:`owner_sequence` for a cyclic owner sequence whose changes go to the next
    owner (mod k): returns the template and ``perm`` with ``perm[j]`` = the input label of the
    owner of stage j + 1 (so owners can be listed in problems.md §3.2 order)."""
    n = len(owner)
    cuts = [i for i in range(n) if owner[i] != owner[i - 1]]
    if not cuts:
        return (0, n), [int(owner[0])]
    for i in cuts:
        if owner[i] != (owner[i - 1] + 1) % k:
            raise PlanError(f"owner sequence {owner.tolist()}: change at op {i} from owner "
                            f"{owner[i - 1]} to {owner[i]} is not round-robin")
    template = tuple(cuts) + (cuts[0] + n,)
    first = int(owner[cuts[0]])
    return template, [(first + j) % k for j in range(k)]


def plan_from_solution(inst: ServingInstance, solution: dict[str, Any]) -> ServingPlan:
    """The :class:`ServingPlan` of a problems.md §3.2 solution object (owners by config id or by
    gpu/tp/ep); PlanError when malformed."""
    try:
        template = tuple(int(x) for x in solution["template"])
        mu = int(solution["microbatches"])
        owners = []
        for k, o in enumerate(solution["owners"]):
            cid = o.get("config")
            if cid is None:
                match = [c.id for c in inst.configs
                         if c.gpu == o["gpu"] and c.tp == int(o["tp"]) and c.ep == int(o.get("ep", 1))]
                if not match:
                    raise PlanError(f"owners[{k}]: no configuration {o['gpu']} tp={o['tp']} "
                                    f"ep={o.get('ep', 1)} in the instance")
                cid = match[0]
            owners.append(Owner(str(cid), int(o["batch"]), int(o.get("replicas", 0) or 0)))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(f"malformed plan: {exc!r}") from None
    return ServingPlan(template, tuple(owners), mu)


def evaluate_plan(inst: ServingInstance, plan: ServingPlan | dict[str, Any]) -> PlanMetrics:
    """Recompute T_rtt, memory, GPUs and cost of a plan; rule violations are collected in
    ``violations`` (empty = feasible). Structural errors (bad template, unknown configuration,
    a batch not divisible by μ, no latency table) raise :class:`PlanError`."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    k = plan.owners_count
    mu = plan.microbatches
    if k < 1:
        raise PlanError("a plan needs at least one owner")
    if mu < 1:
        raise PlanError(f"microbatches must be ≥ 1, got {mu}")
    n = inst.n_ops
    owner = owner_sequence(n, plan.template, k)
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
    cfg_idx_a = np.array(cfg_idx)[owner]
    mb_idx_a = np.array(mb_idx)[owner]
    cnt = inst.op_count
    dur = inst.op_duration[cfg_idx_a, mb_idx_a, np.arange(n)]
    first, last = int(owner[0]), int(owner[inst.last_op])

    busy = np.zeros(k, dtype=np.int64)
    np.add.at(busy, owner, cnt * dur)
    busy[first] += int(inst.head_duration[cfg_idx[first], mb_idx[first], 0])
    busy[last] += int(inst.head_duration[cfg_idx[last], mb_idx[last], 1])
    path = int(busy.sum())
    net_out = np.zeros(k, dtype=np.int64)
    net_in = np.zeros(k, dtype=np.int64)
    if k > 1:
        for i, snd, rcv, occ in crossings(inst, owner):
            path += occ * int(inst.transfer_duration[mb_idx[snd], i])
            net_out[snd] += occ * int(inst.transfer_busy[mb_idx[snd], i])
            net_in[rcv] += occ * int(inst.transfer_busy[mb_idx[rcv], i])
        if last != first:
            mb = mb_idx[last]
            path += int(inst.token_transfer_duration[mb])
            net_out[last] += int(inst.token_transfer_busy[mb])
            net_in[first] += int(inst.token_transfer_busy[mb_idx[first]])
    compute_terms = tuple(int(mu * b) for b in busy)
    t_rtt = max(path, max(compute_terms), int(mu * net_out.max()), int(mu * net_in.max()))

    violations: list[str] = []
    batches = [o.batch for o in plan.owners]
    total = lcm_all(batches)
    replicas = []
    for m, o in enumerate(plan.owners):
        r = o.replicas or total // o.batch
        replicas.append(r)
    reqs = {r * o.batch for r, o in zip(replicas, plan.owners)}
    if len(reqs) > 1:
        violations.append(f"replicas × batch differ between owners ({sorted(reqs)}): every owner "
                          f"must serve the same global batch")
    weights, kv = resident_bytes(inst, owner, k)
    memory = [float(weights[m] + batches[m] * kv[m]) for m in range(k)]
    capacity = [inst.replica_memory_bytes(inst.configs[c]) for c in cfg_idx]
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
    if gpus > inst.grid.max_gpus:
        violations.append(f"GPUs: the plan uses {gpus} > {inst.grid.max_gpus}")
    if k > inst.grid.max_owners:
        violations.append(f"owners: K = {k} > {inst.grid.max_owners}")
    if mu > inst.grid.max_microbatches:
        violations.append(f"microbatches: μ = {mu} > {inst.grid.max_microbatches}")
    if t_rtt > inst.tpot_slo:
        violations.append(f"SLO: T_rtt {t_rtt} {inst.time_unit} > TPOT SLO {inst.tpot_slo} "
                          f"{inst.time_unit}")
    t_s = inst.seconds(t_rtt)
    pm = PlanMetrics(t_rtt=t_rtt, path=path, busy=busy.tolist(), net_out=net_out.tolist(),
                     net_in=net_in.tolist(), memory_bytes=memory, memory_capacity_bytes=capacity,
                     replicas=replicas, gpus=gpus, t_rtt_s=t_s, cost_usd_per_token=t_s * rate,
                     stages_per_token=plan.stages_per_block * inst.blocks_total,
                     bottleneck=("path" if t_rtt == path else
                                 "compute" if t_rtt == max(compute_terms) else "network"),
                     violations=violations)
    return pm


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
            "t_rtt": met.t_rtt, "memory_bytes": met.memory_bytes, "gpus": met.gpus,
            "cost_usd_per_mtok": met.cost_usd_per_mtok}


def check_plan(inst: ServingInstance, solution: dict[str, Any]) -> PlanMetrics:
    """The plan checker: recompute everything and raise :class:`PlanError` on the first broken
    rule (memory, replicas, GPUs, owners, μ, SLO) or on a reported number that disagrees with
    the recomputation (``t_rtt``, ``t_rtt_s``, ``cost_usd_per_mtok``, ``stages_per_block``)."""
    met = evaluate_plan(inst, solution)
    if met.violations:
        raise PlanError(met.violations[0])
    checks = [("t_rtt", met.t_rtt), ("t_rtt_s", met.t_rtt_s),
              ("cost_usd_per_mtok", met.cost_usd_per_mtok),
              ("stages_per_block", len(solution["template"]) - 1),
              ("owners_count", len(solution["owners"]))]
    for key, value in checks:
        if key in solution and solution[key] is not None:
            got = float(solution[key])
            if abs(got - value) > REPORT_RTOL * max(1.0, abs(value)):
                raise PlanError(f"reported {key} = {got!r} but the plan gives {value!r}")
    return met
