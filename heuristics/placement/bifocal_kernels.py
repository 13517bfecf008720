"""numba kernels of Bifocal's loop (docs/problems.md §6, "Bifocal"): the device score's terms
(window, phase, token, eviction and copy costs), the best row and the alternatives without each
term (``flipped_decisions``), the hint and copy-count updates, and :func:`bifocal_loop`, the one
implementation of the loop over a static order (``ready_set: rank``) or the ready set by score
(``ready_set: score``, DOPS Algorithm 1). Inputs are the named tuples of
:mod:`heuristics.placement.kernel_types`, built by :mod:`heuristics.placement.bifocal`;
``NUMBA_DISABLE_JIT=1`` runs the kernels as plain Python, ``bifocal_loop.py_func`` is the
loop's Python function.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heuristics.placement.state_kernels import (
    NO_DEVICE,
    NOT_TOPOLOGICAL,
    OK,
    TWICE,
    commit,
    earliest,
    evaluate,
    load_plan,
    pred_info,
)
from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache


@njit(cache=True)
def alternatives(nr, rd, rf, rx, rh, alt):
    """Fill ``alt`` with the device each score without one term (window, phase, token, evict,
    copy) chooses among the ``nr`` rows (device, EFT, terms cw/penalty/bt/bt0/ce/cc, on the
    hint), each summed in the score's order: the flipped decisions' rule."""
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
    """the copy counts updated by the loads and evictions of the last commit."""
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
    """θ(v) = −1 for evicted v whose class θ(v) holds no copy."""
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
    """(B_token, B_token without the phase penalty) of a reload."""
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
    there: the score's terms beyond EFT and the window. fl = (λ, η, α, κ, ρ)."""
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
        status, _, nv = load_plan(b, d, rl, dv, bbytes, cf.evict != 0, victims)
        if status > 0:
            for i in range(nv):
                v = victims[i]
                if uses_left[v] > 0:
                    n_needed += 1
                    need_sum += loadd[v, d]
    if inv_r >= 0 and rdy > data and n_needed == 0:
        s_warm = earliest(tls, tle, dv, d, cf.insertion != 0, data, dur) + dur
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
def _stale_columns(d, k, b, graph, state, cf, bias, terms, ctarget, homeless0):
    """After a commit of a task of block b on d (its k inputs in ``state.w``): (the bit mask of
    the devices on which every ready task's row may have changed, whether every row is stale):
    d itself (its timeline, port, residency, LRU), the targets of the channels its
    transfers booked, the holders of b when its last use passed (it no longer counts
    as a needed victim). The blocks loaded, evicted or used (θ, uses left, warm duration,
    copies) make their own tasks' rows stale on every device (the caller's block stamps).
    All rows are stale when a class's count of blocks waiting for a copy changed (ρ > 0)."""
    nd = cf.nd
    pchan, etab = graph.pchan, graph.etab
    rl, w = state.rl, state.w
    mask = np.int64(1) << d if nd <= 62 else np.int64(-1)
    all_stale = nd > 62
    if cf.contention != 0:
        for i in range(k):
            du = w[1, i]
            if du != d and etab[w[3, i], du * nd + d] > 0:
                q = du * nd + d
                for h in range(1, pchan[q, 0] + 1):
                    mask |= ctarget[pchan[q, h]]
    uses_left = bias.uses_left
    if terms.track_uses != 0 and b >= 0 and uses_left[b] == 0:
        for x in range(nd):
            if rl[0, x, b] >= 0:
                mask |= np.int64(1) << x if nd <= 62 else np.int64(-1)
    homeless = bias.homeless
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
def bifocal_loop(order, ready, costs, graph, blocks, state, cf, bias, window, terms):
    """Bifocal's loop: per committed task the legal eligible device of lowest score (ties to
    the hinted class, then the lowest index); θ, the hints and the copy counts updated. The
    tasks come from ``order`` (a static order, ``ready_set: rank``) when it is not empty, else
    by the bifocal score (``ready_set: score``, DOPS Algorithm 1): every iteration finds each
    ready task's best placement under the current partial schedule and commits the ready task
    of least score (ties: the lower ``ready.prio``, its position in HEFT's order). The
    arguments are the named tuples of :mod:`heuristics.placement.kernel_types` (``ready``:
    ``ReadySet``, ``bias``: ``BifocalData``, ``window``: ``Window``, ``terms``: ``Terms``).
    Returns (code, task, ties broken by the hint); ``bias.flips`` counted.

    By the score, each ready task's rows (per device: EFT and terms) are kept between
    iterations, and a row is recomputed only when the last commit may have changed it
    (:func:`_stale_columns`: the committed device, the devices its transfers' channels lead
    to, every row of a task whose block was loaded, evicted or used); no other input of a row
    changes with a commit, so the rows — and the choice — are those of a full re-scoring.
    ``terms.rescore_all`` makes every row stale after each commit: the full re-scoring itself,
    against which tests/placement/test_score_cache.py compares the kept rows."""
    prio, indeg, s_off, s_idx, edst = ready.prio, ready.indeg, ready.s_off, ready.s_idx, ready.edst
    ttype, type_dur = costs.ttype, costs.type_dur
    p_off, p_edge, esrc, etype = graph.p_off, graph.p_edge, graph.esrc, graph.etype
    etab, pchan = graph.etab, graph.pchan
    block, bbytes, loadd = blocks.block, blocks.bbytes, blocks.loadd
    sched, ev, cnt, dv, rl = state.sched, state.ev, state.cnt, state.dv, state.rl
    chan, lm, tstart, w, victims = state.chan, state.lm, state.tstart, state.w, state.victims
    tls, tle = state.tls, state.tle
    dcls, class_devs, class_n = bias.dcls, bias.class_devs, bias.class_n
    phase, step, theta, holds_all = bias.phase, bias.step, bias.theta, bias.holds_all
    uses_left, pref, homeless, res_count = bias.uses_left, bias.pref, bias.homeless, bias.res_count
    flips = bias.flips
    type_w, type_best, hs = window.type_w, window.type_best, window.hs
    hint, hint_dist, patterns = window.hint, window.hint_dist, window.patterns
    use_phase, use_token = terms.phase != 0, terms.token != 0
    token_cap, use_window = terms.token_cap != 0, terms.window != 0
    H, l_out, track_uses, by_uses = terms.H, terms.l_out, terms.track_uses != 0, terms.by_uses != 0
    rescore_all = terms.rescore_all != 0
    fl = (terms.lam, terms.eta, terms.alpha, terms.kappa, terms.rho)
    r_min, p_reuse, rho = terms.r_min, terms.p_reuse, terms.rho
    n, nd = len(ttype), cf.nd
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
                cx[j, 0] = type_w[ty, d] if use_window else 0.0
                cx[j, 1] = cx[j, 2] = cx[j, 3] = cx[j, 4] = cx[j, 5] = 0.0
                if b >= 0 and rl[0, d, b] < 0:
                    cx[j, 1], cx[j, 2], cx[j, 3], cx[j, 4], cx[j, 5] = score_terms(
                        d, b, ph, f, data, rdy, dur, inv_r, warm, rl, dv, bbytes, loadd, tls,
                        tle, victims, dcls, class_devs, class_n, theta, holds_all, uses_left,
                        homeless, cf, fl, use_phase, track_uses)
            if not by_score:
                bi = 0
                break
            nr = _compact(i, nd, cfin, cx, dcls, hint[t] if use_window else -1, rd, rf, rx, rh)
            s, d, _, _, _ = best_row(nr, rd, rf, rx, rh)
            if d < 0:
                return NO_DEVICE, t, ties
            if bi < 0 or s < bs or (s == bs and prio[t] < prio[rt[bi]]):
                bi, bs = i, s
        t = rt[bi]
        ty, b = ttype[t], block[t]
        nr = _compact(bi, nd, cfin, cx, dcls, hint[t] if use_window else -1, rd, rf, rx, rh)
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
        if use_window:
            update_hints(t, c, ty, H, type_best, hs, hint, hint_dist, patterns)
        if not by_score:
            continue
        mask, all_stale = _stale_columns(best_d, k, b, graph, state, cf, bias, terms, ctarget,
                                         homeless0)
        all_stale = all_stale or rescore_all
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

