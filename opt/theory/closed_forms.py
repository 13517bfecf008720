"""Closed-form cost-per-token bounds of OpWeave §3 (Appendix A); problems.md §4.

OpWeave §3 prices one decode step of a request on a GPU type ``j`` with two linear terms:
reading the request's KV cache costs ``alpha_j = c_j / beta_j`` dollars per byte and its dense
(GEMM) work costs ``gamma_j = c_j / F_j`` dollars per FLOP, where ``c_j`` is the cost rate of one
GPU, ``beta_j`` its memory bandwidth and ``F_j`` its peak compute. For ``m_kv`` KV bytes per
request (at mean context ``s``) and ``P_act`` active GEMM parameters per token (2 FLOP each):

* ``CPT_hom_j  = alpha_j * m_kv + 2 * gamma_j * P_act``        (ideal single-type serving)
* ``CPT_het_jk = alpha_j * m_kv + 2 * gamma_k * P_act``        (attention on j, dense on k)
* ``CPT_coloc_j = alpha_j * m_kv + max(alpha_j * M_w / b_bar, 2 * gamma_j * P_act)`` with the
  memory-capped batch ``b_bar = (M - M_w) / m_kv``: co-locating weights and KV limits the batch,
  so the weight read ``alpha_j * M_w`` is amortised over at most ``b_bar`` requests.

Theorem 3.1 (homogeneous disaggregation gain ``G_hom = CPT_coloc / CPT_hom``): ``G_hom = 1``
when ``b_bar >= b* = M_w F / (2 P_act beta)``, otherwise it is strictly increasing in ``m_kv``,
and always ``1 <= G_hom < M / (M - M_w)``.

Theorem 3.2 (heterogeneous gain ``G_het = min_j CPT_hom_j / min_{j,k} CPT_het_jk``, two
types): ``G_het >= 1``, ``= 1`` when one type dominates (is no dearer in both ``alpha`` and
``gamma``), otherwise unimodal in ``x = m_kv`` with its peak at
``x* = 2 P_act (gamma_1 - gamma_2) / (alpha_2 - alpha_1)`` and peak value
``(r q - 1) / (r + q - 2)``, ``r = alpha_2/alpha_1``, ``q = gamma_1/gamma_2``, where type 1 is
the bandwidth-cheaper type (``alpha_1 < alpha_2``) and type 2 the compute-cheaper one
(``gamma_2 < gamma_1``). Since ``r q = eta = (beta_1 F_2) / (beta_2 F_1)`` does not depend on the
prices, maximising over the price ratio gives ``G_het <= (1 + sqrt(eta)) / 2``, attained exactly
when ``c_1 / c_2 = sqrt(beta_1 F_1 / (beta_2 F_2))`` (then ``r = q = sqrt(eta)``).

Units: cost rates in $ per second per GPU (``c_usd_per_s``), bandwidth in bytes/s
(``beta_bytes_per_s``), compute in FLOP/s (``peak_flops``), capacities and weights in bytes,
``p_act`` a parameter count; ``alpha`` is $/byte, ``gamma`` is $/FLOP and every CPT is $ per
generated token. Gains, ``eta`` and batch sizes are dimensionless.

The maths assumes idealised continuous batches: batch sizes are real numbers (``b_bar`` is not
floored), kernels run at peak bandwidth and peak FLOP/s (no efficiencies), and there are no
fixed per-step, launch or communication costs. These are analytic bounds, not a cost model.

Every function is vectorised: arguments may be scalars or numpy arrays and broadcast; the
result is a Python ``float`` (``bool``) when every argument is a scalar, an ndarray otherwise.
Invalid input raises :class:`opt.common.errors.InputError` (a ``ValueError``) naming the argument.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from opt.common.errors import InputError

__all__ = [
    "GpuEconomics",
    "alpha",
    "batch_cap",
    "cad_feasible",
    "cpt_coloc",
    "cpt_het",
    "cpt_hom",
    "critical_batch",
    "dominates",
    "eta",
    "gain_het",
    "gain_het_bound",
    "gain_hom",
    "gain_hom_limit",
    "gamma",
    "peak_context_kv",
    "peak_gain",
]

#: A float for all-scalar input, an ndarray when any argument is an array.
FloatOut = float | NDArray[np.float64]
#: A bool for all-scalar input, a boolean ndarray when any argument is an array.
BoolOut = bool | NDArray[np.bool_]

_SECONDS_PER_HOUR = 3600.0


# --------------------------------------------------------------------------------------------
# helpers


def _arr(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64)


def _is_scalar(a: ArrayLike) -> bool:
    return isinstance(a, (float, int, np.generic)) or np.ndim(a) == 0


def _out(x: NDArray, *args: ArrayLike) -> FloatOut:
    """Return a float when every input was a scalar, else the (broadcast) ndarray."""
    if all(_is_scalar(a) for a in args):
        return float(x)
    return np.asarray(x, dtype=np.float64)


def _out_bool(x: NDArray, *args: ArrayLike) -> BoolOut:
    """Return a bool when every input was a scalar, else the (broadcast) boolean ndarray."""
    if all(_is_scalar(a) for a in args):
        return bool(x)
    return np.asarray(x, dtype=bool)


def _first_bad(x: NDArray[np.float64], bad: NDArray[np.bool_]) -> float:
    return float(x[bad].flat[0]) if x.ndim else float(x)


def _check_positive(name: str, x: NDArray[np.float64]) -> None:
    ok = x > 0  # False for NaN too
    if not ok.all():
        raise InputError(f"must be > 0 (got {_first_bad(x, ~ok)!r})", field=name)


def _check_nonnegative(name: str, x: NDArray[np.float64]) -> None:
    ok = x >= 0
    if not ok.all():
        raise InputError(f"must be >= 0 (got {_first_bad(x, ~ok)!r})", field=name)


def _label_pair(
    a1: NDArray[np.float64], g1: NDArray[np.float64], a2: NDArray[np.float64],
    g2: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Broadcast; swap elementwise so type 1 is the bandwidth-cheaper (alpha_1 <= alpha_2)."""
    a1, g1, a2, g2 = np.broadcast_arrays(a1, g1, a2, g2)
    swap = a1 > a2
    return (np.where(swap, a2, a1), np.where(swap, g2, g1),
            np.where(swap, a1, a2), np.where(swap, g1, g2))


# --------------------------------------------------------------------------------------------
# unit prices


def alpha(c_usd_per_s: ArrayLike, beta_bytes_per_s: ArrayLike) -> FloatOut:
    """Bandwidth price ``alpha = c / beta`` in $ per byte read.

    ``c_usd_per_s``: cost rate of one GPU ($/s); ``beta_bytes_per_s``: memory bandwidth (B/s).
    """
    c, b = _arr(c_usd_per_s), _arr(beta_bytes_per_s)
    _check_nonnegative("c_usd_per_s", c)
    _check_positive("beta_bytes_per_s", b)
    return _out(c / b, c_usd_per_s, beta_bytes_per_s)


def gamma(c_usd_per_s: ArrayLike, peak_flops: ArrayLike) -> FloatOut:
    """Compute price ``gamma = c / F`` in $ per FLOP.

    ``c_usd_per_s``: cost rate of one GPU ($/s); ``peak_flops``: peak compute (FLOP/s).
    """
    c, f = _arr(c_usd_per_s), _arr(peak_flops)
    _check_nonnegative("c_usd_per_s", c)
    _check_positive("peak_flops", f)
    return _out(c / f, c_usd_per_s, peak_flops)


# --------------------------------------------------------------------------------------------
# cost per token


def cpt_hom(
    alpha_j: ArrayLike, gamma_j: ArrayLike, m_kv_bytes: ArrayLike, p_act: ArrayLike
) -> FloatOut:
    """Ideal homogeneous cost per token ``alpha_j*m_kv + 2*gamma_j*P_act`` ($/token).

    ``alpha_j`` $/B, ``gamma_j`` $/FLOP, ``m_kv_bytes`` KV bytes per request, ``p_act`` active
    GEMM parameters per token (2 FLOP each).
    """
    a, g, x, p = _arr(alpha_j), _arr(gamma_j), _arr(m_kv_bytes), _arr(p_act)
    return _out(a * x + 2.0 * g * p, alpha_j, gamma_j, m_kv_bytes, p_act)


def cpt_het(
    alpha_attn: ArrayLike, gamma_dense: ArrayLike, m_kv_bytes: ArrayLike, p_act: ArrayLike
) -> FloatOut:
    """Disaggregated cost per token ``alpha_j*m_kv + 2*gamma_k*P_act`` ($/token).

    Attention (the KV read) runs on type j with price ``alpha_attn`` ($/B); the dense GEMMs run
    on type k with price ``gamma_dense`` ($/FLOP). ``j = k`` gives :func:`cpt_hom`.
    """
    return cpt_hom(alpha_attn, gamma_dense, m_kv_bytes, p_act)


def batch_cap(memory_bytes: ArrayLike, weights_bytes: ArrayLike, m_kv_bytes: ArrayLike) -> FloatOut:
    """Memory-capped continuous batch ``b_bar = (M - M_w) / m_kv`` (requests, not floored).

    ``memory_bytes`` GPU capacity M, ``weights_bytes`` resident weights M_w, ``m_kv_bytes`` KV
    bytes per request. Raises :class:`~opt.common.errors.InputError` (a ``ValueError``) if
    ``M <= M_w`` or ``m_kv <= 0`` for any element.
    """
    m, w, x = _arr(memory_bytes), _arr(weights_bytes), _arr(m_kv_bytes)
    _check_nonnegative("weights_bytes", w)
    _check_positive("m_kv_bytes", x)
    free = m - w
    bad = ~(free > 0)
    if bad.any():
        mb, wb, bb = np.broadcast_arrays(m, w, bad)
        i = int(np.flatnonzero(bb)[0])
        raise InputError(
            "must exceed weights_bytes (no room for KV cache): "
            f"memory_bytes={float(mb.flat[i])!r} <= weights_bytes={float(wb.flat[i])!r}",
            field="memory_bytes",
        )
    return _out(free / x, memory_bytes, weights_bytes, m_kv_bytes)


def cpt_coloc(
    alpha_j: ArrayLike, gamma_j: ArrayLike, m_kv_bytes: ArrayLike, p_act: ArrayLike,
    memory_bytes: ArrayLike, weights_bytes: ArrayLike,
) -> FloatOut:
    """Co-located cost per token ``alpha*m_kv + max(alpha*M_w/b_bar, 2*gamma*P_act)`` ($/token).

    Weights and KV share ``memory_bytes``; the per-step weight read ``alpha*M_w`` is amortised
    over the memory-capped batch ``b_bar`` (:func:`batch_cap`) and overlaps the dense compute.
    """
    a, g, x, p = _arr(alpha_j), _arr(gamma_j), _arr(m_kv_bytes), _arr(p_act)
    b_bar = _arr(batch_cap(memory_bytes, weights_bytes, m_kv_bytes))
    w = _arr(weights_bytes)
    val = a * x + np.maximum(a * w / b_bar, 2.0 * g * p)
    return _out(val, alpha_j, gamma_j, m_kv_bytes, p_act, memory_bytes, weights_bytes)


def critical_batch(
    weights_bytes: ArrayLike, peak_flops: ArrayLike, p_act: ArrayLike, beta_bytes_per_s: ArrayLike
) -> FloatOut:
    """Critical batch ``b* = M_w*F / (2*P_act*beta)`` (requests): compute-bound above it.

    Equivalently ``alpha*M_w/b* = 2*gamma*P_act`` for any cost rate (the rate cancels).
    """
    w, f, p, b = _arr(weights_bytes), _arr(peak_flops), _arr(p_act), _arr(beta_bytes_per_s)
    _check_positive("p_act", p)
    _check_positive("beta_bytes_per_s", b)
    return _out(w * f / (2.0 * p * b), weights_bytes, peak_flops, p_act, beta_bytes_per_s)


# --------------------------------------------------------------------------------------------
# Theorem 3.1


def gain_hom(
    alpha_j: ArrayLike, gamma_j: ArrayLike, m_kv_bytes: ArrayLike, p_act: ArrayLike,
    memory_bytes: ArrayLike, weights_bytes: ArrayLike,
) -> FloatOut:
    """Homogeneous disaggregation gain ``G_hom = CPT_coloc / CPT_hom`` (dimensionless, >= 1)."""
    coloc = _arr(cpt_coloc(alpha_j, gamma_j, m_kv_bytes, p_act, memory_bytes, weights_bytes))
    hom = _arr(cpt_hom(alpha_j, gamma_j, m_kv_bytes, p_act))
    return _out(coloc / hom, alpha_j, gamma_j, m_kv_bytes, p_act, memory_bytes, weights_bytes)


def gain_hom_limit(memory_bytes: ArrayLike, weights_bytes: ArrayLike) -> FloatOut:
    """Theorem 3.1 strict upper bound ``M / (M - M_w)`` on ``G_hom`` (approached as m_kv -> inf).

    Raises :class:`~opt.common.errors.InputError` if ``M <= M_w``.
    """
    m, w = _arr(memory_bytes), _arr(weights_bytes)
    _arr(batch_cap(memory_bytes, weights_bytes, 1.0))  # validates M > M_w
    return _out(m / (m - w), memory_bytes, weights_bytes)


# --------------------------------------------------------------------------------------------
# Theorem 3.2


def dominates(
    alpha_1: ArrayLike, gamma_1: ArrayLike, alpha_2: ArrayLike, gamma_2: ArrayLike
) -> BoolOut:
    """True where one type is no dearer (``alpha_j <= alpha_k``, ``gamma_j <= gamma_k``).

    Then disaggregating across the two types cannot help: ``G_het = 1``.
    """
    a1, g1, a2, g2 = _arr(alpha_1), _arr(gamma_1), _arr(alpha_2), _arr(gamma_2)
    val = ((a1 <= a2) & (g1 <= g2)) | ((a2 <= a1) & (g2 <= g1))
    return _out_bool(val, alpha_1, gamma_1, alpha_2, gamma_2)


def gain_het(
    alpha_1: ArrayLike, gamma_1: ArrayLike, alpha_2: ArrayLike, gamma_2: ArrayLike,
    m_kv_bytes: ArrayLike, p_act: ArrayLike,
) -> FloatOut:
    """Heterogeneous gain ``min_j CPT_hom_j / min_{j,k} CPT_het_jk`` over two types (>= 1).

    Prices in $/B (``alpha_*``) and $/FLOP (``gamma_*``), all > 0; ``m_kv_bytes`` KV bytes per
    request; ``p_act`` active parameters per token. Symmetric in the two types.
    """
    a1, g1, a2, g2 = _arr(alpha_1), _arr(gamma_1), _arr(alpha_2), _arr(gamma_2)
    x, p = _arr(m_kv_bytes), _arr(p_act)
    for name, v in (("alpha_1", a1), ("gamma_1", g1), ("alpha_2", a2), ("gamma_2", g2)):
        _check_positive(name, v)
    _check_nonnegative("m_kv_bytes", x)
    _check_nonnegative("p_act", p)
    best_hom = np.minimum(cpt_hom(a1, g1, x, p), cpt_hom(a2, g2, x, p))
    best_het = functools.reduce(
        np.minimum, [_arr(cpt_het(aj, gk, x, p)) for aj in (a1, a2) for gk in (g1, g2)]
    )
    return _out(best_hom / best_het, alpha_1, gamma_1, alpha_2, gamma_2, m_kv_bytes, p_act)


def eta(
    beta_1: ArrayLike, peak_1: ArrayLike, beta_2: ArrayLike, peak_2: ArrayLike
) -> FloatOut:
    """Hardware asymmetry ``eta = (beta_1*F_2)/(beta_2*F_1)``, labels ordered so ``eta >= 1``.

    Returns ``max(beta_1 F_2/(beta_2 F_1), its inverse)``: type 1 is taken to be the one with
    more bandwidth per FLOP. Under non-dominance ``eta = r*q`` (Theorem 3.2) whatever the
    prices. ``beta_*`` in B/s, ``peak_*`` in FLOP/s.
    """
    b1, f1, b2, f2 = _arr(beta_1), _arr(peak_1), _arr(beta_2), _arr(peak_2)
    for name, v in (("beta_1", b1), ("peak_1", f1), ("beta_2", b2), ("peak_2", f2)):
        _check_positive(name, v)
    e = (b1 * f2) / (b2 * f1)
    return _out(np.maximum(e, 1.0 / e), beta_1, peak_1, beta_2, peak_2)


def gain_het_bound(eta: ArrayLike) -> FloatOut:
    """Theorem 3.2 price-free bound ``(1 + sqrt(eta)) / 2`` on ``G_het`` (``eta >= 1``).

    It is the supremum of the peak gain over all price ratios, attained when
    ``c_1/c_2 = sqrt(beta_1 F_1 / (beta_2 F_2))``.
    """
    e = _arr(eta)
    ok = e >= 1.0
    if not ok.all():
        raise InputError(f"must be >= 1 (got {_first_bad(e, ~ok)!r})", field="eta")
    return _out((1.0 + np.sqrt(e)) / 2.0, eta)


def peak_context_kv(
    alpha_1: ArrayLike, gamma_1: ArrayLike, alpha_2: ArrayLike, gamma_2: ArrayLike,
    p_act: ArrayLike,
) -> FloatOut:
    """Peak of G_het in KV bytes per request: ``x* = 2 P_act (gamma_1-gamma_2)/(alpha_2-alpha_1)``.

    Labels are swapped internally so type 1 is bandwidth-cheaper (``alpha_1 < alpha_2``) and
    type 2 compute-cheaper (``gamma_2 < gamma_1``); the result does not depend on argument
    order. ``nan`` where one type dominates (no interior peak; ``G_het = 1`` everywhere).
    At ``x*`` both types have equal homogeneous CPT.
    """
    a1, g1, a2, g2 = _label_pair(_arr(alpha_1), _arr(gamma_1), _arr(alpha_2), _arr(gamma_2))
    p = _arr(p_act)
    dom = _arr(dominates(a1, g1, a2, g2)).astype(bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = 2.0 * p * (g1 - g2) / (a2 - a1)
    x = np.where(dom, np.nan, x)
    return _out(x, alpha_1, gamma_1, alpha_2, gamma_2, p_act)


def peak_gain(
    alpha_1: ArrayLike, gamma_1: ArrayLike, alpha_2: ArrayLike, gamma_2: ArrayLike
) -> FloatOut:
    """Peak heterogeneous gain ``(rq - 1)/(r + q - 2)``, r = alpha_2/alpha_1, q = gamma_1/gamma_2.

    Same internal labelling as :func:`peak_context_kv` (then ``r, q > 1``); 1.0 under
    dominance. Equals ``gain_het`` at ``x*``; at most ``(1 + sqrt(r q))/2``.
    """
    a1, g1, a2, g2 = _label_pair(_arr(alpha_1), _arr(gamma_1), _arr(alpha_2), _arr(gamma_2))
    for name, v in (("alpha", a1), ("gamma", g2)):
        _check_positive(name, v)
    dom = _arr(dominates(a1, g1, a2, g2)).astype(bool)
    r, q = a2 / a1, g1 / g2
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (r * q - 1.0) / (r + q - 2.0)
    val = np.where(dom, 1.0, val)
    return _out(val, alpha_1, gamma_1, alpha_2, gamma_2)


# --------------------------------------------------------------------------------------------
# CAD feasibility


def cad_feasible(
    memory_1_bytes: ArrayLike, microbatches: ArrayLike, beta_1: ArrayLike,
    weights_2_bytes: ArrayLike, beta_2: ArrayLike,
) -> BoolOut:
    """CAD feasibility (uniform layers): ``M_1/(mu*beta_1) >= M_weights,2/beta_2``.

    The attention type 1 sweeping its whole memory ``memory_1_bytes`` once per microbatch
    (``microbatches`` = mu >= 1) must take at least as long as the dense type 2 reading its
    resident weights ``weights_2_bytes``; bandwidths ``beta_*`` in B/s.
    """
    m1, mu, b1 = _arr(memory_1_bytes), _arr(microbatches), _arr(beta_1)
    w2, b2 = _arr(weights_2_bytes), _arr(beta_2)
    _check_positive("microbatches", mu)
    _check_positive("beta_1", b1)
    _check_positive("beta_2", b2)
    val = m1 / (mu * b1) >= w2 / b2
    return _out_bool(val, memory_1_bytes, microbatches, beta_1, weights_2_bytes, beta_2)


# --------------------------------------------------------------------------------------------
# GPU economics record


@dataclass(frozen=True)
class GpuEconomics:
    """Price and roofline of one GPU type (OpWeave Table 1 style).

    ``c_usd_per_s`` $/s per GPU, ``beta_bytes_per_s`` memory bandwidth (B/s), ``peak_flops``
    (FLOP/s), ``memory_bytes`` capacity (B).
    """

    name: str
    c_usd_per_s: float
    beta_bytes_per_s: float
    peak_flops: float
    memory_bytes: float

    def __post_init__(self) -> None:
        for field in ("c_usd_per_s", "beta_bytes_per_s", "peak_flops", "memory_bytes"):
            v = getattr(self, field)
            if not (isinstance(v, (int, float, np.floating, np.integer)) and v > 0
                    and np.isfinite(v)):
                raise InputError(f"must be a finite number > 0 (got {v!r})",
                                 source=self.name, field=field)

    @property
    def alpha(self) -> float:
        """Bandwidth price c/beta in $ per byte."""
        return self.c_usd_per_s / self.beta_bytes_per_s

    @property
    def gamma(self) -> float:
        """Compute price c/F in $ per FLOP."""
        return self.c_usd_per_s / self.peak_flops

    @classmethod
    def from_price_per_hour(
        cls, name: str, price_usd_per_hour: float, beta_bytes_per_s: float, peak_flops: float,
        memory_bytes: float,
    ) -> GpuEconomics:
        """Build from an hourly GPU price ($/GPU-h), converted to $/s."""
        return cls(name, float(price_usd_per_hour) / _SECONDS_PER_HOUR, float(beta_bytes_per_s),
                   float(peak_flops), float(memory_bytes))
