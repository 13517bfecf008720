"""Compiled loops of the certified P1 lower bound (numba, the ``fast`` extra; issue 20 item 1).

Imported only through :func:`opt.placement.bound_options.jit_kernels`, on instances of at
least ``JIT_TASKS`` tasks and when numba is installed. Each kernel performs exactly the
integer and floating-point operations of the pure Python/numpy code it replaces (the callers
keep that code as the fallback), so the bound's values are bit-identical either way: int64
sums wrap as numpy's do (and wrapping addition is associative), maxima and minima of the same
numbers are the same numbers, and the float minima pick the first least value as Python's
``min`` does. Durations in ticks.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def longest_paths(order: np.ndarray, p_off: np.ndarray, preds: np.ndarray, s_off: np.ndarray,
                  succs: np.ndarray, release: np.ndarray, dmin: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(head, tail) int64 [n] of :func:`opt.placement.lower_bounds.heads_tails`: head from the
    releases and the predecessors (``preds[p_off[t]:p_off[t+1]]``), tail incl. the task."""
    n = len(order)
    head = release.copy()
    tail = dmin.copy()
    for i in range(n):
        t = order[i]
        best = head[t]
        for j in range(p_off[t], p_off[t + 1]):
            q = preds[j]
            v = head[q] + dmin[q]
            if v > best:
                best = v
        head[t] = best
    for i in range(n - 1, -1, -1):
        t = order[i]
        a, b = s_off[t], s_off[t + 1]
        if a < b:
            m = tail[succs[a]]
            for j in range(a + 1, b):
                if tail[succs[j]] > m:
                    m = tail[succs[j]]
            tail[t] = dmin[t] + m
    return head, tail


@numba.njit(cache=True)
def min_plus_forward(v0: np.ndarray, seq: np.ndarray, start: int, flat: np.ndarray,
                     offs: np.ndarray, rows: np.ndarray, cols: np.ndarray, rmax: np.ndarray,
                     n_special: int, max_special: int) -> tuple[np.ndarray, int]:
    """(V, k): V ← min over p of V[p] + T_k[p, e] for the segments k = start, … whose table
    is ``seq[k]`` (table i: ``flat[offs[i]:]``, ``rows[i]`` × ``cols[i]``, row-major),
    stopping before the first k that needs a release re-evaluation (``rmax[k] > 0``,
    ``n_special < max_special`` and some finite V[p] < rmax[k]); k = len(seq) when none."""
    v = v0.copy()
    for k in range(start, len(seq)):
        if rmax[k] > 0 and n_special < max_special:
            for x in v:
                if x < rmax[k] and np.isfinite(x):
                    return v, k
        i = seq[k]
        base, nr, nc = offs[i], rows[i], cols[i]
        w = np.empty(nc)
        for e in range(nc):
            best = v[0] + flat[base + e]
            for p in range(1, nr):
                x = v[p] + flat[base + p * nc + e]
                if x < best:
                    best = x
            w[e] = best
        v = w
    return v, len(seq)


@numba.njit(cache=True)
def min_plus_backward(seq: np.ndarray, flat: np.ndarray, offs: np.ndarray, rows: np.ndarray,
                      cols: np.ndarray) -> np.ndarray:
    """float [K] ``min_w`` of :func:`opt.placement.chain_bound._backward_min_plus` (tables as in
    :func:`min_plus_forward`)."""
    n_seg = len(seq)
    w = np.zeros(cols[seq[n_seg - 1]])
    out = np.empty(n_seg)
    for k in range(n_seg - 1, -1, -1):
        m = w[0]
        for x in w[1:]:
            if x < m:
                m = x
        out[k] = m
        i = seq[k]
        base, nr, nc = offs[i], rows[i], cols[i]
        nw = np.empty(nr)
        for p in range(nr):
            best = flat[base + p * nc] + w[0]
            for e in range(1, nc):
                x = flat[base + p * nc + e] + w[e]
                if x < best:
                    best = x
            nw[p] = best
        w = nw
    return out


@numba.njit(cache=True)
def segment_values(dev: np.ndarray, flag: np.ndarray, cost: np.ndarray, cmin: np.ndarray,
                   rel: np.ndarray, rmin: np.ndarray, te: np.ndarray, te_row: np.ndarray,
                   te_col: np.ndarray, te_min: np.ndarray, esrc: np.ndarray, edst: np.ndarray,
                   ins: np.ndarray, outs: np.ndarray, first: int, thresholds: bool, big: int
                   ) -> np.ndarray:
    """int64 [m] of :func:`opt.placement.segment_bound._numpy_values` for the durations,
    releases and transfers of ``_assigned_times`` and ``_edge_durations``: task j (edge e)
    takes its assigned entry when ``flag[j]`` (both ends flagged), else its least one
    (``cmin``, ``rmin``; ``te_row``/``te_col`` with one flagged end, ``te_min``). ``ins``
    (``outs``): the edges into (out of) each local task, CSR offsets (shifted by n + 1) then
    edge indices. Per assignment (row): the longest path, every device's least head + work +
    least tail, with ``thresholds`` also :func:`opt.placement.segment_bound.one_machine`."""
    m, n = dev.shape
    nd = cost.shape[1]
    ne = len(esrc)
    present = np.zeros((nd, n), dtype=np.bool_)  # task j on device d in some row
    for a in range(m):
        for j in range(first, n):
            if dev[a, j] >= 0:
                present[dev[a, j], j] = True
    k_of = np.zeros(nd, dtype=np.int64)
    tasks = np.zeros((nd, n), dtype=np.int64)  # tasks[d, :k_of[d]]: the tasks present on d
    for d in range(nd):
        for j in range(first, n):
            if present[d, j]:
                tasks[d, k_of[d]] = j
                k_of[d] += 1
    out = np.empty(m, dtype=np.int64)
    c = np.empty(n, dtype=np.int64)
    head = np.zeros(n, dtype=np.int64)
    tl = np.zeros(n, dtype=np.int64)
    ed = np.empty(max(ne, 1), dtype=np.int64)
    buf = np.empty((2, n), dtype=np.int64)
    on = np.empty((nd, n), dtype=np.int64)  # on[d, :n_on[d]]: the row's tasks on d, ascending
    n_on = np.empty(nd, dtype=np.int64)
    acc = np.empty((3, nd), dtype=np.int64)  # per device: least head, work, least tail
    for a in range(m):
        for e in range(ne):
            u, v = esrc[e], edst[e]
            if flag[u] and flag[v]:
                ed[e] = te[e, dev[a, u], dev[a, v]]
            elif flag[u]:
                ed[e] = te_row[e, dev[a, u]]
            elif flag[v]:
                ed[e] = te_col[e, dev[a, v]]
            else:
                ed[e] = te_min[e]
        for j in range(n):
            c[j] = cost[j, dev[a, j]] if flag[j] else cmin[j]
        _paths(dev, flag, c, rel, rmin, ed, esrc, edst, ins, outs, a, head, tl)
        val = head[0] + c[0]
        for j in range(1, n):
            if head[j] + c[j] > val:
                val = head[j] + c[j]
        val = _device_bounds(dev, a, c, head, tl, on, n_on, tasks, k_of, first, thresholds,
                             big, val, buf, acc)
        out[a] = val
    return out


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _paths(dev: np.ndarray, flag: np.ndarray, c: np.ndarray, rel: np.ndarray,
           rmin: np.ndarray, ed: np.ndarray, esrc: np.ndarray, edst: np.ndarray,
           ins: np.ndarray, outs: np.ndarray, a: int, head: np.ndarray, tl: np.ndarray) -> None:
    """Row a's heads (release, then the longest path from the predecessors) and tails (after
    the task, excluding it) into ``head`` and ``tl``; unset entries read as 0, as in numpy."""
    n = len(c)
    head[:] = 0
    tl[:] = 0
    for j in range(n):
        h = rel[j, dev[a, j]] if flag[j] else rmin[j]
        for i in range(ins[j], ins[j + 1]):
            e = ins[i]
            u = esrc[e]
            x = head[u] + c[u] + ed[e]
            if x > h:
                h = x
        head[j] = h
    for j in range(n - 1, -1, -1):
        t = 0
        for i in range(outs[j], outs[j + 1]):
            e = outs[i]
            v = edst[e]
            x = ed[e] + c[v] + tl[v]
            if x > t:
                t = x
        tl[j] = t


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _device_bounds(dev: np.ndarray, a: int, c: np.ndarray, head: np.ndarray, tl: np.ndarray,
                   on: np.ndarray, n_on: np.ndarray, tasks: np.ndarray, k_of: np.ndarray,
                   first: int, thresholds: bool, big: int, val: int, buf: np.ndarray,
                   acc: np.ndarray) -> int:
    """``val`` raised by every device's bounds for assignment row a (numpy's masks: nothing
    for a device no row uses, 0 for a row without a task on it); ``tasks[d, :k_of[d]]``: the
    tasks on d in some row (numpy's ``rows``); ``on[d, :n_on[d]]`` ← the row's tasks on d."""
    nd = len(k_of)
    for d in range(nd):
        acc[0, d], acc[1, d], acc[2, d], n_on[d] = big, 0, big, 0
    for j in range(first, len(c)):
        d = dev[a, j]
        if d >= 0:
            acc[0, d] = min(acc[0, d], head[j])
            acc[1, d] += c[j]
            acc[2, d] = min(acc[2, d], tl[j])
            on[d, n_on[d]] = j
            n_on[d] += 1
    for d in range(nd):
        if k_of[d] > 0:
            val = max(val, acc[0, d] + acc[1, d] + acc[2, d] if n_on[d] else 0)
    if thresholds:
        for d in range(nd):
            if k_of[d] == 1:
                val = max(val, 0)
            elif k_of[d] > 1:
                val = max(val, _one_machine_row(dev, a, c, head, tl, on, n_on[d], tasks,
                                                k_of[d], d, big, buf))
                val = max(val, _one_machine_row(dev, a, c, tl, head, on, n_on[d], tasks,
                                                k_of[d], d, big, buf))
    return val


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _one_machine_row(dev: np.ndarray, a: int, c: np.ndarray, key_of: np.ndarray,
                     tail_of: np.ndarray, on: np.ndarray, k_on: int, tasks: np.ndarray, k: int,
                     d: int, big: int, buf: np.ndarray) -> int:
    """:func:`opt.placement.segment_bound.one_machine` for assignment row a over
    ``tasks[d, :k]`` (``on[d, :k_on]``: those on d, in the same order): stable sort by
    ``-key`` (key −big off the device), then the maximum of key + cumulated duration + least
    tail so far (0 where key is −big), capped at big. When every key on d exceeds −big, the
    tasks off d sort last and each gives 0: only the tasks on d are sorted."""
    neg, idx = buf[0], buf[1]
    for i in range(k_on):
        j = on[d, i]
        if key_of[j] <= -big:
            return _one_machine_full(dev[a], c, key_of, tail_of, tasks[d, :k], d, big, buf)
        x, pos = -key_of[j], i  # insertion sort, stable: shift only strictly larger entries
        while pos > 0 and neg[pos - 1] > x:
            neg[pos], idx[pos] = neg[pos - 1], idx[pos - 1]
            pos -= 1
        neg[pos], idx[pos] = x, j
    best = 0
    ps = 0
    qs = big
    for i in range(k_on):
        j = idx[i]
        ps += c[j]
        qs = tail_of[j] if i == 0 else min(qs, tail_of[j])  # numpy's cumulative minimum
        lb = min(key_of[j] + ps + qs, big)
        if i == 0 or lb > best:
            best = lb
    if k_on < k and best < 0:
        best = 0
    return best


@numba.njit(cache=True)
def _one_machine_full(row: np.ndarray, c: np.ndarray, key_of: np.ndarray, tail_of: np.ndarray,
                      tasks: np.ndarray, d: int, big: int, buf: np.ndarray) -> int:
    """:func:`_one_machine_row` sorting every task of ``tasks`` (some key on d is ≤ −big)."""
    k = len(tasks)
    neg, idx = buf[0], buf[1]
    for i in range(k):
        j = tasks[i]
        neg[i] = -(key_of[j] if row[j] == d else -big)
        pos = i  # insertion sort, stable: shift only strictly larger entries
        while pos > 0 and neg[idx[pos - 1]] > neg[i]:
            idx[pos] = idx[pos - 1]
            pos -= 1
        idx[pos] = i
    best = 0
    ps = 0
    qs = big
    for i in range(k):
        j = tasks[idx[i]]
        on = row[j] == d
        hs = key_of[j] if on else -big
        ps += c[j] if on else 0
        q = tail_of[j] if on else big
        qs = q if i == 0 else min(qs, q)  # numpy's cumulative minimum
        lb = min(hs + ps + qs if hs > -big else 0, big)
        if i == 0 or lb > best:
            best = lb
    return best
