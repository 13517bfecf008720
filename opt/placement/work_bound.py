"""The work components of the certified P1 lower bound (:mod:`opt.placement.certified_bounds`):
``work_average`` (the cheapest work spread over all devices) and ``work_lp``, the fractional
unrelated-machines relaxation certified by weak duality — for any device weights ``y`` in the
simplex, ``makespan ≥ Σ_v min_{d legal} y_d cost[v, d]``; HiGHS only chooses ``y`` and the bound
is recomputed from it, so solver tolerances cannot make it invalid. Durations in ticks.
"""

from __future__ import annotations

import math

import numpy as np

from opt.placement.instance import PlacementInstance

#: "Infinite" duration of an illegal (task, device) pair in the certified bounds.
BIG = np.iinfo(np.int64).max // 4


def cheapest(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: each task's cheapest legal duration."""
    return np.where(inst.cost >= 0, inst.cost, BIG).min(axis=1)


def work_lp_bound(inst: PlacementInstance) -> tuple[int, np.ndarray]:
    """(bound, y): ``Σ_v min_{d legal} y_d cost[v, d]`` for the LP-optimal device weights y."""
    rows, counts = np.unique(inst.cost, axis=0, return_counts=True)
    nd = inst.n_devices
    y = np.full(nd, 1.0 / nd)
    try:
        y = lp_weights(rows, counts.astype(np.float64))
    except (ImportError, ValueError, RuntimeError):
        pass  # any y in the simplex gives a valid bound; the uniform one is the fallback
    return _dual_value(rows, counts, y), y


def _dual_value(rows: np.ndarray, counts: np.ndarray, y: np.ndarray) -> int:
    """The weak-duality bound for weights y (clipped, renormalised; safe rounding)."""
    y = np.clip(np.asarray(y, dtype=np.float64), 0.0, None)
    y = y / y.sum() if y.sum() > 0 else np.full(len(y), 1.0 / len(y))
    per = np.where(rows >= 0, rows * y[None, :], np.inf).min(axis=1)
    value = float(np.dot(per, counts))
    return max(0, math.ceil(value - 1e-9 * max(1.0, value)))


def lp_weights(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Dual LP: max Σ_g n_g u_g s.t. u_g ≤ c_gd y_d (legal), Σ y = 1, y ≥ 0 (HiGHS)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    g, nd = rows.shape
    scale = float(rows.max()) if rows.max() > 0 else 1.0
    gi, di = np.nonzero(rows >= 0)
    m = len(gi)
    # variables: u_0..u_{g-1}, y_0..y_{nd-1};  u_g - c_gd y_d <= 0
    data = np.concatenate([np.ones(m), -rows[gi, di] / scale])
    r = np.concatenate([np.arange(m), np.arange(m)])
    c = np.concatenate([gi, g + di])
    a_ub = coo_matrix((data, (r, c)), shape=(m, g + nd)).tocsr()
    a_eq = np.concatenate([np.zeros(g), np.ones(nd)])[None, :]
    obj = -np.concatenate([counts, np.zeros(nd)])
    bounds = [(None, None)] * g + [(0, None)] * nd
    res = linprog(obj, A_ub=a_ub, b_ub=np.zeros(m), A_eq=a_eq, b_eq=[1.0], bounds=bounds,
                  method="highs")
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"HiGHS status {res.status}")
    return np.asarray(res.x[g:])
