"""The ``chain`` component of the certified P1 lower bound (:mod:`opt.placement.certified_bounds`,
whose docstring gives the argument): the instance is cut at tasks comparable with every other
task, each segment between two cuts is bounded given its cuts' devices
(:mod:`opt.placement.segment_bound`), and a min-plus dynamic programme over the cut devices adds
the segments up. Also the chain-strengthened tails used by ``load_chain``. Durations in ticks.
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from opt.placement.bound_options import BoundOptions, jit_kernels
from opt.placement.device_symmetry import interchangeable_devices
from opt.placement.instance import PlacementInstance
from opt.placement.overlap_bound import bound_instance
from opt.placement.segment_bound import Segment, elementwise_min, evaluate_segment
from opt.placement.segment_branch import branch_segment
from opt.placement.work_bound import BIG


def cut_positions(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """(topological order, positions in it of the cut tasks).

    Task π[p] is a cut iff every earlier task has a successor at position ≤ p (then each reaches
    π[p]) and every later task has a predecessor at position ≥ p (then π[p] reaches each)."""
    n = inst.n_tasks
    order = np.asarray(inst.topological_order)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    min_succ = np.full(n, n + 1, dtype=np.int64)
    np.minimum.at(min_succ, inst.edge_src, pos[inst.edge_dst])
    max_pred = np.full(n, -1, dtype=np.int64)
    np.maximum.at(max_pred, inst.edge_dst, pos[inst.edge_src])
    a = min_succ[order]
    before = np.maximum.accumulate(np.concatenate([[-1], a[:-1]]))
    b = max_pred[order]
    after = np.minimum.accumulate(np.concatenate([b[1:], [n + 1]])[::-1])[::-1]
    p = np.arange(n)
    return order, np.flatnonzero((before <= p) & (after >= p))


@dataclass(frozen=True)
class _Chain:
    """The decomposition: tasks in topological ``order``; segment k holds positions
    ``starts[k]..ends[k]`` (closed by a cut when ``has_end[k]``, preceded by one when
    ``has_prev[k]``); its local edges ``lu → lv`` with bytes ``eb`` are
    ``e_off[k]:e_off[k + 1]``; ``cost`` the instance's [n, D] durations (by task, ticks) and
    per segment the largest weight-load release on a legal device (ticks)."""

    order: np.ndarray
    cuts: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    has_prev: np.ndarray
    has_end: np.ndarray
    lu: np.ndarray
    lv: np.ndarray
    eb: np.ndarray
    e_off: np.ndarray
    cost: np.ndarray
    seg_rmax: np.ndarray

    @property
    def n_seg(self) -> int:
        return len(self.starts)

    def bounds(self, k: int) -> tuple[int, int, int, int]:
        """(first local position incl. the previous cut, end + 1, first edge, end edge)."""
        lo = int(self.starts[k]) - int(self.has_prev[k])
        return lo, int(self.ends[k]) + 1, int(self.e_off[k]), int(self.e_off[k + 1])

    def cost_rows(self, lo: int, hi: int) -> np.ndarray:
        """[hi − lo, D] durations (ticks) of the tasks at positions ``lo … hi − 1``."""
        return self.cost[self.order[lo:hi]]

    def segment(self, k: int) -> Segment:
        lo, hi, e0, e1 = self.bounds(k)
        return Segment(self.cost_rows(lo, hi), None, self.lu[e0:e1], self.lv[e0:e1],
                       self.eb[e0:e1], bool(self.has_prev[k]), bool(self.has_end[k]))


@dataclass
class _Tables:
    """The segment tables: segment k's [P, E] table (ticks) is ``distinct[seq[k]]``."""

    distinct: list[np.ndarray]
    seq: np.ndarray

    def packed(self) -> tuple[np.ndarray, ...]:
        """(seq, flat, offs, rows, cols): the tables in use row-major in ``flat``, table i at
        ``offs[i]`` with ``rows[i]`` × ``cols[i]`` entries, and segment k's table ``seq[k]``
        — the compiled min-plus passes' input."""
        counts = np.bincount(self.seq, minlength=len(self.distinct))
        used = np.flatnonzero(counts)
        remap = np.full(len(self.distinct), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        tabs = [self.distinct[i] for i in used.tolist()]
        for t in tabs:
            _check_nan(t)
        sizes = np.array([t.size for t in tabs], dtype=np.int64)
        offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat = np.concatenate([np.ascontiguousarray(t, dtype=np.float64).ravel() for t in tabs])
        rows = np.array([t.shape[0] for t in tabs], dtype=np.int64)
        cols = np.array([t.shape[1] for t in tabs], dtype=np.int64)
        return remap[self.seq], flat, offs, rows, cols


def chain_bound(inst: PlacementInstance, opts: BoundOptions, tail: np.ndarray | None = None,
                dmin: np.ndarray | None = None
                ) -> tuple[int, dict[str, Any], np.ndarray | None]:
    """The ``chain`` component (module docstring), a summary of the decomposition and, when the
    cheapest tails ``tail`` are given, chain-strengthened tails (``makespan − start(t)`` bound
    for every task t; see :func:`_chain_tails`; ``dmin``: the cheapest durations
    :func:`opt.placement.work_bound.cheapest`, when the caller has them). Under
    ``load_timing: overlap`` on :func:`opt.placement.overlap_bound.bound_instance`."""
    inst = bound_instance(inst)
    ch = _decompose(inst)
    shapes = _shapes(inst, ch)
    groups = interchangeable_devices(inst)
    tables, counts = _shape_tables(inst, ch, shapes, groups, opts)
    jit = jit_kernels(inst.n_tasks)
    packed = tables.packed() if jit is not None else None
    value, n_special = _min_plus(inst, ch, tables, groups, opts, packed)
    detail = {"cuts": int(len(ch.cuts)), "segments": ch.n_seg, "shapes": len(shapes),
              "shapes_exact": counts["shapes_exact"], "evaluations": counts["evaluations"],
              "branch_evaluations": counts["branch_evaluations"],
              "branch_s": round(counts["branch_s"], 3),
              "max_segment_tasks": int((ch.ends - ch.starts + 1).max()),
              "release_evaluations": n_special, "evaluate_s": round(counts["evaluate_s"], 3)}
    tails = None
    if tail is not None:
        min_w = _backward_min_plus(tables, jit, packed)
        tails = _chain_tails(inst, tail, ch, min_w, dmin)
    return int(value), detail, tails


def _decompose(inst: PlacementInstance) -> _Chain:
    """Cut the topological order at the cut tasks; segment-local edges (from inside the
    segment or from the previous cut) sorted by segment, destination, source (compiled on
    large instances: :func:`opt.placement.bound_jit.chain_decompose`, the same arrays)."""
    n = inst.n_tasks
    order, cuts = cut_positions(inst)
    starts = np.concatenate([[0], cuts + 1])
    ends = np.concatenate([cuts, [n - 1]])
    keep = starts <= ends  # drop an empty tail segment (last cut is the last task)
    starts, ends = starts[keep], ends[keep]
    n_seg = len(starts)
    has_prev = np.arange(n_seg) > 0
    has_end = np.zeros(n_seg, dtype=bool)
    has_end[:len(cuts)] = True
    jit = jit_kernels(n)
    if jit is not None:
        p_off, p_idx = inst.predecessors
        lu, lv, eb, e_off, seg_rmax = jit.chain_decompose(
            order, jit.ChainCuts(starts, ends, has_prev), p_off, p_idx, inst.edge_src,
            inst.edge_bytes, inst.cost, inst.task_block, inst.load_duration, int(BIG))
    else:
        lu, lv, eb, e_off = _local_edges(inst, order, starts, ends, has_prev)
        legal_pos = inst.cost[order] >= 0
        rel_pos = _first_releases(inst, order)
        rmax_pos = np.where(legal_pos & (rel_pos < BIG), rel_pos, 0).max(axis=1)
        seg_rmax = np.maximum.reduceat(rmax_pos, starts)
    return _Chain(order, cuts, starts, ends, has_prev, has_end, lu, lv, eb, e_off, inst.cost,
                  seg_rmax)


def _local_edges(inst: PlacementInstance, order: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray, has_prev: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lu, lv, eb, e_off) of :class:`_Chain`: the segment-local edges in numpy."""
    n, n_seg = inst.n_tasks, len(starts)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    seg_of = np.repeat(np.arange(n_seg), ends - starts + 1)  # segments tile 0 … n − 1
    sp, dp = pos[inst.edge_src], pos[inst.edge_dst]
    ks = seg_of[dp]
    prev_pos = np.where(has_prev, starts - 1, -5)
    mask = (seg_of[sp] == ks) | (sp == prev_pos[ks])
    sp, dp, ks, eb = sp[mask], dp[mask], ks[mask], inst.edge_bytes[mask]
    off = has_prev.astype(np.int64)
    lu = sp - starts[ks] + off[ks]
    lv = dp - starts[ks] + off[ks]
    width = int(max(lu.max(initial=0), lv.max(initial=0))) + 1
    if n_seg * width * width < 2 ** 62:  # one stable sort of a combined key: lexsort's order
        e_ord = np.argsort((ks * width + lv) * width + lu, kind="stable")
    else:
        e_ord = np.lexsort((lu, lv, ks))
    lu, lv, ks, eb = lu[e_ord], lv[e_ord], ks[e_ord], eb[e_ord]
    return lu, lv, eb, np.searchsorted(ks, np.arange(n_seg + 1))


def _shapes(inst: PlacementInstance, ch: _Chain) -> dict[int, dict[int, np.ndarray]]:
    """Segments grouped by shape (cut flags, size, legal devices, task kinds, local edges),
    then by data (durations and edge bytes): shape label -> data label -> member segments
    (int64, ascending), both in order of first appearance (labels are arbitrary ints)."""
    lo = ch.starts - ch.has_prev.astype(np.int64)
    size, e0 = ch.ends + 1 - lo, ch.e_off[:-1]
    n_edges = ch.e_off[1:] - e0
    jit = jit_kernels(inst.n_tasks)
    if jit is not None:
        spans = jit.SegmentSpans(lo, size, e0, n_edges, ch.has_prev, ch.has_end)
        shape_of, data_of = jit.segment_labels(spans, ch.order, ch.cost, _kind_codes(inst),
                                               ch.lu, ch.lv, ch.eb)
    else:
        shape_of, data_of = _labels(inst, ch, lo, size, e0, n_edges)
    # labels are the first members, so ascending labels are the order of first appearance
    order = np.lexsort((data_of, shape_of))  # stable: members ascending
    cuts = np.flatnonzero(np.diff(data_of[order])) + 1
    shapes: dict[int, dict[int, np.ndarray]] = {}
    for members in np.split(order, cuts):
        k = int(members[0])
        shapes.setdefault(int(shape_of[k]), {})[int(data_of[k])] = members
    return shapes


def _kind_codes(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: equal codes for equal task kinds (Python equality, as dict keys; the kinds
    themselves when they are ints, as in :func:`opt.placement.bound_process.bound_payload`)."""
    kinds = inst.kind or (None,) * inst.n_tasks
    distinct = set(kinds)
    if all(type(k) is int for k in distinct):
        try:
            return np.fromiter(kinds, dtype=np.int64, count=inst.n_tasks)
        except OverflowError:
            pass
    codes = {k: i for i, k in enumerate(distinct)}
    return np.fromiter(map(codes.__getitem__, kinds), dtype=np.int64, count=inst.n_tasks)


def _labels(inst: PlacementInstance, ch: _Chain, lo: np.ndarray, size: np.ndarray,
            e0: np.ndarray, n_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shape_of, data_of): per segment the first segment of equal shape, and of equal shape
    and data. Vectorised per (cut flags, size, edge count): within such a group every
    segment's shape and data are fixed-width integer rows, grouped by :func:`_row_labels`."""
    kind_pos = _kind_codes(inst)[ch.order]
    cost_pos = ch.cost[ch.order]
    legal_pos = (cost_pos >= 0).view(np.uint8)
    group = np.stack([ch.has_prev.astype(np.int64), ch.has_end.astype(np.int64), size,
                      n_edges], axis=1)
    shape_of = np.empty(ch.n_seg, dtype=np.int64)
    data_of = np.empty(ch.n_seg, dtype=np.int64)
    for gi in _row_groups(_byte_rows(group)):
        ln, ne = int(size[gi[0]]), int(n_edges[gi[0]])
        pos = lo[gi][:, None] + np.arange(ln)
        eix = e0[gi][:, None] + np.arange(ne)
        skey = np.concatenate([_byte_rows(legal_pos[pos]), _byte_rows(kind_pos[pos]),
                               _byte_rows(ch.lu[eix]), _byte_rows(ch.lv[eix])], axis=1)
        shape_of[gi] = gi[_row_labels(skey)]  # label: the group's first segment of the shape
        vkey = np.concatenate([_byte_rows(shape_of[gi]), _byte_rows(cost_pos[pos]),
                               _byte_rows(ch.eb[eix])], axis=1)
        data_of[gi] = gi[_row_labels(vkey)]
    return shape_of, data_of


def _row_groups(keys: np.ndarray) -> list[np.ndarray]:
    """Indices (ascending) of each group of equal rows of the uint8 ``keys`` [m, w]."""
    labels = _row_labels(keys)
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    return np.split(order, cuts)


def _byte_rows(a: np.ndarray) -> np.ndarray:
    """``a`` [m, …] as uint8 [m, bytes per row] (its rows' bytes, for row comparison)."""
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], -1)


def _row_labels(keys: np.ndarray) -> np.ndarray:
    """Per row of the uint8 array ``keys`` [m, w], the index of the first row equal to it.
    Rows are grouped by a 1-D key (a wrapping weighted sum of their 8-byte words; far cheaper
    than sorting void rows), checked to have no collision; on one, through a dict of the
    rows' bytes."""
    m, w = keys.shape
    words = np.zeros((m, -(-w // 8) * 8), dtype=np.uint8)
    words[:, :w] = keys
    u64 = words.view(np.uint64)
    weights = (np.arange(1, u64.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
               ) | np.uint64(1)
    with np.errstate(over="ignore"):
        key = (u64 * weights[None, :]).sum(axis=1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    labels = first[inv.reshape(-1)]
    if np.array_equal(keys[labels], keys):
        return labels
    buf = np.ascontiguousarray(keys).tobytes()
    seen: dict[bytes, int] = {}
    return np.fromiter((seen.setdefault(buf[i * w:(i + 1) * w], i) for i in range(m)),
                       dtype=np.int64, count=m)


def _shape_tables(inst: PlacementInstance, ch: _Chain,
                  shapes: dict[int, dict[int, np.ndarray]], groups: list[list[int]],
                  opts: BoundOptions) -> tuple[_Tables, dict[str, Any]]:
    """Each segment's [P, E] table: distinct members of a shape evaluated exactly up to
    ``max_evaluations``, beyond that per bucket of similar work and bytes (element-wise
    minimum); shapes the plain evaluation cannot enumerate are raised by branch and bound on
    at most ``max_branch_evaluations`` buckets (each member takes the maximum of its two
    buckets' bounds); and counters."""
    tables = _Tables([], np.full(ch.n_seg, -1, dtype=np.int64))
    cnt: dict[str, Any] = {"shapes_exact": 0, "evaluations": 0, "evaluate_s": 0.0,
                           "branch_evaluations": 0, "branch_s": 0.0}
    memo: dict[bytes, tuple[np.ndarray, ...]] = {}  # the evaluations' assignments
    for members in shapes.values():
        reps = [int(ks_[0]) for ks_ in members.values()]
        keys = list(members)
        sizes = _bucket_sizes(ch, reps) if len(reps) > opts.max_branch_evaluations else None
        buckets = _buckets(sizes, len(reps), opts.max_evaluations)
        cnt["shapes_exact"] += len(reps) <= opts.max_evaluations
        partial = False
        for bucket in buckets:
            seg = elementwise_min([ch.segment(k) for k in (reps[i] for i in bucket)])
            t0 = time.perf_counter()
            table, n_enum = evaluate_segment(inst, seg, groups, opts.max_assignments, memo)
            cnt["evaluate_s"] += time.perf_counter() - t0
            cnt["evaluations"] += 1
            partial |= n_enum < seg.cost.shape[0]
            tables.seq[_members(members, keys, bucket)] = len(tables.distinct)
            tables.distinct.append(table)
        if opts.branch and partial:
            coarse = _buckets(sizes, len(reps), opts.max_branch_evaluations)
            for bucket in coarse:
                _raise_by_branching(inst, ch, tables, [reps[i] for i in bucket],
                                    _members(members, keys, bucket), groups, opts, cnt)
    return tables, cnt


def _members(members: dict[int, np.ndarray], keys: list[int], bucket: list[int]
             ) -> np.ndarray:
    """The segments of the data labels ``keys[i]`` for i in ``bucket``."""
    return np.concatenate([members[keys[i]] for i in bucket])


def _raise_by_branching(inst: PlacementInstance, ch: _Chain, tables: _Tables, reps: list[int],
                        bucket: np.ndarray, groups: list[list[int]], opts: BoundOptions,
                        cnt: dict[str, Any]) -> None:
    """Segment k's table ← max(its table, branch-and-bound table of the element-wise minimum
    of the distinct members ``reps``) for every segment k of ``bucket``; one maximum per
    distinct table."""
    seg = elementwise_min([ch.segment(k) for k in reps])
    t0 = time.perf_counter()
    bb = branch_segment(inst, seg, groups, opts.max_assignments)
    cnt["branch_s"] += time.perf_counter() - t0
    cnt["branch_evaluations"] += 1
    if bb is None:
        return
    old, inv = np.unique(tables.seq[bucket], return_inverse=True)
    new = np.arange(len(tables.distinct), len(tables.distinct) + len(old))
    tables.distinct.extend(np.maximum(tables.distinct[i], bb) for i in old.tolist())
    tables.seq[bucket] = new[inv.reshape(-1)]


def _bucket_sizes(ch: _Chain, reps: list[int]) -> np.ndarray:
    """[m, 2] total cheapest work and edge bytes of each representative segment."""
    work, nbytes = [], []
    for k in reps:
        lo, hi, e0, e1 = ch.bounds(k)
        c = ch.cost_rows(lo, hi)
        work.append(int(np.where(c >= 0, c, BIG).min(axis=1).sum()))
        nbytes.append(int(ch.eb[e0:e1].sum()))
    return np.array([work, nbytes], dtype=np.float64).T


def _buckets(sizes: np.ndarray | None, n_reps: int, max_buckets: int) -> list[list[int]]:
    """Representatives grouped: one each when they fit ``max_buckets``, else log buckets."""
    if n_reps <= max_buckets or sizes is None:
        return [[i] for i in range(n_reps)]
    return _log_buckets(sizes, max_buckets)


def _min_plus(inst: PlacementInstance, ch: _Chain, tables: _Tables, groups: list[list[int]],
              opts: BoundOptions, packed: tuple[np.ndarray, ...] | None = None
              ) -> tuple[float, int]:
    """(bound, release re-evaluations): min-plus dynamic programme along the chain; V[d] bounds
    end(c_k) given σ(c_k) = d. While V is below a segment's weight-load releases (absolute
    times: loads start at ≥ 0), the segment is re-evaluated with the releases shifted by its
    earliest start V[p]. V is a list of Python floats (the same IEEE sums and minima as the
    numpy form ``(V[:, None] + T).min(axis=0)``, without numpy's per-call cost on 5 × 5); with
    ``packed`` (:meth:`_Tables.packed`, on large instances) the steps without a re-evaluation
    run compiled (the same operations)."""
    n_special = 0
    v = [0.0]
    rmax = ch.seg_rmax.tolist()
    jit = jit_kernels(inst.n_tasks)
    # (the compiled step compares float V with int64 releases as floats: exact below 2**53)
    if jit is None or ch.seg_rmax.max() >= 2 ** 53:
        packed = None
    columns: dict[int, list[list[Any]]] = {}  # table index -> its columns
    k = 0
    while k < ch.n_seg:
        if packed is not None and jit is not None:
            va, k = jit.min_plus_forward(np.array(v), packed[0], k, *packed[1:], ch.seg_rmax,
                                         n_special, opts.max_release_evaluations)
            v = va.tolist()
            if k == ch.n_seg:
                break
        i = int(tables.seq[k])
        t = tables.distinct[i]
        if rmax[k] > 0 and n_special < opts.max_release_evaluations \
                and any(x < rmax[k] and math.isfinite(x) for x in v):
            t, n_special = _with_releases(inst, ch, k, t, np.array(v), groups, opts,
                                          n_special)
        if t is not tables.distinct[i]:
            _check_nan(t)
            cols = t.T.tolist()
        elif i in columns:
            cols = columns[i]
        else:
            _check_nan(t)
            cols = columns[i] = t.T.tolist()
        v = [min(map(operator.add, v, col)) for col in cols]
        k += 1
    value = float(min(v))
    if not math.isfinite(value):
        raise RuntimeError("chain bound: no legal device sequence (instance has no schedule)")
    return value, n_special


def _check_nan(t: np.ndarray) -> None:
    """Raise when a segment table holds NaN (its minima would be meaningless)."""
    if np.isnan(t).any():
        raise RuntimeError("chain bound: a segment table holds NaN")


def _with_releases(inst: PlacementInstance, ch: _Chain, k: int, t: np.ndarray, v: np.ndarray,
                   groups: list[list[int]], opts: BoundOptions, n_special: int
                   ) -> tuple[np.ndarray, int]:
    """Segment k's table raised, for each distinct finite start V[p] below its releases, by
    an evaluation with the releases shifted by that start; and the evaluation count."""
    nd = inst.n_devices
    starts_k = np.unique(v[np.isfinite(v) & (v < ch.seg_rmax[k])])
    if not len(starts_k):
        return t, n_special
    seg = ch.segment(k)
    rel_k = _first_releases(inst, ch.order[int(ch.starts[k]):int(ch.ends[k]) + 1])
    t = t.copy()
    for s0 in starts_k.tolist():
        rel = np.maximum(rel_k - int(s0), 0)
        if seg.has_prev:
            rel = np.vstack([np.zeros((1, nd), dtype=np.int64), rel])
        seg.release = rel
        tab, _ = evaluate_segment(inst, seg, groups, opts.max_assignments)
        rows = v == s0
        t[rows] = np.maximum(t[rows], tab[rows])
        n_special += 1
    return t, n_special


def _chain_tails(inst: PlacementInstance, tail: np.ndarray, ch: _Chain, min_w: np.ndarray,
                 dmin: np.ndarray | None = None) -> np.ndarray:
    """tail'(t) ≥ makespan − start(t). Backward min-plus over the segment tables gives
    ``W_k`` ≥ makespan − end(c_k) (the windows after c_k, ``min_w``); for t in segment k,
    ``end(c_k) − start(t)`` ≥ the cheapest path t → c_k ≥ ``tail[t] − tail[c_k] + dmin[c_k]``
    (a longest cheapest path from t to a sink either passes c_k or jumps from an ancestor of
    c_k to a descendant of it, and both pieces are bounded through c_k). Per segment
    ``− tail[c_k] + dmin[c_k] + W_k`` first, then per task (int64 sums wrap: the same)."""
    w_int = np.where(np.isfinite(min_w), min_w, 0).astype(np.int64)
    cut_task = ch.order[ch.ends]
    if dmin is None:
        c = inst.cost[cut_task]
        dmin_cut = np.where(c >= 0, c, BIG).min(axis=1)
    else:
        dmin_cut = dmin[cut_task]
    per_seg = -tail[cut_task] + dmin_cut + w_int
    length = ch.ends - ch.starts + 1  # segments tile the positions 0 … n − 1
    ok = np.repeat(ch.has_end, length)
    tasks = ch.order[ok]
    t_pos = tail[tasks]
    out = tail.copy()
    out[tasks] = np.maximum(t_pos, t_pos + np.repeat(per_seg, length)[ok])
    return out


def _backward_min_plus(tables: _Tables, jit: ModuleType | None = None,
                       packed: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """float [K] ``min_w[k]`` = min over devices of W_k, where W_{n−1} = 0 and
    W_{k−1} = (T_k + W_k[None, :]).min(axis=1); in Python floats (the same IEEE sums and
    minima as the numpy form, without its per-call cost on 5 × 5 tables), or compiled with
    ``jit`` (:mod:`opt.placement.bound_jit`: the same operations; ``packed``: the tables
    packed)."""
    if jit is not None:
        return jit.min_plus_backward(*(packed or tables.packed()))
    rows: dict[int, list[list[Any]]] = {}  # table index -> its rows
    seq = tables.seq.tolist()
    w: list[Any] = [0.0] * tables.distinct[seq[-1]].shape[1]
    min_w = [0.0] * len(seq)
    for k in range(len(seq) - 1, -1, -1):
        min_w[k] = min(w)
        i = seq[k]
        if i not in rows:
            _check_nan(tables.distinct[i])
            rows[i] = tables.distinct[i].tolist()
        w = [min(map(operator.add, row, w)) for row in rows[i]]
    return np.array(min_w, dtype=np.float64)


def _log_buckets(keys: np.ndarray, max_buckets: int) -> list[list[int]]:
    """Rows of ``keys`` [m, f] (non-negative sizes, e.g. work and edge bytes) grouped so that
    each size varies by at most a factor (1 + eps) within a group, with the smallest eps
    (doubling from 1e-4) that needs at most ``max_buckets`` groups. Outliers (e.g. the prefill
    step among decode steps) keep a group of their own."""
    logk = np.log(np.maximum(keys, 1.0))
    eps = 1e-4
    while True:
        code = np.floor(logk / math.log1p(eps)).astype(np.int64)
        uniq, inv = np.unique(code, axis=0, return_inverse=True)
        if len(uniq) <= max_buckets:
            inv = inv.reshape(-1)
            return [list(np.flatnonzero(inv == i)) for i in range(len(uniq))]
        eps *= 2


def _first_releases(inst: PlacementInstance, tasks: np.ndarray) -> np.ndarray:
    """[len(tasks), D]: a task on d cannot start before its block's load onto d ends."""
    rel = np.zeros((len(tasks), inst.n_devices), dtype=np.int64)
    blk = inst.task_block[tasks]
    has = blk >= 0
    if has.any():
        ld = inst.load_duration[blk[has]]
        rel[has] = np.where(ld >= 0, ld, BIG)  # not loadable there: the task cannot run there
    return rel
