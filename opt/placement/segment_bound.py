"""Lower bounds on one segment of the ``chain`` component of the certified P1 bound
(:mod:`opt.placement.chain_bound`): the segment's optimum given the devices of its two cut
tasks, bounded from below by enumerating device assignments (one per orbit of the
interchangeable devices) and taking, per assignment, the longest path with the assigned
durations and transfers and the one-machine bound of every device. Durations in ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from opt.placement.bound_options import jit_kernels
from opt.placement.instance import PlacementInstance
from opt.placement.work_bound import BIG

#: Cells (assignments × (tasks + edges)) of one segment evaluation's int64 tables: the
#: assignment budget of a long segment shrinks so that its tables stay ~16 MB each (a few of
#: them live at once), whatever the segment's size — memory linear in the DAG.
MAX_CELLS = 2_000_000


@dataclass
class Segment:
    """A segment sub-problem: local column 0 is the previous cut when ``has_prev`` (duration 0);
    the last column is the closing cut when ``has_end``. cost/release [n, D] (-1 illegal);
    edges (local src, local dst) with bytes."""

    cost: np.ndarray
    release: np.ndarray | None
    esrc: np.ndarray
    edst: np.ndarray
    ebytes: np.ndarray
    has_prev: bool
    has_end: bool


def elementwise_min(segs: list[Segment]) -> Segment:
    """A sub-instance every member dominates (same shape; legal patterns are equal)."""
    if len(segs) == 1:
        return segs[0]
    s0 = segs[0]
    cost = np.stack([s.cost for s in segs]).min(axis=0)
    ebytes = np.stack([s.ebytes for s in segs]).min(axis=0)
    release = None
    if s0.release is not None:
        release = np.stack([s.release for s in segs]).min(axis=0)
    return Segment(cost, release, s0.esrc, s0.edst, ebytes, s0.has_prev, s0.has_end)


def _assignments(choices: list[np.ndarray], groups: list[list[int]], nd: int) -> np.ndarray:
    """Every assignment (rows) of the columns' choices, one per orbit of the permutations of
    interchangeable devices: within a group, members are first used in increasing order."""
    grp = np.full(nd, -1)
    rank = np.zeros(nd, dtype=np.int64)
    for g, members in enumerate(groups):
        for r, d in enumerate(sorted(members)):
            grp[d], rank[d] = g, r
    a = np.zeros((1, 0), dtype=np.int16)
    used = np.zeros((1, max(len(groups), 1)), dtype=np.int64)
    for ch in choices:
        parts, uparts = [], []
        for x in ch.tolist():
            if grp[x] < 0:
                ok = np.ones(len(a), dtype=bool)
            else:
                ok = used[:, grp[x]] >= rank[x]
            if not ok.any():
                continue
            col = np.full((int(ok.sum()), 1), x, dtype=np.int16)
            parts.append(np.hstack([a[ok], col]))
            u = used[ok].copy()
            if grp[x] >= 0:
                u[:, grp[x]] = np.maximum(u[:, grp[x]], rank[x] + 1)
            uparts.append(u)
        a = np.vstack(parts)
        used = np.vstack(uparts)
    return a


def _orbit_expand(table_can: np.ndarray, groups: list[list[int]], nd: int) -> np.ndarray:
    """table[p, e] = min over canonical (a, b) whose orbit under the device permutations
    contains (p, e). ``table_can`` is [D, D]."""
    gmembers = {d: sorted(g) for g in groups for d in g}
    out = np.full((nd, nd), np.inf)
    for a, b in zip(*np.nonzero(np.isfinite(table_can))):
        val = table_can[a, b]
        ga = gmembers.get(int(a), [int(a)])
        for a2 in ga:
            if int(b) == int(a):
                opts = [a2]
            elif int(b) in ga:
                opts = [x for x in ga if x != a2]
            else:
                opts = gmembers.get(int(b), [int(b)])
            for b2 in opts:
                if val < out[a2, b2]:
                    out[a2, b2] = val
    return out


def _orbit_expand_1d(vec_can: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """out[d] = min over canonical devices c whose orbit contains d of vec_can[c]."""
    out = vec_can.copy()
    for g in groups:
        out[g] = vec_can[g].min()
    return out


def evaluate_segment(inst: PlacementInstance, seg: Segment, groups: list[list[int]],
                     max_assignments: int, memo: dict[bytes, tuple[np.ndarray, ...]] | None = None
                     ) -> tuple[np.ndarray, int]:
    """Table [P, E] of lower bounds on the segment's span given the previous cut's device (rows;
    one row without a previous cut) and the closing cut's device (columns; one without), and
    the number of enumerated columns. ``memo`` (compiled path): the assignments of earlier
    calls with the same ``groups``, by enumerated columns and their legal devices."""
    nd = inst.n_devices
    n = seg.cost.shape[0]
    legal = seg.cost >= 0
    cost = seg.cost.copy()
    first = 1 if seg.has_prev else 0
    if seg.has_prev:
        cost[0] = np.where(legal[0], 0, -1)  # the previous cut ended at 0
    # release times relative to the segment's start (the previous cut's row is zeros)
    rel = np.zeros((n, nd), dtype=np.int64) if seg.release is None else seg.release
    tt = inst.links.transfer_durations(seg.ebytes) if len(seg.ebytes) else \
        np.zeros((0, nd, nd), dtype=np.int64)
    budget = min(max_assignments, max(1, MAX_CELLS // max(1, n + len(seg.esrc))))
    enum = _enumerated_columns(seg, legal, cost, tt, budget)
    jit = jit_kernels(inst.n_tasks)
    if jit is not None:
        dev, cell = _memo_devices(seg, legal, enum, groups, nd, {} if memo is None else memo)
        can = np.full(nd * nd, np.inf)
        compiled_below(jit, kernel_tables(seg, legal, cost, rel, tt), enum, dev, first, cell,
                       can, update=True, ordered=True)
        return table_from_canonical(seg, can.reshape(nd, nd), groups, nd), int(enum.sum())
    dev, c, r = _assigned_times(legal, cost, rel, enum, groups, nd)
    edur = _edge_durations(seg, legal, tt, enum, dev)
    val = _assignment_values(seg, dev, c, r, edur, first, nd)
    return _cut_table(seg, dev, val, groups, nd), int(enum.sum())


def _enumerated_columns(seg: Segment, legal: np.ndarray, cost: np.ndarray, tt: np.ndarray,
                        max_assignments: int) -> np.ndarray:
    """bool [n]: the tasks whose device is enumerated — the cuts and single-device tasks, then
    the most device-sensitive ones (duration spread plus adjacent transfer spans) while the
    number of assignments stays within ``max_assignments``."""
    n_legal = legal.sum(axis=1)
    must, spread = sensitivity(seg, legal, cost, tt)
    enum = must.copy()
    size = float(np.prod(n_legal[must].astype(np.float64)))
    for j in np.argsort(-spread, kind="stable").tolist():
        if enum[j]:
            continue
        if size * n_legal[j] <= max_assignments:
            enum[j] = True
            size *= n_legal[j]
    return enum


def sensitivity(seg: Segment, legal: np.ndarray, cost: np.ndarray, tt: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """(must [n] bool: the cuts and single-device tasks, spread [n] ticks: duration spread
    plus the spans of adjacent transfers) — which tasks' devices matter most."""
    n = seg.cost.shape[0]
    must = legal.sum(axis=1) == 1
    if seg.has_prev:
        must[0] = True
    if seg.has_end:
        must[n - 1] = True
    spread = np.where(legal, cost, 0).max(axis=1) - np.where(legal, cost, BIG).min(axis=1)
    if len(seg.esrc):
        esrc, edst = np.asarray(seg.esrc, dtype=np.int64), np.asarray(seg.edst, dtype=np.int64)
        pair = legal[esrc][:, :, None] & legal[edst][:, None, :]
        if not pair.any(axis=(1, 2)).all():
            raise ValueError("a segment edge joins a task without a legal device")
        # the largest transfer between legal ends of each edge (int64 sums: any order)
        span = np.where(pair, tt, np.iinfo(np.int64).min).max(axis=(1, 2))
        np.add.at(spread, esrc, span)
        np.add.at(spread, edst, span)
    return must, spread


def _assigned_times(legal: np.ndarray, cost: np.ndarray, rel: np.ndarray, enum: np.ndarray,
                    groups: list[list[int]], nd: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(device [m, n] (−1 = not enumerated), duration [m, n], release [m, n]) per assignment;
    tasks not enumerated take their cheapest duration and earliest release."""
    n = cost.shape[0]
    rel_cost = np.where(legal, cost, BIG)
    dev = _assigned_devices(legal, enum, groups, nd)
    m = len(dev)
    c = np.empty((m, n), dtype=np.int64)
    r = np.empty((m, n), dtype=np.int64)
    for j in range(n):
        if enum[j]:
            c[:, j] = cost[j][dev[:, j]]
            r[:, j] = rel[j][dev[:, j]]
        else:  # relaxed: cheapest duration and earliest release, each on its own
            c[:, j] = rel_cost[j].min()
            r[:, j] = np.where(legal[j], rel[j], BIG).min()
    return dev, c, r


def _assigned_devices(legal: np.ndarray, enum: np.ndarray, groups: list[list[int]], nd: int
                      ) -> np.ndarray:
    """int64 [m, n]: every assignment of the enumerated columns (one per orbit), −1 in the
    others."""
    cols = np.flatnonzero(enum)
    a = _assignments([np.flatnonzero(legal[j]) for j in cols], groups, nd)
    dev = np.full((len(a), legal.shape[0]), -1, dtype=np.int64)
    dev[:, cols] = a
    return dev


def _memo_devices(seg: Segment, legal: np.ndarray, enum: np.ndarray, groups: list[list[int]],
                  nd: int, memo: dict[bytes, tuple[np.ndarray, ...]]
                  ) -> tuple[np.ndarray, ...]:
    """(:func:`_assigned_devices` with its rows in lexicographic order of their enumerated
    devices, their :func:`cell_index`), kept in ``memo`` by the cut flags, enumerated columns and
    their legal devices (``groups`` and ``nd`` fixed per memo; callers only read them)."""
    key = np.packbits(enum).tobytes() + np.packbits(legal[enum]).tobytes() + \
        bytes([seg.has_prev, seg.has_end]) + len(enum).to_bytes(8, "little")
    got = memo.get(key)
    if got is None:
        dev = _assigned_devices(legal, enum, groups, nd)
        dev = dev[np.lexsort(dev[:, np.flatnonzero(enum)[::-1]].T)]
        got = memo[key] = (dev, cell_index(seg, dev, nd))
    return got


def _edge_durations(seg: Segment, legal: np.ndarray, tt: np.ndarray, enum: np.ndarray,
                    dev: np.ndarray) -> np.ndarray:
    """[m, edges] transfer durations: exact between enumerated ends, else the cheapest one
    compatible with the enumerated end (or with none)."""
    m = dev.shape[0]
    edur = np.empty((m, len(seg.esrc)), dtype=np.int64)
    for e in range(len(seg.esrc)):
        u, v = int(seg.esrc[e]), int(seg.edst[e])
        te = np.where(legal[u][:, None] & legal[v][None, :], tt[e], BIG)
        if enum[u] and enum[v]:
            edur[:, e] = te[dev[:, u], dev[:, v]]
        elif enum[u]:
            edur[:, e] = te.min(axis=1)[dev[:, u]]
        elif enum[v]:
            edur[:, e] = te.min(axis=0)[dev[:, v]]
        else:
            edur[:, e] = te.min()
    return edur


def _assignment_values(seg: Segment, dev: np.ndarray, c: np.ndarray, r: np.ndarray,
                       edur: np.ndarray, first: int, nd: int, thresholds: bool = False
                       ) -> np.ndarray:
    """float [m]: per assignment max(longest path, every device's min head + Σ durations +
    min tail); with ``thresholds`` the one-machine bound of every head (tail) threshold set
    (:func:`one_machine`, a sort per device: used by branch and bound, whose frontiers are
    small); inf where no finite value exists."""
    return _as_float(_numpy_values(seg, dev, c, r, edur, first, nd, thresholds))


def _as_float(val: np.ndarray) -> np.ndarray:
    """int64 values capped at ``BIG`` as floats, inf at the cap."""
    val = np.minimum(val, BIG).astype(np.float64)
    val[val >= BIG] = np.inf
    return val


def kernel_tables(seg: Segment, legal: np.ndarray, cost: np.ndarray, rel: np.ndarray,
                  tt: np.ndarray) -> tuple[np.ndarray, ...]:
    """The per-segment inputs of :func:`opt.placement.bound_jit.segment_below`: (cost, least
    duration, release, least release, transfers [E, D, D] (``BIG`` between illegal ends),
    their least per source device, per destination device and overall, edge sources and
    destinations, CSR of the edges into and out of each task) — durations in ticks."""
    n, nd = cost.shape
    esrc = np.ascontiguousarray(seg.esrc, dtype=np.int64)
    edst = np.ascontiguousarray(seg.edst, dtype=np.int64)
    te = np.where(legal[esrc][:, :, None] & legal[edst][:, None, :], tt, BIG).astype(np.int64)
    cmin = np.where(legal, cost, BIG).min(axis=1)
    rmin = np.where(legal, rel, BIG).min(axis=1)

    def csr(key: np.ndarray) -> np.ndarray:  # offsets (shifted past themselves), edges
        off = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=n))]) + n + 1
        return np.concatenate([off, np.argsort(key, kind="stable")]).astype(np.int64)

    return (np.ascontiguousarray(cost, dtype=np.int64), cmin.astype(np.int64),
            np.ascontiguousarray(rel, dtype=np.int64), rmin.astype(np.int64), te,
            np.ascontiguousarray(te.min(axis=2)), np.ascontiguousarray(te.min(axis=1)),
            te.reshape(len(esrc), nd * nd).min(axis=1, initial=BIG), esrc, edst, csr(edst),
            csr(esrc))


def compiled_below(jit: ModuleType, tables: tuple[np.ndarray, ...], flag: np.ndarray,
                   dev: np.ndarray, first: int, cell: np.ndarray, bound: np.ndarray,
                   update: bool, thresholds: bool = False, ordered: bool = False
                   ) -> np.ndarray:
    """bool [m]: per assignment row of ``dev``, whether its :func:`_assignment_values` value
    (durations, releases and transfers of :func:`_assigned_times` and :func:`_edge_durations`
    with enumerated columns ``flag``; float ticks, inf at ``BIG``) is below
    ``bound[cell[row]]``; with ``update``, ``bound`` [cells] is lowered to it (the least
    value per cell). By :func:`opt.placement.bound_jit.segment_below` on
    :func:`kernel_tables`: the same integers, a row stopped once it reaches its bound; rows
    visited in their order when ``ordered``, else lexicographic in the flagged columns."""
    return jit.segment_below(np.ascontiguousarray(dev, dtype=np.int64),
                             np.ascontiguousarray(flag, dtype=np.bool_),
                             jit.SegmentTables(*tables), first,
                             thresholds, int(BIG), np.ascontiguousarray(cell, dtype=np.int64),
                             bound, update, ordered)


def cell_index(seg: Segment, dev: np.ndarray, nd: int) -> np.ndarray:
    """int64 [m]: each row's cut cell (previous cut device, closing cut device) flattened,
    ``p · D + e`` (0 for an absent cut)."""
    pa, pe = cut_cells(seg, dev)
    return (pa * nd + pe).astype(np.int64)


def _numpy_values(seg: Segment, dev: np.ndarray, c: np.ndarray, r: np.ndarray,
                  edur: np.ndarray, first: int, nd: int, thresholds: bool) -> np.ndarray:
    """int64 [m]: the values of :func:`_assignment_values` before the cap at ``BIG``."""
    m, n = c.shape
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    for e in range(len(seg.esrc)):
        ins[int(seg.edst[e])].append(e)
        outs[int(seg.esrc[e])].append(e)
    # task-major copies: each step reads whole rows (contiguous), not strided columns
    cT, rT, eT = (np.ascontiguousarray(a.T) for a in (c, r, edur))
    head = np.zeros((n, m), dtype=np.int64)
    for j in range(n):
        h = rT[j].copy()
        for e in ins[j]:
            u = int(seg.esrc[e])
            np.maximum(h, head[u] + cT[u] + eT[e], out=h)
        head[j] = h
    tl = np.zeros((n, m), dtype=np.int64)  # after j ends, excluding j
    for j in range(n - 1, -1, -1):
        t = np.zeros(m, dtype=np.int64)
        for e in outs[j]:
            v = int(seg.edst[e])
            np.maximum(t, eT[e] + cT[v] + tl[v], out=t)
        tl[j] = t
    val = (head + cT).max(axis=0)
    dv, hd, cc, tq = dev.T[first:], head[first:], cT[first:], tl[first:]
    for d in range(nd):
        on = dv == d
        any_on = on.any(axis=0)
        if not any_on.any():
            continue
        mh = np.where(on, hd, BIG).min(axis=0)
        sc = np.where(on, cc, 0).sum(axis=0)
        mq = np.where(on, tq, BIG).min(axis=0)
        np.maximum(val, np.where(any_on, mh + sc + mq, 0), out=val)
        if thresholds:
            np.maximum(val, one_machine(on, hd, cc, tq), out=val)
            np.maximum(val, one_machine(on, tq, cc, hd), out=val)
    return val


def one_machine(on: np.ndarray, head: np.ndarray, dur: np.ndarray, tail: np.ndarray
                ) -> np.ndarray:
    """int64 [m]: per column (assignment) of the [n, m] arrays, the one-machine bound of the
    tasks ``on`` the device: ``max_S min_S head + Σ_S dur + min_S tail`` over the sets S of
    the tasks whose head is at least some task's head (all of S run one at a time on the
    device, none starts before the least head, and the last one's tail follows it). Swapping
    ``head`` and ``tail`` gives the mirrored sets. 0 where at most one task is on the device
    (one task's set is dominated by the longest path)."""
    rows = np.flatnonzero(on.any(axis=1))
    if len(rows) <= 1:
        return np.zeros(on.shape[1], dtype=np.int64)
    on = on[rows].T  # [m, k]: sorting along contiguous rows
    key = np.where(on, head[rows].T, -BIG)
    idx = np.argsort(-key, axis=1, kind="stable")
    hs = np.take_along_axis(key, idx, axis=1)
    ps = np.cumsum(np.take_along_axis(np.where(on, dur[rows].T, 0), idx, axis=1), axis=1)
    qs = np.minimum.accumulate(
        np.take_along_axis(np.where(on, tail[rows].T, BIG), idx, axis=1), axis=1)
    lb = np.where(hs > -BIG, hs + ps + qs, 0)
    return np.minimum(lb, BIG).max(axis=1)


def _cut_table(seg: Segment, dev: np.ndarray, val: np.ndarray, groups: list[list[int]],
               nd: int) -> np.ndarray:
    """The [P, E] table: the least value per (previous cut device, closing cut device),
    expanded over the orbits of the interchangeable devices."""
    can = np.full((nd, nd), np.inf)
    np.minimum.at(can, cut_cells(seg, dev), val)
    return table_from_canonical(seg, can, groups, nd)


def cut_cells(seg: Segment, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(previous cut device, closing cut device) per assignment row (0 where absent)."""
    m, n = dev.shape
    pa = dev[:, 0] if seg.has_prev else np.zeros(m, dtype=np.int64)
    pe = dev[:, n - 1] if seg.has_end else np.zeros(m, dtype=np.int64)
    return pa, pe


def table_from_canonical(seg: Segment, can: np.ndarray, groups: list[list[int]], nd: int
                         ) -> np.ndarray:
    """The [P, E] table from the [D, D] least values of canonical cut devices, expanded over
    the orbits of the interchangeable devices."""
    if seg.has_prev and seg.has_end:
        table = _orbit_expand(can, groups, nd)
    elif seg.has_prev:
        table = _orbit_expand_1d(can[:, 0], groups)[:, None]
    elif seg.has_end:
        table = _orbit_expand_1d(can[0, :], groups)[None, :]
    else:
        table = np.array([[can.min()]])
    return table
