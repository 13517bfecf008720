"""Compiled loops of the certified P1 lower bound (numba, the ``fast`` extra).

Imported only through :func:`opt.placement.bound_options.jit_kernels`, on instances of at
least ``JIT_TASKS`` tasks and when numba is installed. Each kernel performs exactly the
integer and floating-point operations of the pure Python/numpy code it replaces (the callers
keep that code as the fallback), so the bound's values are bit-identical either way: int64
sums wrap as numpy's do (and wrapping addition is associative), maxima and minima of the same
numbers are the same numbers, and the float minima pick the first least value as Python's
``min`` does. ``segment_below`` stops an assignment row once its value so far (a running
maximum) reaches the row's bound: the rows that finish have the same integers, and the
stopped ones could not change a per-cell minimum or a below-bound test. Durations in ticks.
"""

from __future__ import annotations

from collections import namedtuple

import numba
import numpy as np

from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache

#: :func:`segment_below`'s per-segment tables (:func:`opt.placement.segment_bound.kernel_tables`
#: in this order): durations [n, D] and their least per task, releases [n, D] and their least,
#: transfers [E, D, D] and their least per source device, per destination device and overall
#: (ticks), edge sources and destinations, CSR of the edges into and out of each task
SegmentTables = namedtuple("SegmentTables",
                           "cost cmin rel rmin te te_row te_col te_min esrc edst ins outs")
#: one assignment row's scratch arrays in :func:`segment_below` (ticks): durations ``c``,
#: heads, running longest path ``pm``, tails ``tl``, transfer durations ``ed``, the
#: one-machine sort buffer, the row's tasks per device (``on``, ``n_on``), per-device sums
RowScratch = namedtuple("RowScratch", "c head pm tl ed buf on n_on acc")
#: :func:`chain_decompose`'s segments: first and last position in the order, cut before
ChainCuts = namedtuple("ChainCuts", "starts ends has_prev")
#: :func:`segment_labels`' segments: first position, size, first local edge, edge count, cut
#: before, cut after
SegmentSpans = namedtuple("SegmentSpans", "lo size e0 ne has_prev has_end")


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


@numba.njit(cache=True, nogil=True)
def segment_below(dev: np.ndarray, flag: np.ndarray, t: SegmentTables, first: int,
                  thresholds: bool, big: int, cell: np.ndarray, bound: np.ndarray, update: bool,
                  ordered: bool) -> np.ndarray:
    """bool [m]: whether assignment row a's value (:func:`opt.placement.segment_bound.
    _numpy_values` for the durations, releases and transfers of ``_assigned_times`` and
    ``_edge_durations``, as a float capped at ``big`` like ``_as_float``) is below
    ``bound[cell[a]]``; with ``update`` that value then replaces ``bound[cell[a]]`` (so
    ``bound`` ends as the least value per cell, as ``np.minimum.at`` would leave it, in any
    row order).

    Task j (edge e) takes its assigned entry of the :data:`SegmentTables` ``t`` when
    ``flag[j]`` (both ends flagged), else its least one (``cmin``, ``rmin``;
    ``te_row``/``te_col`` with one flagged end, ``te_min``).
    ``ins`` (``outs``): the edges into (out of) each local task, CSR offsets (shifted by
    n + 1) then edge indices. A row's value is the maximum of the longest path, every
    device's least head + work + least tail and with ``thresholds``
    :func:`opt.placement.segment_bound.one_machine`; it only grows as its terms are taken in,
    so a row stops (not below) as soon as the value so far reaches the bound — the same
    integers as the full evaluation wherever it finishes. Rows are visited in their order
    when ``ordered``, else in :func:`_lex_order`'s (copied into it: memory order); a row's
    heads up to its first device differing from the previous row's are the previous row's
    (a head depends on earlier tasks only)."""
    m, n = dev.shape
    nd = t.cost.shape[1]
    perm = np.arange(m) if ordered else _lex_order(dev, flag, nd)
    rows = dev if ordered else dev[perm]
    tasks, k_of = _present_tasks(rows, first, nd)
    emode = _edge_modes(flag, t.esrc, t.edst)
    below = np.zeros(m, dtype=np.bool_)
    r = _row_scratch(n, nd, len(t.esrc))
    pm = r.pm
    valid = 0  # the heads of tasks < valid are those of the previous row
    for a in range(m):
        ca = cell[perm[a]]
        lim = bound[ca]
        s = 0
        if a > 0:
            while s < valid and rows[a, s] == rows[a - 1, s]:
                s += 1
        if s > 0 and _capped(pm[s - 1], big) >= lim:
            valid = s
            continue
        valid = _heads(rows, flag, t, emode, a, s, r, big, lim)
        if valid < n:
            continue
        _tails(r.c, r.ed, t.edst, t.outs, r.tl)
        val = _device_bounds(rows, a, r, tasks, k_of, first, thresholds, big, pm[n - 1], lim)
        f = _capped(val, big)
        if f < lim:
            below[perm[a]] = True
            if update:
                bound[ca] = f
    return below


@numba.njit(cache=True)
def _edge_modes(flag: np.ndarray, esrc: np.ndarray, edst: np.ndarray) -> np.ndarray:
    """int64 [max(E, 1)]: per edge 0 when both ends are flagged, 1 only its source, 2 only
    its destination, 3 neither."""
    ne = len(esrc)
    emode = np.empty(max(ne, 1), dtype=np.int64)
    for e in range(ne):
        emode[e] = 0 if flag[esrc[e]] and flag[edst[e]] else \
            1 if flag[esrc[e]] else 2 if flag[edst[e]] else 3
    return emode


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _row_scratch(n: int, nd: int, ne: int) -> RowScratch:
    """Scratch arrays of one assignment row over n tasks, nd devices and ne edges."""
    return RowScratch(c=np.empty(n, dtype=np.int64),
                      head=np.zeros(n, dtype=np.int64),
                      pm=np.zeros(n, dtype=np.int64),  # pm[j]: max of head + c over 0 … j
                      tl=np.zeros(n, dtype=np.int64),
                      ed=np.empty(max(ne, 1), dtype=np.int64),
                      buf=np.empty((2, n), dtype=np.int64),
                      on=np.empty((nd, n), dtype=np.int64),  # on[d, :n_on[d]]: tasks on d
                      n_on=np.empty(nd, dtype=np.int64),
                      acc=np.empty((3, nd), dtype=np.int64))  # least head, work, least tail


@numba.njit(cache=True)
def _lex_order(dev: np.ndarray, flag: np.ndarray, nd: int) -> np.ndarray:
    """int64 [m]: the rows of ``dev`` ordered by their devices in the flagged columns, the
    first column most significant (as many leading flagged columns as an int64 key holds)."""
    m, n = dev.shape
    key = np.zeros(m, dtype=np.int64)
    scale = 1
    for j in range(n):
        if not flag[j]:
            continue
        if scale > (2 ** 62) // (nd + 1):
            break
        scale *= nd + 1
        for a in range(m):
            key[a] = key[a] * (nd + 1) + dev[a, j] + 1
    return np.argsort(key)


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _capped(x: int, big: int) -> float:
    """``x`` capped at ``big`` as a float, inf at the cap (``segment_bound._as_float``)."""
    f = float(min(x, big))
    return np.inf if f >= float(big) else f


@numba.njit(cache=True)
def _present_tasks(dev: np.ndarray, first: int, nd: int) -> tuple[np.ndarray, np.ndarray]:
    """(tasks [D, n], k_of [D]): ``tasks[d, :k_of[d]]`` the local tasks (from ``first``,
    ascending) on device d in some row of ``dev`` (numpy's ``rows`` in ``one_machine``)."""
    m, n = dev.shape
    present = np.zeros((nd, n), dtype=np.bool_)
    for a in range(m):
        for j in range(first, n):
            if dev[a, j] >= 0:
                present[dev[a, j], j] = True
    k_of = np.zeros(nd, dtype=np.int64)
    tasks = np.zeros((nd, n), dtype=np.int64)
    for d in range(nd):
        for j in range(first, n):
            if present[d, j]:
                tasks[d, k_of[d]] = j
                k_of[d] += 1
    return tasks, k_of


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _heads(dev: np.ndarray, flag: np.ndarray, t: SegmentTables, emode: np.ndarray, a: int,
           start: int, r: RowScratch, big: int, lim: float) -> int:
    """Row a's durations ``r.c``, transfer durations ``r.ed`` (of the edges into each task)
    and heads (release, then the longest path from the predecessors) in local order from task
    ``start`` (those before are row a's already), with ``r.pm`` the running longest path
    max(head + c). Returns the number of tasks done: j + 1 once ``pm[j]`` (capped) reaches
    ``lim``, else n."""
    c, head, pm, ed = r.c, r.head, r.pm, r.ed
    cost, cmin, rel, rmin, te, te_row, te_col, te_min, esrc, _, ins, _ = t
    n = len(c)
    for j in range(start, n):
        dj = dev[a, j]
        if flag[j]:
            c[j] = cost[j, dj]
            h = rel[j, dj]
        else:
            c[j] = cmin[j]
            h = rmin[j]
        for i in range(ins[j], ins[j + 1]):
            e = ins[i]
            u = esrc[e]
            mode = emode[e]
            if mode == 0:
                x = te[e, dev[a, u], dj]
            elif mode == 1:
                x = te_row[e, dev[a, u]]
            elif mode == 2:
                x = te_col[e, dj]
            else:
                x = te_min[e]
            ed[e] = x
            x += head[u] + c[u]
            if x > h:
                h = x
        head[j] = h
        x = h + c[j]
        if j == 0 or x > pm[j - 1]:
            pm[j] = x
            if _capped(x, big) >= lim:
                return j + 1
        else:
            pm[j] = pm[j - 1]
    return n


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _tails(c: np.ndarray, ed: np.ndarray, edst: np.ndarray, outs: np.ndarray,
           tl: np.ndarray) -> None:
    """Each task's tail (the longest path after it ends, excluding it) into ``tl``."""
    for j in range(len(c) - 1, -1, -1):
        t = 0
        for i in range(outs[j], outs[j + 1]):
            e = outs[i]
            v = edst[e]
            x = ed[e] + c[v] + tl[v]
            if x > t:
                t = x
        tl[j] = t


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _device_bounds(dev: np.ndarray, a: int, r: RowScratch, tasks: np.ndarray,
                   k_of: np.ndarray, first: int, thresholds: bool, big: int, val: int,
                   lim: float) -> int:
    """``val`` raised by every device's bounds for assignment row a (numpy's masks: nothing
    for a device no row uses, 0 for a row without a task on it); ``tasks[d, :k_of[d]]``: the
    tasks on d in some row (numpy's ``rows``); ``r.on[d, :r.n_on[d]]`` ← the row's tasks on
    d. Returns early once ``val`` (capped) reaches ``lim``: the one-machine sorts are
    skipped."""
    c, head, tl, on, n_on, acc = r.c, r.head, r.tl, r.on, r.n_on, r.acc
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
    if not thresholds or _capped(val, big) >= lim:
        return val
    for d in range(nd):
        if k_of[d] == 1:
            val = max(val, 0)
        elif k_of[d] > 1:
            val = max(val, _one_machine_row(dev, a, r, head, tl, n_on[d], tasks, k_of[d], d,
                                            big))
            if _capped(val, big) >= lim:
                return val
            val = max(val, _one_machine_row(dev, a, r, tl, head, n_on[d], tasks, k_of[d], d,
                                            big))
            if _capped(val, big) >= lim:
                return val
    return val


@numba.njit(cache=True, inline="always")  # no per-call array reference counts
def _one_machine_row(dev: np.ndarray, a: int, r: RowScratch, key_of: np.ndarray,
                     tail_of: np.ndarray, k_on: int, tasks: np.ndarray, k: int, d: int, big: int
                     ) -> int:
    """:func:`opt.placement.segment_bound.one_machine` for assignment row a over
    ``tasks[d, :k]`` (``r.on[d, :k_on]``: those on d, in the same order): stable sort by
    ``-key`` (key −big off the device), then the maximum of key + cumulated duration + least
    tail so far (0 where key is −big), capped at big. When every key on d exceeds −big, the
    tasks off d sort last and each gives 0: only the tasks on d are sorted."""
    c, on, buf = r.c, r.on, r.buf
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


@numba.njit(cache=True, nogil=True)
def chain_decompose(order: np.ndarray, cuts: ChainCuts, p_off: np.ndarray, preds: np.ndarray,
                    edge_src: np.ndarray, edge_bytes: np.ndarray, cost: np.ndarray,
                    task_block: np.ndarray, load_duration: np.ndarray, big: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lu, lv, eb, e_off, seg_rmax) of :func:`opt.placement.chain_bound._decompose`: the
    segment-local edges (source inside segment k or its previous cut) sorted by segment,
    destination, source — ties in edge order, as its stable sort — from the instance's
    predecessor CSR (``preds[p_off[t]:p_off[t + 1]]``: the edges into t in edge order); and
    per segment the largest weight-load release on a legal device (ticks, 0 without one).
    Segment k (:data:`ChainCuts`): positions ``starts[k]`` … ``ends[k]`` of ``order``."""
    starts, ends, has_prev = cuts
    n, nd = len(order), cost.shape[1]
    pos = np.empty(n, dtype=np.int64)
    for p in range(n):
        pos[order[p]] = p
    lu = np.empty(len(preds), dtype=np.int64)
    lv = np.empty(len(preds), dtype=np.int64)
    eb = np.empty(len(preds), dtype=np.int64)
    e_off = np.zeros(len(starts) + 1, dtype=np.int64)
    seg_rmax = np.zeros(len(starts), dtype=np.int64)
    cnt = 0
    for k in range(len(starts)):
        st, off, rm = starts[k], 1 if has_prev[k] else 0, 0
        for p in range(st, ends[k] + 1):
            t = order[p]
            b = task_block[t]
            if b >= 0:
                for d in range(nd):
                    x = load_duration[b, d]
                    if cost[t, d] >= 0 and 0 <= x < big and x > rm:
                        rm = x
            b0 = cnt
            for i in range(p_off[t], p_off[t + 1]):
                sp = pos[edge_src[preds[i]]]
                if sp >= st - off:  # inside the segment (sp < p) or its previous cut
                    lu[cnt], lv[cnt], eb[cnt] = sp - st + off, p - st + off, \
                        edge_bytes[preds[i]]
                    cnt += 1
            _sort_bucket(lu, eb, b0, cnt)
        e_off[k + 1] = cnt
        seg_rmax[k] = rm
    return lu[:cnt], lv[:cnt], eb[:cnt], e_off, seg_rmax


@numba.njit(cache=True)
def _sort_bucket(key: np.ndarray, other: np.ndarray, lo: int, hi: int) -> None:
    """Stable sort of ``key[lo:hi]`` (``other`` alongside): insertion sort, merge sort when
    long."""
    if hi - lo > 32:
        idx = np.argsort(key[lo:hi], kind="mergesort") + lo
        key[lo:hi], other[lo:hi] = key[idx], other[idx]
        return
    for i in range(lo + 1, hi):
        x, y, j = key[i], other[i], i
        while j > lo and key[j - 1] > x:  # shift only strictly larger entries: stable
            key[j], other[j] = key[j - 1], other[j - 1]
            j -= 1
        key[j], other[j] = x, y


@numba.njit(cache=True, nogil=True)
def segment_labels(seg: SegmentSpans, order: np.ndarray, cost: np.ndarray, kind: np.ndarray,
                   lu: np.ndarray, lv: np.ndarray, eb: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(shape_of, data_of) of :func:`opt.placement.chain_bound._shapes`: per segment the first
    segment of equal shape (cut flags, size, legal devices, kinds, local edges), and the first
    of equal shape and data (durations, edge bytes). Segment k (:data:`SegmentSpans` ``seg``):
    positions ``lo[k]`` …
    ``lo[k] + size[k] − 1`` of ``order``, edges ``e0[k]`` … ``e0[k] + ne[k] − 1``. Equal shape
    and data is equal everything, so data labels come first (over all segments); the first
    segment of a shape is the first of its data, so shape labels are found among the data
    labels only. Both through a hash table of 64-bit hashes, every match compared in full."""
    m = len(seg.lo)
    everything = np.arange(m)
    data_of = _first_equal(everything, seg, order, cost, kind, lu, lv, eb, True)
    reps = np.flatnonzero(data_of == everything)
    rep_shape = _first_equal(reps, seg, order, cost, kind, lu, lv, eb, False)
    shape_of = np.empty(m, dtype=np.int64)
    for i in range(len(reps)):
        shape_of[reps[i]] = rep_shape[i]
    for k in range(m):
        shape_of[k] = shape_of[data_of[k]]
    return shape_of, data_of


@numba.njit(cache=True, inline="always")
def _mix(h: np.uint64, x: int) -> np.uint64:
    """64-bit hash ``h`` with the integer ``x`` mixed in."""
    h = (h ^ np.uint64(x)) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ (h >> np.uint64(29))


@numba.njit(cache=True)
def _segment_hash(k: int, seg: SegmentSpans, order: np.ndarray, cost: np.ndarray, kind: np.ndarray,
                  lu: np.ndarray, lv: np.ndarray, eb: np.ndarray, data: bool) -> np.uint64:
    """Hash of segment k's shape and, with ``data``, its durations and edge bytes."""
    lo, size, e0, ne, has_prev, has_end = seg
    h = _mix(np.uint64(ne[k]), size[k] * 4 + has_prev[k] * 2 + has_end[k])
    for i in range(size[k]):
        t = order[lo[k] + i]
        h = _mix(h, kind[t])
        for d in range(cost.shape[1]):
            h = _mix(h, cost[t, d] if data else (1 if cost[t, d] >= 0 else 0))
    for i in range(e0[k], e0[k] + ne[k]):
        h = _mix(_mix(h, lu[i]), lv[i])
        if data:
            h = _mix(h, eb[i])
    return h


@numba.njit(cache=True)
def _first_equal(idx: np.ndarray, seg: SegmentSpans, order: np.ndarray, cost: np.ndarray,
                 kind: np.ndarray, lu: np.ndarray, lv: np.ndarray, eb: np.ndarray,
                 data: bool) -> np.ndarray:
    """int64 [len(idx)]: for each segment ``idx[i]`` (ascending), the first of ``idx`` equal
    to it (:func:`_segments_equal`), by open addressing on :func:`_segment_hash`."""
    m = len(idx)
    h = np.empty(m, dtype=np.uint64)
    for i in range(m):
        h[i] = _segment_hash(idx[i], seg, order, cost, kind, lu, lv, eb, data)
    cap = 1
    while cap < 2 * m:
        cap *= 2
    slots = np.full(cap, -1, dtype=np.int64)  # positions in idx
    out = np.empty(m, dtype=np.int64)
    for i in range(m):
        s = h[i] & np.uint64(cap - 1)
        while True:
            r = slots[s]
            if r < 0:
                slots[s] = i
                out[i] = idx[i]
                break
            if h[r] == h[i] and \
                    _segments_equal(idx[i], idx[r], seg, order, cost, kind, lu, lv, eb, data):
                out[i] = idx[r]
                break
            s = (s + np.uint64(1)) & np.uint64(cap - 1)
    return out


@numba.njit(cache=True)
def _segments_equal(k: int, r: int, seg: SegmentSpans, order: np.ndarray, cost: np.ndarray,
                    kind: np.ndarray, lu: np.ndarray, lv: np.ndarray, eb: np.ndarray,
                    data: bool) -> bool:
    """Segments k and r have the same shape (cut flags, size, edge count, legal devices,
    kinds, local edges) and, with ``data``, the same durations and edge bytes."""
    lo, size, e0, ne, has_prev, has_end = seg
    if size[k] != size[r] or ne[k] != ne[r] or has_prev[k] != has_prev[r] or \
            has_end[k] != has_end[r]:
        return False
    for i in range(size[k]):
        a, b = order[lo[k] + i], order[lo[r] + i]
        if kind[a] != kind[b]:
            return False
        for d in range(cost.shape[1]):
            if (cost[a, d] != cost[b, d]) if data else ((cost[a, d] >= 0) != (cost[b, d] >= 0)):
                return False
    for i in range(ne[k]):
        x, y = e0[k] + i, e0[r] + i
        if lu[x] != lu[y] or lv[x] != lv[y] or (data and eb[x] != eb[y]):
            return False
    return True
