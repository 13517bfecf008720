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


@njit(cache=True, inline="always")
def _vertex(u, c, prev, prev_node, fin, pen, sdev, sav, ns, cdev, cblk, nc, ttype, type_dur,
            block, loadd, dcls, rl, dv, etab, hetype, rtype, hint, rule, consist, by_device):
    """One step of the window's simulation (:func:`simulate`): window vertex u on class c (on
    device c when ``by_device``) after ``prev_node`` on ``prev`` finishing at ``fin``, in the
    shadows (``sdev``/``sav`` of length ``ns``: simulated device free times; ``cdev``/``cblk``
    of length ``nc``: simulated loads, appended to). Returns (u's device, ns, nc, u's end, the
    consistency penalty so far)."""
    nd = dv.shape[1]
    h = hint[u]
    if by_device:
        x = c
    elif h >= 0 and dcls[h] == c:  # the hinted device plays its class
        x = h
    else:
        x = _representative(u, c, ttype, type_dur, block, loadd, dcls, sdev, sav, ns, dv)
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
    end = st + serv
    ns = _set_avail(x, end, sdev, sav, ns)
    if h >= 0 and h != x and rtype[u] >= 0:
        pen += consist * float(etab[rtype[u], h * nd + x])
    return x, ns, nc, end, pen


@njit(cache=True)
def _root(t, d, f0, block, dv, sdev, sav, cdev, cblk):
    """The shadows with t on d finishing at ``f0``: (ns, nc)."""
    ns = _set_avail(d, max(dv[TLAST, d], f0), sdev, sav, 0)
    nc = 0
    if block[t] >= 0:
        cdev[0], cblk[0] = d, block[t]
        nc = 1
    return ns, nc


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
    time from h of its heaviest incident payload. One pattern, vertex by vertex
    (:func:`_vertex`); :func:`window_estimate` walks the patterns' shared prefixes once."""
    sdev, sav, cdev, cblk = scratch[0], scratch[1], scratch[2], scratch[3]
    ns, nc = _root(t, d, f0, block, dv, sdev, sav, cdev, cblk)
    prev, prev_node, fin, pen = d, t, f0, 0.0
    for j in range(m):
        u = chain[j]
        x, ns, nc, fin, pen = _vertex(u, pat[j], prev, prev_node, fin, pen, sdev, sav, ns,
                                      cdev, cblk, nc, ttype, type_dur, block, loadd, dcls, rl,
                                      dv, etab, hetype, rtype, hint, rule, consist, by_device)
        out[j] = x
        prev, prev_node = x, u
    return float(fin) + pen


@njit(cache=True)
def window_scratch(W):
    """The scratch of :func:`window_estimate` for windows of up to W vertices after the task:
    (int64 [2·(W + 1) + 9, W + 2], float [W + 1])."""
    return np.empty((2 * (W + 1) + 9, W + 2), np.int64), np.empty(W + 1)


@njit(cache=True)
def window_estimate(t, d, f0, chain, m, reps, ttype, type_dur, block, loadd, dcls, rl, dv,
                    etab, hetype, rtype, hint, rule, consist, pat, best, scratch, by_device,
                    fscratch):
    """(T̂_H(t, d) (float ns), the bit mask of the devices the simulations placed a vertex on,
    t's own d included): the least :func:`simulate` over every pattern of classes legal for
    the window vertices (``reps``: :func:`legal_classes`; the first least in odometer order,
    the first vertex's class the most significant; ``by_device``: every pattern of legal
    devices); ``best[:m]`` its devices. ``f0`` (no pattern, or m = 0): the window is t alone,
    ``best`` untouched. The patterns are walked depth first in that order, each prefix
    simulated once (its shadows kept per depth), so every pattern's value is :func:`simulate`'s.
    A commit on a device outside the mask leaves the estimate as it is: the simulations read the
    state of the devices they place vertices on, and only compare the others' free times,
    which a commit can only push later. ``scratch``, ``fscratch``: :func:`window_scratch`."""
    nd = dv.shape[1]
    K = nd if by_device else reps.shape[1]
    mask = device_bit(d, nd)
    if m == 0:
        return float(f0), mask
    base = scratch.shape[0] - 9  # rows: sdev per depth, sav per depth, then the rest
    half = base // 2
    cdev, cblk, out, idx = scratch[base], scratch[base + 1], scratch[base + 2], scratch[base + 3]
    ns_l, nc_l, fin_l = scratch[base + 4], scratch[base + 5], scratch[base + 6]
    prev_l, node_l = scratch[base + 7], scratch[base + 8]
    pen_l = fscratch
    ns_l[0], nc_l[0] = _root(t, d, f0, block, dv, scratch[0], scratch[half], cdev, cblk)
    fin_l[0], prev_l[0], node_l[0] = f0, d, t
    pen_l[0] = 0.0
    best_v = np.inf
    j = 0
    idx[0] = -1
    while j >= 0:
        idx[j] += 1
        if idx[j] >= K:
            j -= 1
            continue
        c = idx[j]
        u = chain[j]
        if by_device:
            if type_dur[ttype[u], c] < 0 or (block[u] >= 0 and loadd[block[u], c] < 0):
                continue
        elif reps[j, c] < 0:
            continue
        ns = ns_l[j]
        sdev, sav = scratch[j + 1], scratch[half + j + 1]
        sdev[:ns] = scratch[j, :ns]
        sav[:ns] = scratch[half + j, :ns]
        x, ns, nc, fin, pen = _vertex(u, c, prev_l[j], node_l[j], fin_l[j], pen_l[j], sdev,
                                      sav, ns, cdev, cblk, nc_l[j], ttype, type_dur, block,
                                      loadd, dcls, rl, dv, etab, hetype, rtype, hint, rule,
                                      consist, by_device)
        out[j] = x
        mask |= device_bit(x, nd)
        if j == m - 1:
            v = float(fin) + pen
            if v < best_v:
                best_v = v
                best[:m] = out[:m]
            continue
        j += 1
        ns_l[j], nc_l[j], fin_l[j], prev_l[j], node_l[j] = ns, nc, fin, x, u
        pen_l[j] = pen
        idx[j] = -1
    return (float(f0) if best_v == np.inf else best_v), mask


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
