"""numba kernels of the partial list schedule and the EFT loop: timelines with insertion,
transfers on contended channels, weight loads with LRU eviction, evaluating a candidate device
and committing a task (problems.md §1.2), and :func:`eft_loop`, the loop of HEFT, the static
policies, policy search and the replay of :mod:`heuristics.placement.improve`. These kernels
are the schedulers' one implementation; :mod:`heuristics.placement.schedule_arrays` builds
their inputs (the named tuples of :mod:`heuristics.placement.kernel_types`) and reads their
results. Times are integer ns.

State layout (int64; ``nd`` devices, ``nb`` blocks, ``n`` tasks), the fields of
:class:`~heuristics.placement.kernel_types.State`:

* ``sched[3, n]`` device (−1 unscheduled), start, end of each task;
* ``dv[5, nd]`` load port free time, resident bytes, capacity (−1 unlimited), timeline length,
  timeline end; timelines: per device sorted busy starts and ends in the typed lists
  ``tls``/``tle`` (grown by doubling);
* ``rl[2, nd, nb]`` end of b's load on d and start of its last use there, −1 when b is not
  resident;
* ``chan`` channel free times; ``lm[2, n_channels + 1]`` a task's planned channel times and
  their stamp (the current stamp in the last column of row 1);
* ``w[4, max in-degree]`` the current task's inputs: end, device, edge, transfer row;
* ``ev[2, n, 3]`` load and eviction rows (block, device, time) — at most one load per commit
  and never more evictions than loads — and ``cnt`` = [loads, evictions, scheduled].

Hot helpers take only the arrays they use: numba increments and decrements the reference
count of every array argument (an atomic operation) on each call, which dominated a version
that passed the state as tuples; the loops unpack the named tuples once. Return codes of the
loops: 0 done, 1 a task listed twice, 2 order not topological, 3 no device fits, 4 no device
of the task's policy class fits (the task index in the second value).

Debugging: ``NUMBA_DISABLE_JIT=1`` runs these same kernels as plain Python (slowly; every
breakpoint and print works), and each kernel's ``py_func`` is its Python function.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache

OK, TWICE, NOT_TOPOLOGICAL, NO_DEVICE, NO_CLASS_DEVICE = 0, 1, 2, 3, 4
_BIG_SORT = 32  # pred_info: insertion sort up to this many inputs, stable argsort above
PORT, RESIDENT, CAP, TLEN, TLAST = 0, 1, 2, 3, 4  # rows of dv
PREFETCH, AT_USE, OVERLAP = 0, 1, 2  # Config.load_rule: the instance's load_timing


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
    """Earliest start ≥ ready (ns) of a job of ``dur`` ns on d: ``ready`` when it is past the
    timeline's end; else the end (no insertion) or the first idle gap from ``ready`` on that
    fits the job."""
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
    """Book [start, start + dur) on d's timeline (kept sorted by start; its arrays doubled
    when full)."""
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
    and the task's own earlier transfers ; with it, booked (channels, transfer starts), which plans the same times."""
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
    LRU order: last use, then block index; a load waits for the victims' last use."""
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
    does not fit beside d's resident blocks."""
    if b < 0 or rl[0, d, b] >= 0:
        return False
    cap = dv[CAP, d]
    return cap >= 0 and dv[RESIDENT, d] + bbytes[b] > cap


@njit(cache=True)
def slot_length(rule, ld, dur):
    """Length (ns) of the device slot of a task of ``dur`` ns whose block loads in ``ld`` ns
    from its dispatch: ld + dur under ``at_use`` (load, then compute), max(ld, dur) under
    ``overlap`` (the load from the slot's start, the compute ending with the slot)."""
    if rule == OVERLAP:
        return ld if ld > dur else dur
    return ld + dur


@njit(cache=True)
def evaluate(d, dur, k, b, w, etab, pchan, chan, lm, tstart, rl, dv, bbytes, loadd, tls, tle,
             victims, cf):
    """(ok, start, finish, data ready, ready) of a task of block b (−1 none) on d, in ns; ok
    False when d is not eligible (its block cannot be loaded there); ``cf``: :class:`Config`.
    Under ``at_use`` and ``overlap`` a load runs in the task's slot, ``ready`` being the
    compute start (the load's end under ``at_use``, slot end − p_v under ``overlap``)."""
    ready = transfers(d, k, w, etab, pchan, chan, lm, tstart, cf.nd, cf.contention != 0, False)
    data = ready
    if b >= 0:
        r = rl[0, d, b]
        if r < 0:
            status, ls, _ = load_plan(b, d, rl, dv, bbytes, cf.evict != 0, victims)
            if status < 0:
                return False, 0, 0, 0, 0
            if cf.load_rule != PREFETCH:  # one slot from the dispatch on (slot_length)
                slot = slot_length(cf.load_rule, loadd[b, d], dur)
                s0 = earliest(tls, tle, dv, d, cf.insertion != 0, max(ls, data), slot)
                return True, s0 + slot - dur, s0 + slot, data, s0 + slot - dur
            r = ls + loadd[b, d]
        if r > ready:
            ready = r
    s = earliest(tls, tle, dv, d, cf.insertion != 0, ready, dur)
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
    it is ready. The port's free time becomes the load's end (``at_use``: its start, the load
    lying in its task's slot on the device timeline, as under ``overlap``)."""
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
    """Book t on d (transfers, load and evictions, compute);
    returns False when the block cannot be loaded (the caller raises)."""
    insertion = cf.insertion != 0
    ready = transfers(d, k, w, etab, pchan, chan, lm, tstart, cf.nd, cf.contention != 0, True)
    slot = -1  # at_use / overlap: the slot's length, load and compute booked as one slot
    if b >= 0:
        if cf.load_rule != PREFETCH and rl[0, d, b] < 0:
            status, ls, nv = load_plan(b, d, rl, dv, bbytes, cf.evict != 0, victims)
            if status < 0:
                return False
            slot = slot_length(cf.load_rule, loadd[b, d], dur)
            ls = earliest(tls, tle, dv, d, insertion, max(ls, ready), slot)
            book_load_at(b, d, ls, nv, rl, dv, bbytes, loadd, victims, ev, cnt, True)
            ready = ls
        else:
            r = book_load(b, d, rl, dv, bbytes, loadd, cf.evict != 0, victims, ev, cnt)
            if r < 0:
                return False
            if r > ready:
                ready = r
    if slot >= 0:
        s = ready + slot - dur
        book(tls, tle, dv, d, insertion, ready, slot)
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
def earliest_finish(c_ok, c_ev, c_fit, c_f, fit_cls, nd):
    """The eligible candidate of earliest finish ``c_f`` (lowest index on ties), passing over
    one that would evict (``c_ev``) when its class code has a candidate that does not
    (``c_fit``; only set under ``fit_in_class``); −1 when none is eligible."""
    best_f = -1
    best_d = -1
    for d in range(nd):
        if c_ok[d] and not (c_ev[d] and c_fit[fit_cls[d]]) and \
                (best_d < 0 or c_f[d] < best_f):
            best_f, best_d = c_f[d], d
    return best_d


@njit(cache=True)
def least_available(c_ok, dv, nd):
    """The eligible candidate whose timeline ends first (``dv[TLAST]``, ns; lowest index on
    ties); −1 when none is eligible."""
    best_d = -1
    for d in range(nd):
        if c_ok[d] and (best_d < 0 or dv[TLAST, d] < dv[TLAST, best_d]):
            best_d = d
    return best_d


@njit(cache=True)
def eft_loop(order, costs, graph, blocks, state, cf, cand, least=0):
    """``list_schedule``: each task in ``order`` on the legal, eligible device of earliest
    finish (lowest index on ties) among its candidates (code, task). ``costs``, ``graph``,
    ``blocks``, ``state``, ``cf`` (:class:`Config`) and ``cand``
    (:class:`Candidates`) are the named tuples of :mod:`heuristics.placement.kernel_types`.
    Candidates: task t's policy class ``cand.task_class[t]`` (−1 or an empty array: every
    legal device) and its members; a class with no legal member falls back to every legal
    device. With ``cand.fit_class`` (each device's class code; empty: plain earliest finish)
    a candidate whose load would evict is passed over when a candidate of its class runs the
    task without evicting (``device_choice: fit_in_class``). With ``least`` = 1 a task narrowed
    to its class takes the eligible candidate whose timeline ends first (``dv[TLAST]``, the
    end of its last booked slot; lowest index on ties) whatever its finish (``device_choice:
    least_available``, the static baselines of the DOPS authors' code); a task outside any
    class keeps the earliest finish."""
    p_off, p_edge, esrc, etype = graph.p_off, graph.p_edge, graph.esrc, graph.etype
    etab, pchan = graph.etab, graph.pchan
    block, bbytes, loadd = blocks.block, blocks.bbytes, blocks.loadd
    sched, ev, cnt, dv, rl = state.sched, state.ev, state.cnt, state.dv, state.rl
    chan, lm, tstart, w, victims = state.chan, state.lm, state.tstart, state.w, state.victims
    tls, tle = state.tls, state.tle
    ttype, type_dur = costs.ttype, costs.type_dur
    tcls, cmem, fit_cls = cand.task_class, cand.members, cand.fit_class
    n, nd = len(ttype), cf.nd
    narrowing = len(tcls) > 0
    fit = len(fit_cls) > 0
    least_first = least != 0
    c_ok = np.zeros(nd, np.bool_)  # candidate d is eligible
    c_ev = np.zeros(nd, np.bool_)  # d would evict (fit_in_class only)
    c_fit = np.zeros(nd, np.bool_)  # some candidate of class code d runs it without evicting
    c_f = np.zeros(nd, np.int64)  # finish on d
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
        best_d = least_available(c_ok, dv, nd) if least_first and c >= 0 else earliest_finish(
            c_ok, c_ev, c_fit, c_f, fit_cls, nd)
        if best_d < 0:
            return (NO_CLASS_DEVICE if c >= 0 else NO_DEVICE), t
        commit(t, best_d, type_dur[ty, best_d], k, b, w, etab, pchan, chan, lm, tstart, rl,
               dv, bbytes, loadd, tls, tle, victims, sched, ev, cnt, cf)
        seen[t] = True
    return OK, -1
