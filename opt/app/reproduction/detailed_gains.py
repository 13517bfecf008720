"""OpWeave's Theorems 3.1/3.2 re-checked with the *detailed* cost model (problems.md §4).

The closed forms (:mod:`opt.theory.verify`) idealise: continuous batches, peak roofline, no
fixed costs, linear KV growth, memory never binding beyond b̄. Here the same gains are computed
from P3 plans (:mod:`opt.serving.builder`, :mod:`heuristics.serving.search`): integer batches
from the instance's grid (by default the powers of two up to the largest batch memory allows
times the replicas per owner, OpWeave App. B.4, recorded in the instance's ``meta.batch_grid``:
docs/serving.md "Batches"; ``grid`` overrides it), the per-kernel GPU roofline with
efficiencies and launch costs, TP collectives, real KV growth (sliding windows,
linear-attention state), memory limits, and replicas / GPU limits.

- ``G_hom(model, GPU, s)`` = cost of the best colocated plan (COL: one owner runs everything)
  / cost of the best plan on that GPU type (B&B: K ≤ 3 owners, disaggregated or not).
- ``G_het(model, GPU1, GPU2, s)`` = min over the two homogeneous best costs / the best cost on
  the two types together.

The SLO is set loose (``slo_s``, default 10 s): the theorems minimise cost without a latency
constraint. Claims checked, each against the closed form of the same GPU group:

====== ==================================================================================
D3.1a  G_hom ≥ 1 (by construction: COL is in the B&B's space — a failure is a bug)
D3.1b  G_hom < M/(M − M_w) with M the memory of the best COL plan's group (tp GPUs)
D3.1c  G_hom = 1 when the closed form's b̄ ≥ b* for that group
D3.1d  G_hom non-decreasing in s (consecutive contexts, same model and GPU)
D3.2a  G_het ≥ 1 (by construction)
D3.2b  G_het = 1 under dominance (α_1 ≤ α_2 and γ_1 ≤ γ_2, per GPU)
D3.2c  G_het ≤ (1 + √η)/2
====== ==================================================================================

Where an idealised claim fails in the detailed model, the worst counterexample says by how
much and why it can (see docs/bounds.md). Results are cached per (model, GPUs, context,
method) through :func:`opt.app.runs.serving_sweep.run_serving_sweep`, so a rerun resumes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.app.runs.serving_sweep import ServingCell, ServingSweepOptions, run_serving_sweep
from opt.app.runs.sweep import Progress
from opt.serving.instance import ServingGrid
from opt.theory import closed_forms as B
from opt.theory.gains import GpuGroup, hom_report
from opt.theory.verify import ClaimResult
from solvers import solve

DETAILED_CLAIMS: dict[str, str] = {
    "D3.1a": "G_hom >= 1 (detailed; COL is in the space)",
    "D3.1b": "G_hom < M/(M - M_w) (detailed)",
    "D3.1c": "G_hom = 1 when b_bar >= b* (detailed)",
    "D3.1d": "G_hom non-decreasing in s (detailed)",
    "D3.2a": "G_het >= 1 (detailed; each type alone is in the space)",
    "D3.2b": "G_het = 1 under dominance (detailed)",
    "D3.2c": "G_het <= (1 + sqrt(eta))/2 (detailed)",
}
DEFAULT_GPUS = ("H100", "A100", "L40S")
DEFAULT_CONTEXTS = (4096, 16384, 65536, 262144)
#: Relative tolerance of "= 1" in the detailed model (costs from the same integer tables).
TOL = 1e-9


def _summarise(claim: str, items: list[tuple[float, bool, dict]]) -> ClaimResult:
    """items: (margin, ok, case) per sample; the worst case is the failing one with the
    smallest margin, else the smallest margin overall."""
    if not items:
        return ClaimResult(claim, 0, 0, 0, math.nan, {})
    bad = [it for it in items if not it[1]]
    pool = bad or items
    margin, _, case = min(pool, key=lambda it: it[0])
    return ClaimResult(claim, len(items), len(items) - len(bad), len(bad), margin,
                       {**case, "margin": margin})


def _cost(rec: dict[str, Any] | None) -> float | None:
    return None if rec is None else rec.get("cost_usd_per_mtok")


def verify_detailed(*, catalog, cards, models: Sequence[str] | None = None,
                    gpus: Sequence[str] = DEFAULT_GPUS,
                    contexts: Sequence[int] = DEFAULT_CONTEXTS, slo_s: float = 10.0,
                    out: str | Path = "results/verify-detailed", resume: bool = True,
                    progress: bool = True, grid: ServingGrid | None = None
                    ) -> dict[str, Any]:
    """Solve every (model, GPU type or pair, context) and check the D-claims; returns
    ``{"claims": [ClaimResult], "hom": [rows], "het": [rows]}``. ``grid``: the planner's
    search grid (None: the default limits, each instance's batches from memory)."""

    models = list(models) if models else cards.names()
    slo_ms = slo_s * 1e3
    singles = [ServingCell(m, (g,), s, slo_ms) for m in models for g in gpus for s in contexts]
    pairs = [ServingCell(m, pair, s, slo_ms) for m in models
             for pair in itertools.combinations(gpus, 2) for s in contexts]

    def solve_one(inst, method):
        return solve(inst, method, time_limit=600)

    recs: dict[tuple, dict[str, Any]] = {}
    for cells, methods in ((singles, ("col", "bnb")), (pairs, ("bnb",))):
        bar = Progress(len(cells) * len(methods)) if progress else None
        options = ServingSweepOptions(grid=grid, resume=resume, progress=bar)
        for rec, _ in run_serving_sweep(cells, methods, Path(out), solve_one, catalog=catalog,
                                        cards=cards, options=options):
            recs[(rec["model"], tuple(rec["gpus"]), rec["context"], rec["method"])] = rec

    hom_rows, het_rows = [], []
    items: dict[str, list] = {k: [] for k in DETAILED_CLAIMS}
    for m in models:
        card = cards[m]
        for g in gpus:
            dev = catalog.device(g)
            series = []
            for s in contexts:
                col = _cost(recs.get((m, (g,), s, "col")))
                best = _cost(recs.get((m, (g,), s, "bnb")))
                row: dict[str, Any] = {"model": m, "gpu": g, "context": s, "col": col,
                                       "best": best}
                if col is None or best is None:
                    row["note"] = "no feasible colocated plan" if best else "no feasible plan"
                    hom_rows.append(row)
                    continue
                gain = col / best
                col_rec = recs[(m, (g,), s, "col")]
                tp = col_rec["plan"]["owners"][0]["tp"]
                closed = hom_report(GpuGroup(dev, tp), card, s)
                row.update({"g_hom": gain, "tp": tp, "closed_g_hom": closed["gain"],
                            "limit": closed["gain_limit"], "b_bar": closed["b_bar"],
                            "b_star": closed["b_star"]})
                hom_rows.append(row)
                case = {"model": m, "gpu": g, "context": s, "g_hom": gain, "tp": tp,
                        "col": col, "best": best, "limit": closed["gain_limit"],
                        "b_bar": closed["b_bar"], "b_star": closed["b_star"]}
                items["D3.1a"].append((gain - 1, gain >= 1 - TOL, case))
                items["D3.1b"].append((closed["gain_limit"] - gain,
                                       gain < closed["gain_limit"], case))
                if closed["b_bar"] >= closed["b_star"]:
                    dev_ = abs(gain - 1)
                    items["D3.1c"].append((-dev_, dev_ <= TOL, case))
                series.append((s, gain, case))
            for (s0, g0, _), (s1, g1, c1) in zip(series, series[1:]):
                items["D3.1d"].append(((g1 - g0) / g0, g1 >= g0 * (1 - TOL),
                                       {**c1, "previous_context": s0, "previous_g_hom": g0}))
        for g1, g2 in itertools.combinations(gpus, 2):
            d1, d2 = catalog.device(g1), catalog.device(g2)
            e1, e2 = GpuGroup(d1).economics(), GpuGroup(d2).economics()
            eta = float(B.eta(e1.beta_bytes_per_s, e1.peak_flops, e2.beta_bytes_per_s,
                              e2.peak_flops))
            bound = float(B.gain_het_bound(eta))
            dominance = bool(B.dominates(e1.alpha, e1.gamma, e2.alpha, e2.gamma))
            for s in contexts:
                h1 = _cost(recs.get((m, (g1,), s, "bnb")))
                h2 = _cost(recs.get((m, (g2,), s, "bnb")))
                pair = _cost(recs.get((m, (g1, g2), s, "bnb")))
                homs = [h for h in (h1, h2) if h is not None]
                row = {"model": m, "gpus": f"{g1}+{g2}", "context": s, "hom1": h1, "hom2": h2,
                       "pair": pair, "eta": eta, "bound": bound, "dominance": dominance}
                if pair is None or not homs:
                    row["note"] = "no feasible plan on a single type" if pair else "no feasible plan"
                    het_rows.append(row)
                    continue
                gain = min(homs) / pair
                row["g_het"] = gain
                het_rows.append(row)
                case = {"model": m, "gpus": f"{g1}+{g2}", "context": s, "g_het": gain,
                        "eta": eta, "bound": bound, "best_hom": min(homs), "pair": pair,
                        "dominance": dominance}
                items["D3.2a"].append((gain - 1, gain >= 1 - TOL, case))
                if dominance:
                    dev_ = abs(gain - 1)
                    items["D3.2b"].append((-dev_, dev_ <= TOL, case))
                items["D3.2c"].append((bound - gain, gain <= bound * (1 + TOL), case))
    claims = [_summarise(k, v) for k, v in items.items()]
    return {"claims": claims, "hom": hom_rows, "het": het_rows,
            "structural_ok": all(c.ok for c in claims if c.claim in ("D3.1a", "D3.2a"))}


def worst_rows(rows: list[dict[str, Any]], key: str, limit_key: str, n: int = 5
               ) -> list[dict[str, Any]]:
    """The ``n`` rows where ``key`` exceeds ``limit_key`` the most (counterexamples first)."""
    have = [r for r in rows if r.get(key) is not None and r.get(limit_key) is not None]
    return sorted(have, key=lambda r: r[limit_key] - r[key])[:n]


__all__ = ["DETAILED_CLAIMS", "verify_detailed", "worst_rows"]
