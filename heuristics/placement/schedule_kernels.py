"""numba kernels of the compiled scheduling engine: the list-scheduling state of
:class:`heuristics.placement.list_scheduler.ScheduleState`, the EFT loop of HEFT and of the
static policies (their device classes as arrays), Bifocal's
``_run``, the O(n) loops of the task order and the set-up (uniquing, Bifocal's window tails
and sibling groups, the orders in one call), over numpy arrays.

Imported only through :func:`heuristics.placement.engine.kernels` (this module imports
numba; small solves and ``hetopt --help`` never load it). Every kernel mirrors its Python
reference statement by statement — integer arithmetic in int64 where Python uses ints, float64
sums in the same order — so the compiled engine's schedules and statistics are byte-identical
(tests/placement/test_compiled_engine.py). Times are integer ns.

State layout (int64; ``nd`` devices, ``nb`` blocks, ``n`` tasks):

* ``sched[3, n]`` device (−1 unscheduled), start, end of each task;
* ``dv[5, nd]`` load port free time, resident bytes, capacity (−1 unlimited), timeline length,
  timeline end (``_Timeline.last``); timelines: per device sorted busy starts and ends in the
  typed lists ``tls``/``tle`` (grown by doubling);
* ``rl[2, nd, nb]`` end of b's load on d (``res_ready``) and start of its last use there
  (``last_use``), −1 when b is not resident;
* ``chan`` channel free times; ``lm[2, n_channels + 1]`` a task's planned channel times and
  their stamp (the current stamp in the last column of row 1);
* ``w[4, max in-degree]`` the current task's inputs: end, device, edge, transfer row;
* ``ev[2, n, 3]`` load and eviction rows (block, device, time) — at most one load per commit
  and never more evictions than loads — and ``cnt`` = [loads, evictions, scheduled].

Hot helpers take only the arrays they use: numba increments and decrements the reference
count of every array argument (an atomic operation) on each call, which dominated the first
version that passed the state as tuples. Return codes of the loops: 0 done, 1 a task listed
twice, 2 order not topological, 3 no device fits, 4 no device of the task's policy class fits
(the task index in the second value).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

OK, TWICE, NOT_TOPOLOGICAL, NO_DEVICE, NO_CLASS_DEVICE = 0, 1, 2, 3, 4
_BIG_SORT = 32  # pred_info: insertion sort up to this many inputs, stable argsort above
PORT, RESIDENT, CAP, TLEN, TLAST = 0, 1, 2, 3, 4  # rows of dv


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
def earliest(tls, tle, dv, d, insertion, ready, dur):
    """Earliest start ≥ ready (ns) of a job of ``dur`` ns on d: ``_Timeline.earliest``."""
    if ready >= dv[TLAST, d]:
        return ready
    if not insertion:
        return dv[TLAST, d]
    starts = tls[d]
    ends = tle[d]
    n = dv[TLEN, d]
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
def book(tls, tle, dv, d, insertion, start, dur):
    """Book [start, start + dur) on d: ``_Timeline.book`` (arrays doubled when full)."""
    if dur <= 0:
        return
    end = start + dur
    if not insertion:
        if end > dv[TLAST, d]:
            dv[TLAST, d] = end
        return
    n = dv[TLEN, d]
    if n == len(tls[d]):
        s2 = np.empty(2 * n + 16, np.int64)
        e2 = np.empty(2 * n + 16, np.int64)
        s2[:n] = tls[d][:n]
        e2[:n] = tle[d][:n]
        tls[d] = s2
        tle[d] = e2
    starts = tls[d]
    ends = tle[d]
    if start >= dv[TLAST, d]:
        starts[n] = start
        ends[n] = end
        dv[TLEN, d] = n + 1
        dv[TLAST, d] = end
        return
    i = np.searchsorted(starts[:n], start, side="left")
    j = n
    while j > i:
        starts[j] = starts[j - 1]
        ends[j] = ends[j - 1]
        j -= 1
    starts[i] = start
    ends[i] = end
    dv[TLEN, d] = n + 1
    if end > dv[TLAST, d]:
        dv[TLAST, d] = end


# ---- inputs, transfers ------------------------------------------------------------------------

@njit(cache=True)
def pred_info(t, p_off, p_edge, esrc, etype, sched, w):
    """Fill ``w`` with (end, device, edge, transfer row) of t's inputs sorted by end (stable);
    their count, or −1 when a predecessor is not scheduled yet (order not topological)."""
    k = 0
    for j in range(p_off[t], p_off[t + 1]):
        e = p_edge[j]
        u = esrc[e]
        if sched[0, u] < 0:
            return -1
        w[0, k] = sched[2, u]
        w[1, k] = sched[0, u]
        w[2, k] = e
        w[3, k] = etype[e]
        k += 1
    if k > _BIG_SORT:
        idx = np.argsort(w[0, :k], kind="mergesort")
        for r in range(4):
            w[r, :k] = w[r, :k][idx]
    else:
        for i in range(1, k):
            x0, x1, x2, x3 = w[0, i], w[1, i], w[2, i], w[3, i]
            j = i - 1
            while j >= 0 and w[0, j] > x0:
                for r in range(4):
                    w[r, j + 1] = w[r, j]
                j -= 1
            w[0, j + 1], w[1, j + 1], w[2, j + 1], w[3, j + 1] = x0, x1, x2, x3
    return k


@njit(cache=True)
def transfers(d, k, w, etab, pchan, chan, lm, tstart, nd, contention, commit):
    """Time (ns) all k inputs are on d. Without ``commit``, planned against the booked channels
    and the task's own earlier transfers (``ScheduleState.ready``); with it, booked (channels,
    transfer starts: the transfers of ``ScheduleState.commit``), which plans the same times."""
    ready = 0
    stamp = 0
    if contention and not commit:
        top = lm.shape[1] - 1
        stamp = lm[1, top] + 1
        lm[1, top] = stamp
    for i in range(k):
        eu = w[0, i]
        du = w[1, i]
        if du == d:
            if eu > ready:
                ready = eu
            continue
        q = du * nd + d
        dur = etab[w[3, i], q]
        ts = eu
        if contention and dur > 0:
            for h in range(1, pchan[q, 0] + 1):
                ch = pchan[q, h]
                c = lm[0, ch] if not commit and lm[1, ch] == stamp else chan[ch]
                if c > ts:
                    ts = c
            for h in range(1, pchan[q, 0] + 1):
                ch = pchan[q, h]
                if commit:
                    chan[ch] = ts + dur
                else:
                    lm[0, ch] = ts + dur
                    lm[1, ch] = stamp
        if commit:
            tstart[w[2, i]] = ts
        ts += dur
        if ts > ready:
            ready = ts
    return ready


# ---- weight blocks ------------------------------------------------------------------------------

@njit(cache=True)
def load_plan(b, d, rl, dv, bbytes, evict, victims):
    """(status, load start, victims) of block b on d: status 0 resident, 1 loadable (the first
    ``nv`` entries of ``victims`` evicted at the start), −1 it cannot be loaded;
    ``ScheduleState.load_plan`` (LRU order: last use, then block index)."""
    if rl[0, d, b] >= 0:
        return 0, 0, 0
    ls = dv[PORT, d]
    size = bbytes[b]
    cap = dv[CAP, d]
    if cap < 0 or dv[RESIDENT, d] + size <= cap:
        return 1, ls, 0
    if not evict or size > cap:
        return -1, 0, 0
    need = dv[RESIDENT, d] + size - cap
    lu = rl[1, d]
    m = 0
    for blk in range(len(lu)):
        if lu[blk] >= 0:
            victims[m] = blk
            m += 1
    order = np.argsort(lu[victims[:m]], kind="mergesort")  # stable: ties by block
    cand = victims[:m][order]
    freed = 0
    latest = -1
    nv = 0
    for i in range(m):
        blk = cand[i]
        victims[nv] = blk
        nv += 1
        freed += bbytes[blk]
        if lu[blk] > latest:
            latest = lu[blk]
        if freed >= need:
            break
    if freed < need:
        return -1, 0, 0
    return 1, max(ls, latest + 1), nv


@njit(cache=True)
def evicts(b, d, rl, dv, bbytes):
    """Whether running a task of block b (−1 none) on d evicts: b is not resident on d and
    does not fit beside d's resident blocks (``ScheduleState.evicts``)."""
    if b < 0 or rl[0, d, b] >= 0:
        return False
    cap = dv[CAP, d]
    return cap >= 0 and dv[RESIDENT, d] + bbytes[b] > cap


@njit(cache=True)
def evaluate(d, dur, k, b, w, etab, pchan, chan, lm, tstart, rl, dv, bbytes, loadd, tls, tle,
             victims, cf):
    """(ok, start, finish, data ready, ready) of a task of block b (−1 none) on d, in ns; ok
    False when d is not eligible: ``ScheduleState.evaluate``. cf = (nd, contention,
    insertion, evict, at_use)."""
    ready = transfers(d, k, w, etab, pchan, chan, lm, tstart, cf[0], cf[1] != 0, False)
    data = ready
    if b >= 0:
        r = rl[0, d, b]
        if r < 0:
            status, ls, _ = load_plan(b, d, rl, dv, bbytes, cf[3] != 0, victims)
            if status < 0:
                return False, 0, 0, 0, 0
            if cf[4] != 0:  # at_use: load then compute, one slot from the dispatch on
                ld = loadd[b, d]
                s0 = earliest(tls, tle, dv, d, cf[2] != 0, max(ls, data), ld + dur)
                return True, s0 + ld, s0 + ld + dur, data, s0 + ld
            r = ls + loadd[b, d]
        if r > ready:
            ready = r
    s = earliest(tls, tle, dv, d, cf[2] != 0, ready, dur)
    return True, s, s + dur, data, ready


@njit(cache=True)
def book_load(b, d, rl, dv, bbytes, loadd, evict, victims, ev, cnt):
    """Load block b onto d if it is not resident (evicting the planned victims); the time
    (ns) it is ready there, −1 when it cannot be loaded."""
    status, ls, nv = load_plan(b, d, rl, dv, bbytes, evict, victims)
    if status < 0:
        return -1
    if status == 0:
        return rl[0, d, b]
    return book_load_at(b, d, ls, nv, rl, dv, bbytes, loadd, victims, ev, cnt, False)


@njit(cache=True)
def book_load_at(b, d, ls, nv, rl, dv, bbytes, loadd, victims, ev, cnt, at_use):
    """Book b's load onto d from ``ls`` (ns), evicting the first ``nv`` victims then; the time
    it is ready. The port's free time becomes the load's end (at_use: its start)."""
    for i in range(nv):
        v = victims[i]
        rl[0, d, v] = -1
        rl[1, d, v] = -1
        dv[RESIDENT, d] -= bbytes[v]
        ev[1, cnt[1], 0] = v
        ev[1, cnt[1], 1] = d
        ev[1, cnt[1], 2] = ls
        cnt[1] += 1
    r = ls + loadd[b, d]
    rl[0, d, b] = r
    dv[PORT, d] = ls if at_use else r
    dv[RESIDENT, d] += bbytes[b]
    ev[0, cnt[0], 0] = b
    ev[0, cnt[0], 1] = d
    ev[0, cnt[0], 2] = ls
    cnt[0] += 1
    return r


@njit(cache=True)
def commit(t, d, dur, k, b, w, etab, pchan, chan, lm, tstart, rl, dv, bbytes, loadd, tls, tle,
           victims, sched, ev, cnt, cf):
    """Book t on d (transfers, load and evictions, compute): ``ScheduleState.commit``;
    returns False when the block cannot be loaded (the caller raises)."""
    insertion = cf[2] != 0
    ready = transfers(d, k, w, etab, pchan, chan, lm, tstart, cf[0], cf[1] != 0, True)
    slot = 0  # at_use: the load's length, booked with the compute as one slot
    if b >= 0:
        if cf[4] != 0 and rl[0, d, b] < 0:
            status, ls, nv = load_plan(b, d, rl, dv, bbytes, cf[3] != 0, victims)
            if status < 0:
                return False
            slot = loadd[b, d]
            ls = earliest(tls, tle, dv, d, insertion, max(ls, ready), slot + dur)
            r = book_load_at(b, d, ls, nv, rl, dv, bbytes, loadd, victims, ev, cnt, True)
        else:
            r = book_load(b, d, rl, dv, bbytes, loadd, cf[3] != 0, victims, ev, cnt)
        if r < 0:
            return False
        if r > ready:
            ready = r
    if slot > 0:
        s = ready
        book(tls, tle, dv, d, insertion, s - slot, slot + dur)
    else:
        s = earliest(tls, tle, dv, d, insertion, ready, dur)
        book(tls, tle, dv, d, insertion, s, dur)
    sched[0, t] = d
    sched[1, t] = s
    sched[2, t] = s + dur
    if b >= 0 and rl[1, d, b] < s:
        rl[1, d, b] = s
    cnt[2] += 1
    return True


# ---- the EFT loop (HEFT, the static policies, policy search) -------------------------------------

@njit(cache=True)
def eft_loop(order, ttype, type_dur, gr, bl, stt, tls, tle, cf, tcls, cmem, fit_cls):
    """``list_schedule``: each task in ``order`` on the legal, eligible device of earliest
    finish (lowest index on ties) among its candidates; with ``fit_cls`` (each device's class
    code, < nd; empty: plain earliest finish) a candidate whose load would evict is passed
    over when a candidate of its class runs the task without evicting (``list_schedule``'s
    ``device_choice``). (code, task). ``gr`` = (p_off, p_edge,
    esrc, etype, etab, pchan), ``bl`` = (block, bbytes, loadd), ``stt`` = (sched, ev, cnt, dv,
    rl, chan, lm, tstart, w, victims). Candidates (``DeviceClasses``): task t's policy class
    ``tcls[t]`` (−1 or an empty ``tcls``: every legal device) and the members ``cmem[c, d]``
    (1: device d is in class c); a class with no legal member falls back to every legal
    device."""
    p_off, p_edge, esrc, etype, etab, pchan = gr
    block, bbytes, loadd = bl
    sched, ev, cnt, dv, rl, chan, lm, tstart, w, victims = stt
    n, nd = len(ttype), cf[0]
    narrowing = len(tcls) > 0
    fit = len(fit_cls) > 0
    c_ok = np.zeros(nd, np.bool_)
    c_ev = np.zeros(nd, np.bool_)
    c_fit = np.zeros(nd, np.bool_)
    c_f = np.zeros(nd, np.int64)
    seen = np.zeros(n, np.bool_)
    for t in order:
        if seen[t]:
            return TWICE, t
        k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
        if k < 0:
            return NOT_TOPOLOGICAL, t
        ty, b = ttype[t], block[t]
        c = tcls[t] if narrowing else -1
        if c >= 0:  # narrow only when some legal device is in the class
            narrow = False
            for d in range(nd):
                if type_dur[ty, d] >= 0 and cmem[c, d] != 0:
                    narrow = True
                    break
            if not narrow:
                c = -1
        for d in range(nd):
            c_ok[d] = False
            c_fit[d] = False
            dur = type_dur[ty, d]
            if dur < 0 or (c >= 0 and cmem[c, d] == 0):
                continue
            ok, _, f, _, _ = evaluate(d, dur, k, b, w, etab, pchan, chan, lm, tstart, rl, dv,
                                      bbytes, loadd, tls, tle, victims, cf)
            c_ok[d], c_f[d] = ok, f
            c_ev[d] = fit and ok and evicts(b, d, rl, dv, bbytes)
            if ok and fit and not c_ev[d]:
                c_fit[fit_cls[d]] = True
        best_f = -1
        best_d = -1
        for d in range(nd):
            if c_ok[d] and not (c_ev[d] and c_fit[fit_cls[d]]) and \
                    (best_d < 0 or c_f[d] < best_f):
                best_f, best_d = c_f[d], d
        if best_d < 0:
            return (NO_CLASS_DEVICE if c >= 0 else NO_DEVICE), t
        commit(t, best_d, type_dur[ty, best_d], k, b, w, etab, pchan, chan, lm, tstart, rl,
               dv, bbytes, loadd, tls, tle, victims, sched, ev, cnt, cf)
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
def count_homes(n_ld0, n_ev0, b, ev, cnt, dcls, uses_left, pref, homeless, res_count):
    """``bifocal._count_homes`` over the loads and evictions of the last commit."""
    for i in range(n_ld0, cnt[0]):
        v, c = ev[0, i, 0], dcls[ev[0, i, 1]]
        res_count[c, v] += 1
        if res_count[c, v] == 1 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] -= 1
    for i in range(n_ev0, cnt[1]):
        v, c = ev[1, i, 0], dcls[ev[1, i, 1]]
        res_count[c, v] -= 1
        if res_count[c, v] == 0 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] += 1
    c = pref[b]
    if uses_left[b] == 1 and c >= 0 and res_count[c, b] == 0:
        homeless[c] -= 1


@njit(cache=True)
def forget_evicted(n_ev0, ev, cnt, rl, dcls, class_devs, class_n, theta):
    """``bifocal._forget_evicted``: θ(v) = −1 for evicted v whose class θ(v) holds no copy."""
    for i in range(n_ev0, cnt[1]):
        v, cv = ev[1, i, 0], dcls[ev[1, i, 1]]
        if theta[v] == cv:
            held = False
            for j in range(class_n[cv]):
                if rl[0, class_devs[cv, j], v] >= 0:
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
def update_hints(t, c, ty, H, type_best, hs, hint, hint_dist, patterns):
    """The best pattern's classes become hints along t's heaviest chain (nearest wins)."""
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
def inverse_reuse(step, l_out, r_min, p_reuse):
    """1 / max(1, r_eff) of a decode task at ``step``: the token term's amortisation."""
    x = float(l_out - step + 1) * p_reuse
    return 1.0 / _fmax(1.0, _fmax(r_min, x))


@njit(cache=True)
def warm_duration(b, ty, type_dur, rl):
    """Shortest duration (ns) of the task on a legal device holding b (−1: none)."""
    wd = -1
    for d in range(type_dur.shape[1]):
        if type_dur[ty, d] >= 0 and rl[0, d, b] >= 0 and (wd < 0 or type_dur[ty, d] < wd):
            wd = type_dur[ty, d]
    return wd


@njit(cache=True)
def score_terms(d, b, ph, f, data, rdy, dur, inv_r, warm, rl, dv, bbytes, loadd, tls, tle,
                victims, dcls, class_devs, class_n, theta, holds_all, uses_left, homeless, cf,
                fl, use_phase, track_uses):
    """(penalty, bt, bt0, ce, cc) of a task of phase ``ph`` on d whose block b is not resident
    there: ``_run``'s terms beyond EFT and the window. fl = (λ, η, α, κ, ρ)."""
    lam, eta, alpha, kappa, rho = fl
    cd = dcls[d]
    penalty = bt = bt0 = ce = cc = 0.0
    if use_phase:
        tr = rdy - data
        th = theta[b]
        if th >= 0 and th != cd:
            penalty = lam * tr
        if ph == 0 and holds_all[cd]:
            penalty -= eta * tr
    n_needed = 0
    need_sum = 0
    if track_uses:
        status, _, nv = load_plan(b, d, rl, dv, bbytes, cf[3] != 0, victims)
        if status > 0:
            for i in range(nv):
                v = victims[i]
                if uses_left[v] > 0:
                    n_needed += 1
                    need_sum += loadd[v, d]
    if inv_r >= 0 and rdy > data and n_needed == 0:
        s_warm = earliest(tls, tle, dv, d, cf[2] != 0, data, dur) + dur
        cap = np.inf
        if warm >= 0:
            cap = alpha * float(_fmax(0, warm - dur)) / inv_r
        bt, bt0 = token_terms(f, s_warm, penalty, inv_r, alpha, cap)
    if kappa > 0 and n_needed > 0:
        ce = kappa * need_sum
    if rho > 0 and homeless[cd] != 0:
        for j in range(class_n[cd]):
            x = class_devs[cd, j]
            if x != d and rl[0, x, b] >= 0:
                cc = rho * loadd[b, d]
                break
    return penalty, bt, bt0, ce, cc


@njit(cache=True)
def best_row(nr, rd, rf, rx, rh):
    """(best score, best device (−1 none), ties the hint broke, whether any row has a term
    beyond EFT and the window, the device of least EFT) of the ``nr`` rows in device order:
    the lowest score, ties to a device on the hint, then the first."""
    best_s, best_d, best_h, ties = 0.0, -1, False, 0
    eft_s, eft_d = 0.0, -1
    extra = False
    for i in range(nr):
        d, f = rd[i], rf[i]
        cw, penalty, bt, bt0, ce, cc = rx[i, 0], rx[i, 1], rx[i, 2], rx[i, 3], rx[i, 4], rx[i, 5]
        score = float(f) + cw + penalty + bt + ce + cc
        if best_d < 0 or score < best_s:
            best_s, best_d, best_h = score, d, rh[i]
        elif score == best_s and not best_h and rh[i]:
            best_d, best_h = d, True
            ties += 1
        if penalty != 0 or bt != 0 or bt0 != 0 or ce != 0 or cc != 0:
            extra = True
        if eft_d < 0 or float(f) < eft_s:
            eft_s, eft_d = float(f), d
    return best_s, best_d, ties, extra, eft_d


@njit(cache=True)
def _rows(nd):
    """Scratch rows of :func:`device_row` for ``nd`` devices, and the alternatives' array."""
    return (np.empty(nd, np.int64), np.empty(nd, np.int64), np.empty((nd, 6)),
            np.empty(nd, np.bool_), np.empty(5, np.int64))


@njit(cache=True)
def channel_targets(pchan, nd):
    """int64 [channels]: per channel, the bit mask of the devices a route over it ends on
    (all bits when there are more than 62 devices)."""
    nch = 1
    for q in range(nd * nd):
        for h in range(1, pchan[q, 0] + 1):
            if pchan[q, h] + 1 > nch:
                nch = pchan[q, h] + 1
    out = np.zeros(nch, np.int64)
    for q in range(nd * nd):
        for h in range(1, pchan[q, 0] + 1):
            out[pchan[q, h]] |= (np.int64(1) << (q % nd)) if nd <= 62 else np.int64(-1)
    return out


@njit(cache=True)
def _stale_columns(d, k, b, gr, stt, cf, ba, ip, ctarget, homeless0):
    """After a commit of a task of block b on d (its k inputs in ``w``): (the bit mask of the
    devices on which every ready task's row may have changed, whether every row is stale):
    d itself (its timeline, port, residency, LRU), the targets of the channels its
    transfers booked, the holders of b when its last use passed (it no longer counts
    as a needed victim). The blocks loaded, evicted or used (θ, uses left, warm duration,
    copies) make their own tasks' rows stale on every device (the caller's block stamps).
    All rows are stale when a class's count of blocks waiting for a copy changed (ρ > 0)."""
    nd = cf[0]
    pchan, etab = gr[5], gr[4]
    rl, w = stt[4], stt[8]
    mask = np.int64(1) << d if nd <= 62 else np.int64(-1)
    all_stale = nd > 62
    if cf[1] != 0:
        for i in range(k):
            du = w[1, i]
            if du != d and etab[w[3, i], du * nd + d] > 0:
                q = du * nd + d
                for h in range(1, pchan[q, 0] + 1):
                    mask |= ctarget[pchan[q, h]]
    uses_left = ba[7]
    if ip[6] != 0 and b >= 0 and uses_left[b] == 0:
        for x in range(nd):
            if rl[0, x, b] >= 0:
                mask |= np.int64(1) << x if nd <= 62 else np.int64(-1)
    homeless = ba[9]
    for c in range(len(homeless)):
        if homeless[c] != homeless0[c]:
            all_stale = True
    return mask, all_stale


@njit(cache=True)
def _compact(i, nd, cfin, cx, dcls, h, rd, rf, rx, rh):
    """The eligible rows of ready slot i in device order into (rd, rf, rx, rh); their count."""
    nr = 0
    for d in range(nd):
        if cfin[i, d] < 0:
            continue
        rd[nr], rf[nr], rh[nr] = d, cfin[i, d], dcls[d] == h
        for j in range(6):
            rx[nr, j] = cx[i * nd + d, j]
        nr += 1
    return nr


@njit(cache=True)
def _push_ready(t, rt, cv, cfin, cx, cap, size):
    """Add ready task t with no valid row (the arrays grown when full); the arrays, capacity
    and size after."""
    if size == cap:
        rt, cv, cfin, cx, cap = _grown_rows(rt, cv, cfin, cx, cap)
    rt[size] = t
    cv[size, :] = False
    return rt, cv, cfin, cx, cap, size + 1


@njit(cache=True)
def _grown_rows(rt, cv, cfin, cx, cap):
    """The ready slots' arrays at twice the capacity."""
    c2 = 2 * cap
    rt2 = np.empty(c2, np.int64)
    cv2 = np.zeros((c2, cv.shape[1]), np.bool_)
    cf2 = np.empty((c2, cv.shape[1]), np.int64)
    cx2 = np.empty((c2 * cv.shape[1], 6))
    rt2[:cap] = rt
    cv2[:cap] = cv
    cf2[:cap] = cfin
    cx2[:len(cx)] = cx
    return rt2, cv2, cf2, cx2, c2


@njit(cache=True)
def bifocal_loop(order, rs, ttype, type_dur, gr, bl, stt, tls, tle, cf, ba, look, ip, fp, flips):
    """Bifocal's ``_run``: per committed task the legal eligible device of lowest score (ties to
    the hinted class, then the lowest index); θ, the hints and the copy counts updated. The
    tasks come from ``order`` (a static order, ``ready_set: rank``) when it is not empty, else
    by the bifocal score (``ready_set: score``, DOPS Algorithm 1): every iteration finds each
    ready task's best placement under the current partial schedule and commits the ready task
    of least score (ties: the lower ``prio``, its position in HEFT's order).
    ``rs`` = (prio, in-degree, successor offsets, successor edges, edge targets);
    ``gr``, ``bl``, ``stt`` as :func:`eft_loop`; ``ba`` = (class, class devices, class sizes,
    phase, step, θ, holds all, uses left, preferred class, homeless, copies per class);
    ``look`` = (γ·tail per type and device, best pattern, heaviest successor, hint, hint
    distance, patterns); ``ip`` = (phase, token, token_cap, window, H, L_out, track uses,
    horizon by uses); ``fp`` = (λ, η, α, κ, r_min, p_reuse, ρ). Returns (code, task, ties
    broken by the hint); ``flips`` counted.

    By the score, each ready task's rows (per device: EFT and terms) are kept between
    iterations, and a row is recomputed only when the last commit may have changed it
    (:func:`_stale_columns`: the committed device, the devices its transfers' channels lead
    to, every row of a task whose block was loaded, evicted or used); no other input of a row
    changes with a commit, so the rows — and the choice — are a full re-scoring's (the Python
    engine re-scores every ready task; the tests compare the engines' schedules)."""
    prio, indeg, s_off, s_idx, edst = rs
    p_off, p_edge, esrc, etype, etab, pchan = gr
    block, bbytes, loadd = bl
    sched, ev, cnt, dv, rl, chan, lm, tstart, w, victims = stt
    dcls, class_devs, class_n, phase, step, theta, holds_all, uses_left, pref, homeless, \
        res_count = ba
    type_w, type_best, hs, hint, hint_dist, patterns = look
    use_phase, use_token, token_cap, window = ip[0] != 0, ip[1] != 0, ip[2] != 0, ip[3] != 0
    H, l_out, track_uses, by_uses = ip[4], ip[5], ip[6] != 0, ip[7] != 0
    fl = (fp[0], fp[1], fp[2], fp[3], fp[6])
    r_min, p_reuse, rho = fp[4], fp[5], fp[6]
    n, nd = len(ttype), cf[0]
    by_score = len(order) == 0
    rd, rf, rx, rh, alt = _rows(nd)
    seen = np.zeros(n, np.bool_)
    ctarget = channel_targets(pchan, nd)
    cap = 64
    rt = np.empty(cap, np.int64)  # the ready tasks (by the score; else the one task in order)
    cv = np.zeros((cap, nd), np.bool_)  # row valid
    cfin = np.empty((cap, nd), np.int64)  # EFT, −1: not legal or not eligible
    cx = np.empty((cap * nd, 6))  # terms, row i·nd + d
    bstale = np.zeros(max(len(bbytes), 1), np.int64)  # block -> the iteration it changed
    homeless0 = homeless.copy()
    size = 0
    if by_score:
        for t in range(n):
            if indeg[t] == 0:
                rt, cv, cfin, cx, cap, size = _push_ready(t, rt, cv, cfin, cx, cap, size)
    ties = 0
    it = 0
    k = 0
    while True:
        if by_score:
            if size == 0:
                break
        else:
            if it == len(order):
                break
            t = order[it]
            if seen[t]:
                return TWICE, t, ties
            seen[t] = True
            k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
            if k < 0:
                return NOT_TOPOLOGICAL, t, ties
            rt[0] = t
            cv[0, :] = False
            size = 1
        it += 1
        bi, bs = -1, 0.0
        for i in range(size):
            t = rt[i]
            ty, b, ph = ttype[t], block[t], phase[t]
            first = True
            inv_r = -1.0
            warm = -1
            for d in range(nd):
                if cv[i, d]:
                    continue
                cv[i, d] = True
                if first:
                    first = False
                    if by_score:
                        k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
                    if use_token and b >= 0 and ph == 1:
                        if by_uses:  # the block's remaining uses (token_horizon)
                            inv_r = 1.0 / _fmax(1.0, _fmax(r_min, float(uses_left[b]) * p_reuse))
                        else:
                            inv_r = inverse_reuse(step[t], l_out, r_min, p_reuse)
                    warm = -1 if inv_r < 0 or not token_cap else \
                        warm_duration(b, ty, type_dur, rl)
                dur = type_dur[ty, d]
                cfin[i, d] = -1
                if dur < 0:
                    continue
                ok, _, f, data, rdy = evaluate(d, dur, k, b, w, etab, pchan, chan, lm, tstart,
                                               rl, dv, bbytes, loadd, tls, tle, victims, cf)
                if not ok:
                    continue
                cfin[i, d] = f
                j = i * nd + d
                cx[j, 0] = type_w[ty, d] if window else 0.0
                cx[j, 1] = cx[j, 2] = cx[j, 3] = cx[j, 4] = cx[j, 5] = 0.0
                if b >= 0 and rl[0, d, b] < 0:
                    cx[j, 1], cx[j, 2], cx[j, 3], cx[j, 4], cx[j, 5] = score_terms(
                        d, b, ph, f, data, rdy, dur, inv_r, warm, rl, dv, bbytes, loadd, tls,
                        tle, victims, dcls, class_devs, class_n, theta, holds_all, uses_left,
                        homeless, cf, fl, use_phase, track_uses)
            if not by_score:
                bi = 0
                break
            nr = _compact(i, nd, cfin, cx, dcls, hint[t] if window else -1, rd, rf, rx, rh)
            s, d, _, _, _ = best_row(nr, rd, rf, rx, rh)
            if d < 0:
                return NO_DEVICE, t, ties
            if bi < 0 or s < bs or (s == bs and prio[t] < prio[rt[bi]]):
                bi, bs = i, s
        t = rt[bi]
        ty, b = ttype[t], block[t]
        nr = _compact(bi, nd, cfin, cx, dcls, hint[t] if window else -1, rd, rf, rx, rh)
        _, best_d, nt, extra, eft_d = best_row(nr, rd, rf, rx, rh)
        ties += nt
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
        size -= 1
        if bi != size:
            rt[bi] = rt[size]
            cv[bi, :] = cv[size, :]
            cfin[bi, :] = cfin[size, :]
            cx[bi * nd:(bi + 1) * nd, :] = cx[size * nd:(size + 1) * nd, :]
        if by_score:
            k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
            homeless0[:] = homeless
        n_ev0, n_ld0 = cnt[1], cnt[0]
        if not commit(t, best_d, type_dur[ty, best_d], k, b, w, etab, pchan, chan, lm, tstart,
                      rl, dv, bbytes, loadd, tls, tle, victims, sched, ev, cnt, cf):
            return NO_DEVICE, t, ties
        if rho > 0 and b >= 0 and (n_ld0 != cnt[0] or n_ev0 != cnt[1] or uses_left[b] == 1):
            count_homes(n_ld0, n_ev0, b, ev, cnt, dcls, uses_left, pref, homeless, res_count)
        if track_uses and b >= 0:
            uses_left[b] -= 1
        c = dcls[best_d]
        if n_ev0 != cnt[1]:
            forget_evicted(n_ev0, ev, cnt, rl, dcls, class_devs, class_n, theta)
        if b >= 0:
            theta[b] = c
        if window:
            update_hints(t, c, ty, H, type_best, hs, hint, hint_dist, patterns)
        if not by_score:
            continue
        mask, all_stale = _stale_columns(best_d, k, b, gr, stt, cf, ba, ip, ctarget, homeless0)
        if b >= 0:
            bstale[b] = it
        for j in range(n_ld0, cnt[0]):
            bstale[ev[0, j, 0]] = it
        for j in range(n_ev0, cnt[1]):
            bstale[ev[1, j, 0]] = it
        for i in range(size):
            bt_ = block[rt[i]]
            if all_stale or (bt_ >= 0 and bstale[bt_] == it):
                cv[i, :] = False
            else:
                for d in range(nd):
                    if (mask >> d) & 1:
                        cv[i, d] = False
        for j in range(s_off[t], s_off[t + 1]):
            v = edst[s_idx[j]]
            indeg[v] -= 1
            if indeg[v] == 0:
                rt, cv, cfin, cx, cap, size = _push_ready(v, rt, cv, cfin, cx, cap, size)
    return OK, -1, ties


# ---- set-up: uniquing, the lookahead's tails, sibling groups ----------------------------------
# O(n) passes that replace numpy sorts and masks of the set-up; each mirrors its numpy reference
# (named in its docstring) and gives the same values (tests/placement/test_setup_kernels.py).

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


# ---- set-up: the task order in one call ----------------------------------------------------------

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
