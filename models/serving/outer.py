"""Outer choices of the P3 serving MILP (models.serving.milp): owners K, microbatches μ and
global batch B with their admissible (configuration, batch) choices and a cheap lower bound
on the cost (see the ``models.serving.milp`` docstring, "Outer loop")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opt.serving.instance import ServingInstance, lcm_all


@dataclass
class Outer:
    """One outer choice: owners K, microbatches μ, global batch B and its admissible choices
    (config index, batch); ``lb``: cheap lower bound on the cost ($/token)."""

    k: int
    mu: int
    total_batch: int
    choices: list[tuple[int, int]]
    lb: float
    t_lb: int


def outer_choices(inst: ServingInstance, owners: list[int], mus: list[int]
                   ) -> tuple[list[Outer], int]:
    """Admissible outer choices sorted by their cheap bound, and how many were skipped as
    infeasible before any MILP (no admissible choice, GPUs, T_LB > SLO)."""
    grid = inst.grid
    n = inst.n_ops
    cnt = inst.op_count
    tick_s = inst.seconds(1)
    price = [inst.replica_price_usd_per_s(c) for c in inst.configs]
    cap = [inst.replica_memory_bytes(c) for c in inst.configs]
    w_cnt = np.array([o.weight_bytes for o in inst.ops], dtype=np.float64) * cnt
    kv_cnt = np.array([o.kv_bytes_per_request for o in inst.ops], dtype=np.float64) * cnt
    out: list[Outer] = []
    skipped = 0
    for mu in mus:
        batches = sorted({b for b in inst.batches
                          if b % mu == 0 and (b // mu) in inst.microbatch_sizes})
        totals = sorted({b * r for b in batches for r in range(1, grid.max_replicas + 1)})
        for total in totals:
            adm = [b for b in batches if total % b == 0 and total // b <= grid.max_replicas]
            if not adm or lcm_all(adm) != total:
                continue  # covered by B = lcm(adm) (module docstring)
            for k in owners:
                if k > n:
                    continue
                # an owner replicates its batch's share of GPUs and holds at least one op
                choices = [(c, b) for c, cfg in enumerate(inst.configs) for b in adm
                           if cfg.tp * (total // b) <= grid.max_gpus
                           and float(np.min(w_cnt + b * kv_cnt)) <= cap[c]]
                if not choices:
                    skipped += 1
                    continue
                if k * min(inst.configs[c].tp * (total // b) for c, b in choices) > grid.max_gpus:
                    skipped += 1
                    continue
                ci = np.array([c for c, _ in choices])
                mbi = np.array([inst.mb_index(b // mu) for _, b in choices])
                work = int((cnt * inst.op_duration[ci, mbi, :].min(axis=0)).sum()
                           + inst.head_duration[ci, mbi, 0].min()
                           + inst.head_duration[ci, mbi, 1].min())
                t_lb = max(work, mu * -(-work // k))
                if t_lb > inst.tpot_slo:
                    skipped += 1
                    continue
                rates = np.array([price[c] / b for c, b in choices])
                # T·Σ_m r_m ≥ T_LB·K·min r, and ≥ Σ_m μ·busy_m·r_m ≥ μ·Σ_i min_j dur·r
                by_op = (cnt * inst.op_duration[ci, mbi, :] * rates[:, None]).min(axis=0).sum()
                heads = sum((inst.head_duration[ci, mbi, h] * rates).min() for h in (0, 1))
                lb = max(t_lb * k * float(rates.min()), mu * float(by_op + heads)) * tick_s
                out.append(Outer(k, mu, total, choices, lb, t_lb))
    out.sort(key=lambda o: (o.lb, o.k, o.mu, o.total_batch))
    return out, skipped
