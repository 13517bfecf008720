"""Plots of OpWeave's closed-form gain curves (problems.md §4; OpWeave Figs. 4 and 5) and CAD regions.

Three figures, each written to a PNG file (non-interactive "Agg" backend):

* :func:`plot_hom_gain` — Theorem 3.1: G_hom = CPT_coloc / CPT_hom versus mean context length
  for each model on a ``min_gpus``-sized group of one GPU type, with the limit M/(M − M_w)
  (dashed) and the context where b̄ = b* (below it G_hom = 1).
* :func:`plot_het_gain` — Theorem 3.2: G_het versus mean context for two GPU types, with the
  price-free bound (1 + √η)/2 and the peak at x* = m_kv(s*).
* :func:`plot_cad_regions` — CAD feasibility M_1/(μ·β_1) ≥ M_w2/β_2 as heat maps over ordered
  (attention GPU, dense GPU) pairs × models, one panel per μ ∈ {1, 2, 4}.

matplotlib is an optional dependency (``pip install 'hetopt[plot]'``); it is imported inside the
functions, so importing this module never needs it. Every function returns a small dict of the
numbers it drew (path, peaks, limits) for the CLI and tests; each ``plot_*`` writes the figure
that its ``figure_*`` twin builds and returns (a :class:`matplotlib.figure.Figure` with those
numbers, for tests to inspect; the caller closes it). Inputs default to the bundled
catalog and model cards; pass ``catalog`` / ``cards`` to use others.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.theory import closed_forms as B
from opt.theory.gains import GpuGroup, context_for_kv, min_gpus

__all__ = ["DEFAULT_CONTEXTS", "DPI", "MICROBATCHES", "figure_cad_regions", "figure_het_gain",
           "figure_hom_gain", "plot_cad_regions", "plot_het_gain", "plot_hom_gain",
           "tight_price2"]

#: Default context grid, tokens (1K … 1M, log-spaced).
DEFAULT_CONTEXTS = np.logspace(3, 6, 121)
#: Microbatch counts of the CAD panels.
MICROBATCHES = (1, 2, 4)
#: Resolution of the written PNGs.
DPI = 100


def _pyplot():
    """matplotlib.pyplot on the Agg backend, or a clear InputError when it is not installed."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise InputError("plotting needs matplotlib; install it with "
                         "pip install 'hetopt[plot]'", field="matplotlib") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _inputs(catalog, cards):
    if catalog is None:
        catalog = bundled_catalog()
    if cards is None:
        cards = bundled_cards()
    return catalog, cards


def _save(fig, path: str | Path) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def _fmt_tokens(s: float) -> str:
    if not np.isfinite(s):
        return "n/a"
    if s >= 1e6:
        return f"{s / 1e6:.3g}M"
    if s >= 1e3:
        return f"{s / 1e3:.3g}K"
    return f"{s:.3g}"


# --------------------------------------------------------------------------------------------
# Theorem 3.1


def plot_hom_gain(path: str | Path, gpu: str = "H100",
                  models: Sequence[str] = ("qwen3-235b-a22b", "gpt-oss-120b"),
                  contexts: Sequence[float] | None = None, *, catalog=None,
                  cards=None) -> dict[str, Any]:
    """:func:`figure_hom_gain` written to ``path`` (PNG); returns its numbers and the path."""
    fig, info = figure_hom_gain(gpu, models, contexts, catalog=catalog, cards=cards)
    return {"path": _save(fig, path), **info}


def figure_hom_gain(gpu: str = "H100",
                    models: Sequence[str] = ("qwen3-235b-a22b", "gpt-oss-120b"),
                    contexts: Sequence[float] | None = None, *, catalog=None,
                    cards=None) -> tuple[Any, dict[str, Any]]:
    """G_hom versus mean context (log x) per model on a ``min_gpus``-sized ``gpu`` group.

    Dashed line: the limit M/(M − M_w); dotted vertical line and marker: the context where
    b̄(s) = b* (G_hom = 1 to its left). G_hom does not depend on the price (it cancels), so
    GPUs without a catalog price are plotted at 1 $/h. Returns the matplotlib Figure and the
    per-model numbers.
    """
    plt = _pyplot()
    catalog, cards = _inputs(catalog, cards)
    s = np.asarray(DEFAULT_CONTEXTS if contexts is None else contexts, dtype=np.float64)
    if s.ndim != 1 or s.size < 2 or not (s > 0).all():
        raise InputError("need at least two contexts > 0", field="contexts")
    dev = catalog.device(gpu)
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    out: dict[str, Any] = {"gpu": dev.name, "models": []}
    for i, name in enumerate(models):
        card = cards[name]
        n = min_gpus(dev, card)
        e = GpuGroup(dev, n, dev.price_usd_per_hour or 1.0).economics()
        w, p = card.weight_bytes(), card.active_gemm_params()
        x = np.asarray(card.kv_bytes(s), dtype=np.float64)
        g = np.asarray(B.gain_hom(e.alpha, e.gamma, x, p, e.memory_bytes, w))
        lim = float(B.gain_hom_limit(e.memory_bytes, w))
        b_star = float(B.critical_batch(w, e.peak_flops, p, e.beta_bytes_per_s))
        s_star = context_for_kv(card, (e.memory_bytes - w) / b_star)
        c = colors[i % len(colors)]
        ax.plot(s, g, color=c, lw=2, label=f"{card.name} ({n}×{dev.name})")
        ax.axhline(lim, color=c, ls="--", lw=1.2,
                   label=f"{card.name} limit M/(M−M_w) = {lim:.3f}")
        if np.isfinite(s_star) and s[0] <= s_star <= s[-1]:
            ax.axvline(s_star, color=c, ls=":", lw=1)
            ax.plot([s_star], [1.0], "o", color=c, ms=6,
                    label=f"{card.name} b̄ = b* at s = {_fmt_tokens(s_star)}")
        out["models"].append({"model": card.name, "gpus": n, "limit": lim, "b_star": b_star,
                              "context_b_bar_eq_b_star": s_star,
                              "gain_at_max_context": float(g[-1])})
    ax.set_xscale("log")
    ax.set_xlabel("mean context length s (tokens)")
    ax.set_ylabel("G_hom = CPT_coloc / CPT_hom  (×)")
    ax.set_title(f"Homogeneous disaggregation gain on {dev.name} (Theorem 3.1)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig, out


# --------------------------------------------------------------------------------------------
# Theorem 3.2


def tight_price2(dev1, price1: float, dev2) -> float:
    """The price of ``dev2`` ($/GPU-h) at which G_het reaches its bound (1 + √η)/2:
    c1/c2 = w* = sqrt(β1·F1/(β2·F2)), i.e. ``c2 = c1 / w*``."""
    w_star = math.sqrt(dev1.mem_bw_bytes_per_s * dev1.peak_flops
                       / (dev2.mem_bw_bytes_per_s * dev2.peak_flops))
    return price1 / w_star


def plot_het_gain(path: str | Path, gpu1: str = "H100", gpu2: str = "H20",
                  model: str = "qwen3-235b-a22b", price2: float | None = None,
                  contexts: Sequence[float] | None = None, *, price1: float | None = None,
                  catalog=None, cards=None) -> dict[str, Any]:
    """:func:`figure_het_gain` written to ``path`` (PNG); returns its numbers and the path."""
    fig, info = figure_het_gain(gpu1, gpu2, model, price2, contexts, price1=price1,
                                catalog=catalog, cards=cards)
    return {"path": _save(fig, path), **info}


def figure_het_gain(gpu1: str = "H100", gpu2: str = "H20", model: str = "qwen3-235b-a22b",
                    price2: float | None = None, contexts: Sequence[float] | None = None, *,
                    price1: float | None = None, catalog=None,
                    cards=None) -> tuple[Any, dict[str, Any]]:
    """G_het versus mean context (log x) for two GPU types with the bound (1 + √η)/2 and the
    peak at x* marked.

    Prices in $ per GPU-hour. ``price1`` defaults to ``gpu1``'s catalog price. ``price2``
    defaults to the catalog price of ``gpu2``, or — when the catalog has none (H20) — to the
    *tight* price :func:`tight_price2` (c1/c2 = sqrt(β1F1/(β2F2))), at which the peak equals
    the bound; the title says which. The context axis is widened to include the peak.
    """
    plt = _pyplot()
    catalog, cards = _inputs(catalog, cards)
    d1, d2 = catalog.device(gpu1), catalog.device(gpu2)
    card = cards[model]
    c1 = price1 if price1 is not None else d1.price_usd_per_hour
    if c1 is None:
        raise InputError(f"GPU '{d1.name}' has no published price; pass price1",
                         field="price1")
    if price2 is not None:
        c2, price_note = float(price2), f"{d2.name} at {float(price2):.2f} $/h (user)"
    elif d2.price_usd_per_hour is not None:
        c2, price_note = d2.price_usd_per_hour, f"{d2.name} at {d2.price_usd_per_hour:.2f} $/h"
    else:
        c2 = tight_price2(d1, c1, d2)
        price_note = (f"{d2.name} priced at {c2:.2f} $/h (assumed: tight case "
                      f"c1/c2 = √(β1F1/β2F2))")
    for name, v in (("price1", c1), ("price2", c2)):
        if not (v > 0 and np.isfinite(v)):
            raise InputError(f"must be a finite number > 0 (got {v!r})", field=name)
    e1 = GpuGroup(d1, 1, c1).economics()
    e2 = GpuGroup(d2, 1, c2).economics()
    p = card.active_gemm_params()
    eta = float(B.eta(e1.beta_bytes_per_s, e1.peak_flops, e2.beta_bytes_per_s, e2.peak_flops))
    bound = float(B.gain_het_bound(eta))
    dominated = bool(B.dominates(e1.alpha, e1.gamma, e2.alpha, e2.gamma))
    x_star = float(B.peak_context_kv(e1.alpha, e1.gamma, e2.alpha, e2.gamma, p))
    peak = float(B.peak_gain(e1.alpha, e1.gamma, e2.alpha, e2.gamma))
    s_star = context_for_kv(card, x_star) if np.isfinite(x_star) else math.nan

    if contexts is None:
        lo, hi = 1e3, 1e6
        if np.isfinite(s_star):
            lo, hi = min(lo, s_star / 10), max(hi, s_star * 10)
        s = np.logspace(np.log10(lo), np.log10(hi), 161)
    else:
        s = np.asarray(contexts, dtype=np.float64)
    x = np.asarray(card.kv_bytes(s), dtype=np.float64)
    g = np.asarray(B.gain_het(e1.alpha, e1.gamma, e2.alpha, e2.gamma, x, p))

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    ax.plot(s, g, lw=2, color="C0", label=f"G_het, {card.name}")
    ax.axhline(bound, color="C3", ls="--", lw=1.2,
               label=f"bound (1+√η)/2 = {bound:.3f}  (η = {eta:.2f})")
    if np.isfinite(s_star):
        ax.axvline(s_star, color="C2", ls=":", lw=1)
        ax.plot([s_star], [peak], "o", color="C2", ms=7,
                label=f"peak {peak:.3f} at s* = {_fmt_tokens(s_star)} tokens "
                      f"(x* = {x_star / 1e9:.3g} GB)")
    ax.set_xscale("log")
    ax.set_ylim(0.95, max(bound, float(np.nanmax(g))) * 1.05)
    ax.set_xlabel("mean context length s (tokens)")
    ax.set_ylabel("G_het = min_j CPT_hom,j / min_jk CPT_het,jk  (×)")
    ax.set_title(f"Heterogeneous gain {d1.name} ({c1:.2f} $/h) + {d2.name} (Theorem 3.2)\n"
                 f"{price_note}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower center")
    fig.tight_layout()
    return fig, {"gpu1": d1.name, "gpu2": d2.name, "model": card.name,
            "price1_usd_per_hour": c1, "price2_usd_per_hour": c2,
            "price2_assumed_tight": price2 is None and d2.price_usd_per_hour is None,
            "eta": eta, "bound": bound, "dominance": dominated, "peak_gain": peak,
            "peak_m_kv_bytes": x_star, "peak_context_tokens": s_star,
            "max_gain_plotted": float(np.nanmax(g))}


# --------------------------------------------------------------------------------------------
# CAD feasibility


def plot_cad_regions(path: str | Path, models: Sequence[str] | None = None,
                     pairs: Sequence[tuple[str, str]] | None = None,
                     microbatches: Sequence[int] = MICROBATCHES, *, catalog=None,
                     cards=None) -> dict[str, Any]:
    """:func:`figure_cad_regions` written to ``path`` (PNG); returns its numbers and the
    path."""
    fig, info = figure_cad_regions(models, pairs, microbatches, catalog=catalog, cards=cards)
    return {"path": _save(fig, path), **info}


def figure_cad_regions(models: Sequence[str] | None = None,
                       pairs: Sequence[tuple[str, str]] | None = None,
                       microbatches: Sequence[int] = MICROBATCHES, *, catalog=None,
                       cards=None) -> tuple[Any, dict[str, Any]]:
    """CAD feasibility M_1/(μ·β_1) ≥ M_w2/β_2 over (attention GPU, dense GPU) pairs × models,
    one heat-map panel per μ.

    Each GPU is a ``min_gpus``-sized group (as in ``hetopt theory verify``); M_1 and β_1 are the
    attention group's memory and bandwidth, M_w2 the model's weights, β_2 the dense group's
    bandwidth. Cell colour = (M_1/β_1)/(μ·M_w2/β_2) on a log scale centred at 1 (green ≥ 1:
    feasible); infeasible cells carry an ×. Defaults: every bundled card and every ordered pair
    of catalog GPUs with a known memory size.
    """
    plt = _pyplot()
    from matplotlib.colors import TwoSlopeNorm

    catalog, cards = _inputs(catalog, cards)
    card_list = [cards[m] for m in models] if models is not None else list(cards)
    if pairs is None:
        gpus = [d for d in catalog.gpus() if d.memory_bytes]
        pair_devs = list(itertools.permutations(gpus, 2))
    else:
        pair_devs = [(catalog.device(a), catalog.device(d)) for a, d in pairs]
    if not card_list or not pair_devs:
        raise InputError("need at least one model and one GPU pair", field="models")
    ratio = np.empty((len(pair_devs), len(card_list)))
    for i, (d1, d2) in enumerate(pair_devs):
        for j, card in enumerate(card_list):
            n1, n2 = min_gpus(d1, card), min_gpus(d2, card)
            m1, b1 = n1 * d1.memory_bytes, n1 * d1.mem_bw_bytes_per_s
            b2 = n2 * d2.mem_bw_bytes_per_s
            ratio[i, j] = (m1 / b1) / (card.weight_bytes() / b2)
    mus = [int(m) for m in microbatches]
    ylabels = [f"{a.name} → {d.name}" for a, d in pair_devs]
    xlabels = [c.name for c in card_list]
    fig, axes = plt.subplots(1, len(mus), sharey=True,
                             figsize=(2.0 + 0.34 * len(xlabels) * len(mus),
                                      1.8 + 0.26 * len(ylabels)), squeeze=False)
    norm = TwoSlopeNorm(vmin=-3.0, vcenter=0.0, vmax=3.0)  # log2 of slack, clipped ±3
    feasible_counts = {}
    im = None
    for ax, mu in zip(axes[0], mus):
        slack = np.log2(ratio / mu)
        feas = ratio / mu >= 1.0
        feasible_counts[mu] = int(feas.sum())
        im = ax.imshow(np.clip(slack, -3, 3), cmap="RdYlGn", norm=norm, aspect="auto")
        for i, j in zip(*np.nonzero(~feas)):
            ax.text(j, i, "×", ha="center", va="center", fontsize=7, color="black")
        ax.set_title(f"μ = {mu}: {feas.sum()}/{feas.size} feasible", fontsize=10)
        ax.set_xticks(range(len(xlabels)))
        ax.set_xticklabels(xlabels, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(ylabels)))
        ax.set_yticklabels(ylabels, fontsize=7)
        ax.set_xlabel("model")
    axes[0][0].set_ylabel("attention GPU → dense GPU (groups by min_gpus)")
    fig.suptitle("CAD feasibility  M₁/(μ·β₁) ≥ M_w2/β₂   (× = infeasible)", fontsize=11)
    fig.tight_layout()
    cb = fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, pad=0.01)
    cb.set_label("log₂[(M₁/β₁) / (μ·M_w2/β₂)]  (≥ 0 feasible)", fontsize=8)
    return fig, {"models": xlabels, "pairs": ylabels,
            "cells_per_panel": int(ratio.size),
            "feasible": {f"mu{mu}": feasible_counts[mu] for mu in mus}}
