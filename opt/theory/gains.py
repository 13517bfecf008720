"""OpWeave's closed-form gains evaluated for catalog GPUs and model cards (CLI and bench glue).

Inputs come from one place: prices, bandwidths, peaks and capacities from the hardware catalog,
KV/state bytes per request m_kv(s), active GEMM parameters P_act and resident weight bytes
M_weights from the model card. A group of ``gpus`` identical GPUs (tensor-parallel) is treated as
one device with ``gpus``× the memory, bandwidth, peak and price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.costlib.hardware import DeviceSpec
from opt.costlib.modelcard import ModelCard
from opt.placement.build_options import MAX_CONTEXT_TOKENS
from opt.theory import closed_forms as bounds

USD_PER_TOKEN_TO_PER_MTOK = 1e6


@dataclass(frozen=True)
class GpuGroup:
    """``gpus`` identical GPUs of ``device`` acting as one device (price in $/h per GPU)."""

    device: DeviceSpec
    gpus: int = 1
    price_usd_per_hour: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, Integral) or self.gpus < 1:
            raise InputError(f"a GPU group needs an integer number of GPUs ≥ 1, got "
                             f"{self.gpus!r}", field="--group-size")

    @property
    def price(self) -> float:
        price = self.price_usd_per_hour
        if price is None:
            price = self.device.price_usd_per_hour
        if price is None:
            raise InputError(f"GPU '{self.device.name}' has no published price; pass one "
                             f"(e.g. --price1/--price2 or --price in $ per GPU-hour)",
                             field="price_usd_per_hour")
        if not (math.isfinite(price) and price > 0):
            raise InputError(f"the price of GPU '{self.device.name}' must be a finite number "
                             f"of $ per GPU-hour > 0, got {price}", field="--price")
        return price

    def economics(self) -> bounds.GpuEconomics:
        if self.device.device_class != "gpu":
            raise InputError(f"device '{self.device.name}' is a {self.device.device_class}, "
                             f"not a GPU", field="gpu")
        return bounds.GpuEconomics.from_price_per_hour(
            f"{self.gpus}x{self.device.name}", self.price * self.gpus,
            self.device.mem_bw_bytes_per_s * self.gpus, self.device.peak_flops * self.gpus,
            (self.device.memory_bytes or math.inf) * self.gpus)


#: Default share of a group's memory that weights may take, leaving the rest for KV.
MAX_WEIGHT_FRACTION = 0.5


def min_gpus(device: DeviceSpec, card: ModelCard,
             max_weight_fraction: float = MAX_WEIGHT_FRACTION) -> int:
    """Smallest power-of-two GPU count whose memory holds the weights in at most
    ``max_weight_fraction`` of it (the rest is for KV; a nearly full group makes b̄ degenerate)."""
    g = 1
    while g <= 1024:
        if device.memory_bytes and card.weight_bytes() <= max_weight_fraction * g * device.memory_bytes:
            return g
        g *= 2
    raise InputError(f"model '{card.name}' does not fit on 1024 × {device.name}", field="gpus")


def context_for_kv(card: ModelCard, kv_bytes: float, kv_dtype: str | None = None) -> float:
    """Smallest context s (tokens, real-valued) with m_kv(s) ≥ ``kv_bytes``; nan if no context
    reaches it (beyond the growth, or below the fixed state a model holds at s = 0)."""
    if not np.isfinite(kv_bytes) or kv_bytes <= float(card.kv_bytes(0.0, kv_dtype)):
        return math.nan
    lo, hi = 0.0, 1.0
    while float(card.kv_bytes(hi, kv_dtype)) < kv_bytes:
        hi *= 2
        if hi > 1e12:
            return math.nan
    for _ in range(200):
        mid = (lo + hi) / 2
        if float(card.kv_bytes(mid, kv_dtype)) < kv_bytes:
            lo = mid
        else:
            hi = mid
    return hi


def check_context(context_tokens: float) -> float:
    """``context_tokens`` (the mean context s of ``--context``, tokens) when it is a finite
    number in (0, MAX_CONTEXT_TOKENS] (the placement builder's cap, 10 M tokens: beyond any
    model card's context window); an InputError naming ``--context`` and the value otherwise
    (not a derived field such as the KV bytes it gives)."""
    if isinstance(context_tokens, bool) or not isinstance(context_tokens, (int, float)) \
            or not math.isfinite(context_tokens) or not 0 < context_tokens <= MAX_CONTEXT_TOKENS:
        raise InputError(f"the mean context must be a finite number of tokens in (0, "
                         f"{MAX_CONTEXT_TOKENS:,}], got {context_tokens:g}"
                         if isinstance(context_tokens, (int, float)) else
                         f"the mean context must be a number of tokens, got {context_tokens!r}",
                         field="--context")
    return context_tokens


def hom_report(group: GpuGroup, card: ModelCard, context_tokens: float,
               kv_dtype: str | None = None) -> dict[str, Any]:
    """Theorem 3.1 quantities for one homogeneous GPU group, model and mean context."""
    check_context(context_tokens)
    e = group.economics()
    m_kv = float(card.kv_bytes(context_tokens, kv_dtype))
    w = card.weight_bytes()
    p_act = card.active_gemm_params()
    if w >= e.memory_bytes:
        raise InputError(f"model '{card.name}' weights ({w / 1e9:.1f} GB) do not fit in "
                         f"{group.gpus} × {group.device.name} ({e.memory_bytes / 1e9:.0f} GB); "
                         f"use more GPUs (--group-size)", field="--group-size")
    b_bar = float(bounds.batch_cap(e.memory_bytes, w, m_kv))
    b_star = float(bounds.critical_batch(w, e.peak_flops, p_act, e.beta_bytes_per_s))
    coloc = float(bounds.cpt_coloc(e.alpha, e.gamma, m_kv, p_act, e.memory_bytes, w))
    hom = float(bounds.cpt_hom(e.alpha, e.gamma, m_kv, p_act))
    return {
        "gpu": group.device.name, "gpus": group.gpus, "model": card.name,
        "context_tokens": context_tokens, "m_kv_bytes": m_kv, "weights_bytes": w,
        "p_act": p_act, "b_bar": b_bar, "b_star": b_star,
        "cpt_coloc_usd_per_mtok": coloc * USD_PER_TOKEN_TO_PER_MTOK,
        "cpt_hom_usd_per_mtok": hom * USD_PER_TOKEN_TO_PER_MTOK,
        "gain": coloc / hom,
        "gain_limit": float(bounds.gain_hom_limit(e.memory_bytes, w)),
        "memory_bound_regime": b_bar < b_star,
    }


def het_report(g1: GpuGroup, g2: GpuGroup, card: ModelCard | None = None,
               context_tokens: float | None = None, kv_dtype: str | None = None) -> dict[str, Any]:
    """Theorem 3.2 quantities for two GPU types; with a model (and context) also the crossing
    context where the two homogeneous costs meet (= the peak of G_het) and the gains there."""
    if context_tokens is not None:
        check_context(context_tokens)
    e1, e2 = g1.economics(), g2.economics()
    eta = float(bounds.eta(e1.beta_bytes_per_s, e1.peak_flops, e2.beta_bytes_per_s, e2.peak_flops))
    out: dict[str, Any] = {
        "gpu1": g1.device.name, "gpu2": g2.device.name, "eta": eta,
        "bound": float(bounds.gain_het_bound(eta)),
        "dominance": bool(bounds.dominates(e1.alpha, e1.gamma, e2.alpha, e2.gamma)),
        "peak_gain": float(bounds.peak_gain(e1.alpha, e1.gamma, e2.alpha, e2.gamma)),
    }
    if card is not None:
        p_act = card.active_gemm_params()
        x_star = float(bounds.peak_context_kv(e1.alpha, e1.gamma, e2.alpha, e2.gamma, p_act))
        out.update({"model": card.name, "p_act": p_act, "peak_m_kv_bytes": x_star,
                    "peak_context_tokens": context_for_kv(card, x_star, kv_dtype)})
        if context_tokens is not None:
            m_kv = float(card.kv_bytes(context_tokens, kv_dtype))
            out.update({"context_tokens": context_tokens, "m_kv_bytes": m_kv,
                        "gain": float(bounds.gain_het(e1.alpha, e1.gamma, e2.alpha, e2.gamma,
                                                      m_kv, p_act))})
    return out
