"""numba kernels of the schedulers' set-up: O(n) passes that replace numpy sorts and masks —
uniquing of values and rows by hash tables, Bifocal's lookahead (heaviest successor, class
durations and transfers, pinned inputs, window tails, the task types in one call) and the
sibling groups. Each gives its numpy reference's values (named in its docstring; tests in
tests/placement/test_setup_kernels.py) and reports a hash collision, where the caller falls
back to the exact numpy grouping. ``NUMBA_DISABLE_JIT=1`` runs them as plain Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TABLE_START = 1024  # initial slots of a hash table (doubled when half full)


@njit(cache=True, nogil=True)
def _mix(x):
    """SplitMix64 finaliser of an int64 (uint64): ``opt.common.rows.splitmix64``."""
    z = np.uint64(x) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _slot(tab, ukeys, key):
    """The slot of ``key`` in the open-addressing table ``tab`` (indices into ``ukeys``, −1
    empty; size a power of two): where it is, or the empty slot where it goes."""
    mask = len(tab) - 1
    h = np.int64(_mix(key) >> np.uint64(1)) & mask
    while True:
        u = tab[h]
        if u < 0 or ukeys[u] == key:
            return h
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def _grown(tab, ukeys, nu):
    """``tab`` rehashed into twice the slots (``nu`` keys)."""
    new = np.full(2 * len(tab), -1, np.int64)
    for u in range(nu):
        new[_slot(new, ukeys, ukeys[u])] = u
    return new


@njit(cache=True, nogil=True)
def unique_inverse(keys):
    """(distinct values ascending, index of each one's first occurrence, inverse) of int64
    ``keys``: ``np.unique(keys, return_index=True, return_inverse=True)`` by a hash table, so
    only the distinct values are sorted."""
    n = len(keys)
    tab = np.full(_TABLE_START, -1, np.int64)
    ukeys = np.empty(n, np.int64)
    ufirst = np.empty(n, np.int64)
    inv = np.empty(n, np.int64)
    nu = 0
    for i in range(n):
        h = _slot(tab, ukeys, keys[i])
        u = tab[h]
        if u < 0:
            u = nu
            ukeys[u] = keys[i]
            ufirst[u] = i
            tab[h] = u
            nu += 1
            if 2 * nu > len(tab):
                tab = _grown(tab, ukeys, nu)
        inv[i] = u
    order = np.argsort(ukeys[:nu])
    rank = np.empty(nu, np.int64)
    rank[order] = np.arange(nu)
    for i in range(n):
        inv[i] = rank[inv[i]]
    return ukeys[:nu][order], ufirst[:nu][order], inv


@njit(cache=True, nogil=True)
def unique_rows(a, w):
    """(first row of each distinct row, inverse, no collision) of an int64 matrix with the
    row hash Σ a[i, j]·w[j] (wrapping): ``opt.common.rows.unique_rows``'s grouping and order;
    False when two distinct rows share a hash (the caller falls back to the exact sort)."""
    return unique_row_pairs(a, np.zeros((a.shape[0], 0), np.int64), w)


@njit(cache=True, nogil=True)
def unique_row_pairs(a, b, w):
    """:func:`unique_rows` of the rows of ``[a | b]`` (a and b side by side), not formed."""
    n, ka = a.shape
    kb = b.shape[1]
    keys = np.empty(n, np.int64)
    for i in range(n):
        s = 0
        for j in range(ka):
            s += a[i, j] * w[j]
        for j in range(kb):
            s += b[i, j] * w[ka + j]
        keys[i] = s
    _, first, inv = unique_inverse(keys)
    for i in range(n):
        f = first[inv[i]]
        for j in range(ka):
            if a[i, j] != a[f, j]:
                return first, inv, False
        for j in range(kb):
            if b[i, j] != b[f, j]:
                return first, inv, False
    return first, inv, True


@njit(cache=True, nogil=True)
def heaviest_successor(n, src, dst, nbytes):
    """(successor, bytes) over each task's heaviest outgoing edge, ties to the lowest edge
    index; successor −1 for sinks: ``bifocal.heaviest_successor``."""
    hs = np.full(n, -1, np.int64)
    hb = np.zeros(n, np.int64)
    for e in range(len(src)):
        s = src[e]
        if hs[s] < 0 or nbytes[e] > hb[s]:
            hs[s] = dst[e]
            hb[s] = nbytes[e]
    return hs, hb


@njit(cache=True, nogil=True, error_model="numpy")
def class_transfer(nb, a, b, dcls, lat, bw):
    """Shortest transfer (float ticks) of ``nb`` bytes from a device of class a to one of
    class b, 0 within a class: one entry of ``window_tails``' ``xfer``."""
    if a == b:
        return 0.0
    cur = np.inf
    nbf = float(nb)
    for i in range(len(dcls)):
        if dcls[i] != a:
            continue
        for j in range(len(dcls)):
            if dcls[j] == b:
                v = lat[i, j] + np.ceil(nbf / bw[i, j])
                if v < cur:
                    cur = v
    return cur


@njit(cache=True, nogil=True)
def class_durations(cost, dcls, n_cls):
    """float [n, K] each task's shortest duration on a device of each class (inf: none legal):
    ``bifocal.class_durations``."""
    n, nd = cost.shape
    out = np.full((n, n_cls), np.inf)
    for t in range(n):
        for d in range(nd):
            c = cost[t, d]
            if c >= 0 and c < out[t, dcls[d]]:
                out[t, dcls[d]] = c
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def pinned_inputs(cost, dcls, n_cls, src, dst, nbytes, lat, bw):
    """float [n, K]: the longest shortest-link transfer into each task on each class from a
    predecessor legal on one class only (0 without one): ``bifocal.pinned_inputs``."""
    n, nd = cost.shape
    out = np.zeros((n, n_cls))
    if len(src) == 0 or n_cls < 2:
        return out
    pcls = np.full(n, -1, np.int64)
    for t in range(n):
        for d in range(nd):
            if cost[t, d] >= 0:
                if pcls[t] == -1:
                    pcls[t] = dcls[d]
                elif pcls[t] != dcls[d]:
                    pcls[t] = -2
    for e in range(len(src)):
        a = pcls[src[e]]
        if a < 0:
            continue
        v = dst[e]
        for k in range(n_cls):
            x = class_transfer(nbytes[e], a, k, dcls, lat, bw)
            if x > out[v, k]:
                out[v, k] = x
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _class_transfers(nbytes, dcls, n_cls, lat, bw):
    """float [len(nbytes), K, K]: each payload moved between two classes (:func:`class_transfer`)."""
    out = np.empty((len(nbytes), n_cls, n_cls))
    for t in range(len(nbytes)):
        for a in range(n_cls):
            for b in range(n_cls):
                out[t, a, b] = class_transfer(nbytes[t], a, b, dcls, lat, bw)
    return out


@njit(cache=True, nogil=True)
def _chain_sums(ch, depth, kpow, xt, xtype, pin, dcl, pre):
    """The tails of every class pattern of the chain ``ch[1..depth]`` (depth ≥ 1) after its
    task on each class c0: ``window_tails``' recursion level by level, each prefix sum formed
    as there (prefix + max(transfer, pinned input) + duration). Returns where in ``pre`` (2·K^(H+1)
    scratch entries) the K^(depth+1) leaves start: c0's in ``itertools.product`` order from
    c0·K^depth on. ``kpow[i]`` = K^i; ``xt[xtype[c]]`` the transfers of c's heaviest output
    between two classes."""
    n_cls = kpow[1]
    half = len(pre) // 2
    a, u = xtype[ch[0]], ch[1]
    for c0 in range(n_cls):
        for kappa in range(n_cls):
            x = xt[a, c0, kappa]
            y = pin[u, kappa]
            pre[c0 * n_cls + kappa] = 0.0 + (y if y > x else x) + dcl[u, kappa]
    src = 0  # the current level's prefixes start at pre[src], the next level's at pre[dst]
    for k in range(1, depth):
        a, u = xtype[ch[k]], ch[k + 1]
        dst = half - src
        j = 0  # prefix j ends in class prev: j = (j // K)·K + prev
        for _ in range(kpow[k]):
            for prev in range(n_cls):
                for kappa in range(n_cls):
                    x = xt[a, prev, kappa]
                    y = pin[u, kappa]
                    pre[dst + j * n_cls + kappa] = pre[src + j] + (y if y > x else x) \
                        + dcl[u, kappa]
                j += 1
        src = dst
    return src


@njit(cache=True, nogil=True)
def window_tails(cost, dcls, n_cls, H, hs, hb, pin, lat, bw):
    """(tails, all finite): int64 [n, 2K] each task's window tail per class, truncated as
    ``tail.astype(int64)``, and the index of its first least pattern per class —
    ``bifocal.window_tails`` (depth H ≥ 1; ``hs``, ``hb``: :func:`heaviest_successor`;
    ``pin``: :func:`pinned_inputs`)."""
    n = cost.shape[0]
    dcl = class_durations(cost, dcls, n_cls)
    ub, _, xtype = unique_inverse(hb)
    xt = _class_transfers(ub, dcls, n_cls, lat, bw)
    out = np.zeros((n, 2 * n_cls), np.int64)
    ch = np.empty(H + 1, np.int64)
    kpow = np.ones(H + 2, np.int64)
    for i in range(1, H + 2):
        kpow[i] = kpow[i - 1] * n_cls
    pre = np.empty(2 * kpow[H + 1])
    finite = True
    for t in range(n):
        ch[0] = t
        depth = 0
        while depth < H and hs[ch[depth]] >= 0:
            ch[depth + 1] = hs[ch[depth]]
            depth += 1
        if depth == 0:  # a sink: no chain, tail 0 by the first pattern
            continue
        src = _chain_sums(ch, depth, kpow, xt, xtype, pin, dcl, pre)
        for c0 in range(n_cls):
            best_v = np.inf
            best_j = 0
            for j in range(kpow[depth]):
                v = pre[src + c0 * kpow[depth] + j]
                if v < best_v:
                    best_v = v
                    best_j = j
            if best_v == np.inf:
                finite = False
                best_v = 0.0
            out[t, c0] = np.int64(best_v)
            out[t, n_cls + c0] = best_j * kpow[H - depth]
    return out, finite


@njit(cache=True, nogil=True)
def _two_shortest(cost, t):
    """(legal devices, shortest, second shortest duration; inf when missing) of task t."""
    m1 = m2 = np.inf
    k = 0
    for d in range(cost.shape[1]):
        c = cost[t, d]
        if c < 0:
            continue
        k += 1
        if c < m1:
            m2 = m1
            m1 = c
        elif c < m2:
            m2 = c
    return k, m1, m2


@njit(cache=True, nogil=True)
def _sorted_segments(p_off, p_idx, esrc):
    """Each task's predecessors (sources of its incoming edges), sorted, CSR by ``p_off``."""
    out = np.empty(len(p_idx), np.int64)
    for t in range(len(p_off) - 1):
        lo = p_off[t]
        for j in range(lo, p_off[t + 1]):  # insertion sort: a few inputs each
            x = esrc[p_idx[j]]
            i = j - 1
            while i >= lo and out[i] > x:
                out[i + 1] = out[i]
                i -= 1
            out[i + 1] = x
    return out


@njit(cache=True, nogil=True)
def _sort_by_key(idx, keys):
    """``idx`` sorted by ``keys[idx]`` in place (insertion sort when short, else argsort)."""
    if len(idx) > 16:
        idx[:] = idx[np.argsort(keys[idx], kind="mergesort")]
        return
    for j in range(1, len(idx)):
        x = idx[j]
        i = j - 1
        while i >= 0 and keys[idx[i]] > keys[x]:
            idx[i + 1] = idx[i]
            i -= 1
        idx[i + 1] = x


@njit(cache=True, nogil=True)
def _same_segment(ssrc, p_off, t, r):
    """Whether tasks t and r have the same sorted predecessors (``ssrc`` CSR by ``p_off``)."""
    if p_off[t + 1] - p_off[t] != p_off[r + 1] - p_off[r]:
        return False
    for j in range(p_off[t + 1] - p_off[t]):
        if ssrc[p_off[t] + j] != ssrc[p_off[r] + j]:
            return False
    return True


@njit(cache=True, nogil=True)
def sibling_groups(cost, p_off, p_idx, esrc):
    """(group per task, pinned per task, exact): ``bifocal.sibling_groups`` and the pinned
    mask (one legal device) of ``bifocal._sibling_data``. Groups: tasks with two or more legal
    devices and the same non-empty multiset of predecessors — bucketed by their smallest
    predecessor, ordered by a hash of the multiset within a bucket, then compared — kept when
    of two or more members whose shortest durations summed exceed some member's second
    shortest; −1 for the rest. ``exact`` False when two different multisets of one bucket
    share a hash (the caller falls back to the numpy reference)."""
    n = cost.shape[0]
    ssrc = _sorted_segments(p_off, p_idx, esrc)
    pinned = np.zeros(n, np.bool_)
    first = np.empty(n)
    second = np.empty(n)
    keys = np.full(n, 0, np.int64)
    bucket = np.full(n, -1, np.int64)  # smallest predecessor of an eligible task, else −1
    for t in range(n):
        k, first[t], second[t] = _two_shortest(cost, t)
        pinned[t] = k == 1
        if k >= 2 and p_off[t + 1] > p_off[t]:
            h = np.uint64(0)
            for j in range(p_off[t], p_off[t + 1]):
                h += _mix(ssrc[j])
            keys[t] = np.int64(h)
            bucket[t] = ssrc[p_off[t]]
    gid, ng, exact = _equal_runs(bucket, keys, ssrc, p_off)
    if exact:
        _keep_spread(gid, ng, first, second)
    return gid, pinned, exact


@njit(cache=True, nogil=True)
def _equal_runs(bucket, keys, ssrc, p_off):
    """(group per task, groups, exact): the tasks of each bucket (−1: none) with equal keys
    and equal sorted predecessors, two or more to a group (−1 else); exact False when equal
    keys hide different predecessors."""
    n = len(bucket)
    start = np.zeros(n + 1, np.int64)  # tasks counted, then placed, by bucket
    for t in range(n):
        if bucket[t] >= 0:
            start[bucket[t] + 1] += 1
    for s in range(n):
        start[s + 1] += start[s]
    members = np.empty(start[n], np.int64)
    fill = start[:n].copy()
    for t in range(n):
        if bucket[t] >= 0:
            members[fill[bucket[t]]] = t
            fill[bucket[t]] += 1
    gid = np.full(n, -1, np.int64)
    ng = 0
    for s in range(n):
        seg = members[start[s]:start[s + 1]]
        if len(seg) < 2:
            continue
        _sort_by_key(seg, keys)
        i = 0
        while i < len(seg):
            j = i + 1
            while j < len(seg) and keys[seg[j]] == keys[seg[i]]:
                if not _same_segment(ssrc, p_off, seg[j], seg[i]):
                    return gid, ng, False
                j += 1
            if j - i > 1:
                gid[seg[i:j]] = ng
                ng += 1
            i = j
    return gid, ng, True


@njit(cache=True, nogil=True)
def _keep_spread(gid, ng, first, second):
    """Ungroup (−1) the groups whose members' shortest durations (``first``) summed, in task
    order, do not exceed the least second shortest (``second``): ``sibling_groups``' test."""
    total = np.zeros(ng)
    low = np.full(ng, np.inf)
    for t in range(len(gid)):
        g = gid[t]
        if g >= 0:
            total[g] += first[t]
            if second[t] < low[g]:
                low[g] = second[t]
    for t in range(len(gid)):
        g = gid[t]
        if g >= 0 and not total[g] > low[g]:
            gid[t] = -1


@njit(cache=True, nogil=True)
def window_types(cost, dcls, n_cls, H, src, dst, nbytes, lat, bw, w):
    """(tails, first, inverse, heaviest successor, finite, exact): :func:`window_tails` (depth
    H ≥ 1) and the rows of ``[cost | tails]`` grouped by :func:`unique_row_pairs` (weights
    w) — the task types of ``bifocal._lookahead``, the distinct rows at ``first``."""
    hs, hb = heaviest_successor(cost.shape[0], src, dst, nbytes)
    pin = pinned_inputs(cost, dcls, n_cls, src, dst, nbytes, lat, bw)
    tails, finite = window_tails(cost, dcls, n_cls, H, hs, hb, pin, lat, bw)
    first, inv, exact = unique_row_pairs(cost, tails, w)
    return tails, first, inv, hs, finite, exact
