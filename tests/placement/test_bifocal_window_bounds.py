"""The availability bounds of Bifocal's window simulation
(:func:`heuristics.placement.bifocal_window.window_estimate`, its ``thr`` argument): raising a
device's real availability to any value up to its bound leaves the window's value and its best
devices unchanged — the rule by which the loop keeps a window over a commit
(tests/placement/test_score_cache.py checks the loop's kept rows against a full re-scoring).
Random small states: every load rule, class and device patterns, hints."""

from __future__ import annotations

import numpy as np
import pytest

from heuristics.placement.bifocal_window import window_estimate
from heuristics.placement.state_kernels import AT_USE, OVERLAP, PREFETCH, TLAST

BIG = np.iinfo(np.int64).max


def random_window(rng: np.random.Generator) -> dict:
    """A random window: a root task 0 and a chain of up to 3 vertices on 2–5 devices of 1–3
    classes, random durations (−1 illegal), blocks, loads, residency, availability (ns),
    transfer table and hints."""
    nd = int(rng.integers(2, 6))
    K = int(rng.integers(1, min(nd, 3) + 1))
    dcls = np.concatenate([np.arange(K), rng.integers(0, K, nd - K)]).astype(np.int64)
    n, nb, nty = 4, 3, 4
    m = int(rng.integers(1, 4))
    type_dur = rng.integers(1, 50, (nty, nd)).astype(np.int64)
    type_dur[rng.random((nty, nd)) < 0.2] = -1
    type_dur[:, 0] = rng.integers(1, 50, nty)  # every type has a legal device
    block = rng.integers(-1, nb, n).astype(np.int64)
    loadd = rng.integers(1, 40, (nb, nd)).astype(np.int64)
    rl = np.full((3, nd, nb), -1, np.int64)
    rl[0][rng.random((nd, nb)) < 0.3] = 5
    dv = np.zeros((5, nd), np.int64)
    dv[TLAST] = rng.integers(0, 80, nd)
    dv[0] = rng.integers(0, 80, nd)  # the load ports' free time
    hint = np.full(n, -1, np.int64)
    hint[1:] = np.where(rng.random(n - 1) < 0.4, rng.integers(0, nd, n - 1), -1)
    reps = np.full((3, K), -1, np.int64)
    chain = np.arange(1, m + 1, dtype=np.int64)
    ttype = rng.integers(0, nty, n).astype(np.int64)
    for j in range(m):
        u = chain[j]
        for x in range(nd):
            if type_dur[ttype[u], x] >= 0 and (block[u] < 0 or loadd[block[u], x] >= 0):
                reps[j, dcls[x]] = 1
    return {"d": int(rng.integers(0, nd)), "f0": int(rng.integers(0, 120)), "chain": chain,
            "m": m, "reps": reps, "ttype": ttype, "type_dur": type_dur, "block": block,
            "loadd": loadd, "dcls": dcls, "rl": rl, "dv": dv,
            "etab": rng.integers(0, 20, (2, nd * nd)).astype(np.int64),
            "hetype": rng.integers(0, 2, n).astype(np.int64),
            "rtype": rng.integers(-1, 2, n).astype(np.int64), "hint": hint,
            "rule": int(rng.choice([AT_USE, OVERLAP, PREFETCH])),
            "consist": float(rng.choice([0.0, 0.5, 2.0])), "by_device": bool(rng.random() < 0.3)}


def estimate(w: dict, dv: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """(T̂_H, its best devices, the availability bounds) of window ``w`` under ``dv``."""
    nd = dv.shape[1]
    best = np.full(3, -1, np.int64)
    thr = np.full(nd, BIG, np.int64)
    v = window_estimate(0, w["d"], w["f0"], w["chain"], w["m"], w["reps"], w["ttype"],
                        w["type_dur"], w["block"], w["loadd"], w["dcls"], w["rl"], dv,
                        w["etab"], w["hetype"], w["rtype"], w["hint"], w["rule"], w["consist"],
                        np.empty(3, np.int64), best, np.empty((6, 5), np.int64), w["by_device"],
                        thr)
    return v, best.tolist(), thr


@pytest.mark.parametrize("seed", range(300))
def test_raising_an_availability_up_to_its_bound_keeps_the_window(seed):
    rng = np.random.default_rng(seed)
    w = random_window(rng)
    v, best, thr = estimate(w, w["dv"])
    for x in range(w["dv"].shape[1]):
        lo = int(w["dv"][TLAST, x])
        hi = lo + 200 if thr[x] == BIG else int(thr[x])
        assert hi >= lo  # a bound is never below the availability it was taken at
        for a in sorted({lo + (hi - lo) // 2, hi}):
            dv = w["dv"].copy()
            dv[TLAST, x] = a
            assert estimate(w, dv)[:2] == (v, best)


def test_the_bounds_are_tight_somewhere():
    """Past its bound a device's availability changes the window on some random state: the
    bounds are not vacuous (a bound of 'never' on every device would keep stale windows)."""
    changed = 0
    for seed in range(300):
        w = random_window(np.random.default_rng(seed))
        v, best, thr = estimate(w, w["dv"])
        for x in np.flatnonzero(thr < BIG):
            dv = w["dv"].copy()
            dv[TLAST, x] = thr[x] + 1
            changed += estimate(w, dv)[:2] != (v, best)
    assert changed > 0
