"""Numerical verification of OpWeave's closed-form theorems (problems.md §4) over wide sweeps.

:func:`verify_closed_forms` evaluates the vectorised closed forms of :mod:`opt.theory.closed_forms` on whole
grids at once — every ordered pair of catalog GPUs (catalog prices, 1 $/h where unpublished,
and a grid of price ratios c1/c2), ``samples`` random GPU types drawn log-uniformly, every
bundled model card and a log grid of contexts 1K…1M tokens — and checks each statement of
Theorems 3.1/3.2 and the CAD condition, one :class:`ClaimResult` per claim.

A claim's *margin* is its slack in the claim's own units (gain ratio, or relative change);
``margin > 0`` means it holds with room to spare, equalities report ``-|difference|``.
Equalities and non-strict inequalities pass within a relative float tolerance (``TOL`` for
quantities computed by the same monotone floating-point operations, ``TOL_CANCEL`` where the
closed form ``(rq-1)/(r+q-2)`` loses digits to cancellation as ``r + q -> 2``); strict
inequalities (T3.1b, T3.1d) must hold with margin > 0. ``worst_case`` is the sample with the
smallest margin among the failures if any, else overall.

This checks the *idealised* closed forms against themselves (continuous batches, peak
roofline, no fixed costs, linear KV growth, memory not binding), not a detailed cost model.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.theory import closed_forms as B
from opt.theory.gains import GpuGroup, min_gpus

__all__ = ["CLAIMS", "ClaimResult", "cad_feasibility", "verify_closed_forms"]

#: Relative tolerance for equalities/non-strict inequalities between values computed by the
#: same (monotone) floating-point operations.
TOL = 1e-12
#: Relative tolerance where the peak formula (rq-1)/(r+q-2) suffers cancellation (r+q ≈ 2).
TOL_CANCEL = 1e-9

#: Claim id -> one-line statement (CLI table, docs).
CLAIMS: dict[str, str] = {
    "T3.1a": "G_hom >= 1",
    "T3.1b": "G_hom < M/(M - M_w)",
    "T3.1c": "G_hom = 1 when b_bar >= b*",
    "T3.1d": "G_hom strictly increasing in s where b_bar < b*",
    "T3.2a": "G_het >= 1",
    "T3.2b": "G_het = 1 under dominance",
    "T3.2c": "G_het <= (1 + sqrt(eta))/2",
    "T3.2d": "G_het(x*) = (rq - 1)/(r + q - 2)",
    "T3.2e": "bound attained at c1/c2 = sqrt(b1 F1/(b2 F2))",
    "T3.2f": "G_het unimodal in x with peak at x*",
    "CAD": "cad_feasible == [M1/(mu b1) >= M_w2/b2]",
}

CONTEXTS = np.logspace(3, 6, 25)  # tokens, 1K .. 1M
PRICE_RATIOS = np.logspace(-1, 1, 9)  # c1/c2
MICROBATCHES = (1, 2, 4)
UNIMODAL_DECADES = 2.0  # dense x grid spans x* * 10^[-2, 2]
UNIMODAL_POINTS = 81  # per side, x* included at both ends

# random GPU types: log-uniform ranges (per GPU)
PRICE_RANGE = (0.1, 20.0)  # $/h
BW_RANGE = (1e11, 2e13)  # B/s
FLOPS_RANGE = (1e13, 1e16)  # FLOP/s
MEM_OVER_WEIGHTS = (1.01, 1000.0)  # M / M_w of a random group


@dataclass(frozen=True)
class ClaimResult:
    """Outcome of one claim over ``samples`` evaluated instances."""

    claim: str
    samples: int
    passed: int
    failed: int
    worst_margin: float
    worst_case: dict

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "statement": CLAIMS.get(self.claim, ""),
                "samples": self.samples, "passed": self.passed, "failed": self.failed,
                "worst_margin": self.worst_margin, "worst_case": self.worst_case}


# --------------------------------------------------------------------------------------------
# generic checking


def _py(v: Any) -> Any:
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    return v


class _Grid:
    """Labels for the axes of a broadcast sample array (for ``worst_case``)."""

    def __init__(self, axes: Sequence[tuple[str, Sequence[Any]]],
                 extras: Mapping[str, Any] | None = None):
        self.axes = list(axes)
        self.shape = tuple(len(v) for _, v in self.axes)
        self.extras = {k: np.broadcast_to(np.asarray(v), self.shape)
                       for k, v in (extras or {}).items()}

    def describe(self, flat: int) -> dict[str, Any]:
        idx = np.unravel_index(flat, self.shape)
        out: dict[str, Any] = {}
        for (name, values), i in zip(self.axes, idx):
            v = values[i]
            if isinstance(v, Mapping):
                out.update({k: _py(x) for k, x in v.items()})
            else:
                out[name] = _py(v)
        for k, arr in self.extras.items():
            out[k] = _py(arr[idx])
        return out


def _summarise(claim: str, margin: np.ndarray, ok: np.ndarray,
               describe: Callable[[int], dict], mask: np.ndarray | None = None) -> ClaimResult:
    """ClaimResult of the elements of ``margin``/``ok`` selected by ``mask`` (default: all)."""
    margin = np.asarray(margin, dtype=np.float64) + 0.0  # no -0.0
    ok = np.broadcast_to(np.asarray(ok, dtype=bool), margin.shape)
    sel = np.ones(margin.shape, bool) if mask is None else np.broadcast_to(mask, margin.shape)
    n = int(sel.sum())
    if n == 0:
        return ClaimResult(claim, 0, 0, 0, math.nan, {})
    bad = sel & ~ok
    pool = bad if bad.any() else sel
    m = np.where(pool, np.nan_to_num(margin, nan=-np.inf), np.inf)
    flat = int(np.argmin(m))
    case = describe(flat)
    case["margin"] = float(margin.flat[flat])
    n_bad = int(bad.sum())
    return ClaimResult(claim, n, n - n_bad, n_bad, float(margin.flat[flat]), case)


def check_at_least_one(claim: str, gain: np.ndarray,
                       describe: Callable[[int], dict] | None = None,
                       mask: np.ndarray | None = None) -> ClaimResult:
    """``gain >= 1`` (margin ``gain - 1``; exact: G >= 1 holds in floating point too)."""
    gain = np.asarray(gain, dtype=np.float64)
    describe = describe or (lambda i: {"index": i, "gain": float(gain.flat[i])})
    return _summarise(claim, gain - 1.0, gain >= 1.0, describe, mask)


def check_equals_one(claim: str, gain: np.ndarray, describe: Callable[[int], dict],
                     mask: np.ndarray | None = None) -> ClaimResult:
    """``gain == 1`` within ``TOL`` (margin ``-|gain - 1|``)."""
    dev = np.abs(np.asarray(gain, dtype=np.float64) - 1.0)
    return _summarise(claim, -dev, dev <= TOL, describe, mask)


# --------------------------------------------------------------------------------------------
# sweep inputs


def _log_uniform(rng: np.random.Generator, lo: float, hi: float, size) -> np.ndarray:
    return np.exp(rng.uniform(math.log(lo), math.log(hi), size))


@dataclass
class _Inputs:
    cards: list  # ModelCard
    card_names: list[str]
    m_w: np.ndarray  # (C,)
    p_act: np.ndarray  # (C,)
    x: np.ndarray  # (C, S) KV bytes per request
    catalog_gpus: list  # DeviceSpec


def _inputs() -> _Inputs:
    cards = list(bundled_cards())
    return _Inputs(
        cards=cards, card_names=[c.name for c in cards],
        m_w=np.array([c.weight_bytes() for c in cards], dtype=np.float64),
        p_act=np.array([c.active_gemm_params() for c in cards], dtype=np.float64),
        x=np.stack([np.asarray(c.kv_bytes(CONTEXTS), dtype=np.float64) for c in cards]),
        catalog_gpus=[d for d in bundled_catalog().gpus() if d.memory_bytes],
    )


def _price(dev) -> float:
    return dev.price_usd_per_hour if dev.price_usd_per_hour is not None else 1.0


# --------------------------------------------------------------------------------------------
# Theorem 3.1


def _verify_hom(inp: _Inputs, rng: np.random.Generator, samples: int) -> list[ClaimResult]:
    C = len(inp.cards)
    meta: list[dict] = []
    a_rows, g_rows, m_rows, bw_rows, f_rows = [], [], [], [], []
    for dev in inp.catalog_gpus:  # group sized by min_gpus per card; alpha/gamma are per-GPU
        groups = [GpuGroup(dev, min_gpus(dev, card), _price(dev)) for card in inp.cards]
        econ = [g.economics() for g in groups]
        a_rows.append([e.alpha for e in econ])
        g_rows.append([e.gamma for e in econ])
        m_rows.append([e.memory_bytes for e in econ])
        bw_rows.append([e.beta_bytes_per_s for e in econ])
        f_rows.append([e.peak_flops for e in econ])
        meta.append({"source": "catalog", "gpu": dev.name, "price_usd_per_hour": _price(dev)})
    n = samples
    c = _log_uniform(rng, *PRICE_RANGE, n) / 3600.0
    bw = _log_uniform(rng, *BW_RANGE, n)
    fl = _log_uniform(rng, *FLOPS_RANGE, n)
    mem = inp.m_w[None, :] * _log_uniform(rng, *MEM_OVER_WEIGHTS, (n, C))
    for i in range(n):
        meta.append({"source": "random", "gpu": f"rand{i}", "price_usd_per_hour": c[i] * 3600})
    a = np.concatenate([np.array(a_rows), np.repeat((c / bw)[:, None], C, 1)])[:, :, None]
    g = np.concatenate([np.array(g_rows), np.repeat((c / fl)[:, None], C, 1)])[:, :, None]
    M = np.concatenate([np.array(m_rows), mem])[:, :, None]
    BW = np.concatenate([np.array(bw_rows), np.repeat(bw[:, None], C, 1)])[:, :, None]
    FL = np.concatenate([np.array(f_rows), np.repeat(fl[:, None], C, 1)])[:, :, None]
    w = inp.m_w[None, :, None]
    p = inp.p_act[None, :, None]
    x = inp.x[None, :, :]

    G = B.gain_hom(a, g, x, p, M, w)
    lim = B.gain_hom_limit(M, w)
    b_bar = B.batch_cap(M, w, x)
    b_star = B.critical_batch(w, FL, p, BW)
    G, lim, b_bar, b_star = np.broadcast_arrays(G, lim, b_bar, b_star)
    membound = b_bar < b_star

    grid = _Grid([("gpu", meta), ("model", inp.card_names), ("context_tokens", CONTEXTS)],
                 {"memory_bytes": M, "weights_bytes": w, "m_kv_bytes": x, "p_act": p,
                  "b_bar": b_bar, "b_star": b_star, "G_hom": G, "limit": lim})
    out = [
        check_at_least_one("T3.1a", G, grid.describe),
        _summarise("T3.1b", (lim - G) / lim, G < lim, grid.describe),
        check_equals_one("T3.1c", G, grid.describe, mask=~membound),
    ]
    # T3.1d: consecutive contexts both memory-bound (and m_kv actually growing)
    rel = (G[..., 1:] - G[..., :-1]) / G[..., :-1]
    pair_mask = membound[..., 1:] & membound[..., :-1] & (x[..., 1:] > x[..., :-1])
    pairs = [{"context_from": float(s0), "context_to": float(s1)}
             for s0, s1 in zip(CONTEXTS[:-1], CONTEXTS[1:])]
    grid_d = _Grid([("gpu", meta), ("model", inp.card_names), ("contexts", pairs)],
                   {"memory_bytes": M, "weights_bytes": w, "G_from": G[..., :-1],
                    "G_to": G[..., 1:], "b_bar_to": b_bar[..., 1:], "b_star": b_star[..., 1:]})
    out.append(_summarise("T3.1d", rel, rel > 0, grid_d.describe, pair_mask))
    return out


# --------------------------------------------------------------------------------------------
# Theorem 3.2


def _het_pairs(inp: _Inputs, rng: np.random.Generator, samples: int):
    """Two-type samples (c1, b1, F1, c2, b2, F2) + labels: catalog ordered pairs at catalog
    prices and at every price ratio, then ``samples`` random pairs."""
    rows, meta = [], []
    for d1, d2 in itertools.permutations(inp.catalog_gpus, 2):
        settings = [("catalog", _price(d1), _price(d2))]
        settings += [(f"c1/c2={r:.4g}", float(r), 1.0) for r in PRICE_RATIOS]
        for label, c1, c2 in settings:
            rows.append((c1, d1.mem_bw_bytes_per_s, d1.peak_flops,
                         c2, d2.mem_bw_bytes_per_s, d2.peak_flops))
            meta.append({"source": "catalog", "gpu1": d1.name, "gpu2": d2.name, "prices": label,
                         "price1_usd_per_hour": c1, "price2_usd_per_hour": c2})
    n = samples
    rnd = np.stack([_log_uniform(rng, *PRICE_RANGE, n), _log_uniform(rng, *BW_RANGE, n),
                    _log_uniform(rng, *FLOPS_RANGE, n), _log_uniform(rng, *PRICE_RANGE, n),
                    _log_uniform(rng, *BW_RANGE, n), _log_uniform(rng, *FLOPS_RANGE, n)], 1)
    for i in range(n):
        meta.append({"source": "random", "gpu1": f"rand{i}a", "gpu2": f"rand{i}b",
                     "prices": "random", "price1_usd_per_hour": rnd[i, 0],
                     "price2_usd_per_hour": rnd[i, 3]})
    arr = np.concatenate([np.array(rows, dtype=np.float64).reshape(-1, 6), rnd])
    return arr, meta


def _unit_prices(c1, b1, f1, c2, b2, f2):
    c1, c2 = c1 / 3600.0, c2 / 3600.0
    return c1 / b1, c1 / f1, c2 / b2, c2 / f2


def _verify_het(inp: _Inputs, rng: np.random.Generator, samples: int) -> list[ClaimResult]:
    arr, meta = _het_pairs(inp, rng, samples)
    c1, b1, f1, c2, b2, f2 = (arr[:, k] for k in range(6))
    a1, g1, a2, g2 = _unit_prices(c1, b1, f1, c2, b2, f2)
    e = B.eta(b1, f1, b2, f2)
    bound = B.gain_het_bound(e)
    dom = B.dominates(a1, g1, a2, g2)
    col = (slice(None), None, None)
    G = B.gain_het(a1[col], g1[col], a2[col], g2[col], inp.x[None], inp.p_act[None, :, None])
    pair_x = {"eta": e[col], "bound": bound[col], "dominance": dom[col]}
    grid = _Grid([("pair", meta), ("model", inp.card_names), ("context_tokens", CONTEXTS)],
                 {**pair_x, "m_kv_bytes": inp.x[None], "p_act": inp.p_act[None, :, None],
                  "G_het": G})
    bnd = np.broadcast_to(bound[col], G.shape)
    out = [
        check_at_least_one("T3.2a", G, grid.describe),
        check_equals_one("T3.2b", G, grid.describe, mask=np.broadcast_to(dom[col], G.shape)),
        _summarise("T3.2c", bnd - G, G <= bnd * (1 + TOL), grid.describe),
    ]

    # T3.2d: value at x* equals the peak formula (non-dominated pairs, every card)
    col2 = (slice(None), None)
    p = inp.p_act[None, :]
    xs = B.peak_context_kv(a1[col2], g1[col2], a2[col2], g2[col2], p)
    nd = ~dom
    with np.errstate(invalid="ignore"):
        g_at = B.gain_het(a1[col2], g1[col2], a2[col2], g2[col2], np.where(nd[:, None], xs, 1.0),
                          p)
    pk = np.broadcast_to(B.peak_gain(a1, g1, a2, g2)[:, None], g_at.shape)
    diff = np.abs(g_at - pk)
    grid2 = _Grid([("pair", meta), ("model", inp.card_names)],
                  {"eta": e[:, None], "x_star_bytes": xs, "G_het_at_x_star": g_at,
                   "peak_gain": pk, "bound": bound[:, None]})
    out.append(_summarise("T3.2d", -diff, diff <= TOL_CANCEL * pk, grid2.describe,
                          np.broadcast_to(nd[:, None], diff.shape)))

    # T3.2e: at c1/c2 = w* the peak equals the bound (every pair's hardware, c2 = 1 $/h)
    hw = np.flatnonzero([m["source"] == "random" or m["prices"] == "catalog" for m in meta])
    hmeta = [{"source": meta[i]["source"], "gpu1": meta[i]["gpu1"], "gpu2": meta[i]["gpu2"]}
             for i in hw]
    tb1, tf1, tb2, tf2, te, tbound = b1[hw], f1[hw], b2[hw], f2[hw], e[hw], bound[hw]
    w_star = np.sqrt(tb1 * tf1 / (tb2 * tf2))
    ta1, tg1, ta2, tg2 = _unit_prices(w_star, tb1, tf1, np.ones_like(w_star), tb2, tf2)
    tdom = B.dominates(ta1, tg1, ta2, tg2)  # only when eta == 1 (then bound == 1 too)
    txs = B.peak_context_kv(ta1[col2], tg1[col2], ta2[col2], tg2[col2], p)
    t_g = B.gain_het(ta1[col2], tg1[col2], ta2[col2], tg2[col2],
                     np.where(np.isnan(txs), 1.0, txs), p)
    t_g = np.where(tdom[:, None], 1.0, t_g)
    tdiff = np.abs(t_g - tbound[:, None])
    tpk = B.peak_gain(ta1, tg1, ta2, tg2)
    grid3 = _Grid([("pair", hmeta), ("model", inp.card_names)],
                  {"eta": te[:, None], "price_ratio_w_star": w_star[:, None],
                   "x_star_bytes": txs, "G_het_at_x_star": t_g, "peak_gain": tpk[:, None],
                   "bound": tbound[:, None]})
    ok_e = ((tdiff <= TOL * tbound[:, None])
            & (np.abs(tpk - tbound)[:, None] <= TOL_CANCEL * tbound[:, None]))
    out.append(_summarise("T3.2e", -np.maximum(tdiff, np.abs(tpk - tbound)[:, None]), ok_e,
                          grid3.describe))

    # T3.2f: unimodal on a dense log grid around x* (non-dominated pairs, every card)
    k = np.logspace(-UNIMODAL_DECADES, 0.0, UNIMODAL_POINTS)
    ks = np.concatenate([k, 1.0 / k[::-1]])  # before: [x*/100 .. x*], after: [x* .. 100 x*]
    sel = np.flatnonzero(nd)
    col3 = (sel, None, None)
    xg = np.where(np.isnan(xs[sel]), 1.0, xs[sel])[:, :, None] * ks[None, None, :]
    Gx = B.gain_het(a1[col3], g1[col3], a2[col3], g2[col3], xg, p[:, :, None])
    K = UNIMODAL_POINTS
    up = np.diff(Gx[..., :K], axis=-1)  # must be >= 0 (before x*)
    down = -np.diff(Gx[..., K:], axis=-1)  # must be >= 0 (after x*)
    steps = np.concatenate([up, down], axis=-1)  # gain units
    labels = ([{"side": "before x*", "x_over_x_star_from": float(ks[i]),
                "x_over_x_star_to": float(ks[i + 1])} for i in range(K - 1)]
              + [{"side": "after x*", "x_over_x_star_from": float(ks[K + i]),
                  "x_over_x_star_to": float(ks[K + i + 1])} for i in range(K - 1)])
    grid4 = _Grid([("pair", [meta[i] for i in sel]), ("model", inp.card_names),
                   ("step", labels)],
                  {"eta": e[sel, None, None], "x_star_bytes": xs[sel][:, :, None],
                   "G_het_at_x_star": Gx[..., K - 1:K]})
    out.append(_summarise("T3.2f", steps, steps >= -TOL, grid4.describe))
    return out


# --------------------------------------------------------------------------------------------
# CAD


def _cad_arrays(inp: _Inputs):
    """Catalog ordered pairs (attention type 1, dense type 2) × cards, groups by min_gpus."""
    pairs = list(itertools.permutations(inp.catalog_gpus, 2))
    C = len(inp.cards)
    m1 = np.empty((len(pairs), C))
    bw1 = np.empty_like(m1)
    bw2 = np.empty_like(m1)
    n1 = np.empty_like(m1, dtype=int)
    n2 = np.empty_like(n1)
    for i, (d1, d2) in enumerate(pairs):
        for j, card in enumerate(inp.cards):
            n1[i, j], n2[i, j] = min_gpus(d1, card), min_gpus(d2, card)
            m1[i, j] = n1[i, j] * d1.memory_bytes
            bw1[i, j] = n1[i, j] * d1.mem_bw_bytes_per_s
            bw2[i, j] = n2[i, j] * d2.mem_bw_bytes_per_s
    return pairs, m1, bw1, bw2, n1, n2


def _verify_cad(inp: _Inputs, rng: np.random.Generator, samples: int) -> ClaimResult:
    pairs, m1, bw1, bw2, _, _ = _cad_arrays(inp)
    mu = np.array(MICROBATCHES, dtype=np.float64)
    w2 = inp.m_w
    # catalog part (P, C, U) + random part (samples, C, U)
    n = samples
    r_bw1 = _log_uniform(rng, *BW_RANGE, (n, 1))
    r_bw2 = _log_uniform(rng, *BW_RANGE, (n, 1))
    r_m1 = w2[None, :] * _log_uniform(rng, *MEM_OVER_WEIGHTS, (n, len(w2)))
    M1 = np.concatenate([m1, r_m1])[:, :, None]
    B1 = np.concatenate([bw1, np.broadcast_to(r_bw1, r_m1.shape)])[:, :, None]
    B2 = np.concatenate([bw2, np.broadcast_to(r_bw2, r_m1.shape)])[:, :, None]
    W2 = w2[None, :, None]
    MU = mu[None, None, :]
    got = np.asarray(B.cad_feasible(M1, MU, B1, W2, B2))
    lhs, rhs = M1 / (MU * B1), W2 / B2
    direct = lhs >= rhs
    lhs, rhs = np.broadcast_arrays(lhs, rhs)
    agree = got == direct
    margin = np.where(agree, np.abs(lhs / rhs - 1.0), -1.0)
    meta = [{"source": "catalog", "attention_gpu": a.name, "dense_gpu": d.name}
            for a, d in pairs] + [{"source": "random", "attention_gpu": f"rand{i}a",
                                   "dense_gpu": f"rand{i}b"} for i in range(n)]
    grid = _Grid([("pair", meta), ("model", inp.card_names), ("microbatches", list(MICROBATCHES))],
                 {"memory_1_bytes": M1, "beta_1": B1, "weights_2_bytes": W2, "beta_2": B2,
                  "lhs_s": lhs, "rhs_s": rhs, "cad_feasible": got, "direct": direct})
    return _summarise("CAD", margin, agree, grid.describe)


def cad_feasibility() -> list[dict[str, Any]]:
    """Informational: per model card and ordered catalog GPU pair (attention GPU, dense GPU,
    groups sized by ``min_gpus``), whether CAD is feasible for each μ in ``MICROBATCHES``,
    with the time ratio ``(M_1/β_1) / (M_w2/β_2)`` (feasible for μ up to that ratio)."""
    inp = _inputs()
    pairs, m1, bw1, bw2, n1, n2 = _cad_arrays(inp)
    rows = []
    for j, card in enumerate(inp.cards):
        for i, (d1, d2) in enumerate(pairs):
            ratio = (m1[i, j] / bw1[i, j]) / (inp.m_w[j] / bw2[i, j])
            row = {"model": card.name, "attention_gpu": d1.name, "attention_gpus": int(n1[i, j]),
                   "dense_gpu": d2.name, "dense_gpus": int(n2[i, j]), "time_ratio": float(ratio)}
            for mu in MICROBATCHES:
                row[f"feasible_mu{mu}"] = bool(B.cad_feasible(m1[i, j], mu, bw1[i, j],
                                                              inp.m_w[j], bw2[i, j]))
            rows.append(row)
    return rows


def cad_feasibility_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per model: share of ordered catalog GPU pairs where CAD is feasible, per μ."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = out.setdefault(r["model"], {"model": r["model"], "pairs": 0,
                                        **{f"feasible_mu{mu}": 0 for mu in MICROBATCHES}})
        s["pairs"] += 1
        for mu in MICROBATCHES:
            s[f"feasible_mu{mu}"] += int(r[f"feasible_mu{mu}"])
    return list(out.values())


# --------------------------------------------------------------------------------------------


def verify_closed_forms(*, samples: int = 2000, seed: int = 0) -> list[ClaimResult]:
    """Check every claim of problems.md §4 over the sweep; one :class:`ClaimResult` per claim, in the
    order of :data:`CLAIMS`. ``samples`` random GPU types (and random pairs) are drawn with a
    ``numpy`` Generator seeded by ``seed``."""
    if samples < 0:
        raise InputError(f"must be >= 0 (got {samples})", field="samples")
    rng = np.random.default_rng(seed)
    inp = _inputs()
    results = _verify_hom(inp, rng, samples) + _verify_het(inp, rng, samples)
    results.append(_verify_cad(inp, rng, samples))
    return results
