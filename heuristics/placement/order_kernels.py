"""numba kernels of the task orders: HEFT's upward rank and priority order, Bifocal's sibling
order (a begun group's siblings moved ahead of the held pinned tasks) and the orders computed
in one call from the instance's arrays (:func:`heft_order`, :func:`bifocal_order`), the rank's
float sums in numpy's order (sequential below 8 devices; :mod:`heuristics.placement.schedule_arrays`
sums them in numpy from 8 devices on). ``NUMBA_DISABLE_JIT=1`` runs them as plain Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heuristics.placement.setup_kernels import sibling_groups
from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache


@njit(cache=True)
def upward_rank_loop(topo, s_off, s_idx, dst, mc, comm):
    """HEFT's upward rank over ``topo`` reversed: ``upward_rank``'s loop (float64)."""
    rank = mc.copy()
    for i in range(len(topo) - 1, -1, -1):
        t = topo[i]
        lo, hi = s_off[t], s_off[t + 1]
        if lo == hi:
            continue
        best = 0.0
        for j in range(lo, hi):
            e = s_idx[j]
            v = comm[e] + rank[dst[e]]
            if j == lo or v > best:
                best = v
        rank[t] = mc[t] + best
    return rank


@njit(cache=True)
def _heap_less(ka, ta, kb, tb):
    return ka < kb or (ka == kb and ta < tb)


@njit(cache=True)
def _sift_up(hk, ht, i):
    while i > 0:
        p = (i - 1) >> 1
        if _heap_less(hk[i], ht[i], hk[p], ht[p]):
            hk[i], hk[p] = hk[p], hk[i]
            ht[i], ht[p] = ht[p], ht[i]
            i = p
        else:
            break


@njit(cache=True)
def _sift_down(hk, ht, size):
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _heap_less(hk[c + 1], ht[c + 1], hk[c], ht[c]):
            c += 1
        if _heap_less(hk[c], ht[c], hk[i], ht[i]):
            hk[i], hk[c] = hk[c], hk[i]
            ht[i], ht[c] = ht[c], ht[i]
            i = c
        else:
            break


@njit(cache=True)
def priority_loop(indeg, s_off, s_idx, dst, neg):
    """``priority_order``'s heap: ready tasks by (−priority, index), smallest first. The keys
    are distinct, so every binary heap pops them in heapq's order."""
    n = len(indeg)
    hk = np.empty(n, np.float64)
    ht = np.empty(n, np.int64)
    size = 0
    for t in range(n):
        if indeg[t] == 0:
            hk[size] = neg[t]
            ht[size] = t
            size += 1
            _sift_up(hk, ht, size - 1)
    out = np.empty(n, np.int64)
    m = 0
    while size > 0:
        t = ht[0]
        size -= 1
        hk[0] = hk[size]
        ht[0] = ht[size]
        _sift_down(hk, ht, size)
        out[m] = t
        m += 1
        for j in range(s_off[t], s_off[t + 1]):
            v = dst[s_idx[j]]
            indeg[v] -= 1
            if indeg[v] == 0:
                hk[size] = neg[v]
                ht[size] = v
                size += 1
                _sift_up(hk, ht, size - 1)
    return out[:m]


@njit(cache=True)
def sibling_loop(order, gid, pinned, n_groups):
    """``sibling_order``'s loop: a begun group's sibling moves ahead of the held pinned tasks."""
    begun = np.zeros(n_groups, np.bool_)
    out = np.empty(len(order), np.int64)
    held = np.empty(len(order), np.int64)
    m = 0
    nh = 0
    for t in order:
        g = gid[t]
        if pinned[t]:
            held[nh] = t
            nh += 1
        elif g >= 0 and begun[g]:
            out[m] = t
            m += 1
        else:
            for i in range(nh):
                out[m] = held[i]
                m += 1
            nh = 0
            out[m] = t
            m += 1
            if g >= 0:
                begun[g] = True
    for i in range(nh):
        out[m] = held[i]
        m += 1
    return out[:m]


@njit(cache=True, nogil=True, error_model="numpy")
def mean_costs(cost):
    """float [n]: each task's mean legal duration, the legal durations summed in device order
    (numpy's row sum of ``upward_rank``, which is sequential below 8 devices)."""
    n, nd = cost.shape
    out = np.empty(n)
    for t in range(n):
        s = 0.0
        k = 0
        for d in range(nd):
            if cost[t, d] >= 0:
                s += float(cost[t, d])
                k += 1
        out[t] = s / k
    return out


@njit(cache=True, nogil=True)
def mean_transfers(nbytes, lat_mean, inv_bw_mean):
    """float [m]: ``upward_rank``'s mean transfer time of each edge, lat_mean + bytes·inv_bw_mean."""
    out = np.empty(len(nbytes))
    for e in range(len(nbytes)):
        out[e] = lat_mean + float(nbytes[e]) * inv_bw_mean
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def upward_ranks(topo, s_off, s_idx, dst, cost, nbytes, lat_mean, inv_bw_mean):
    """HEFT's upward rank (float [n]) from the cost matrix and the payloads: ``upward_rank``."""
    return upward_rank_loop(topo, s_off, s_idx, dst, mean_costs(cost),
                            mean_transfers(nbytes, lat_mean, inv_bw_mean))


@njit(cache=True, nogil=True, error_model="numpy")
def heft_order(topo, s_off, s_idx, dst, cost, nbytes, lat_mean, inv_bw_mean):
    """HEFT's task order: ``priority_order`` of the upward ranks (int64 task indices)."""
    rank = upward_ranks(topo, s_off, s_idx, dst, cost, nbytes, lat_mean, inv_bw_mean)
    indeg = np.zeros(len(topo), np.int64)
    for e in range(len(dst)):
        indeg[dst[e]] += 1
    return priority_loop(indeg, s_off, s_idx, dst, -rank)


@njit(cache=True, nogil=True, error_model="numpy")
def bifocal_order(topo, s_off, s_idx, dst, cost, nbytes, lat_mean, inv_bw_mean, p_off, p_idx,
                  esrc):
    """(order, exact): HEFT's order with the siblings moved up (``sibling_order``); exact False
    when :func:`sibling_groups` met a hash collision (the caller recomputes the groups)."""
    order = heft_order(topo, s_off, s_idx, dst, cost, nbytes, lat_mean, inv_bw_mean)
    gid, pinned, exact = sibling_groups(cost, p_off, p_idx, esrc)
    if not exact:
        return order, False
    return sibling_loop(order, gid, pinned, max(gid.max() + 1, 1) if len(gid) else 1), True

