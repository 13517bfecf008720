"""Bifocal (DOPS §5.1): a list scheduler over the ready set whose device choice looks both
*near* (the task's own earliest finish) and *far* (a lookahead over its successors and the
reuse of weights over phases and tokens). A reimplementation from the paper's description (the
authors' released code, YIAI-02/TriForm at 8a64b06, has no Bifocal). docs/problems.md §6
("Bifocal") defines every term, default and extension; this module implements them.

Rules implemented:

- Ready-set order (``ready_set``): ``score`` (default) is DOPS §5.1.2 and Algorithm 1 — each
  iteration scores every ready task on each legal device under the current partial schedule
  and commits the ready task whose best placement scores least (ties: HEFT's upward-rank
  order); ``rank`` is HEFT's static order with the ``siblings`` extension
  (:func:`sibling_groups`, :func:`sibling_order`).
- Device score (DOPS §5.1.2, Eq. 2–4), lowest wins (ties: the device of the task's hint
  class, then the lowest index): ``(1 − γ)·EFT + γ·T̂_H + B_phase + B_token`` (+ the eviction
  and copy costs). EFT has every rule of problems.md §1.2 (transfers on contended channels,
  loads on the load port, LRU evictions) and starts a task no earlier than its device's free
  time under the score order (Eq. 1 and 3, ``insertion: auto``); T̂_H is the DAG-window
  lookahead over the heaviest-payload chain (:func:`pinned_inputs` for the KV a chain task
  reads); B_phase the phase-reuse bias of the hint map θ; B_token the token amortisation
  (Eq. 4).
- ``auto`` parameters resolve per the instance's ``load_timing`` (:data:`AUTO_LAM`,
  :data:`AUTO_TOKEN_CAP`, :data:`AUTO_COPY_COST`); :data:`EFT_ONLY` (every far-focus term
  and extension off, HEFT's order) is HEFT's list schedule where no capacity binds.
- ``stats["flipped_decisions"]`` counts, per term of :data:`FLIP_TERMS`, the tasks whose
  device would differ in the same partial schedule without that term.

The algorithm is deterministic (``seed`` is accepted and reported). Engines (``engine``:
``auto``, ``python``, ``compiled``; :mod:`heuristics.placement.engine`): :func:`_run` is the
reference, :func:`_run_compiled` runs the same loop as the numba kernel ``bifocal_loop`` of
:mod:`heuristics.placement.schedule_kernels`, term by term with the float sums in the same
order, so both give the same schedule and statistics (docs/speed.md, "Schedulers (Bifocal,
HEFT)").
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from heuristics.placement import engine as _engine
from heuristics.placement.bifocal_params import (  # noqa: F401 (re-exported)
    AUTO_COPY_COST,
    AUTO_LAM,
    AUTO_PARAMS,
    AUTO_TOKEN_CAP,
    EFT_ONLY,
    EXTENSIONS_OFF,
    FLIP_TERMS,
    READY_SETS,
    TOKEN_HORIZONS,
    BifocalParams,
)
from heuristics.placement.engine import as_int64
from heuristics.placement.list_scheduler import (
    ScheduleState,
    priority_order,
    upward_rank,
)
from opt.common.errors import InputError
from opt.common.rows import splitmix64, unique_rows
from opt.placement.instance import PlacementInstance

#: Version of Bifocal's schedules, part of its recorded settings (the ``revision`` field of a
#: sweep record, :func:`solvers.placement.backends.bifocal_settings`): a record of another
#: version is recomputed rather than trusted. Raised whenever a change of this module changes a
#: schedule under the same parameters.
BIFOCAL_VERSION = 7


# ---------------------------------------------------------------------------------------------
# lookahead precomputation (vectorised over all tasks)

def heaviest_successor(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(successor, bytes) over each task's heaviest outgoing edge (ties: lowest edge index);
    successor −1 for sinks."""
    n, m = inst.n_tasks, inst.n_edges
    hs = np.full(n, -1, dtype=np.int64)
    hb = np.zeros(n, dtype=np.int64)
    if m:
        src, nb = inst.edge_src, inst.edge_bytes
        order = np.lexsort((np.arange(m), -nb, src))
        s = src[order]
        first = np.concatenate([[True], s[1:] != s[:-1]])
        sel = order[first]
        hs[src[sel]] = inst.edge_dst[sel]
        hb[src[sel]] = nb[sel]
    return hs, hb


def legal_durations(cost: np.ndarray) -> np.ndarray:
    """float copy of cost-matrix rows (−1 = illegal) with inf where a device is illegal."""
    c = cost.astype(np.float64)
    c[cost < 0] = np.inf
    return c


def class_durations(cost: np.ndarray, dev_cls: np.ndarray, K: int) -> np.ndarray:
    """[rows, K] each row's shortest duration on a device of each class (inf where the class
    has no legal device); ``cost`` rows of the instance's cost matrix (−1 = illegal)."""
    c = legal_durations(cost)
    return np.stack([c[:, dev_cls == k].min(axis=1) for k in range(K)], axis=1)


def window_tails(inst: PlacementInstance, H: int, dev_cls: np.ndarray, n_cls: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tail [n, K], best pattern [n, K], heaviest successor [n]).

    tail[t, κ₀] = min over class patterns of the chain's transfer + compute time after t when
    t runs on class κ₀ — each chain task's input arrival being the later of the chain edge's
    transfer and its inputs from pinned tasks (:func:`pinned_inputs`); best = the index of the
    first minimal pattern in ``itertools.product(range(K), repeat=H)`` order."""
    n, K = inst.n_tasks, n_cls
    hs, hb = heaviest_successor(inst)
    tail = np.zeros((n, K))
    best = np.zeros((n, K), dtype=np.int64)
    if H == 0 or n == 0:
        return tail, best, hs
    dcl = class_durations(inst.cost, dev_cls, K)  # [n, K]
    lat = inst.links.latency
    bw = inst.links.bandwidth
    members = [np.flatnonzero(dev_cls == c) for c in range(K)]

    def xfer(nbytes: np.ndarray) -> np.ndarray:
        """[K, K, len] shortest inter-class transfer time (0 within a class)."""
        out = np.zeros((K, K, len(nbytes)))
        nbf = nbytes.astype(np.float64)
        for a in range(K):
            for b in range(K):
                if a == b:
                    continue
                cur = np.full(len(nbytes), np.inf)
                for i in members[a]:
                    for j in members[b]:
                        cur = np.minimum(cur, lat[i, j] + np.ceil(nbf / bw[i, j]))
                out[a, b] = cur
        return out

    pin_in = pinned_inputs(inst, dev_cls, K, xfer)
    chain = []  # per position k: (D [n, K], X [K, K, n], pinned-input arrival P [n, K])
    c = np.arange(n)
    nbytes = np.zeros(n, dtype=np.int64)
    for _ in range(H):
        valid = c >= 0
        nbytes = np.where(valid, hb[np.maximum(c, 0)], 0)
        c = np.where(valid, hs[np.maximum(c, 0)], -1)
        valid = c >= 0
        if not valid.any():
            break
        D = np.where(valid[:, None], dcl[np.maximum(c, 0)], 0.0)
        X = np.where(valid[None, None, :], xfer(nbytes), 0.0)
        P = np.where(valid[:, None], pin_in[np.maximum(c, 0)], 0.0)
        chain.append((D, X, P))
    depth = len(chain)
    if depth == 0:
        return tail, best, hs
    stride = [K ** (H - 1 - k) for k in range(H)]
    for c0 in range(K):
        best_val = np.full(n, np.inf)
        best_idx = np.zeros(n, dtype=np.int64)

        def rec(k: int, prev: int, partial: np.ndarray, idx: int) -> None:
            if k == depth:
                better = partial < best_val
                best_val[better] = partial[better]
                best_idx[better] = idx
                return
            D, X, P = chain[k]
            for kappa in range(K):
                arrive = np.maximum(X[prev, kappa], P[:, kappa])  # inputs arrive in parallel
                rec(k + 1, kappa, partial + arrive + D[:, kappa], idx + kappa * stride[k])

        rec(0, c0, np.zeros(n), 0)
        tail[:, c0] = best_val
        best[:, c0] = best_idx
    return tail, best, hs


def pinned_inputs(inst: PlacementInstance, dev_cls: np.ndarray, K: int, xfer) -> np.ndarray:
    """[n, K]: for each task v and class κ, the longest transfer into v on κ from a predecessor
    whose legal devices are all of one class (a *pinned* task: ``kv_write`` on its KV home,
    ``embed`` on the NPU), over the shortest link between the two classes; 0 without one. This is
    how the window sees the KV cache a ``qk``/``sv`` away from its home must fetch."""
    n, m = inst.n_tasks, inst.n_edges
    out = np.zeros((n, K))
    if m == 0 or K < 2:
        return out
    legal = inst.cost >= 0
    per_cls = np.stack([legal[:, dev_cls == c].any(axis=1) for c in range(K)], axis=1)
    pinned = per_cls.sum(axis=1) == 1
    src = inst.edge_src
    sel = np.flatnonzero(pinned[src])
    if len(sel) == 0:
        return out
    pcls = per_cls[src[sel]].argmax(axis=1)
    x = xfer(inst.edge_bytes[sel])  # [K, K, len(sel)]
    vals = x[pcls, :, np.arange(len(sel))]  # [len(sel), K]
    np.maximum.at(out, inst.edge_dst[sel], vals)
    return out


def sibling_groups(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: a group id shared by tasks with the same non-empty set of predecessors (the
    q/k/v projections of one normed input) that can run side by side, −1 for every other task.
    Side by side: each member has two or more legal devices, and the members' shortest
    durations summed exceed some member's duration on a device other than its fastest — in
    sequence on their fastest device they would finish later than spread."""
    c = legal_durations(inst.cost)
    gid = _same_predecessors(inst, np.isfinite(c).sum(axis=1) >= 2)
    grouped = np.flatnonzero(gid >= 0)
    if len(grouped) == 0:
        return gid
    two = np.sort(c[grouped], axis=1)[:, :2]  # shortest and second shortest duration
    ng = int(gid.max()) + 1
    size = np.bincount(gid[grouped], minlength=ng)
    total = np.bincount(gid[grouped], weights=two[:, 0], minlength=ng)
    second = np.full(ng, np.inf)
    np.minimum.at(second, gid[grouped], two[:, 1])  # a member away from the others' device
    keep = (size > 1) & (total > second)
    gid[grouped[~keep[gid[grouped]]]] = -1
    return gid


def _same_predecessors(inst: PlacementInstance, eligible: np.ndarray) -> np.ndarray:
    """int64 [n]: a group id per eligible task with predecessors, shared by the eligible tasks
    with the same predecessor set (−1 otherwise; ids need not be consecutive). Sets are hashed
    (a commutative sum of splitmix64 mixes) and then compared exactly, so a hash collision
    cannot merge two sets."""
    n = inst.n_tasks
    gid = np.full(n, -1, dtype=np.int64)
    p_off, p_idx = inst.predecessors
    cnt = np.diff(p_off)
    has = np.flatnonzero((cnt > 0) & eligible)
    if len(has) < 2:
        return gid
    src = inst.edge_src[p_idx]
    h = _set_hash(src, p_off)
    _, inv, counts = np.unique(h[has], return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    multi = counts[inv] > 1
    cand, k = has[multi], inv[multi]
    if len(cand) == 0:
        return gid
    # exact check, vectorised: each candidate's sorted predecessors against those of the
    # first candidate with its hash; a mismatch (a collision) is grouped one by one below
    seg = np.repeat(np.arange(n), cnt)
    ssrc = src[np.lexsort((src, seg))]
    by_k = np.argsort(k, kind="stable")
    first = by_k[np.concatenate([[True], k[by_k][1:] != k[by_k][:-1]])]
    rep = np.full(len(counts), -1, dtype=np.int64)
    rep[k[first]] = cand[first]  # the first candidate of each hash
    c_cnt = cnt[cand]
    pos = np.arange(int(c_cnt.sum())) - np.repeat(np.cumsum(c_cnt) - c_cnt, c_cnt)
    mine = np.repeat(p_off[cand], c_cnt) + pos
    theirs = np.minimum(np.repeat(p_off[rep[k]], c_cnt) + pos, len(ssrc) - 1)
    same = (cnt[rep[k]] == c_cnt) & np.logical_and.reduceat(ssrc[mine] == ssrc[theirs],
                                                           np.cumsum(c_cnt) - c_cnt)
    gid[cand[same]] = k[same]
    exact: dict[tuple[int, ...], int] = {}
    for t in cand[~same].tolist():
        preds = tuple(ssrc[p_off[t]:p_off[t + 1]].tolist())
        gid[t] = exact.setdefault(preds, len(counts) + len(exact))
    return gid


def _set_hash(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """uint64 [len(offsets) − 1]: an order-independent hash of each CSR segment of
    ``values`` (the sum of :func:`splitmix64` mixes, wrapping; 0 for an empty segment)."""
    cnt = np.diff(offsets)
    z = splitmix64(values)
    nonempty = np.flatnonzero(cnt > 0)  # offsets strictly increasing: one sum each
    h = np.zeros(len(cnt), dtype=np.uint64)
    if len(nonempty):
        with np.errstate(over="ignore"):
            h[nonempty] = np.add.reduceat(z, offsets[nonempty])
    return h


def _sibling_data(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(sibling group per task (:func:`sibling_groups`), whether a task is pinned: one legal
    device) — what :func:`sibling_order` reads."""
    return sibling_groups(inst), (inst.cost >= 0).sum(axis=1) == 1


def sibling_order(inst: PlacementInstance, order: Sequence[int], *, engine: str = "auto"
                  ) -> list[int]:
    """``order`` in which a sibling (:func:`sibling_groups`) whose group has begun is moved
    ahead of the pinned tasks (one legal device) listed since the previous unmoved task: a
    pinned successor of the first sibling no longer takes its device before the later
    siblings are scored there. Still topological: a moved sibling's predecessors are its
    group's, all listed before the first sibling, while the pinned tasks it passes come after.
    ``engine``: :mod:`heuristics.placement.engine`."""
    gid_a, pinned_a = _sibling_data(inst)
    if _engine.resolve_engine(engine, inst.n_tasks) == "compiled":
        return _engine.sibling_array(order, gid_a, pinned_a).tolist()
    gid = gid_a.tolist()
    pinned = pinned_a.tolist()
    begun = [False] * (max(gid, default=-1) + 1)
    out: list[int] = []
    held: list[int] = []  # pinned tasks listed since the last unmoved task
    for t in order:
        t = int(t)
        g = gid[t]
        if pinned[t]:
            held.append(t)
        elif g >= 0 and begun[g]:
            out.append(t)
        else:
            if held:
                out.extend(held)
                held.clear()
            out.append(t)
            if g >= 0:
                begun[g] = True
    out.extend(held)
    return out


def load_port_prior(inst: PlacementInstance, dev_cls: list[int]) -> list[int]:
    """θ before any commit (switch ``prior``, an extension): blocks assigned to load ports by
    longest-processing-time-first list scheduling — each block, longest cheapest load first,
    goes to the legal device whose port would finish its loads earliest — and θ(b) = that
    device's class. Balances the weight traffic over the ports, which EFT alone cannot see."""
    nb, nd = len(inst.block_ids), inst.n_devices
    users = np.zeros((nb, nd), dtype=bool)
    has = np.flatnonzero(inst.task_block >= 0)
    legal = inst.cost[has] >= 0
    np.logical_or.at(users, inst.task_block[has], legal)
    ld = inst.load_duration.astype(np.float64)
    ld[(ld < 0) | ~users] = np.inf
    order = np.argsort(-np.where(np.isfinite(ld), ld, -np.inf).min(axis=1), kind="stable")
    port = np.zeros(nd)
    theta = [-1] * nb
    for b in order.tolist():
        fin = port + ld[b]
        if not np.isfinite(fin).any():
            continue
        d = int(np.argmin(fin))
        port[d] = fin[d]
        theta[b] = dev_cls[d]
    return theta


# ---------------------------------------------------------------------------------------------

def bifocal_schedule(inst: PlacementInstance, params: dict[str, Any] | BifocalParams | None = None,
                     *, order: list[int] | None = None, stats: dict[str, Any] | None = None,
                     engine: str = "auto") -> dict:
    """The Bifocal schedule of ``inst`` (problems.md §1.2a solution dict); see the module docstring.

    params: a dict of :class:`BifocalParams` fields (unknown names raise InputError);
    order: a static task order to commit in (``ready_set`` then does not apply; default: the
    ``ready_set`` parameter's order); stats: filled with counters
    and timings when given; engine: ``auto``, ``python`` or ``compiled``
    (:mod:`heuristics.placement.engine`; the same schedule and statistics, but for
    ``stats["engine"]``, the engine that ran)."""
    p = params if isinstance(params, BifocalParams) else BifocalParams.from_dict(params)
    eng = _engine.resolve_engine(engine, inst.n_tasks)
    t0 = time.perf_counter()
    classes: list[str] = []
    for dv in inst.devices:
        if dv.device_class not in classes:
            classes.append(dv.device_class)
    dcls_l = [classes.index(dv.device_class) for dv in inst.devices]
    look = _lookahead(inst, p, dcls_l, len(classes), compiled=eng == "compiled")
    by_score = order is None and p.ready_set == "score"
    gaps = inserts(p, by_score)
    if eng == "compiled":
        cost_types = look.cost_types if look is not None else _engine.unique_rows(inst.cost)
        cs = _engine.compiled_state(inst, cost_types, insertion=gaps, evict=True)
        n_types = len(cost_types[0])
    else:
        st = ScheduleState(inst, insertion=gaps, evict=True,
                           cost_types=look.cost_types if look is not None else None)
        n_types = len(st.type_dur)
    t_pre = time.perf_counter()
    prio = None  # by score: each task's position in HEFT's order (the ties' rule)
    order_l: list[int] | None = None
    if eng == "compiled":  # an int64 array throughout
        if by_score:
            prio = _positions(_engine.heft_order(inst))
            order_a = None
        else:
            order_a = _engine.order_array(inst, order) if order is not None else \
                _compiled_order(inst, p)
    elif order is None:
        order_l = priority_order(inst, upward_rank(inst, engine=eng), engine=eng)
        if by_score:
            prio, order_l = _positions(np.asarray(order_l, dtype=np.int64)), None
        elif sibling_moves(p):
            order_l = sibling_order(inst, order_l, engine=eng)
    else:
        order_l = [int(x) for x in order]
    t_order = time.perf_counter()
    bias = _biases(inst, p, dcls_l, len(classes))
    if eng == "compiled":
        ties_by_hint, flips = _run_compiled(inst, cs, order_a, prio, p, look, bias, dcls_l,
                                            len(classes))
    else:
        ties_by_hint, flips = _run(inst, st, order_l, p, look, bias, dcls_l, len(classes),
                                   prio.tolist() if prio is not None else None)
    t_loop = time.perf_counter()
    if eng == "compiled":
        solution = _engine.compiled_solution(cs)
        n_loads, n_evictions, _ = cs.counts
        dev = cs.device
    else:
        solution = st.solution()
        n_loads, n_evictions = len(st.load_events), len(st.evictions)
        dev = np.asarray(st.dev, dtype=np.int64)
    t_end = time.perf_counter()
    if stats is not None:
        per_class = np.bincount(np.asarray(dcls_l, dtype=np.int64)[dev], minlength=len(classes))
        # token_horizon: recorded when set, and the horizon ``auto`` chose when it is not the
        # steps (statistics of prefetch runs stay as before the parameter existed); λ: the
        # value in effect (3 under prefetch: the former default, the same statistics)
        recorded = asdict(p)
        recorded["lam"] = phase_weight(inst, p)  # the λ in effect (``auto``: the load rule's)
        recorded["token_cap"] = capped(inst, p)  # likewise
        recorded["copy_cost"] = copy_weight(inst, p)  # likewise
        recorded["siblings"] = sibling_moves(p)  # likewise
        recorded["insertion"] = gaps  # likewise
        if order is not None:
            recorded["ready_set"] = "order"  # the caller's static order
        if recorded["token_horizon"] == "auto":
            del recorded["token_horizon"]
            if uses_horizon(inst, p):
                stats["token_horizon"] = "uses"
        stats.update({
            "params": recorded, "classes": classes, "l_out": bias.l_out,
            "loads": n_loads, "evictions": n_evictions,
            "tasks_per_class": dict(zip(classes, per_class.tolist())),
            "ties_broken_by_hint": ties_by_hint,
            "flipped_decisions": flips,
            "types": n_types, "engine": eng,
            "time_s": {"precompute": t_pre - t0, "order": t_order - t_pre,
                       "schedule": t_loop - t_order, "solution": t_end - t_loop,
                       "total": t_end - t0},
        })
    return solution


def sibling_moves(p: BifocalParams) -> bool:
    """Whether siblings move up in the static order (``siblings``; ``auto``: under
    ``ready_set: rank``, the only order it applies to)."""
    return p.ready_set == "rank" if p.siblings == "auto" else bool(p.siblings)


def inserts(p: BifocalParams, by_score: bool) -> bool:
    """Whether a task may start in an idle gap before its device's free time (``insertion``;
    ``auto``: not under the score order, where DOPS Eq. 1 and 3 start it no earlier than
    avail(k); in a static order — ``rank`` or a caller's —, HEFT's insertion)."""
    return not by_score if p.insertion == "auto" else bool(p.insertion)


def _positions(order: np.ndarray) -> np.ndarray:
    """int64 [n]: each task's position in ``order``."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order), dtype=np.int64)
    return pos


def _compiled_order(inst: PlacementInstance, p: BifocalParams) -> np.ndarray:
    """The static task order of ``ready_set: rank`` (HEFT's, siblings moved up when on) on
    the compiled engine."""
    if not sibling_moves(p):
        return _engine.heft_order(inst)
    order, exact = _engine.bifocal_order(inst)
    if exact:
        return order
    return _engine.sibling_array(_engine.heft_order(inst), *_sibling_data(inst))


def _run_compiled(inst: PlacementInstance, cs: _engine.CompiledState, order: np.ndarray | None,
                  prio: np.ndarray | None, p: BifocalParams, look: _Lookahead | None,
                  bias: _Biases, dcls_l: list[int], K: int) -> tuple[int, dict[str, int]]:
    """:func:`_run` on the compiled engine (``schedule_kernels.bifocal_loop``, in a static
    ``order`` or, when it is None, by the score with ties to the lower ``prio``): the same
    terms, switches and counters over arrays; returns the same (ties, flips)."""
    track_uses = p.evict_cost > 0 or bias.use_token or copy_weight(inst, p) > 0
    ip = np.array([bias.use_phase, bias.use_token, capped(inst, p), look is not None,
                   look.H if look is not None else 0, bias.l_out or 0, track_uses,
                   uses_horizon(inst, p)], dtype=np.int64)
    fp = np.array([phase_weight(inst, p), p.eta, p.alpha, p.evict_cost, p.r_min, p.p_reuse,
                   copy_weight(inst, p)], dtype=np.float64)
    flips = np.zeros(5, dtype=np.int64)
    args = (cs.ttype, cs.type_dur, cs.gr, cs.bl, cs.stt, cs.tls, cs.tle, cs.cf,
            _bias_arrays(inst, p, bias, dcls_l, K), _look_arrays(inst, look, K), ip, fp, flips)
    none = _frozen(np.zeros(0, dtype=np.int64))
    rs: tuple[np.ndarray, ...]  # (priority, in-degrees: the loop's own, successors, edges)
    if order is not None:
        rs = (none, np.zeros(0, dtype=np.int64), none, none, none)
    else:
        assert prio is not None
        s_off, s_idx = inst.successors
        rs = (_frozen(prio), np.diff(inst.predecessors[0]).astype(np.int64),
              _frozen(as_int64(s_off)), _frozen(as_int64(s_idx)),
              _frozen(as_int64(inst.edge_dst)))
    code, t, ties = _engine.kernels().bifocal_loop(_frozen(order if order is not None else none),
                                                   rs, *args)
    _engine.raise_for(cs, int(code), int(t))
    return int(ties), dict(zip(FLIP_TERMS, flips.tolist()))


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``: the kernel's read-only inputs always reach it read-only,
    whether they come from the instance (read-only when read from a file) or were made here,
    so numba compiles one version of the loop, not one per combination of flags."""
    view = a.view()
    view.flags.writeable = False
    return view


def _bias_arrays(inst: PlacementInstance, p: BifocalParams, bias: _Biases, dcls_l: list[int],
                 K: int) -> tuple[np.ndarray, ...]:
    """The kernel's ``ba``: (class per device, devices per class [K, nd] padded with −1,
    class sizes, phase, step, θ, holds all, uses left, preferred class, homeless per class,
    copies per class and block [K, nb])."""
    i64, n, nd = np.int64, inst.n_tasks, inst.n_devices
    pref, homeless = _homes(inst, bias.uses_left, dcls_l, K, copy_weight(inst, p))
    class_devs = np.full((K, nd), -1, dtype=i64)
    class_n = np.zeros(K, dtype=i64)
    for d, c in enumerate(dcls_l):
        class_devs[c, class_n[c]] = d
        class_n[c] += 1
    return (np.asarray(dcls_l, dtype=i64), class_devs, class_n,
            _frozen(as_int64(inst.phase) if inst.phase is not None else np.full(n, -1, dtype=i64)),
            _frozen(as_int64(inst.step) if inst.step is not None else np.full(n, -1, dtype=i64)),
            np.asarray(bias.theta, dtype=i64), np.asarray(bias.holds_all, dtype=i64),
            np.asarray(bias.uses_left, dtype=i64), np.asarray(pref, dtype=i64),
            np.asarray(homeless, dtype=i64), np.zeros((K, len(bias.uses_left)), dtype=i64))


def _look_arrays(inst: PlacementInstance, look: _Lookahead | None, K: int
                 ) -> tuple[np.ndarray, ...]:
    """The kernel's ``look``: (γ·tail per type and device, best pattern per type and class,
    heaviest successor, hint class (−1), hint distance, patterns); placeholders when the
    window is off."""
    i64, n, nd = np.int64, inst.n_tasks, inst.n_devices
    if look is None:
        return (np.zeros((1, nd)), np.zeros((1, K), dtype=i64), np.zeros(1, dtype=i64),
                np.zeros(1, dtype=i64), np.zeros(1, dtype=i64), np.zeros((1, 1), dtype=i64))
    return (np.ascontiguousarray(look.type_w, dtype=np.float64),
            as_int64(look.type_best), as_int64(look.hs),
            np.full(n, -1, dtype=i64), np.full(n, look.H + 1, dtype=i64),
            as_int64(look.patterns))


# ---------------------------------------------------------------------------------------------
# state set-up: lookahead per cost type, phase / token / eviction-cost data

@dataclass(frozen=True)
class _Lookahead:
    """The window term per task type (cost row + tail + best pattern): γ·tail per device
    (``type_w``, float [types, nd], ns), the best pattern index per class (``type_best``, int
    [types, K]); the heaviest successor of each task (``hs``, −1 none) and the class patterns
    (int [K^H, H]). The hint map filled on commits is the loop's own."""

    H: int
    cost_types: tuple[np.ndarray, np.ndarray]
    type_w: np.ndarray
    type_best: np.ndarray
    hs: np.ndarray
    patterns: np.ndarray


def _lookahead(inst: PlacementInstance, p: BifocalParams, dcls_l: list[int], K: int,
               compiled: bool = False) -> _Lookahead | None:
    """The window data (switch ``window``, depth H; None when off or H = 0); ``compiled``:
    the tails and types from the numba kernels (the same values)."""
    H = p.H if p.window else 0
    if H <= 0:
        return None
    nd = inst.n_devices
    dcls = np.array(dcls_l, dtype=np.int64)
    rows, inv, hs = (_window_types_compiled if compiled else _window_types)(inst, H, dcls, K)
    type_w = p.gamma * rows[:, nd + dcls].astype(np.float64)
    pat = np.arange(K ** H)[:, None] // K ** np.arange(H - 1, -1, -1)[None, :] % K
    return _Lookahead(H, (rows[:, :nd], inv), type_w, rows[:, nd + K:], hs, pat)


def _window_types(inst: PlacementInstance, H: int, dcls: np.ndarray, K: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct rows of cost + tail (int) + best pattern, each task's row, heaviest
    successor): the task types of the window (:func:`window_tails`)."""
    tail, best, hs = window_tails(inst, H, dcls, K)
    if not np.isfinite(tail).all():  # cannot happen: every task has a legal device
        raise InputError("lookahead found no feasible class pattern", field="window")
    rows, inv = unique_rows(np.concatenate([inst.cost, tail.astype(np.int64), best], axis=1))
    return rows, inv, hs


def _window_types_compiled(inst: PlacementInstance, H: int, dcls: np.ndarray, K: int
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_window_types` from the numba kernels: the same rows, order and inverse."""
    rows, inv, hs, finite = _engine.window_types(inst, H, dcls, K)
    if not finite:
        raise InputError("lookahead found no feasible class pattern", field="window")
    return rows, inv, hs


@dataclass(frozen=True)
class _Biases:
    """Per-task phase and step, θ (block -> class of its last use, −1 none; updated in place),
    whether each class can hold all blocks, L_out, the switches in effect and, for the
    eviction cost, the uses each block has left (updated in place)."""

    phase: list[int]
    step: list[int]
    theta: list[int]
    holds_all: list[bool]
    l_out: int | None
    use_phase: bool
    use_token: bool
    uses_left: list[int]


def _biases(inst: PlacementInstance, p: BifocalParams, dcls_l: list[int], K: int) -> _Biases:
    n, nb = inst.n_tasks, len(inst.block_ids)
    phase_l = inst.phase.tolist() if inst.phase is not None else [-1] * n
    step_l = inst.step.tolist() if inst.step is not None else [-1] * n
    theta = [-1] * nb
    if p.phase and p.prior and nb:
        theta = load_port_prior(inst, dcls_l)
    total_bytes = int(inst.block_bytes.sum()) if nb else 0
    holds_all = []
    for c in range(K):
        caps = [dv.weight_capacity for d, dv in enumerate(inst.devices) if dcls_l[d] == c]
        holds_all.append(any(x is None for x in caps) or sum(caps) >= total_bytes)
    l_out = None
    wl = inst.meta.get("workload") if isinstance(inst.meta, dict) else None
    if isinstance(wl, dict) and isinstance(wl.get("decode"), int):
        l_out = wl["decode"]
    elif inst.step is not None and inst.phase is not None and (inst.phase == 1).any():
        l_out = int(inst.step[inst.phase == 1].max())
    # eviction cost (extension): victims still needed later are charged their reload time
    uses_left = [0] * nb
    if (p.evict_cost > 0 or p.token or copy_weight(inst, p) > 0) and nb:
        used = inst.task_block[inst.task_block >= 0]
        uses_left = np.bincount(used, minlength=nb).tolist()
    return _Biases(phase_l, step_l, theta, holds_all, l_out, p.phase,
                   p.token and l_out is not None, uses_left)


# ---------------------------------------------------------------------------------------------
# the list-scheduling loop: score the devices, commit the best, update θ and the hints

def _run(inst: PlacementInstance, st: ScheduleState, order: list[int] | None, p: BifocalParams,
         look: _Lookahead | None, bias: _Biases, dcls_l: list[int], K: int,
         prio: Sequence[int] | None = None) -> tuple[int, dict[str, int]]:
    """Schedule the tasks: per task, the device with the lowest score EFT + γ·tail + B_phase +
    B_token (+ the eviction and copy costs; problems.md §6), ties to the hinted class;
    commit it and update θ and the hints. ``order`` given: the tasks in that static order
    (``ready_set: rank``); None: by the bifocal score (``ready_set: score``, DOPS Algorithm 1:
    each iteration scores every ready task and commits the one of least score, ties to the
    lower ``prio``). Returns how many ties the hint broke and, per term,
    how many decisions it flipped (the device the same score without that term — and, for
    the window, without its hint — would have chosen in the same partial schedule differs).
    The hot loop: state bound to locals, no call per task beyond the state's own."""
    window = look is not None
    ttype, type_dur, type_legal = st.ttype, st.type_dur, st.type_legal
    block, loadd, res_ready, tls = st.block, st.loadd, st.res_ready, st.tl
    evaluate, load_plan, pred_info, commit = st.evaluate, st.load_plan, st.pred_info, st.commit
    evictions = st.evictions
    class_devs = [[d for d in range(len(dcls_l)) if dcls_l[d] == c] for c in range(K)]
    phase_l, step_l, theta, holds_all = bias.phase, bias.step, bias.theta, bias.holds_all
    use_phase, use_token, l_out, uses_left = bias.use_phase, bias.use_token, bias.l_out, \
        bias.uses_left
    lam, eta, alpha, kappa, r_min, p_reuse = (phase_weight(inst, p), p.eta, p.alpha,
                                              p.evict_cost, p.r_min, p.p_reuse)
    H, type_w, type_best, hs_l, patterns = _window_lists(look)
    # the hint map: class and distance of the nearest committed ancestor's hint
    hint, hint_dist = [-1] * inst.n_tasks, [H + 1] * inst.n_tasks
    rho = copy_weight(inst, p)
    track_uses = kappa > 0 or use_token or rho > 0
    # copy cost: per class, how many devices hold each block and how many blocks that run
    # fastest on the class and are still used later are held by none of them
    nb = len(uses_left)
    res_count = [[0] * nb for _ in range(K)]
    pref, homeless = _homes(inst, uses_left, dcls_l, K, rho)
    load_events = st.load_events
    amort: dict[int, float] = {}  # step -> 1 / max(1, r_eff)
    inf, token_cap = math.inf, capped(inst, p)
    by_uses = uses_horizon(inst, p)
    ties_by_hint = 0
    flips = [0, 0, 0, 0, 0]  # decisions each term changed: window, phase, token, evict, copy

    def score(t: int, info: Any) -> tuple[Any, Any, int, list, bool, Any]:
        """(best score, best device (None: none), ties the hint broke, rows, any term beyond
        EFT and the window, the device of least EFT) of t in the current partial schedule."""
        ties = 0
        ty, b, ph = ttype[t], block[t], phase_l[t]
        durs = type_dur[ty]
        inv_r = -1.0
        if use_token and b >= 0 and ph == 1:
            if by_uses:
                inv_r = 1.0 / max(1.0, max(r_min, uses_left[b] * p_reuse))
            else:
                i = step_l[t]
                inv_r = amort.get(i)
                if inv_r is None:
                    inv_r = amort[i] = 1.0 / max(1.0, max(r_min, (l_out - i + 1) * p_reuse))
        warm = inf if inv_r < 0 or not token_cap else \
            _warm_duration(b, durs, type_legal[ty], res_ready)
        wrow = type_w[ty] if window else []
        h = hint[t] if window else -1
        best_s = best_d = None
        best_h = False
        eft_s = eft_d = None  # the choice by EFT alone (the score without the window)
        rows = []  # the terms of each eligible device, for the choices without one term each
        extra = False  # whether any device has a nonzero term beyond EFT + window
        for d in type_legal[ty]:
            dur = durs[d]
            r = evaluate(t, d, dur, info)
            if r is None:
                continue
            f = r[1]
            cw = wrow[d] if window else 0.0
            penalty = bt = bt0 = ce = cc = 0.0
            if b >= 0 and b not in res_ready[d]:
                if use_phase:
                    tr = r[3] - r[2]  # the reload's exposed delay (0 when prefetched in time)
                    th = theta[b]
                    if th >= 0 and th != dcls_l[d]:
                        penalty = lam * tr
                    if ph == 0 and holds_all[dcls_l[d]]:
                        penalty -= eta * tr
                needed: Sequence[int] = ()  # the victims of this load that later tasks still use
                if track_uses:
                    lp = load_plan(b, d)
                    if lp and lp[1]:
                        needed = [v for v in lp[1] if uses_left[v] > 0]
                if inv_r >= 0 and r[3] > r[2] and not needed:
                    # the current cost of the reload is its delay plus its phase penalty; both
                    # are paid once and amortised over the steps that will reuse the block —
                    # only when the block can stay: a load that evicts blocks still needed
                    # makes the device thrash, and its reuse is not to be counted on
                    s_warm = tls[d].earliest(r[2], dur) + dur
                    c_cur = f + max(0.0, penalty)
                    c_avg = s_warm + max(0, c_cur - s_warm) * inv_r
                    # never more than the move saves over the remaining steps against the
                    # best device that already holds the block (0 between equal devices)
                    cap = inf if warm == inf else alpha * max(0.0, warm - dur) / inv_r
                    bt = max(-cap, min(0.0, alpha * (c_avg - c_cur)))
                    # the same without the phase penalty (for the phase term's flip count)
                    bt0 = max(-cap, min(0.0, alpha * (s_warm + max(0, f - s_warm) * inv_r - f)))
                if kappa > 0 and needed:
                    ce = kappa * sum(loadd[v][d] for v in needed)
                if rho > 0 and homeless[dcls_l[d]]:
                    for x in class_devs[dcls_l[d]]:
                        if x != d and b in res_ready[x]:
                            cc = rho * loadd[b][d]
                            break
            sc = f + cw + penalty + bt + ce + cc
            on_hint = dcls_l[d] == h
            if best_s is None or sc < best_s:
                best_s, best_d, best_h = sc, d, on_hint
            elif sc == best_s and not best_h and on_hint:
                best_d, best_h = d, True
                ties += 1
            rows.append((d, f, cw, penalty, bt, bt0, ce, cc, on_hint))
            if penalty or bt or bt0 or ce or cc:
                extra = True
            fl = float(f)
            if eft_s is None or fl < eft_s:
                eft_s, eft_d = fl, d
        return best_s, best_d, ties, rows, extra, eft_d

    def place(t: int, info: Any, best_d: int, rows: list, extra: bool, eft_d: Any) -> None:
        """Count the flips from t's rows, commit t on ``best_d``, update θ, hints, copies."""
        b = block[t]
        # without extra terms every choice leaving one out is the score's own, but the
        # window's (EFT alone, no hint); else each is recomputed from the terms
        alt = _alternatives(rows) if extra else (eft_d, best_d, best_d, best_d, best_d)
        for j in range(5):
            if alt[j] != best_d:
                flips[j] += 1
        n_ev, n_ld = len(evictions), len(load_events)
        commit(t, best_d, info)
        if rho > 0 and b >= 0 and (n_ld != len(load_events) or n_ev != len(evictions)
                                   or uses_left[b] == 1):  # else _count_homes changes nothing
            _count_homes(load_events[n_ld:], evictions[n_ev:], b, uses_left, res_count,
                         homeless, pref, dcls_l)
        if track_uses and b >= 0:
            uses_left[b] -= 1
        c = dcls_l[best_d]
        if n_ev != len(evictions):
            _forget_evicted(theta, evictions[n_ev:], dcls_l, class_devs, res_ready)
        if b >= 0:
            theta[b] = c
        if window:  # the best pattern's classes become hints along the heaviest chain
            pat = patterns[type_best[ttype[t]][c]]
            u = hs_l[t]
            k = 0
            while u >= 0 and k < H:
                if k + 1 <= hint_dist[u]:
                    hint[u] = pat[k]
                    hint_dist[u] = k + 1
                u = hs_l[u]
                k += 1

    if order is not None:
        seen = [False] * inst.n_tasks
        for t in order:
            if seen[t]:
                raise InputError(f"priority order lists task '{inst.task_ids[t]}' twice",
                                 field="order")
            seen[t] = True
            info = pred_info(t)
            _, best_d, ties, rows, extra, eft_d = score(t, info)
            ties_by_hint += ties
            if best_d is None:
                raise st.no_device_error(t)
            place(t, info, best_d, rows, extra, eft_d)
        return ties_by_hint, dict(zip(FLIP_TERMS, flips))
    assert prio is not None
    s_off, s_idx = inst.successors
    edst = inst.edge_dst
    indeg = np.diff(inst.predecessors[0]).tolist()
    ready = [t for t in range(inst.n_tasks) if indeg[t] == 0]
    while ready:
        best = None  # (score, task, its inputs, its scoring)
        for t in ready:  # Algorithm 1, lines 8-17: every ready task re-scored
            info = pred_info(t)
            got = score(t, info)
            if got[1] is None:
                raise st.no_device_error(t)
            if best is None or got[0] < best[0] or (got[0] == best[0]
                                                    and prio[t] < prio[best[1]]):
                best = (got[0], t, info, got)
        assert best is not None
        _, t, info, (_, best_d, ties, rows, extra, eft_d) = best
        ready.remove(t)
        ties_by_hint += ties
        place(t, info, best_d, rows, extra, eft_d)
        for j in range(s_off[t], s_off[t + 1]):
            v = int(edst[s_idx[j]])
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return ties_by_hint, dict(zip(FLIP_TERMS, flips))


def _window_lists(look: _Lookahead | None) -> tuple[int, list[list[float]], list[list[int]],
                                                    list[int], list[list[int]]]:
    """(H, γ·tail per type and device, best pattern per type and class, heaviest successor,
    patterns) of the window as lists for :func:`_run` (0 and empty lists when it is off)."""
    if look is None:
        return 0, [], [], [], []
    return (look.H, look.type_w.tolist(), look.type_best.tolist(), look.hs.tolist(),
            look.patterns.tolist())


def _homes(inst: PlacementInstance, uses_left: list[int], dcls_l: list[int], K: int,
           rho: float) -> tuple[list[int], list[int]]:
    """(preferred class per block (−1 none, all −1 without the copy cost), per class the
    still-used blocks preferring it that no device of the class holds yet): the copy cost's
    initial counts."""
    nb = len(uses_left)
    pref = preferred_class(inst, dcls_l, K) if rho > 0 else [-1] * nb
    homeless = [sum(1 for b_ in range(nb) if uses_left[b_] > 0 and pref[b_] == c)
                for c in range(K)]
    return pref, homeless


def preferred_class(inst: PlacementInstance, dcls_l: list[int], K: int) -> list[int]:
    """Per weight block, the device class on which its users' summed shortest durations are
    least (−1 for a block without users): the class whose load ports the block's first load
    will need. Decode users, one per step, outweigh the prefill's."""
    nb = len(inst.block_ids)
    has = np.flatnonzero(inst.task_block >= 0)
    if nb == 0 or len(has) == 0:
        return [-1] * nb
    per_class = class_durations(inst.cost[has], np.array(dcls_l), K)
    total = np.zeros((nb, K))
    np.add.at(total, inst.task_block[has], np.where(np.isfinite(per_class), per_class, 1e30))
    pref = np.argmin(total, axis=1)
    used = np.zeros(nb, dtype=bool)
    used[inst.task_block[has]] = True
    return np.where(used, pref, -1).tolist()


def _alternatives(rows: Sequence[tuple]) -> list[int | None]:
    """The device each score without one term (FLIP_TERMS order) chooses among ``rows``
    (device, EFT, window, phase, token, token without phase, evict, copy, on the hint),
    with the score's tie rule; each summed in the score's order, so equal scores stay
    exactly equal."""
    alt: list[list[Any]] = [[None, None, False] for _ in range(5)]
    for d, f, cw, penalty, bt, bt0, ce, cc, on_hint in rows:
        for j, sc in enumerate((f + penalty + bt + ce + cc, f + cw + bt0 + ce + cc,
                                f + cw + penalty + ce + cc, f + cw + penalty + bt + cc,
                                f + cw + penalty + bt + ce)):
            a_ = alt[j]
            hj = on_hint and j != 0  # without the window there is no hint
            if a_[0] is None or sc < a_[0]:
                a_[0], a_[1], a_[2] = sc, d, hj
            elif sc == a_[0] and not a_[2] and hj:
                a_[1], a_[2] = d, True
    return [a_[1] for a_ in alt]


def _count_homes(loaded: Sequence[tuple[int, int, int]], evicted: Sequence[tuple[int, int, int]],
                 b: int, uses_left: list[int], res_count: list[list[int]], homeless: list[int],
                 pref: list[int], dcls_l: list[int]) -> None:
    """Update, after committing a task that uses block ``b`` (its use not yet subtracted from
    ``uses_left``), the per-class copy counts and, per class, the number of still-used blocks
    preferring it (:func:`preferred_class`) that no device of the class holds."""
    for v, vd, _ in loaded:
        c = dcls_l[vd]
        res_count[c][v] += 1
        if res_count[c][v] == 1 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] -= 1
    for v, vd, _ in evicted:
        c = dcls_l[vd]
        res_count[c][v] -= 1
        if res_count[c][v] == 0 and uses_left[v] > 0 and pref[v] == c:
            homeless[c] += 1
    c = pref[b]
    if uses_left[b] == 1 and c >= 0 and res_count[c][b] == 0:  # b's last use: no longer waits
        homeless[c] -= 1


def uses_horizon(inst: PlacementInstance, p: BifocalParams) -> bool:
    """Whether the token term amortises over the block's remaining uses (``token_horizon``;
    ``auto``: under ``load_timing: at_use``, where a reload is paid in the task's own slot and a
    block of several layers is used several times per step) rather than the remaining steps."""
    if p.token_horizon == "auto":
        return inst.load_timing == "at_use"
    return p.token_horizon == "uses"


def capped(inst: PlacementInstance, p: BifocalParams) -> bool:
    """Whether the token credit is capped (``token_cap``; ``auto``: under ``prefetch`` only,
    :data:`AUTO_TOKEN_CAP`)."""
    return AUTO_TOKEN_CAP[inst.load_timing] if p.token_cap == "auto" else bool(p.token_cap)


def copy_weight(inst: PlacementInstance, p: BifocalParams) -> float:
    """ρ in effect: ``copy_cost``, or for ``auto`` :data:`AUTO_COPY_COST` of the load rule."""
    return AUTO_COPY_COST[inst.load_timing] if p.copy_cost == "auto" else float(p.copy_cost)


def phase_weight(inst: PlacementInstance, p: BifocalParams) -> float:
    """λ in effect: ``lam``, or for ``auto`` :data:`AUTO_LAM` of the instance's load rule."""
    return AUTO_LAM[inst.load_timing] if p.lam == "auto" else float(p.lam)


def _warm_duration(b: int, durs: Sequence[int], legal: Sequence[int],
                   res_ready: list[dict[int, int]]) -> float:
    """The shortest duration of the task on a legal device where its block ``b`` is resident
    (inf when none holds it, or the task has no block): the recurring per-step cost a move
    onto another device is measured against by the token term."""
    if b < 0:
        return math.inf
    return min((durs[d] for d in legal if b in res_ready[d]), default=math.inf)


def _forget_evicted(theta: list[int], evicted: list[tuple[int, int, int]], dcls_l: list[int],
                    class_devs: list[list[int]], res_ready: list[dict[int, int]]) -> None:
    """θ(v) = −1 for evicted blocks v whose class θ(v) keeps no resident copy."""
    for v, vd, _ in evicted:
        cv = dcls_l[vd]
        if theta[v] == cv and not any(v in res_ready[x] for x in class_devs[cv]):
            theta[v] = -1
