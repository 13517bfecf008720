"""Latency models of the cost library (problems.md §5): one object per device kind, all vectorised.

- :class:`LogisticRoofline` — DOPS' calibrated roofline for the NPU (Ascend 910B) and the PIM
  device (SK hynix AiM): ``τ = slowdown[c]·max(f/(P·max(u(f), ε_u)), m/B) + τ_kernel[c]`` with a
  logistic utilisation ``u(f)`` in log10 FLOPs. On the NPU ``slowdown`` is 1 and ``τ_kernel`` holds
  the per-class kernel overheads; on the PIM ``τ_kernel`` is 0 and ``slowdown`` holds the
  per-class factors calibrated against DOPS' trace figures.
- :class:`EfficiencyRoofline` — GPUs: ``τ = t0 + max(f/(η_c·F), m/(η_m·β))``.
- :class:`Link` — ``latency + bytes/bandwidth`` and the collectives built on it.

Op classes (``OP_CLASSES``): gemm (dense projections, GEMV in decode), attention (qk/sv over the
KV cache with T_q > 1 — the prefill regime —, linear-attention recurrences), attention_decode
(qk/sv of a decode step, T_q = 1: one GEMV per sequence and head over its KV cache; an op keeps
its class ``attention`` and :func:`regime_class` picks this one for the latency), norm, activation, elementwise (adds, KV writes, gathers,
gates, combine), softmax, router (MoE gate GEMM + top-k), collective (TP reductions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opt.common.errors import InputError

OP_CLASSES = ("gemm", "attention", "attention_decode", "norm", "activation", "elementwise",
              "softmax", "router", "collective")

EPS_U = 1e-6  #: utilisation floor ε_u of problems.md §5.1


def regime_class(op_class: str, decode: bool) -> str:
    """The latency class of an op of ``op_class`` in a step with T_q = 1 (``decode``) or
    T_q > 1: attention in decode is the GEMV regime ``attention_decode`` (problems.md §5.2),
    every other class is the same in both regimes."""
    return "attention_decode" if decode and op_class == "attention" else op_class


def _check_classes(mapping: Mapping[str, float], what: str, source: str | None) -> None:
    for key, value in mapping.items():
        if key not in OP_CLASSES:
            raise InputError(f"unknown op class '{key}' in {what}; known: {', '.join(OP_CLASSES)}",
                             source=source, field=what)
        if not float(value) >= 0:
            raise InputError(f"{what}['{key}'] must be ≥ 0, got {value!r}", source=source,
                             field=what)


@dataclass(frozen=True)
class LogisticRoofline:
    """Calibrated roofline with logistic utilisation (DOPS, problems.md §5.1/§5.2).

    peak_flops: P in FLOP/s; mem_bw_bytes_per_s: B; utilisation u(f) rises from ``u_min`` to
    ``u_max`` around ``knee_flops`` with steepness ``slope`` per decade of FLOPs, clamped to
    ``u_min`` for f ≤ f_low_flops and ``u_max`` for f ≥ f_high_flops.
    kernel_overhead_s: added per op class (seconds); slowdown: multiplies the roofline per class.
    """

    peak_flops: float
    mem_bw_bytes_per_s: float
    u_min: float
    u_max: float
    knee_flops: float
    slope: float
    f_low_flops: float
    f_high_flops: float
    kernel_overhead_s: Mapping[str, float] = field(default_factory=dict)
    slowdown: Mapping[str, float] = field(default_factory=dict)
    source: str = ""

    kind = "logistic_roofline"

    def utilisation(self, flops):
        """u(f) in [u_min, u_max] for FLOP counts ``flops`` (scalar or array)."""
        f = np.asarray(flops, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):
            z = -self.slope * (np.log10(np.maximum(f, 1e-300)) - np.log10(self.knee_flops))
            u = self.u_min + (self.u_max - self.u_min) / (1.0 + np.exp(z))
        u = np.where(f <= self.f_low_flops, self.u_min, u)
        u = np.where(f >= self.f_high_flops, self.u_max, u)
        return u

    def roofline_s(self, flops, bytes_):
        """The bare calibrated roofline max(f/(P·u), m/B) in seconds, no overhead or slowdown."""
        f = np.asarray(flops, dtype=np.float64)
        m = np.asarray(bytes_, dtype=np.float64)
        compute = f / (self.peak_flops * np.maximum(self.utilisation(f), EPS_U))
        return np.maximum(compute, m / self.mem_bw_bytes_per_s)

    def latency_s(self, op_class: str, flops, bytes_):
        """Latency in seconds of an op of ``op_class`` doing ``flops`` FLOPs over ``bytes_`` bytes."""
        t = self.roofline_s(flops, bytes_) * self.slowdown.get(op_class, 1.0)
        return t + self.kernel_overhead_s.get(op_class, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "peak_flops": self.peak_flops,
                "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s, "u_min": self.u_min,
                "u_max": self.u_max, "knee_flops": self.knee_flops, "slope": self.slope,
                "f_low_flops": self.f_low_flops, "f_high_flops": self.f_high_flops,
                "kernel_overhead_s": dict(self.kernel_overhead_s),
                "slowdown": dict(self.slowdown), "source": self.source}


@dataclass(frozen=True)
class EfficiencyRoofline:
    """GPU roofline with compute/memory efficiencies and a fixed launch cost (problems.md §5.3).

    τ = t0_s + max(f/(eta_c·peak_flops), m/(eta_m·mem_bw_bytes_per_s)).
    """

    peak_flops: float
    mem_bw_bytes_per_s: float
    eta_c: float
    eta_m: float
    t0_s: float
    source: str = ""

    kind = "efficiency_roofline"

    def latency_s(self, op_class: str, flops, bytes_):
        """Latency in seconds (``op_class`` does not change the GPU model)."""
        f = np.asarray(flops, dtype=np.float64)
        m = np.asarray(bytes_, dtype=np.float64)
        return self.t0_s + np.maximum(f / (self.eta_c * self.peak_flops),
                                      m / (self.eta_m * self.mem_bw_bytes_per_s))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "eta_c": self.eta_c, "eta_m": self.eta_m, "t0_s": self.t0_s,
                "source": self.source}


LatencyModel = LogisticRoofline | EfficiencyRoofline


@dataclass(frozen=True)
class Link:
    """A point-to-point link: ``latency_s + bytes / bandwidth_bytes_per_s`` per transfer."""

    latency_s: float
    bandwidth_bytes_per_s: float
    source: str = ""

    def transfer_s(self, bytes_):
        """Seconds to move ``bytes_`` (0 bytes still pays nothing: no transfer happens)."""
        b = np.asarray(bytes_, dtype=np.float64)
        return np.where(b > 0, self.latency_s + b / self.bandwidth_bytes_per_s, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"latency_s": self.latency_s, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
                "source": self.source}


#: Fixed software cost of one collective call (problems.md §5.3 ring all-reduce formula).
COLLECTIVE_OVERHEAD_S = 5e-6


def ring_allreduce_s(bytes_, group: int, link: Link):
    """Ring all-reduce of ``bytes_`` over ``group`` peers on a fully connected fabric (problems.md §5.3).

    ``5 µs + 2(g−1)·latency + 2(g−1)/g · bytes / bandwidth``; 0 for a group of one.
    """
    g = np.asarray(group, dtype=np.float64)
    b = np.asarray(bytes_, dtype=np.float64)
    t = (COLLECTIVE_OVERHEAD_S + 2.0 * (g - 1.0) * link.latency_s
         + 2.0 * (g - 1.0) / g * b / link.bandwidth_bytes_per_s)
    return np.where(g > 1, t, 0.0)


def star_allreduce_s(bytes_, group: int, link: Link):
    """All-reduce through a host on a star: every peer sends its partial up its own link in
    parallel, the host reduces, and broadcasts down the links in parallel.

    ``5 µs + 2·(latency + bytes/bandwidth)``; 0 for a group of one. (Host reduction time is
    neglected: it is a vector add over ``bytes_``, far below the link time at PCIe rates.)
    """
    g = np.asarray(group, dtype=np.float64)
    b = np.asarray(bytes_, dtype=np.float64)
    t = COLLECTIVE_OVERHEAD_S + 2.0 * (link.latency_s + b / link.bandwidth_bytes_per_s)
    return np.where(g > 1, t, 0.0)


def latency_model_from_dict(d: Mapping[str, Any], *, peak_flops: float, mem_bw_bytes_per_s: float,
                            source: str | None, field_path: str) -> LatencyModel | None:
    """Build a latency model from its JSON form (``None`` → device without compute model)."""
    if d is None:
        return None
    if not isinstance(d, Mapping):
        raise InputError(f"expected an object, got {d!r}", source=source, field=field_path)
    kind = d.get("type")
    try:
        if kind == LogisticRoofline.kind:
            overhead = dict(d.get("kernel_overhead_s", {}))
            slowdown = dict(d.get("slowdown", {}))
            _check_classes(overhead, f"{field_path}.kernel_overhead_s", source)
            _check_classes(slowdown, f"{field_path}.slowdown", source)
            model = LogisticRoofline(
                peak_flops=peak_flops, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                u_min=float(d["u_min"]), u_max=float(d["u_max"]),
                knee_flops=float(d["knee_flops"]), slope=float(d["slope"]),
                f_low_flops=float(d["f_low_flops"]), f_high_flops=float(d["f_high_flops"]),
                kernel_overhead_s=overhead, slowdown=slowdown, source=str(d.get("source", "")))
            if not 0 < model.u_min <= model.u_max <= 1:
                raise InputError(f"need 0 < u_min ≤ u_max ≤ 1, got u_min={model.u_min}, "
                                 f"u_max={model.u_max}", source=source, field=field_path)
            return model
        if kind == EfficiencyRoofline.kind:
            model = EfficiencyRoofline(
                peak_flops=peak_flops, mem_bw_bytes_per_s=mem_bw_bytes_per_s,
                eta_c=float(d["eta_c"]), eta_m=float(d["eta_m"]), t0_s=float(d["t0_s"]),
                source=str(d.get("source", "")))
            for name in ("eta_c", "eta_m"):
                value = getattr(model, name)
                if not 0 < value <= 1:
                    raise InputError(f"must be in (0, 1], got {value!r}", source=source,
                                     field=f"{field_path}.{name}")
            return model
    except KeyError as exc:
        raise InputError(f"missing required field '{exc.args[0]}'", source=source,
                         field=field_path) from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"bad value: {exc}", source=source, field=field_path) from None
    raise InputError(f"unknown latency model type {kind!r}; known: "
                     f"{LogisticRoofline.kind}, {EfficiencyRoofline.kind}",
                     source=source, field=f"{field_path}.type")
