"""numba kernels of Bifocal's DAG window T̂_H (DOPS §5.1.2, "Near-focus DAG-window term";
docs/problems.md §6 "The window T̂_H"): the window's chain, the representative device of each
device class per window vertex, the contention-free lookahead simulation over every legal
class pattern, and the near-future hint map H. Where the paper is silent the authors' released
``BifocalScheduler`` decides (YIAI-02/TriForm ``src/scheduler/scheduler_bifocal.py`` at
d2c679fa9902a42f92f8e7592861322f52d402d3: ``_build_lookahead_chain``,
``_rep_device_by_type``, ``_simulate_chain_finish``, ``_update_plan_hints``). Times are
integer ns; the penalties are float ns.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from heuristics.placement.state_kernels import AT_USE, OVERLAP, PORT, TLAST
from opt.common.numba_cache import use_kernel_cache

use_kernel_cache()  # before the first @njit(cache=True): opt.common.numba_cache


@njit(cache=True)
def device_bit(x, nd):
    """The bit mask of device x (every bit when there are more than 62 devices)."""
    return (np.int64(1) << x) if nd <= 62 else np.int64(-1)


@njit(cache=True)
def window_chain(t, H, hs, chain):
    """Fill ``chain`` with the window's vertices after t — its heaviest-payload successor, that
    one's, … — up to H − 1 of them (the window holds at most H vertices, t included); their
    count."""
    m = 0
    u = hs[t]
    while u >= 0 and m < H - 1:
        chain[m] = u
        m += 1
        u = hs[u]
    return m


@njit(cache=True)
def legal_classes(chain, m, ttype, type_dur, block, loadd, dcls, nd, reps):
    """``reps[j, c]``: 1 when window vertex ``chain[j]`` has a legal device (its block
    loadable there) of class c, else −1. Returns the bit mask of every such device: the devices
    whose state the simulation may read besides the root's."""
    mask = np.int64(0)
    for j in range(m):
        u = chain[j]
        ty, b = ttype[u], block[u]
        reps[j, :] = -1
        for x in range(nd):
            if type_dur[ty, x] >= 0 and (b < 0 or loadd[b, x] >= 0):
                reps[j, dcls[x]] = 1
                mask |= device_bit(x, nd)
    return mask


@njit(cache=True)
def _representative(u, c, ttype, type_dur, block, loadd, dcls, sdev, sav, ns, dv):
    """The representative of class c for vertex u: its least-available legal device of the
    class in the simulation's shadow (earliest free, ties: lowest index; the authors'
    ``_rep_device_by_type``), −1 none."""
    ty, b = ttype[u], block[u]
    best, best_av = -1, 0
    for x in range(dv.shape[1]):
        if dcls[x] != c or type_dur[ty, x] < 0 or (b >= 0 and loadd[b, x] < 0):
            continue
        av = _shadow_avail(x, sdev, sav, ns, dv)
        if best < 0 or av < best_av:
            best, best_av = x, av
    return best


@njit(cache=True)
def _shadow_avail(x, sdev, sav, ns, dv):
    """The shadow availability of device x: its simulated free time, else its real one."""
    for i in range(ns):
        if sdev[i] == x:
            return sav[i]
    return dv[TLAST, x]


@njit(cache=True)
def _set_avail(x, v, sdev, sav, ns):
    """Set x's shadow availability to v; the shadow's new length."""
    for i in range(ns):
        if sdev[i] == x:
            sav[i] = v
            return ns
    sdev[ns] = x
    sav[ns] = v
    return ns + 1


@njit(cache=True)
def _cached(x, b, rl, cdev, cblk, nc):
    """Whether block b is resident on x, really or in the simulation's cache shadow."""
    if rl[0, x, b] >= 0:
        return True
    for i in range(nc):
        if cdev[i] == x and cblk[i] == b:
            return True
    return False


@njit(cache=True)
def simulate(t, d, f0, chain, m, pat, out, ttype, type_dur, block, loadd, dcls, rl, dv, etab,
             hetype, rtype, hint, rule, consist, scratch, by_device):
    """The simulated completion (float ns) of t's window with t on d finishing at ``f0`` and
    window vertex j on class ``pat[j]`` — on its near-future hint when the hint is of that
    class (the hints are consistency hints), else on the class's representative
    (:func:`_representative`, in the shadow of the vertices before it) — (``out[j]``), plus the
    consistency penalty; ``by_device``: ``pat[j]`` is vertex j's device itself (the patterns
    of devices, as the authors' code enumerates them). Contention-free, from the current
    partial schedule: each vertex starts at max(its device's shadow availability,
    the previous vertex's end + the chain edge's transfer); it is served in p on a device
    holding its block (really or in the shadow), else in the miss service of the load rule
    (``at_use`` t_load + p, ``overlap`` max(t_load, p), ``prefetch`` p once the port has
    loaded it); inputs from outside the chain are not simulated (the authors'
    ``_simulate_chain_finish``). A hinted vertex off its hint h adds ``consist`` × the transfer
    time from h of its heaviest incident payload."""
    nd = dv.shape[1]
    sdev, sav, cdev, cblk = scratch[0], scratch[1], scratch[2], scratch[3]
    ns = _set_avail(d, max(dv[TLAST, d], f0), sdev, sav, 0)
    nc = 0
    if block[t] >= 0:
        cdev[0], cblk[0] = d, block[t]
        nc = 1
    prev, prev_node, fin, pen = d, t, f0, 0.0
    for j in range(m):
        u = chain[j]
        h = hint[u]
        if by_device:
            x = pat[j]
        elif h >= 0 and dcls[h] == pat[j]:  # the hinted device plays its class
            x = h
        else:
            x = _representative(u, pat[j], ttype, type_dur, block, loadd, dcls, sdev, sav, ns,
                                dv)
        out[j] = x
        ready = fin if x == prev else fin + etab[hetype[prev_node], prev * nd + x]
        st = max(_shadow_avail(x, sdev, sav, ns, dv), ready)
        p = type_dur[ttype[u], x]
        serv = p
        b = block[u]
        if b >= 0 and not _cached(x, b, rl, cdev, cblk, nc):
            ld = loadd[b, x]
            if rule == AT_USE:
                serv = ld + p
            elif rule == OVERLAP:
                serv = max(ld, p)
            else:
                st = max(st, dv[PORT, x] + ld)
            cdev[nc], cblk[nc] = x, b
            nc += 1
        fin = st + serv
        ns = _set_avail(x, fin, sdev, sav, ns)
        if h >= 0 and h != x and rtype[u] >= 0:
            pen += consist * float(etab[rtype[u], h * nd + x])
        prev, prev_node = x, u
    return float(fin) + pen


@njit(cache=True)
def window_estimate(t, d, f0, chain, m, reps, ttype, type_dur, block, loadd, dcls, rl, dv,
                    etab, hetype, rtype, hint, rule, consist, pat, best, scratch, by_device):
    """T̂_H(t, d) (float ns): the least :func:`simulate` over every pattern of classes legal
    for the window vertices (``reps``: :func:`legal_classes`; the first least in odometer
    order, the first vertex's class the most significant; ``by_device``: every pattern of legal
    devices); ``best[:m]`` its devices. ``f0`` (no pattern, or m = 0): the window is t alone,
    ``best`` untouched."""
    K = dv.shape[1] if by_device else reps.shape[1]
    if m == 0:
        return float(f0)
    out, idx = scratch[4], scratch[5]  # the devices of a pattern, the odometer
    idx[:m] = 0
    best_v = np.inf
    while True:
        ok = True
        for j in range(m):
            pat[j] = idx[j]
            if by_device:
                u, x = chain[j], idx[j]
                legal = type_dur[ttype[u], x] >= 0 and (block[u] < 0 or loadd[block[u], x] >= 0)
            else:
                legal = reps[j, idx[j]] >= 0
            if not legal:
                ok = False
                break
        if ok:
            v = simulate(t, d, f0, chain, m, pat, out, ttype, type_dur, block, loadd, dcls, rl,
                         dv, etab, hetype, rtype, hint, rule, consist, scratch, by_device)
            if v < best_v:
                best_v = v
                best[:m] = out[:m]
        j = m - 1
        while j >= 0:
            idx[j] += 1
            if idx[j] < K:
                break
            idx[j] = 0
            j -= 1
        if j < 0:
            break
    return float(f0) if best_v == np.inf else best_v


@njit(cache=True)
def _drop_hint(u, hint, hstamp, hq, hq_len, it):
    """Remove u's hint (kept order of the others)."""
    n = hq_len[0]
    k = 0
    for i in range(n):
        if hq[i] != u:
            hq[k] = hq[i]
            k += 1
    hq_len[0] = k
    hint[u] = -1
    hstamp[u] = it


@njit(cache=True)
def update_hints(t, chain, m, devs, hint, hstamp, hq, hq_len, hint_max, it):
    """After t's commit (iteration ``it``): t's own hint dropped (it is scheduled), then the
    committed placement's best pattern ``devs[:m]`` saved as the hints of its window vertices
    (each moved to the newest), then the oldest dropped down to ``hint_max`` (the authors'
    ``_update_plan_hints``; none kept when ``hint_max`` ≤ 0). Every vertex whose hint is set
    or dropped is stamped with ``it`` (a refreshed equal hint too: its rows are recomputed to
    the same values)."""
    if hint_max <= 0:
        return
    if hint[t] >= 0:
        _drop_hint(t, hint, hstamp, hq, hq_len, it)
    for j in range(m):
        u, x = chain[j], devs[j]
        if hint[u] >= 0:
            _drop_hint(u, hint, hstamp, hq, hq_len, it)
        hint[u] = x
        hstamp[u] = it
        hq[hq_len[0]] = u
        hq_len[0] += 1
    while hq_len[0] > hint_max:
        _drop_hint(hq[0], hint, hstamp, hq, hq_len, it)
