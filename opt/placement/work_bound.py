"""The work components of the certified P1 lower bound (:mod:`opt.placement.certified_bounds`):
``work_average`` (the cheapest work spread over all devices) and ``work_lp``, the fractional
unrelated-machines relaxation certified by weak duality — for any device weights ``y`` in the
simplex, ``makespan ≥ Σ_v min_{d legal} y_d cost[v, d]``; HiGHS only chooses ``y`` and the bound
is recomputed from it, so solver tolerances cannot make it invalid. Durations in ticks.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from opt.common.rows import unique_rows
from opt.placement.instance import PlacementInstance
from opt.placement.overlap_bound import shortened_loads

#: "Infinite" duration of an illegal (task, device) pair in the certified bounds.
BIG = np.iinfo(np.int64).max // 4


def cheapest(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: each task's cheapest legal duration."""
    return np.where(inst.cost >= 0, inst.cost, BIG).min(axis=1)


def work_lp_bound(inst: PlacementInstance) -> tuple[int, np.ndarray]:
    """(bound, y): ``Σ_v min_{d legal} y_d cost[v, d]`` for the LP-optimal device weights y.
    Under ``load_timing: at_use`` every used block also counts as one job whose duration on d
    is its load there, over the devices that may run one of its tasks (:func:`load_rows`)."""
    rows, counts = unique_cost_rows(np.concatenate([inst.cost, load_rows(inst)]))
    nd = inst.n_devices
    y = np.full(nd, 1.0 / nd)
    try:
        y = lp_weights(rows, counts.astype(np.float64))
    except (ImportError, ValueError, RuntimeError):
        pass  # any y in the simplex gives a valid bound; the uniform one is the fallback
    return _dual_value(rows, counts, y), y


def load_rows(inst: PlacementInstance) -> np.ndarray:
    """int64 [k, D]: under ``load_timing: at_use`` (problems.md §1.2 rule 5) one row per used
    block, its shortest load (over every format) on each device that may run one of its tasks
    (−1 elsewhere), else no rows. Valid as extra work: each used block is loaded at least once, onto a device that
    runs one of its tasks, and under at_use that load runs in its task's slot, when the device
    computes nothing else and loads nothing else (so busy_d ≥ compute + loads on d). Under
    ``overlap`` the rows hold the loads shortened by the longest user duration on the device
    (:func:`opt.placement.overlap_bound.shortened_loads`): the load and its task's computation
    cover ≥ max(load, p_v) ≥ p_v + max(0, load − P(b, d)) of the device's time, nothing else
    computing there (docs/lower_bounds.md "Bounds under overlap")."""
    nd = inst.n_devices
    if inst.load_timing not in ("at_use", "overlap") or not len(inst.block_ids):
        return np.zeros((0, nd), dtype=np.int64)
    block_load = shortened_loads(inst) if inst.load_timing == "overlap" else inst.block_load
    users = np.flatnonzero(inst.task_block >= 0)
    may = np.zeros((len(inst.block_ids), nd), dtype=bool)
    np.logical_or.at(may, inst.task_block[users], inst.cost[users] >= 0)
    # the shortest load over every format (a relaxation, so P2's format choice is covered)
    big = np.iinfo(np.int64).max
    load = np.min([np.where(a >= 0, a, big) for a in block_load.values()], axis=0) \
        if block_load else np.full(may.shape, big)
    out = np.where(may & (load < big), load, -1)
    return out[(out >= 0).any(axis=1)]


def unique_cost_rows(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(cost, axis=0, return_counts=True)`` (rows in lexicographic order), without
    its sort of the [n, D] rows as records: the rows are grouped by
    :func:`opt.common.rows.unique_rows` (a checked 1-D hash), then the few distinct rows are
    sorted."""
    a = np.ascontiguousarray(cost, dtype=np.int64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        return np.unique(a, axis=0, return_counts=True)
    distinct, inv = unique_rows(a)
    rows, inv2 = np.unique(distinct, axis=0, return_inverse=True)
    counts = np.bincount(inv2.reshape(-1)[inv], minlength=len(rows))
    return rows, counts


def _dual_value(rows: np.ndarray, counts: np.ndarray, y: np.ndarray) -> int:
    """The weak-duality bound for weights y (clipped, renormalised; safe rounding)."""
    y = np.clip(np.asarray(y, dtype=np.float64), 0.0, None)
    y = y / y.sum() if y.sum() > 0 else np.full(len(y), 1.0 / len(y))
    per = np.where(rows >= 0, rows * y[None, :], np.inf).min(axis=1)
    value = float(np.dot(per, counts))
    return max(0, math.ceil(value - 1e-9 * max(1.0, value)))


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """File descriptor 1 to /dev/null for the block (C libraries' prints included)."""
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def lp_weights(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Dual LP: max Σ_g n_g u_g s.t. u_g ≤ c_gd y_d (legal), Σ y = 1, y ≥ 0 (HiGHS, through
    highspy directly: scipy.optimize would add ~0.3 s of import to every solve)."""
    import highspy

    g, nd = rows.shape
    scale = float(rows.max()) if rows.max() > 0 else 1.0
    gi, di = np.nonzero(rows >= 0)
    m = len(gi)
    # columns u_0..u_{g-1}, y_0..y_{nd-1}; rows k < m: u_g − (c_gd / scale) y_d ≤ 0; row m: Σ y = 1
    r = np.concatenate([np.arange(m), np.arange(m), np.full(nd, m)])
    c = np.concatenate([gi, g + di, g + np.arange(nd)])
    v = np.concatenate([np.ones(m), -rows[gi, di] / scale, np.ones(nd)])
    order = np.lexsort((r, c))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = g + nd, m + 1
    lp.col_cost_ = -np.concatenate([counts, np.zeros(nd)])
    lp.col_lower_ = np.concatenate([np.full(g, -highspy.kHighsInf), np.zeros(nd)])
    lp.col_upper_ = np.full(g + nd, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate([np.full(m, -highspy.kHighsInf), [1.0]])
    lp.row_upper_ = np.concatenate([np.zeros(m), [1.0]])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(c[order], np.arange(g + nd + 1)).astype(np.int32)
    lp.a_matrix_.index_ = r[order].astype(np.int32)
    lp.a_matrix_.value_ = v[order]
    with _quiet_stdout():  # HiGHS prints its banner on the C-level stdout when constructed
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        # no "threads" option: HiGHS' scheduler is process-global, and asking for another
        # thread count than the one it started with makes the run fail
        h.passModel(lp)
        h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS status {h.modelStatusToString(h.getModelStatus())}")
    return np.asarray(h.getSolution().col_value[g:])
