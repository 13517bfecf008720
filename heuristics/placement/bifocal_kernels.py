"""numba kernels of Bifocal's loop (docs/problems.md §6, "Bifocal"): the device score's terms
(phase, token, eviction and copy costs; the window's in :mod:`heuristics.placement.bifocal_window`),
the best row and the alternatives without each term (``flipped_decisions``), the copy-count
updates, and :func:`bifocal_loop`, the one
implementation of the loop over a static order (``ready_set: rank``) or the ready set by score
(``ready_set: score``, DOPS Algorithm 1). Inputs are the named tuples of
:mod:`heuristics.placement.kernel_types`, built by :mod:`heuristics.placement.bifocal`;
``NUMBA_DISABLE_JIT=1`` runs the kernels as plain Python, ``bifocal_loop.py_func`` is the
loop's Python function.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heuristics.placement.bifocal_window import (
    device_bit,
    legal_classes,
    update_hints,
    window_chain,
    window_estimate,
)
from heuristics.placement.state_kernels import (
    AT_USE,
    NO_DEVICE,
    NOT_TOPOLOGICAL,
    OK,
    OVERLAP,
    TWICE,
    commit,
    evaluate,
    load_plan,
    pred_info,
)
from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache


@njit(cache=True)
def alternatives(nr, rd, rf, rx, alt):
    """Fill ``alt`` with the device each score without one term (window, phase, token, evict,
    copy) chooses among the ``nr`` rows (device, EFT, terms cw/penalty/bt/bt0/ce/cc), each
    summed in the score's order, ties as :func:`best_row` breaks them: the flipped decisions'
    rule."""
    best = np.zeros(5)
    best_f = np.zeros(5, np.int64)
    alt[:] = -1
    for i in range(nr):
        f = rf[i]
        cw, pen, bt, ce, cc = rx[i, 0], rx[i, 1], rx[i, 2], rx[i, 4], rx[i, 5]
        for j in range(5):
            if j == 0:
                sc = float(f) + pen + bt + ce + cc
            elif j == 1:
                sc = float(f) + cw + bt + ce + cc
            elif j == 2:
                sc = float(f) + cw + pen + ce + cc
            elif j == 3:
                sc = float(f) + cw + pen + bt + cc
            else:
                sc = float(f) + cw + pen + bt + ce
            if alt[j] < 0 or sc < best[j] or (sc == best[j] and f < best_f[j]):
                best[j] = sc
                best_f[j] = f
                alt[j] = rd[i]


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
def _fmax(a, b):
    """Python's max(a, b): a unless b > a."""
    return b if b > a else a


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
def reload_time(rule, ld, dur, data, rdy):
    """t_reload (ns) of a task of ``dur`` ns whose block, not resident on the device, loads
    there in ``ld`` ns (DOPS Eq. 1, under the instance's load rule): ``at_use`` t_load,
    ``overlap`` max(0, t_load − p), ``prefetch`` the wait past the inputs' arrival ``data``
    for the load to end (``rdy`` − ``data``, the rows of :func:`evaluate`)."""
    if rule == AT_USE:
        return ld
    if rule == OVERLAP:
        return ld - dur if ld > dur else 0
    return rdy - data


@njit(cache=True)
def score_terms(d, b, ph, data, rdy, dur, inv_r, warm, rl, dv, bbytes, loadd, victims, dcls,
                class_devs, class_n, theta, holds_all, uses_left, homeless, cf, fl, use_phase,
                track_uses):
    """(penalty, bt, bt0, ce, cc) of a task of phase ``ph`` on d whose block b is not resident
    there: the score's terms beyond EFT and the window, from its reload time t_reload
    (:func:`reload_time`). B_phase: λ·t_reload when θ(b) is another class than d's, −η·t_reload
    in prefill on a class that can hold every block. B_token (decode; ``inv_r`` ≥ 0):
    α(Ĉ_avg − Ĉ_cur) with Ĉ_cur = p + t_reload and Ĉ_avg = p + t_reload / max(1, r_eff), so
    −α·t_reload·(1 − 1/max(1, r_eff)) (never above 0: DOPS Eq. 4 needs no clamp), no less than
    −cap under the token cap (``warm`` ≥ 0); bt0 = bt. fl = (λ, η, α, κ, ρ)."""
    lam, eta, alpha, kappa, rho = fl
    cd = dcls[d]
    tr = float(reload_time(cf.load_rule, loadd[b, d], dur, data, rdy))
    penalty = bt = ce = cc = 0.0
    if use_phase:
        th = theta[b]
        if th >= 0 and th != cd:
            penalty = lam * tr
        if ph == 0 and holds_all[cd]:
            penalty -= eta * tr
    if inv_r >= 0 and tr > 0:
        bt = -alpha * tr * (1.0 - inv_r)
        if warm >= 0:
            cap = alpha * float(_fmax(0, warm - dur)) / inv_r
            bt = _fmax(-cap, bt)
    if track_uses and kappa > 0:
        status, _, nv = load_plan(b, d, rl, dv, bbytes, cf.evict != 0, victims)
        if status > 0:
            need_sum = 0
            for i in range(nv):
                v = victims[i]
                if uses_left[v] > 0:
                    need_sum += loadd[v, d]
            ce = kappa * need_sum
    if rho > 0 and homeless[cd] != 0:
        for j in range(class_n[cd]):
            x = class_devs[cd, j]
            if x != d and rl[0, x, b] >= 0:
                cc = rho * loadd[b, d]
                break
    return penalty, bt, bt, ce, cc


@njit(cache=True)
def best_row(nr, rd, rf, rx):
    """(best score, best device (−1 none), its EFT, ties the EFT broke, whether any row has a
    term beyond EFT and the window, the device of least EFT) of the ``nr`` rows in device
    order: the lowest score, ties to the lower EFT, then the first (the authors break the last
    tie at random)."""
    best_s, best_d, best_f, ties = 0.0, -1, 0, 0
    eft_s, eft_d = 0, -1
    extra = False
    for i in range(nr):
        d, f = rd[i], rf[i]
        cw, penalty, bt, bt0, ce, cc = rx[i, 0], rx[i, 1], rx[i, 2], rx[i, 3], rx[i, 4], rx[i, 5]
        score = float(f) + cw + penalty + bt + ce + cc
        if best_d < 0 or score < best_s:
            best_s, best_d, best_f = score, d, f
        elif score == best_s and f < best_f:
            best_d, best_f = d, f
            ties += 1
        if penalty != 0 or bt != 0 or bt0 != 0 or ce != 0 or cc != 0:
            extra = True
        if eft_d < 0 or f < eft_s:
            eft_s, eft_d = f, d
    return best_s, best_d, best_f, ties, extra, eft_d


@njit(cache=True)
def _rows(nd):
    """Scratch rows of :func:`best_row` for ``nd`` devices, and the alternatives' array."""
    return (np.empty(nd, np.int64), np.empty(nd, np.int64), np.empty((nd, 6)),
            np.empty(5, np.int64))


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
def _compact(i, nd, cfin, cx, rd, rf, rx):
    """The eligible rows of ready slot i in device order into (rd, rf, rx); their count."""
    nr = 0
    for d in range(nd):
        if cfin[i, d] < 0:
            continue
        rd[nr], rf[nr] = d, cfin[i, d]
        for j in range(6):
            rx[nr, j] = cx[i * nd + d, j]
        nr += 1
    return nr


@njit(cache=True)
def _push_ready(t, rows, cap, size):
    """Add ready task t with no valid row (the slots' arrays ``rows`` grown when full); the
    arrays, capacity and size after."""
    if size == cap:
        rows, cap = _grown_rows(rows, cap)
    rows[0][size] = t
    rows[1][size, :] = False
    rows[6][size, :] = False
    return rows, cap, size + 1


@njit(cache=True)
def _grown_rows(rows, cap):
    """The ready slots' arrays (task, row valid, EFT, terms, window devices, representatives'
    mask, window valid) at twice the capacity."""
    rt, cv, cfin, cx, cdv, srm, wv = rows
    nd = cv.shape[1]
    c2 = 2 * cap
    rt2 = np.empty(c2, np.int64)
    cv2 = np.zeros((c2, nd), np.bool_)
    cf2 = np.empty((c2, nd), np.int64)
    cx2 = np.empty((c2 * nd, 6))
    cdv2 = np.empty((c2 * nd, cdv.shape[1]), np.int64)
    srm2 = np.zeros(c2, np.int64)
    wv2 = np.zeros((c2, nd), np.bool_)
    rt2[:cap] = rt
    cv2[:cap] = cv
    cf2[:cap] = cfin
    cx2[:len(cx)] = cx
    cdv2[:len(cdv)] = cdv
    srm2[:cap] = srm
    wv2[:cap] = wv
    return (rt2, cv2, cf2, cx2, cdv2, srm2, wv2), c2


@njit(cache=True)
def _move_slot(rows, src, dst, nd):
    """Copy ready slot ``src`` over slot ``dst``."""
    rt, cv, cfin, cx, cdv, srm, wv = rows
    rt[dst] = rt[src]
    wv[dst, :] = wv[src, :]
    cv[dst, :] = cv[src, :]
    cfin[dst, :] = cfin[src, :]
    cx[dst * nd:(dst + 1) * nd, :] = cx[src * nd:(src + 1) * nd, :]
    cdv[dst * nd:(dst + 1) * nd, :] = cdv[src * nd:(src + 1) * nd, :]
    srm[dst] = srm[src]


@njit(cache=True)
def _score_slot(i, rows, by_score, k, costs, graph, blocks, state, cf, bias, window, terms,
                chain, reps, pat, bestp, scratch):
    """Recompute the stale rows of ready slot i (per device: EFT, the terms, the window's best
    devices) and, on rows whose EFT and terms still hold, the stale windows; ``k``: the task's
    inputs in ``state.w`` unless ``by_score``, which reads them. The input count."""
    rt, cv, cfin, cx, cdv, srm, wv = rows
    ttype, type_dur = costs.ttype, costs.type_dur
    block, bbytes, loadd = blocks.block, blocks.bbytes, blocks.loadd
    dv, rl, w, victims = state.dv, state.rl, state.w, state.victims
    dcls, phase, step = bias.dcls, bias.phase, bias.step
    uses_left = bias.uses_left
    use_window, by_uses = terms.window != 0, terms.by_uses != 0
    fl = (terms.lam, terms.eta, terms.alpha, terms.kappa, terms.rho)
    nd = cf.nd
    t = rt[i]
    ty, b, ph = ttype[t], block[t], phase[t]
    first, have_k = True, not by_score
    inv_r = -1.0
    warm = -1
    m = 0
    for d in range(nd):
        if cv[i, d] and wv[i, d]:
            continue
        evaluated = cv[i, d]
        cv[i, d] = wv[i, d] = True
        if first:
            first = False
            if terms.token != 0 and b >= 0 and ph == 1:
                if by_uses:  # the block's remaining uses (token_horizon)
                    r = float(uses_left[b]) * terms.p_reuse
                    inv_r = 1.0 / _fmax(1.0, _fmax(terms.r_min, r))
                else:
                    inv_r = inverse_reuse(step[t], terms.l_out, terms.r_min, terms.p_reuse)
            warm = -1 if inv_r < 0 or terms.token_cap == 0 else \
                warm_duration(b, ty, type_dur, rl)
            if use_window:
                m = window_chain(t, terms.H, window.hs, chain)
                srm[i] = legal_classes(chain, m, ttype, type_dur, block, loadd, dcls, nd, reps)
        j = i * nd + d
        if evaluated:  # EFT and terms hold: the window only
            if cfin[i, d] >= 0:
                _window_row(t, d, cfin[i, d], j, chain, m, reps, costs, blocks, state, graph,
                            bias, window, terms, cf, cx, cdv, pat, bestp, scratch)
            continue
        if not have_k:
            have_k = True
            k = pred_info(t, graph.p_off, graph.p_edge, graph.esrc, graph.etype,
                          state.sched, w)
        dur = type_dur[ty, d]
        cfin[i, d] = -1
        if dur < 0:
            continue
        ok, _, f, data, rdy = evaluate(d, dur, k, b, w, graph.etab, graph.pchan, state.chan,
                                       state.lm, state.tstart, rl, dv, bbytes, loadd,
                                       state.tls, state.tle, victims, cf)
        if not ok:
            continue
        cfin[i, d] = f
        cx[j, :] = 0.0
        if use_window:
            _window_row(t, d, f, j, chain, m, reps, costs, blocks, state, graph, bias,
                        window, terms, cf, cx, cdv, pat, bestp, scratch)
        if b >= 0 and rl[0, d, b] < 0:
            cx[j, 1], cx[j, 2], cx[j, 3], cx[j, 4], cx[j, 5] = score_terms(
                d, b, ph, data, rdy, dur, inv_r, warm, rl, dv, bbytes, loadd, victims, dcls,
                bias.class_devs, bias.class_n, bias.theta, bias.holds_all, uses_left,
                bias.homeless, cf, fl, terms.phase != 0, terms.track_uses != 0)
    return k


@njit(cache=True)
def _window_row(t, d, f, j, chain, m, reps, costs, blocks, state, graph, bias, window, terms,
                cf, cx, cdv, pat, bestp, scratch):
    """Row j's window term γ·(T̂_H − EFT) (task t on d finishing at f) and its best
    devices."""
    bestp[:] = -1
    th = window_estimate(t, d, f, chain, m, reps, costs.ttype, costs.type_dur, blocks.block,
                         blocks.loadd, bias.dcls, state.rl, state.dv, graph.etab,
                         window.hetype, window.rtype, window.hint, cf.load_rule, terms.consist,
                         pat, bestp, scratch, terms.by_device != 0)
    cx[j, 0] = terms.gamma * (th - float(f))
    cdv[j, :] = bestp


@njit(cache=True)
def _window_stale(tt, it, best_d, srm_i, terms, window, chain, nd):
    """Whether the window of ready task ``tt`` may have changed with the commit on ``best_d``
    at iteration ``it``: best_d is a legal device of a window vertex (the simulation reads
    their availability, residency and port besides the root's), or a window vertex's hint
    changed."""
    if (srm_i & device_bit(best_d, nd)) != 0:
        return True
    m = window_chain(tt, terms.H, window.hs, chain)
    for j in range(m):
        if window.hstamp[chain[j]] == it:
            return True
    return False


@njit(cache=True)
def _replayed_slot(rows, size, by_score, k, replay, cpos, costs, graph, blocks, state, cf,
                   n_refused):
    """The ready slot to commit by replay and its device (``replay``: :func:`bifocal_loop`):
    by the score, of the ready tasks with a counterpart the one whose counterpart was
    committed earliest; in a static order, the one slot. The counterpart's device when the
    task may start there (legal, its block loadable: :func:`evaluate`), else the task's
    ``replay`` entry is set to −1 (refused) and the next is tried. Returns (slot, device, the
    task's inputs in ``state.w`` (``k`` unchanged when none), refusals); device −1: none."""
    rt = rows[0]
    type_dur, ttype = costs.type_dur, costs.ttype
    sched, w = state.sched, state.w
    while True:
        bi = -1
        for i in range(size if by_score else 1):
            c = replay[rt[i]]
            if c >= 0 and (bi < 0 or cpos[c] < cpos[replay[rt[bi]]]):
                bi = i
        if bi < 0:
            return -1, -1, k, n_refused
        t = rt[bi]
        d = sched[0, replay[t]]
        dur = type_dur[ttype[t], d] if d >= 0 else -1
        ok = False
        if dur >= 0:
            kk = pred_info(t, graph.p_off, graph.p_edge, graph.esrc, graph.etype, sched, w)
            ok, _, _, _, _ = evaluate(d, dur, kk, blocks.block[t], w, graph.etab, graph.pchan,
                                      state.chan, state.lm, state.tstart, state.rl, state.dv,
                                      blocks.bbytes, blocks.loadd, state.tls, state.tle,
                                      state.victims, cf)
            if ok:
                return bi, d, kk, n_refused
        replay[t] = -1
        n_refused += 1


@njit(cache=True)
def bifocal_loop(order, ready, costs, graph, blocks, state, cf, bias, window, terms, replay):
    """Bifocal's loop: per committed task the legal eligible device of lowest score (ties to
    the lower EFT, then the lowest index); θ, the near-future hints and the copy counts
    updated. The tasks come from ``order`` (a static order, ``ready_set: rank``) when it is not
    empty, else by the bifocal score (``ready_set: score``, DOPS Algorithm 1): every iteration
    finds each ready task's best placement under the current partial schedule and commits the
    ready task of least score (ties: the lower EFT, then the lower ``ready.prio``, its position
    in HEFT's order). The arguments are the named tuples of
    :mod:`heuristics.placement.kernel_types` (``ready``: ``ReadySet``, ``bias``:
    ``BifocalData``, ``window``: ``Window``, ``terms``: ``Terms``). Returns (code, task, ties
    broken by the EFT, tasks replayed, replays refused); ``bias.flips`` counted.

    ``replay`` (int64 [n], written): per task its counterpart in the last refreshed decode step
    (``plan_refresh_stride``), −1 for a scored task. A task with a counterpart is not scored:
    it goes to its counterpart's device and, by the score, the ready task whose counterpart
    was committed earliest goes first, before any scored task (the refreshed step's order).
    It is committed by the same list-scheduler kernel as a scored task (its EFT under the
    current timeline, ports, residency and evictions) and leaves θ and the hints as they are
    (the authors' ``schedule_with_plan``). Where the counterpart's device is not eligible the
    task is scored (its entry set to −1, counted as refused).

    By the score, each ready task's rows (per device: EFT, terms, the window's best devices)
    are kept between iterations, and a row is recomputed only when the last commit may have
    changed it (:func:`_stale_columns`: the committed device, the devices its transfers'
    channels lead to, every row of a task whose block was loaded, evicted or used;
    :func:`_window_stale`: the window term of every row of a task whose window read the
    committed device or a changed hint, recomputed alone on the kept EFT); no other input of a row changes with a commit, so the rows — and the
    choice — are those of a full re-scoring. ``terms.rescore_all`` makes every row stale after
    each commit: the full re-scoring itself, against which tests/placement/test_score_cache.py
    compares the kept rows."""
    prio, indeg, s_off, s_idx, edst = ready.prio, ready.indeg, ready.s_off, ready.s_idx, ready.edst
    ttype, type_dur = costs.ttype, costs.type_dur
    p_off, p_edge, esrc, etype = graph.p_off, graph.p_edge, graph.esrc, graph.etype
    etab, pchan = graph.etab, graph.pchan
    block, bbytes, loadd = blocks.block, blocks.bbytes, blocks.loadd
    sched, ev, cnt, dv, rl = state.sched, state.ev, state.cnt, state.dv, state.rl
    chan, lm, tstart, w, victims = state.chan, state.lm, state.tstart, state.w, state.victims
    tls, tle = state.tls, state.tle
    dcls, theta = bias.dcls, bias.theta
    uses_left, pref, homeless, res_count = bias.uses_left, bias.pref, bias.homeless, bias.res_count
    flips = bias.flips
    use_window = terms.window != 0
    track_uses = terms.track_uses != 0
    rescore_all = terms.rescore_all != 0
    rho = terms.rho
    n, nd = len(ttype), cf.nd
    K = len(bias.class_n)
    by_score = len(order) == 0
    rd, rf, rx, alt = _rows(nd)
    seen = np.zeros(n, np.bool_)
    ctarget = channel_targets(pchan, nd)
    W = max(terms.H - 1, 1)
    chain = np.empty(W, np.int64)
    reps = np.empty((W, K), np.int64)
    pat = np.empty(W, np.int64)
    bestp = np.empty(W, np.int64)
    scratch = np.empty((6, W + 2), np.int64)  # the window's shadows and odometer
    cap = 64
    # the ready slots: task (by the score; else the one task in order), row valid, EFT (−1:
    # not legal or not eligible), terms (row i·nd + d), the window's best devices per row,
    # the representatives' mask, window valid (EFT and terms valid, the window stale: only the
    # window recomputed)
    rows = (np.empty(cap, np.int64), np.zeros((cap, nd), np.bool_),
            np.empty((cap, nd), np.int64), np.empty((cap * nd, 6)),
            np.empty((cap * nd, W), np.int64), np.zeros(cap, np.int64),
            np.zeros((cap, nd), np.bool_))
    bstale = np.zeros(max(len(bbytes), 1), np.int64)  # block -> the iteration it changed
    homeless0 = homeless.copy()
    cpos = np.full(n, -1, np.int64)  # task -> the iteration that committed it
    replaying = False
    for t in range(n):
        if replay[t] >= 0:
            replaying = True
            break
    n_replayed, n_refused = 0, 0
    size = 0
    if by_score:
        for t in range(n):
            if indeg[t] == 0:
                rows, cap, size = _push_ready(t, rows, cap, size)
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
                return TWICE, t, ties, n_replayed, n_refused
            seen[t] = True
            k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
            if k < 0:
                return NOT_TOPOLOGICAL, t, ties, n_replayed, n_refused
            rows[0][0] = t
            rows[1][0, :] = False
            rows[6][0, :] = False
            size = 1
        it += 1
        bi, bs, bf = -1, 0.0, 0
        best_d = -1
        if replaying:
            bi, best_d, k, n_refused = _replayed_slot(rows, size, by_score, k, replay, cpos,
                                                      costs, graph, blocks, state, cf,
                                                      n_refused)
        replayed = best_d >= 0
        if not replayed:
            bi = -1
            for i in range(size):  # no ready task has a counterpart left
                k = _score_slot(i, rows, by_score, k, costs, graph, blocks, state, cf, bias,
                                window, terms, chain, reps, pat, bestp, scratch)
                if not by_score:
                    bi = 0
                    break
                nr = _compact(i, nd, rows[2], rows[3], rd, rf, rx)
                s, d, f, _, _, _ = best_row(nr, rd, rf, rx)
                t = rows[0][i]
                if d < 0:
                    return NO_DEVICE, t, ties, n_replayed, n_refused
                if bi < 0 or s < bs or (s == bs and (f < bf or (f == bf and prio[t] <
                                                                  prio[rows[0][bi]]))):
                    bi, bs, bf = i, s, f
        t = rows[0][bi]
        ty, b = ttype[t], block[t]
        if replayed:
            n_replayed += 1
        else:
            nr = _compact(bi, nd, rows[2], rows[3], rd, rf, rx)
            _, best_d, _, nt, extra, eft_d = best_row(nr, rd, rf, rx)
            if best_d < 0:
                return NO_DEVICE, t, ties, n_replayed, n_refused
            ties += nt
            if extra:
                alternatives(nr, rd, rf, rx, alt)
            else:
                alt[0] = eft_d
                alt[1:] = best_d
            for j in range(5):
                if alt[j] != best_d:
                    flips[j] += 1
            if use_window:
                bestp[:] = rows[4][bi * nd + best_d, :]
        size -= 1
        if bi != size:
            _move_slot(rows, size, bi, nd)
        if by_score:
            k = pred_info(t, p_off, p_edge, esrc, etype, sched, w)
            homeless0[:] = homeless
        n_ev0, n_ld0 = cnt[1], cnt[0]
        if not commit(t, best_d, type_dur[ty, best_d], k, b, w, etab, pchan, chan, lm, tstart,
                      rl, dv, bbytes, loadd, tls, tle, victims, sched, ev, cnt, cf):
            return NO_DEVICE, t, ties, n_replayed, n_refused
        cpos[t] = it
        if rho > 0 and b >= 0 and (n_ld0 != cnt[0] or n_ev0 != cnt[1] or uses_left[b] == 1):
            count_homes(n_ld0, n_ev0, b, ev, cnt, dcls, uses_left, pref, homeless, res_count)
        if track_uses and b >= 0:
            uses_left[b] -= 1
        if b >= 0 and not replayed:
            theta[b] = dcls[best_d]
        if use_window and not replayed:
            m = window_chain(t, terms.H, window.hs, chain)
            update_hints(t, chain, m, bestp, window.hint, window.hstamp, window.hq,
                         window.hq_len, terms.hint_max, it)
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
        rt, cv, wv = rows[0], rows[1], rows[6]
        for i in range(size):
            tt = rt[i]
            bt_ = block[tt]
            if all_stale or (bt_ >= 0 and bstale[bt_] == it):
                cv[i, :] = False
                continue
            for d in range(nd):
                if (mask >> d) & 1:
                    cv[i, d] = False
            if use_window and _window_stale(tt, it, best_d, rows[5][i], terms, window, chain,
                                            nd):
                wv[i, :] = False
        for j in range(s_off[t], s_off[t + 1]):
            v = edst[s_idx[j]]
            indeg[v] -= 1
            if indeg[v] == 0:
                rows, cap, size = _push_ready(v, rows, cap, size)
    return OK, -1, ties, n_replayed, n_refused
