"""numba kernels of the compiled scheduling engine (issue 20 item 1): the list-scheduling state of
:class:`heuristics.placement.list_scheduler.ScheduleState`, HEFT's EFT loop, Bifocal's
``_run`` and the O(n) loops of the task order, over numpy arrays.

Imported only through :func:`heuristics.placement.engine.kernels` (this module imports
numba; small solves and ``hetopt --help`` never load it). Every kernel mirrors its Python
reference statement by statement — integer arithmetic in int64 where Python uses ints, float64
sums in the same order — so the compiled engine's schedules and statistics are byte-identical
(tests/placement/test_compiled_engine.py). Times are integer ns.

State layout (one device axis ``nd``, one block axis ``nb``):

* ``res[d, b]`` the end of b's load on d (−1: not resident) — ``ScheduleState.res_ready``;
* ``lu[d, b]`` the start of b's last scheduled use on d (−1: none) — ``last_use``;
* timelines: per device a sorted array of busy starts and ends (``tls``/``tle`` typed lists,
  grown by doubling; ``tln`` lengths, ``tlast`` the latest end);
* ``loads``/``evs`` rows (block, device, time), at most one load and as many evictions per
  commit, so n rows each suffice; ``cnt`` = [loads, evictions, scheduled, channel stamp].
Return codes of the loops: 0 done, 1 a task listed twice, 2 order not topological, 3 no device
fits (the task index in the second value).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

OK, TWICE, NOT_TOPOLOGICAL, NO_DEVICE = 0, 1, 2, 3
_BIG_SORT = 32  # pred_info: insertion sort up to this many inputs, stable argsort above


# ---- timelines ------------------------------------------------------------------------------

@njit(cache=True)
def new_timelines(nd, size):
    """Typed lists of ``nd`` empty start and end arrays of capacity ``size``."""
    tls = List()
    tle = List()
    for _ in range(nd):
        tls.append(np.empty(size, np.int64))
        tle.append(np.empty(size, np.int64))
    return tls, tle


@njit(cache=True)
def earliest(tls, tle, tln, tlast, d, insertion, ready, dur):
    """Earliest start ≥ ready (ns) of a job of ``dur`` ns on d: ``_Timeline.earliest``."""
    if ready >= tlast[d]:
        return ready
    if not insertion:
        return tlast[d]
    starts = tls[d]
    ends = tle[d]
    n = tln[d]
    i = np.searchsorted(ends[:n], ready, side="right")
    t = ready
    while i < n:
        if t + dur <= starts[i]:
            return t
        e = ends[i]
        if e > t:
            t = e
        i += 1
    return t


@njit(cache=True)
def book(tls, tle, tln, tlast, d, insertion, start, dur):
    """Book [start, start + dur) on d: ``_Timeline.book`` (arrays doubled when full)."""
    if dur <= 0:
        return
    end = start + dur
    if not insertion:
        if end > tlast[d]:
            tlast[d] = end
        return
    n = tln[d]
    if n == len(tls[d]):
        s2 = np.empty(2 * n + 16, np.int64)
        e2 = np.empty(2 * n + 16, np.int64)
        s2[:n] = tls[d][:n]
        e2[:n] = tle[d][:n]
        tls[d] = s2
        tle[d] = e2
    starts = tls[d]
    ends = tle[d]
    if start >= tlast[d]:
        starts[n] = start
        ends[n] = end
        tln[d] = n + 1
        tlast[d] = end
        return
    i = np.searchsorted(starts[:n], start, side="left")
    j = n
    while j > i:
        starts[j] = starts[j - 1]
        ends[j] = ends[j - 1]
        j -= 1
    starts[i] = start
    ends[i] = end
    tln[d] = n + 1
    if end > tlast[d]:
        tlast[d] = end


# ---- inputs, transfers ------------------------------------------------------------------------

@njit(cache=True)
def pred_info(t, g, dev, end, w_end, w_dev, w_edge):
    """Fill (end, device, edge) of t's inputs sorted by end (stable); their count, or −1 when
    a predecessor is not scheduled yet (the order is not topological)."""
    p_off, p_edge, esrc = g[0], g[1], g[2]
    k = 0
    for j in range(p_off[t], p_off[t + 1]):
        e = p_edge[j]
        u = esrc[e]
        if dev[u] < 0:
            return -1
        w_end[k] = end[u]
        w_dev[k] = dev[u]
        w_edge[k] = e
        k += 1
    if k > _BIG_SORT:
        idx = np.argsort(w_end[:k], kind="mergesort")
        a, b_, c = w_end[:k][idx], w_dev[:k][idx], w_edge[:k][idx]
        w_end[:k] = a
        w_dev[:k] = b_
        w_edge[:k] = c
    else:
        for i in range(1, k):
            x, y, z = w_end[i], w_dev[i], w_edge[i]
            j = i - 1
            while j >= 0 and w_end[j] > x:
                w_end[j + 1] = w_end[j]
                w_dev[j + 1] = w_dev[j]
                w_edge[j + 1] = w_edge[j]
                j -= 1
            w_end[j + 1] = x
            w_dev[j + 1] = y
            w_edge[j + 1] = z
    return k


@njit(cache=True)
def ready_time(d, k, w_end, w_dev, w_edge, g, nd, contention, chan, loc, mark, cnt):
    """Time (ns) all k inputs are on d, transfers planned against the booked channels and the
    task's own earlier transfers: ``ScheduleState.ready``."""
    etype, etab, pair_chan, pc_n = g[3], g[4], g[5], g[6]
    ready = 0
    if not contention:
        for i in range(k):
            eu = w_end[i]
            du = w_dev[i]
            if du != d:
                eu += etab[etype[w_edge[i]], du * nd + d]
            if eu > ready:
                ready = eu
        return ready
    cnt[3] += 1
    stamp = cnt[3]
    for i in range(k):
        eu = w_end[i]
        du = w_dev[i]
        if du == d:
            if eu > ready:
                ready = eu
            continue
        q = du * nd + d
        dur = etab[etype[w_edge[i]], q]
        ts = eu
        if dur > 0:
            for h in range(pc_n[q]):
                ch = pair_chan[q, h]
                c = loc[ch] if mark[ch] == stamp else chan[ch]
                if c > ts:
                    ts = c
            for h in range(pc_n[q]):
                ch = pair_chan[q, h]
                loc[ch] = ts + dur
                mark[ch] = stamp
        ts += dur
        if ts > ready:
            ready = ts
    return ready


# ---- weight blocks ------------------------------------------------------------------------------

@njit(cache=True)
def load_plan(b, d, bk, st, evict, victims):
    """(status, load start, victims) of block b on d: status 0 resident, 1 loadable (the first
    ``nv`` entries of ``victims`` evicted at the start), −1 it cannot be loaded;
    ``ScheduleState.load_plan`` (LRU order: last use, then block index)."""
    bbytes, cap = bk[1], bk[3]
    port_free, resident, res, lu = st[5], st[6], st[7], st[8]
    if res[d, b] >= 0:
        return 0, 0, 0
    ls = port_free[d]
    size = bbytes[b]
    if cap[d] < 0 or resident[d] + size <= cap[d]:
        return 1, ls, 0
    if not evict or size > cap[d]:
        return -1, 0, 0
    need = resident[d] + size - cap[d]
    nb = lu.shape[1]
    m = 0
    for blk in range(nb):
        if lu[d, blk] >= 0:
            victims[m] = blk
            m += 1
    order = np.argsort(lu[d][victims[:m]], kind="mergesort")  # stable: ties by block
    cand = victims[:m][order]
    freed = 0
    latest = -1
    nv = 0
    for i in range(m):
        blk = cand[i]
        victims[nv] = blk
        nv += 1
        freed += bbytes[blk]
        if lu[d, blk] > latest:
            latest = lu[d, blk]
        if freed >= need:
            break
    if freed < need:
        return -1, 0, 0
    return 1, max(ls, latest + 1), nv


@njit(cache=True)
def evaluate(t, d, dur, k, wk, g, bk, st, tls, tle, cfg, victims):
    """(ok, start, finish, data ready, ready) of t on d (ns); ok False when d is not eligible:
    ``ScheduleState.evaluate``."""
    nd, contention, insertion, evict = cfg[0], cfg[1] != 0, cfg[2] != 0, cfg[3] != 0
    w_end, w_dev, w_edge, loc, mark = wk[0], wk[1], wk[2], wk[3], wk[4]
    block, loadd = bk[0], bk[2]
    res, chan, tln, tlast, cnt = st[7], st[9], st[11], st[12], st[13]
    ready = ready_time(d, k, w_end, w_dev, w_edge, g, nd, contention, chan, loc, mark, cnt)
    data = ready
    b = block[t]
    if b >= 0:
        r = res[d, b]
        if r < 0:
            status, ls, _ = load_plan(b, d, bk, st, evict, victims)
            if status < 0:
                return False, 0, 0, 0, 0
            r = ls + loadd[b, d]
        if r > ready:
            ready = r
    s = earliest(tls, tle, tln, tlast, d, insertion, ready, dur)
    return True, s, s + dur, data, ready


@njit(cache=True)
def commit(t, d, dur, k, wk, g, bk, st, tls, tle, cfg, victims):
    """Book t on d (transfers, load and evictions, compute): ``ScheduleState.commit``;
    returns False when the block cannot be loaded (the caller raises)."""
    nd, contention, insertion, evict = cfg[0], cfg[1] != 0, cfg[2] != 0, cfg[3] != 0
    w_end, w_dev, w_edge = wk[0], wk[1], wk[2]
    etype, etab, pair_chan, pc_n = g[3], g[4], g[5], g[6]
    block, bbytes, loadd = bk[0], bk[1], bk[2]
    dev, start, end, port_free, resident, res, lu = st[0], st[1], st[2], st[5], st[6], st[7], st[8]
    chan, tstart, loads, evs, tln, tlast, cnt = st[9], st[10], st[3], st[4], st[11], st[12], st[13]
    ready = 0
    for i in range(k):
        eu = w_end[i]
        du = w_dev[i]
        if du == d:
            if eu > ready:
                ready = eu
            continue
        q = du * nd + d
        tdur = etab[etype[w_edge[i]], q]
        ts = eu
        if contention and tdur > 0:
            for h in range(pc_n[q]):
                if chan[pair_chan[q, h]] > ts:
                    ts = chan[pair_chan[q, h]]
            for h in range(pc_n[q]):
                chan[pair_chan[q, h]] = ts + tdur
        tstart[w_edge[i]] = ts
        if ts + tdur > ready:
            ready = ts + tdur
    b = block[t]
    if b >= 0:
        status, ls, nv = load_plan(b, d, bk, st, evict, victims)
        if status < 0:
            return False
        if status == 0:
            r = res[d, b]
        else:
            for i in range(nv):
                v = victims[i]
                res[d, v] = -1
                lu[d, v] = -1
                resident[d] -= bbytes[v]
                evs[cnt[1], 0] = v
                evs[cnt[1], 1] = d
                evs[cnt[1], 2] = ls
                cnt[1] += 1
            r = ls + loadd[b, d]
            res[d, b] = r
            port_free[d] = r
            resident[d] += bbytes[b]
            loads[cnt[0], 0] = b
            loads[cnt[0], 1] = d
            loads[cnt[0], 2] = ls
            cnt[0] += 1
        if r > ready:
            ready = r
    s = earliest(tls, tle, tln, tlast, d, insertion, ready, dur)
    book(tls, tle, tln, tlast, d, insertion, s, dur)
    dev[t] = d
    start[t] = s
    end[t] = s + dur
    if b >= 0 and lu[d, b] < s:
        lu[d, b] = s
    cnt[2] += 1
    return True


# ---- HEFT's loop ----------------------------------------------------------------------------------

@njit(cache=True)
def eft_loop(order, ttype, type_dur, g, bk, st, tls, tle, cfg, wk, victims):
    """``list_schedule`` without a candidates policy: each task in ``order`` on the legal,
    eligible device of earliest finish (lowest index on ties). (code, task)."""
    n = len(ttype)
    nd = cfg[0]
    seen = np.zeros(n, np.bool_)
    dev, end = st[0], st[2]
    w_end, w_dev, w_edge = wk[0], wk[1], wk[2]
    for t in order:
        if seen[t]:
            return TWICE, t
        k = pred_info(t, g, dev, end, w_end, w_dev, w_edge)
        if k < 0:
            return NOT_TOPOLOGICAL, t
        ty = ttype[t]
        best_f = -1
        best_d = -1
        for d in range(nd):
            dur = type_dur[ty, d]
            if dur < 0:
                continue
            ok, _, f, _, _ = evaluate(t, d, dur, k, wk, g, bk, st, tls, tle, cfg, victims)
            if ok and (best_d < 0 or f < best_f):
                best_f, best_d = f, d
        if best_d < 0:
            return NO_DEVICE, t
        commit(t, best_d, type_dur[ty, best_d], k, wk, g, bk, st, tls, tle, cfg, victims)
        seen[t] = True
    return OK, -1


# ---- the task order --------------------------------------------------------------------------------

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


# ---- Bifocal's loop -------------------------------------------------------------------------------

@njit(cache=True)
def alternatives(nr, rd, rf, rx, rh, alt):
    """Fill ``alt`` with the device each score without one term (window, phase, token, evict,
    copy) chooses among the ``nr`` rows (device, EFT, terms cw/penalty/bt/bt0/ce/cc, on the
    hint), each summed in the score's order: ``bifocal._alternatives``."""
    best = np.zeros(5)
    hinted = np.zeros(5, np.bool_)
    alt[:] = -1
    for i in range(nr):
        f = float(rf[i])
        cw, pen, bt, bt0, ce, cc = rx[i, 0], rx[i, 1], rx[i, 2], rx[i, 3], rx[i, 4], rx[i, 5]
        for j in range(5):
            if j == 0:
                sc = f + pen + bt + ce + cc
            elif j == 1:
                sc = f + cw + bt0 + ce + cc
            elif j == 2:
                sc = f + cw + pen + ce + cc
            elif j == 3:
                sc = f + cw + pen + bt + cc
            else:
                sc = f + cw + pen + bt + ce
            hj = rh[i] and j != 0
            if alt[j] < 0 or sc < best[j]:
                best[j] = sc
                alt[j] = rd[i]
                hinted[j] = hj
            elif sc == best[j] and not hinted[j] and hj:
                alt[j] = rd[i]
                hinted[j] = True


@njit(cache=True)
def count_homes(n_ld0, n_ev0, b, st, ba):
    """``bifocal._count_homes`` over the loads and evictions of the last commit."""
    loads, evs, cnt = st[3], st[4], st[13]
    dcls, uses_left, pref, homeless, res_count = ba[0], ba[7], ba[8], ba[9], ba[10]
    for i in range(n_ld0, cnt[0]):
        v, c = loads[i, 0], dcls[loads[i, 1]]
        res_count[c, v] += 1
        if res_count[c, v] == 1 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] -= 1
    for i in range(n_ev0, cnt[1]):
        v, c = evs[i, 0], dcls[evs[i, 1]]
        res_count[c, v] -= 1
        if res_count[c, v] == 0 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] += 1
    c = pref[b]
    if uses_left[b] == 1 and c >= 0 and res_count[c, b] == 0:
        homeless[c] -= 1


@njit(cache=True)
def forget_evicted(n_ev0, st, ba):
    """``bifocal._forget_evicted``: θ(v) = −1 for evicted v whose class θ(v) holds no copy."""
    evs, res, cnt = st[4], st[7], st[13]
    dcls, class_devs, class_n, theta = ba[0], ba[1], ba[2], ba[5]
    for i in range(n_ev0, cnt[1]):
        v, cv = evs[i, 0], dcls[evs[i, 1]]
        if theta[v] == cv:
            held = False
            for j in range(class_n[cv]):
                if res[class_devs[cv, j], v] >= 0:
                    held = True
                    break
            if not held:
                theta[v] = -1


@njit(cache=True)
def _fmax(a, b):
    """Python's max(a, b): a unless b > a."""
    return b if b > a else a


@njit(cache=True)
def _fmin(a, b):
    """Python's min(a, b): a unless b < a."""
    return b if b < a else a


@njit(cache=True)
def token_terms(f, s_warm, penalty, inv_r, alpha, cap):
    """(B_token, B_token without the phase penalty) of a reload: ``_run``'s token branch."""
    c_cur = float(f) + _fmax(0.0, penalty)
    x = c_cur - float(s_warm)
    c_avg = float(s_warm) + (x if x > 0 else 0.0) * inv_r
    bt = _fmax(-cap, _fmin(0.0, alpha * (c_avg - c_cur)))
    fw = f - s_warm
    z = float(s_warm) + float(fw if fw > 0 else 0) * inv_r - float(f)
    bt0 = _fmax(-cap, _fmin(0.0, alpha * z))
    return bt, bt0


@njit(cache=True)
def update_hints(t, c, ty, look, H):
    """The best pattern's classes become hints along t's heaviest chain (nearest wins)."""
    type_best, hs, hint, hint_dist, patterns = look[1], look[2], look[3], look[4], look[5]
    pat = type_best[ty, c]
    u = hs[t]
    k = 0
    while u >= 0 and k < H:
        if k + 1 <= hint_dist[u]:
            hint[u] = patterns[pat, k]
            hint_dist[u] = k + 1
        u = hs[u]
        k += 1


@njit(cache=True)
def inverse_reuse(t, b, ba, ip, fp):
    """1 / max(1, r_eff) of a decode task with a block (−1 when the token term is off)."""
    phase, step = ba[3], ba[4]
    if ip[1] == 0 or b < 0 or phase[t] != 1:
        return -1.0
    x = float(ip[5] - step[t] + 1) * fp[5]
    return 1.0 / _fmax(1.0, _fmax(fp[4], x))


@njit(cache=True)
def score_terms(t, d, b, f, data, rdy, dur, inv_r, warm, bk, st, tls, tle, cfg, victims, ba,
                ip, fp, out):
    """Fill ``out`` with (penalty, bt, bt0, ce, cc) of t on d: ``_run``'s terms beyond EFT and
    the window (all 0 when b is resident on d or t has no block)."""
    out[:] = 0.0
    res, tln, tlast = st[7], st[11], st[12]
    loadd = bk[2]
    dcls, class_devs, class_n, theta, holds_all = ba[0], ba[1], ba[2], ba[5], ba[6]
    uses_left, homeless = ba[7], ba[9]
    lam, eta, alpha, kappa, rho = fp[0], fp[1], fp[2], fp[3], fp[6]
    if b < 0 or res[d, b] >= 0:
        return
    cd = dcls[d]
    penalty = 0.0
    if ip[0]:
        tr = rdy - data
        th = theta[b]
        if th >= 0 and th != cd:
            penalty = lam * tr
        if ba[3][t] == 0 and holds_all[cd]:
            penalty -= eta * tr
    out[0] = penalty
    n_needed = 0
    need_sum = 0
    if ip[6]:
        status, _, nv = load_plan(b, d, bk, st, cfg[3] != 0, victims)
        if status > 0:
            for i in range(nv):
                v = victims[i]
                if uses_left[v] > 0:
                    n_needed += 1
                    need_sum += loadd[v, d]
    if inv_r >= 0 and rdy > data and n_needed == 0:
        s_warm = earliest(tls, tle, tln, tlast, d, cfg[2] != 0, data, dur) + dur
        cap = np.inf
        if warm >= 0:
            cap = alpha * float(_fmax(0, warm - dur)) / inv_r
        out[1], out[2] = token_terms(f, s_warm, penalty, inv_r, alpha, cap)
    if kappa > 0 and n_needed > 0:
        out[3] = kappa * need_sum
    if rho > 0 and homeless[cd] != 0:
        for j in range(class_n[cd]):
            x = class_devs[cd, j]
            if x != d and res[x, b] >= 0:
                out[4] = rho * loadd[b, d]
                break


@njit(cache=True)
def warm_duration(b, ty, type_dur, res):
    """Shortest duration (ns) of the task on a legal device holding b (−1: none)."""
    w = -1
    for d in range(type_dur.shape[1]):
        if type_dur[ty, d] >= 0 and res[d, b] >= 0 and (w < 0 or type_dur[ty, d] < w):
            w = type_dur[ty, d]
    return w


@njit(cache=True)
def bifocal_loop(order, ttype, type_dur, g, bk, st, tls, tle, cfg, wk, victims, ba, look,
                 ip, fp, flips):
    """Bifocal's ``_run``: per task the legal eligible device of lowest score (ties to the
    hinted class, then the lowest index), committed; θ, the hints and the copy counts updated.
    ``ip`` = (phase, token, token_cap, window, H, L_out, track uses); ``fp`` = (λ, η, α, κ,
    r_min, p_reuse, ρ). Returns (code, task, ties broken by the hint); ``flips`` counted."""
    n, nd = len(ttype), cfg[0]
    block, dev, end, cnt, res = bk[0], st[0], st[2], st[13], st[7]
    dcls, uses_left = ba[0], ba[7]
    window, H, track_uses, rho = ip[3] != 0, ip[4], ip[6] != 0, fp[6]
    type_w, hint = look[0], look[3]
    w_end, w_dev, w_edge = wk[0], wk[1], wk[2]
    rd = np.empty(nd, np.int64)
    rf = np.empty(nd, np.int64)
    rx = np.empty((nd, 6))
    rh = np.empty(nd, np.bool_)
    terms = np.empty(5)
    alt = np.empty(5, np.int64)
    seen = np.zeros(n, np.bool_)
    ties = 0
    for t in order:
        if seen[t]:
            return TWICE, t, ties
        seen[t] = True
        k = pred_info(t, g, dev, end, w_end, w_dev, w_edge)
        if k < 0:
            return NOT_TOPOLOGICAL, t, ties
        ty, b = ttype[t], block[t]
        inv_r = inverse_reuse(t, b, ba, ip, fp)
        warm = -1 if inv_r < 0 or ip[2] == 0 else warm_duration(b, ty, type_dur, res)
        h = hint[t] if window else -1
        best_s, best_d, best_h = 0.0, -1, False
        eft_s, eft_d = 0.0, -1
        nr = 0
        extra = False
        for d in range(nd):
            dur = type_dur[ty, d]
            if dur < 0:
                continue
            ok, _, f, data, rdy = evaluate(t, d, dur, k, wk, g, bk, st, tls, tle, cfg, victims)
            if not ok:
                continue
            cw = type_w[ty, d] if window else 0.0
            score_terms(t, d, b, f, data, rdy, dur, inv_r, warm, bk, st, tls, tle, cfg,
                        victims, ba, ip, fp, terms)
            penalty, bt, bt0, ce, cc = terms[0], terms[1], terms[2], terms[3], terms[4]
            score = float(f) + cw + penalty + bt + ce + cc
            on_hint = dcls[d] == h
            if best_d < 0 or score < best_s:
                best_s, best_d, best_h = score, d, on_hint
            elif score == best_s and not best_h and on_hint:
                best_d, best_h = d, True
                ties += 1
            rd[nr], rf[nr], rh[nr] = d, f, on_hint
            rx[nr, 0], rx[nr, 1], rx[nr, 2], rx[nr, 3], rx[nr, 4], rx[nr, 5] = \
                cw, penalty, bt, bt0, ce, cc
            nr += 1
            if penalty != 0 or bt != 0 or bt0 != 0 or ce != 0 or cc != 0:
                extra = True
            if eft_d < 0 or float(f) < eft_s:
                eft_s, eft_d = float(f), d
        if extra:
            alternatives(nr, rd, rf, rx, rh, alt)
        else:
            alt[0] = eft_d
            alt[1:] = best_d
        for j in range(5):
            if alt[j] != best_d:
                flips[j] += 1
        if best_d < 0:
            return NO_DEVICE, t, ties
        n_ev0, n_ld0 = cnt[1], cnt[0]
        if not commit(t, best_d, type_dur[ty, best_d], k, wk, g, bk, st, tls, tle, cfg,
                      victims):
            return NO_DEVICE, t, ties
        if rho > 0 and b >= 0 and (n_ld0 != cnt[0] or n_ev0 != cnt[1] or uses_left[b] == 1):
            count_homes(n_ld0, n_ev0, b, st, ba)
        if track_uses and b >= 0:
            uses_left[b] -= 1
        c = dcls[best_d]
        if n_ev0 != cnt[1]:
            forget_evicted(n_ev0, st, ba)
        if b >= 0:
            ba[5][b] = c
        if window:
            update_hints(t, c, ty, look, H)
    return OK, -1, ties
