"""Per-plan quantities of OpWeave's evaluation figures 10 and 11 — inter-node payload per
output token, price-weighted compute occupancy, mean per-GPU batch — as pure functions of a
plan and its instance, on the plan checker's numbers (:func:`opt.serving.checker.evaluate_plan`).

Definitions (hetopt's reading of OpWeave's figures; problems.md §3.2 for the plan):

- **Inter-node payload per output token** (bytes): every activation a token's step sends from
  one owner (device group) to another — each stage boundary between different owners, as often
  as the token crosses it (:func:`opt.serving.plan.crossings`: ``out_bytes_per_request`` of the
  op before the boundary × its occurrences), plus the sampled token id returned from the
  LM-head owner to the embedding owner (``TOKEN_ID_BYTES``) when they differ. Every such
  transfer goes over the network link (the NICs of the chain, :mod:`opt.serving.chain`), since
  owners are distinct device groups. Not counted: tensor-parallel collectives inside a replica
  (intra-node NVLink / PCIe) and boundaries between consecutive stages of one owner (K = 1:
  no payload). A microbatch of b̂ requests carries b̂ × these bytes and yields b̂ tokens, so the
  figure is per request and independent of batches and μ.
- **Price-weighted compute occupancy** (fraction in [0, 1]): ``Σ_m n_m c_m f_m / Σ_m n_m c_m``
  over owners m with n_m replicas of price c_m ($/s, tp_m GPUs each): the price-weighted mean
  over GPUs of the fraction of the period each GPU computes. ``f_m = μ · busy_m / T_rtt``: in
  the periodic schedule (:mod:`opt.serving.period`) a replica of owner m runs, per period, one
  token of each of its μ microbatches, ``busy_m`` ticks each (its ops' durations, heads and TP
  collectives included); the rest of the period it waits. ``f_m ≤ 1`` because ``T_rtt ≥ μ ·
  busy_m`` (a cycle of the event graph).
- **GPUs per type** (GPUs): ``Σ replicas_m × tp_m`` over the owners m on each GPU type — whether
  a heterogeneous plan uses both types, and how many of each (:func:`gpus_by_type`).
- **Mean per-GPU batch** (requests): the GPU-weighted mean of the batch per GPU of each owner,
  ``Σ_m n_m b_m / Σ_m n_m tp_m`` — the requests whose tokens one GPU's kernels carry per
  period, b_m (all μ microbatches) over the tp_m GPUs sharing them. ``served_per_gpu`` is the
  other reading, the global batch over all GPUs ``B / Σ_m n_m tp_m`` (a disaggregated plan
  carries every request on K owners, so it is K times smaller for equal owners).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from opt.serving.builder import TOKEN_ID_BYTES
from opt.serving.checker import PlanMetrics, evaluate_plan
from opt.serving.instance import ServingInstance
from opt.serving.plan import ServingPlan, crossings, owner_sequence, plan_from_solution


@dataclass(frozen=True)
class PlanFigures:
    """A plan's figure quantities (module docstring). ``busy_fraction[m]``: owner m's f_m;
    ``payload_bytes``: inter-node payload per output token; ``occupancy``: price-weighted
    compute occupancy; ``mean_gpu_batch`` / ``served_per_gpu``: requests per GPU."""

    stages_per_token: float
    microbatches: int
    gpus: int
    payload_bytes: int
    busy_fraction: tuple[float, ...]
    occupancy: float
    mean_gpu_batch: float
    served_per_gpu: float


def payload_bytes_per_token(inst: ServingInstance, plan: ServingPlan) -> int:
    """Bytes a token sends between different owners per output token (module docstring)."""
    k = plan.owners_count
    if k == 1:
        return 0
    owner = owner_sequence(inst.n_ops, plan.template, k)
    total = sum(occ * inst.ops[i].out_bytes_per_request
                for i, _, _, occ in crossings(inst, owner))
    if owner[0] != owner[inst.last_op]:
        total += TOKEN_ID_BYTES
    return int(total)


def busy_fractions(plan: ServingPlan, met: PlanMetrics) -> tuple[Fraction, ...]:
    """f_m = μ · busy_m / T_rtt per owner, exact (module docstring)."""
    mu = plan.microbatches
    return tuple(Fraction(mu * int(b)) / met.t_rtt_exact for b in met.busy)


def price_weighted_occupancy(inst: ServingInstance, plan: ServingPlan, met: PlanMetrics
                             ) -> float:
    """Σ_m n_m c_m f_m / Σ_m n_m c_m (module docstring), a fraction in [0, 1]."""
    weights = [r * inst.replica_price_usd_per_s(inst.configs[inst.config_index(o.config)])
               for r, o in zip(met.replicas, plan.owners)]
    fr = busy_fractions(plan, met)
    return float(sum(w * f for w, f in zip(weights, fr)) / sum(weights))


def gpu_batches(inst: ServingInstance, plan: ServingPlan, met: PlanMetrics
                ) -> tuple[float, float]:
    """(mean per-GPU batch Σ n_m b_m / G, served requests per GPU B / G), G = Σ n_m tp_m."""
    gpus = sum(r * inst.configs[inst.config_index(o.config)].tp
               for r, o in zip(met.replicas, plan.owners))
    carried = sum(r * o.batch for r, o in zip(met.replicas, plan.owners))
    served = met.replicas[0] * plan.owners[0].batch
    return carried / gpus, served / gpus


def plan_figures(inst: ServingInstance, plan: ServingPlan | dict[str, Any],
                 met: PlanMetrics | None = None) -> PlanFigures:
    """Every figure quantity of ``plan`` (a :class:`ServingPlan` or a problems.md §3.2
    solution object); ``met``: its :func:`evaluate_plan` result when already computed."""
    if isinstance(plan, dict):
        plan = plan_from_solution(inst, plan)
    met = met or evaluate_plan(inst, plan)
    mean_batch, served = gpu_batches(inst, plan, met)
    return PlanFigures(stages_per_token=met.stages_per_token, microbatches=plan.microbatches,
                       gpus=met.gpus, payload_bytes=payload_bytes_per_token(inst, plan),
                       busy_fraction=tuple(float(f) for f in busy_fractions(plan, met)),
                       occupancy=price_weighted_occupancy(inst, plan, met),
                       mean_gpu_batch=mean_batch, served_per_gpu=served)


def gpus_by_type(plan: dict[str, Any]) -> dict[str, int]:
    """GPUs of each type in a solution object (problems.md §3.2: owners with ``gpu``, ``tp``,
    ``batch`` and ``replicas``): Σ replicas × tp per GPU type, in the owners' order. A missing
    or zero replica count is derived as the checker derives it: lcm of the batches / batch."""
    owners = plan["owners"]
    global_batch = math.lcm(*(int(o["batch"]) for o in owners))
    out: dict[str, int] = {}
    for o in owners:
        replicas = int(o.get("replicas") or 0) or global_batch // int(o["batch"])
        out[o["gpu"]] = out.get(o["gpu"], 0) + replicas * int(o["tp"])
    return out
