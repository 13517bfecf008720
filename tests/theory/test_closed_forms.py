"""Tests for opt.theory.closed_forms: OpWeave §3 closed-form bounds (problems.md §4), Theorems 3.1 and 3.2.

Derivations the property tests rely on (x = m_kv, A = 2·P_act, labels with α1 < α2, γ2 < γ1):

* G_het(x) = min(α1x + Aγ1, α2x + Aγ2) / (α1x + Aγ2). The two homogeneous costs cross at
  x* = A(γ1 − γ2)/(α2 − α1); below x* type 2 is cheaper and the ratio (α2x + Aγ2)/(α1x + Aγ2)
  rises, above x* type 1 is cheaper and (α1x + Aγ1)/(α1x + Aγ2) falls: unimodal, peak at x*.
* With t* = α1x*/(Aγ2) = (q − 1)/(r − 1), the peak is (t* + q)/(t* + 1) = (rq − 1)/(r + q − 2).
* rq = (α2/α1)(γ1/γ2) = (β1F2)/(β2F1) = η does not depend on prices; for fixed η the peak
  (η − 1)/(r + η/r − 2) is largest at r = √η, giving (1 + √η)/2. r = √η ⇔ c1/c2 =
  sqrt(β1F1/(β2F2)) ⇔ α1γ1 = α2γ2, a condition symmetric in the labels.
* Theorem 3.1: α·M_w/b̄ ≤ 2γP_act ⇔ b̄ ≥ b* (the cost rate cancels), so G_hom = 1 there and
  G_hom = M/(M − M_w) · αx/(αx + 2γP_act) otherwise — increasing in x and < M/(M − M_w).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from opt.theory import closed_forms as B

SETTINGS = settings(max_examples=200, deadline=None, database=None)

# OpWeave Table 1: (peak FLOP/s, bandwidth B/s, memory B, $/GPU-h)
TABLE1 = {
    "H100": (989e12, 3350e9, 80e9, 3.49),
    "A100": (312e12, 2039e9, 80e9, 1.74),
    "L40S": (362.05e12, 864e9, 48e9, 1.09),
}


def gpu(name: str) -> B.GpuEconomics:
    f, bw, mem, price = TABLE1[name]
    return B.GpuEconomics.from_price_per_hour(name, price, bw, f, mem)


def logu(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Log-uniform positive floats in [lo, hi]."""
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0**e)


cost = logu(1e-5, 1e-2)  # $/s per GPU (≈ $0.04 – $36 per hour)
bandwidth = logu(1e11, 1e13)  # B/s
flops = logu(1e13, 3e15)  # FLOP/s
memory = logu(1e10, 2e11)  # B
kv = logu(1e3, 1e10)  # B per request
params = logu(1e6, 1e12)  # active parameters per token
frac = st.floats(0.01, 0.99)  # M_w / M


# --------------------------------------------------------------------------------------------
# published values and unit prices


@pytest.mark.parametrize(
    "a, b, eta_2dp, bound_2dp", [("H100", "L40S", 1.42, 1.10), ("H100", "A100", 1.93, 1.19)]
)
def test_published_eta_and_bound(a, b, eta_2dp, bound_2dp):
    fa, ba, _, _ = TABLE1[a]
    fb, bb, _, _ = TABLE1[b]
    for args in ((ba, fa, bb, fb), (bb, fb, ba, fa)):  # both orders
        e = B.eta(*args)
        assert e >= 1.0
        assert round(e, 2) == eta_2dp
        assert round(B.gain_het_bound(e), 2) == bound_2dp


def test_gpu_economics_units():
    h = gpu("H100")
    assert h.c_usd_per_s == pytest.approx(3.49 / 3600, rel=1e-15)
    assert h.alpha == pytest.approx(3.49 / 3600 / 3350e9, rel=1e-15)
    assert h.gamma == pytest.approx(3.49 / 3600 / 989e12, rel=1e-15)
    assert h.alpha == B.alpha(h.c_usd_per_s, h.beta_bytes_per_s)
    assert h.gamma == B.gamma(h.c_usd_per_s, h.peak_flops)
    with pytest.raises(AttributeError):
        h.c_usd_per_s = 1.0  # frozen
    with pytest.raises(ValueError, match="peak_flops"):
        B.GpuEconomics("bad", 1e-3, 1e12, 0.0, 80e9)


def test_table1_real_prices_below_bound():
    """At the real Table 1 prices the peak gain is below (and close to) the price-free bound."""
    for a, b in (("H100", "L40S"), ("H100", "A100")):
        ga, gb = gpu(a), gpu(b)
        e = B.eta(ga.beta_bytes_per_s, ga.peak_flops, gb.beta_bytes_per_s, gb.peak_flops)
        pk = B.peak_gain(ga.alpha, ga.gamma, gb.alpha, gb.gamma)
        assert not B.dominates(ga.alpha, ga.gamma, gb.alpha, gb.gamma)
        assert 1.0 < pk <= B.gain_het_bound(e)
        x = B.peak_context_kv(ga.alpha, ga.gamma, gb.alpha, gb.gamma, 27e9)
        assert B.gain_het(ga.alpha, ga.gamma, gb.alpha, gb.gamma, x, 27e9) == pytest.approx(
            pk, rel=1e-12)


def test_critical_batch_value_and_cost_independence():
    # H100, 27B bf16 weights (54 GB), P_act = 27e9: b* = 54e9·989e12 / (2·27e9·3350e9)
    b_star = B.critical_batch(54e9, 989e12, 27e9, 3350e9)
    assert b_star == pytest.approx(989e12 / 3350e9, rel=1e-14)
    assert round(b_star, 1) == 295.2
    for c in (1e-4, 3.49 / 3600, 0.5):  # α·M_w/b* = 2γ·P_act for any cost rate
        a, g = B.alpha(c, 3350e9), B.gamma(c, 989e12)
        assert a * 54e9 / b_star == pytest.approx(2 * g * 27e9, rel=1e-14)


def test_cpt_values_and_batch_cap():
    assert B.cpt_hom(2.0, 3.0, 5.0, 7.0) == 2 * 5 + 2 * 3 * 7
    assert B.cpt_het(2.0, 3.0, 5.0, 7.0) == B.cpt_hom(2.0, 3.0, 5.0, 7.0)
    assert B.batch_cap(80e9, 54e9, 1e9) == pytest.approx(26.0)
    # b̄ = 26 < b* → weight read term α·M_w/b̄ dominates
    a, g = 1e-12, 1e-15
    expect = a * 1e9 + max(a * 54e9 / 26.0, 2 * g * 1e9)
    assert B.cpt_coloc(a, g, 1e9, 1e9, 80e9, 54e9) == pytest.approx(expect, rel=1e-14)
    assert B.gain_hom_limit(80e9, 60e9) == pytest.approx(4.0)


def test_cad_feasible():
    # M1/(μ·β1) = 80e9/(2·2039e9) ≈ 19.6 ms ≥ 40e9/3350e9 ≈ 11.9 ms; with μ = 4, 9.8 ms < 11.9 ms
    assert B.cad_feasible(80e9, 2, 2039e9, 40e9, 3350e9) is True
    assert B.cad_feasible(80e9, 4, 2039e9, 40e9, 3350e9) is False
    np.testing.assert_array_equal(
        B.cad_feasible(80e9, np.array([1, 2, 3, 4]), 2039e9, 40e9, 3350e9),
        [True, True, True, False])


# --------------------------------------------------------------------------------------------
# Theorem 3.1


def _hom_case(c, bw, f, m, fr, p):
    w = fr * m
    return B.alpha(c, bw), B.gamma(c, f), w, B.critical_batch(w, f, p, bw)


@SETTINGS
@given(c=cost, bw=bandwidth, f=flops, m=memory, fr=frac, p=params, x=kv,
       t=st.floats(1e-6, 1.0), t1=logu(1e-3, 1e3), t2=logu(1e-2, 1e2))
def test_theorem_3_1(c, bw, f, m, fr, p, x, t, t1, t2):
    a, g, w, b_star = _hom_case(c, bw, f, m, fr, p)
    limit = B.gain_hom_limit(m, w)

    # 1 <= G_hom < M/(M - M_w) at an arbitrary context
    gh = B.gain_hom(a, g, x, p, m, w)
    assert gh >= 1.0 - 1e-12
    assert gh < limit

    # G_hom = 1 when b̄ >= b*: x = t·x_c with x_c = (M - M_w)/b*, so b̄ = b*/t
    x_c = (m - w) / b_star
    x0 = t * x_c
    if B.batch_cap(m, w, x0) >= b_star:
        assert B.gain_hom(a, g, x0, p, m, w) == pytest.approx(1.0, rel=1e-12, abs=0)
    if t <= 0.999:  # clearly inside the regime: the max picks the compute term, exactly 1
        assert B.batch_cap(m, w, x0) > b_star
        assert B.gain_hom(a, g, x0, p, m, w) == 1.0

    # strictly increasing in m_kv while b̄(m_kv) < b*: two contexts x_c < x1 < x2
    x1 = x_c * (1.0 + t1)
    x2 = x1 * (1.0 + t2)
    assert B.batch_cap(m, w, x1) < b_star and B.batch_cap(m, w, x2) < b_star
    g1, g2 = B.gain_hom(a, g, x1, p, m, w), B.gain_hom(a, g, x2, p, m, w)
    assert 1.0 < g1 < g2 < limit
    # closed form in the capped regime: G = M/(M − M_w) · αx/(αx + 2γP)
    assert g1 == pytest.approx(m / (m - w) * a * x1 / (a * x1 + 2 * g * p), rel=1e-12)


# --------------------------------------------------------------------------------------------
# Theorem 3.2


@SETTINGS
@given(c1=cost, bw1=bandwidth, f1=flops, c2=cost, bw2=bandwidth, f2=flops, x=kv, p=params)
def test_theorem_3_2_range_and_price_free_bound(c1, bw1, f1, c2, bw2, f2, x, p):
    a1, g1, a2, g2 = B.alpha(c1, bw1), B.gamma(c1, f1), B.alpha(c2, bw2), B.gamma(c2, f2)
    bound = B.gain_het_bound(B.eta(bw1, f1, bw2, f2))
    for args in ((a1, g1, a2, g2), (a2, g2, a1, g1)):
        gh = B.gain_het(*args, x, p)
        assert 1.0 - 1e-12 <= gh <= bound * (1 + 1e-12)
        assert B.peak_gain(*args) <= bound * (1 + 1e-12)
        assert gh <= B.peak_gain(*args) * (1 + 1e-12)
    assert B.gain_het(a1, g1, a2, g2, x, p) == B.gain_het(a2, g2, a1, g1, x, p)


@SETTINGS
@given(a=logu(1e-16, 1e-10), g=logu(1e-19, 1e-14), da=st.floats(0, 10), dg=st.floats(0, 10),
       x=kv, p=params)
def test_theorem_3_2_dominance(a, g, da, dg, x, p):
    a2, g2 = a * (1 + da), g * (1 + dg)  # type 1 no dearer on both prices
    for args in ((a, g, a2, g2), (a2, g2, a, g)):
        assert B.dominates(*args) is True
        assert B.gain_het(*args, x, p) == 1.0
        assert B.peak_gain(*args) == 1.0
        assert math.isnan(B.peak_context_kv(*args, p))


def _nondominated(a1, g2, r, q):
    """Type 1 bandwidth-cheaper (α2 = r·α1), type 2 compute-cheaper (γ1 = q·γ2), r, q > 1."""
    return a1, q * g2, r * a1, g2


@SETTINGS
@given(a1=logu(1e-16, 1e-10), g2=logu(1e-19, 1e-14), r=st.floats(1.001, 100),
       q=st.floats(1.001, 100), p=params)
def test_theorem_3_2_peak_and_unimodality(a1, g2, r, q, p):
    a1, g1, a2, g2 = _nondominated(a1, g2, r, q)
    for args in ((a1, g1, a2, g2), (a2, g2, a1, g1)):  # order-independent
        assert B.dominates(*args) is False
        xs = B.peak_context_kv(*args, p)
        assert xs == pytest.approx(2 * p * (g1 - g2) / (a2 - a1), rel=1e-12)
        # at x* the two homogeneous costs are equal
        assert B.cpt_hom(a1, g1, xs, p) == pytest.approx(B.cpt_hom(a2, g2, xs, p), rel=1e-12)
        pk = B.peak_gain(*args)
        assert pk == pytest.approx((r * q - 1) / (r + q - 2), rel=1e-9)
        assert B.gain_het(*args, xs, p) == pytest.approx(pk, rel=1e-9)
        assert pk <= (1 + math.sqrt(r * q)) / 2 * (1 + 1e-12)

    # unimodal on a log grid around x*: strictly up to x*, strictly down after
    grid = xs * np.logspace(-3, 3, 61)  # grid[30] == x*
    assert grid[30] == xs
    gh = B.gain_het(a1, g1, a2, g2, grid, p)
    assert int(np.argmax(gh)) == 30
    assert np.all(np.diff(gh[:31]) > 0)
    assert np.all(np.diff(gh[30:]) < 0)
    assert np.all(gh > 1.0)


@SETTINGS
@given(bw1=bandwidth, f1=flops, bw2=bandwidth, f2=flops, c2=cost, p=params)
def test_theorem_3_2_bound_is_tight(bw1, f1, bw2, f2, c2, p):
    e = B.eta(bw1, f1, bw2, f2)
    assume(e > 1.001)
    # w* = c1/c2 = sqrt(β1F1/(β2F2)); the condition ⇔ α1γ1 = α2γ2, so it is label-symmetric
    c1 = c2 * math.sqrt(bw1 * f1 / (bw2 * f2))
    a1, g1, a2, g2 = B.alpha(c1, bw1), B.gamma(c1, f1), B.alpha(c2, bw2), B.gamma(c2, f2)
    bound = B.gain_het_bound(e)
    for args in ((a1, g1, a2, g2), (a2, g2, a1, g1)):
        assert B.peak_gain(*args) == pytest.approx(bound, rel=1e-9)
        xs = B.peak_context_kv(*args, p)
        assert B.gain_het(*args, xs, p) == pytest.approx(bound, rel=1e-9)
    # any other price ratio stays strictly below the bound
    for k in (0.5, 2.0):
        a1k, g1k = B.alpha(k * c1, bw1), B.gamma(k * c1, f1)
        assert B.peak_gain(a1k, g1k, a2, g2) < bound


# --------------------------------------------------------------------------------------------
# vectorisation and bad input


def test_vectorised_matches_scalar_calls():
    rng = np.random.default_rng(7)
    n = 40

    def lu(lo, hi):
        return 10.0 ** rng.uniform(math.log10(lo), math.log10(hi), n)

    c1, c2 = lu(1e-5, 1e-2), lu(1e-5, 1e-2)
    bw1, bw2 = lu(1e11, 1e13), lu(1e11, 1e13)
    f1, f2 = lu(1e13, 3e15), lu(1e13, 3e15)
    m = lu(1e10, 2e11)
    w = m * rng.uniform(0.01, 0.99, n)
    x, p = lu(1e3, 1e10), lu(1e6, 1e12)
    mu = rng.integers(1, 5, n)
    a1, g1 = B.alpha(c1, bw1), B.gamma(c1, f1)
    a2, g2 = B.alpha(c2, bw2), B.gamma(c2, f2)
    assert isinstance(a1, np.ndarray) and a1.shape == (n,)

    cases = {
        B.alpha: (c1, bw1), B.gamma: (c1, f1),
        B.cpt_hom: (a1, g1, x, p), B.cpt_het: (a1, g2, x, p),
        B.batch_cap: (m, w, x), B.cpt_coloc: (a1, g1, x, p, m, w),
        B.critical_batch: (w, f1, p, bw1), B.gain_hom: (a1, g1, x, p, m, w),
        B.gain_hom_limit: (m, w), B.gain_het: (a1, g1, a2, g2, x, p),
        B.eta: (bw1, f1, bw2, f2), B.gain_het_bound: (B.eta(bw1, f1, bw2, f2),),
        B.peak_context_kv: (a1, g1, a2, g2, p), B.peak_gain: (a1, g1, a2, g2),
        B.dominates: (a1, g1, a2, g2), B.cad_feasible: (m, mu, bw1, w, bw2),
    }
    for fn, args in cases.items():
        vec = fn(*args)
        assert isinstance(vec, np.ndarray) and vec.shape == (n,), fn.__name__
        ref = [fn(*(arg[i].item() for arg in args)) for i in range(n)]
        assert all(isinstance(v, (float, bool)) for v in ref), fn.__name__
        np.testing.assert_array_equal(vec, np.array(ref), err_msg=fn.__name__)

    # broadcasting: scalar prices against a grid of contexts, and a 2-D outer product
    grid = np.logspace(3, 10, 8)
    np.testing.assert_array_equal(
        B.gain_het(a1[0], g1[0], a2[0], g2[0], grid, p[0]),
        [B.gain_het(a1[0], g1[0], a2[0], g2[0], xx, p[0]) for xx in grid])
    out = B.gain_hom(a1[0], g1[0], grid[:, None], p[:3][None, :], m[0], w[0])
    assert out.shape == (8, 3)
    assert out[5, 2] == B.gain_hom(a1[0], g1[0], grid[5], p[2], m[0], w[0])


@pytest.mark.parametrize("fn, args", [
    (B.batch_cap, (60e9, 60e9, 1e6)),
    (B.batch_cap, (np.array([80e9, 50e9]), 60e9, 1e6)),
    (B.cpt_coloc, (1e-12, 1e-15, 1e6, 1e9, 40e9, 60e9)),
    (B.gain_hom, (1e-12, 1e-15, 1e6, 1e9, 40e9, 60e9)),
    (B.gain_hom_limit, (40e9, 60e9)),
])
def test_memory_not_above_weights_raises(fn, args):
    with pytest.raises(ValueError, match="memory_bytes") as exc:
        fn(*args)
    assert "weights_bytes" in str(exc.value)


@pytest.mark.parametrize("bad_kv", [0.0, -1.0, np.array([1e6, 0.0])])
def test_nonpositive_kv_raises(bad_kv):
    with pytest.raises(ValueError, match="m_kv_bytes"):
        B.batch_cap(80e9, 60e9, bad_kv)


def test_other_bad_input_raises():
    with pytest.raises(ValueError, match="beta_bytes_per_s"):
        B.alpha(1e-3, 0.0)
    with pytest.raises(ValueError, match="eta"):
        B.gain_het_bound(0.9)
    with pytest.raises(ValueError, match="microbatches"):
        B.cad_feasible(80e9, 0, 2e12, 40e9, 3e12)
