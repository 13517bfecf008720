"""Branch and bound over a segment's device assignments: the ``chain`` component's segment
tables (:mod:`opt.placement.segment_bound`) when a segment has too many assignments to
enumerate them all (the head-sharded attention segment of a decode layer, 20 tasks on 5
devices).

The plain evaluation enumerates a fixed subset of the tasks and relaxes the others (cheapest
duration, no device). Here the tasks are assigned one at a time (cuts and single-device tasks
first, then by device sensitivity); every partial assignment is valued with the unassigned
tasks relaxed the same way, which never exceeds the value of any of its completions (more
tasks on a device and longer durations and transfers only raise the longest paths and the
one-machine sums). A completion of each partial assignment (every unassigned task on its
cheapest device) is a real assignment, so its value is an upper bound ``U[p, e]`` on the least
value of the cut cell (p, e); partial assignments valued ``≥ U[p, e]`` are dropped. A task
whose branching would exceed the assignment budget stays relaxed. The cell's entry is the
least of ``U[p, e]`` and the values of the partial assignments left at the end: every complete
assignment descends from one of those (value ≥ its partial value) or from a dropped one (value
≥ ``U[p, e]``), so the entry bounds the least complete value from below, as the plain
enumeration's does. Durations in ticks.
"""

from __future__ import annotations

import numpy as np

from opt.placement.bound_options import jit_kernels
from opt.placement.instance import PlacementInstance
from opt.placement.segment_bound import (
    MAX_CELLS,
    Segment,
    _assignment_values,
    _edge_durations,
    cell_index,
    compiled_below,
    cut_cells,
    kernel_tables,
    sensitivity,
    table_from_canonical,
)
from opt.placement.work_bound import BIG

#: Largest segment (tasks + edges) that gets branch and bound: one level costs a pass over the
#: segment per partial assignment, and a generic DAG's single long segment gains nothing.
MAX_BRANCH_SIZE = 2_000

#: Partial assignments below this many are carried to the next level without being valued
#: and pruned (each valuation is a pass over the segment).
PRUNE_ROWS = 256


def branch_segment(inst: PlacementInstance, seg: Segment, groups: list[list[int]],
                   max_assignments: int) -> np.ndarray | None:
    """[P, E] table of lower bounds on the segment's span (as ``evaluate_segment``'s), or None
    when the segment is too large or its cuts alone exceed the budget. The frontier is capped
    by the tables' memory bound (``MAX_CELLS`` cells), not by ``max_assignments`` (unused,
    kept for the evaluators' common signature): pruning keeps it far below a full enumeration
    of as many tasks."""
    nd = inst.n_devices
    n, ne = seg.cost.shape[0], len(seg.esrc)
    if n + ne > MAX_BRANCH_SIZE:
        return None
    legal = seg.cost >= 0
    cost = seg.cost.copy()
    if seg.has_prev:
        cost[0] = np.where(legal[0], 0, -1)  # the previous cut ended at 0
    rel = np.zeros((n, nd), dtype=np.int64) if seg.release is None else seg.release
    tt = inst.links.transfer_durations(seg.ebytes) if ne else \
        np.zeros((0, nd, nd), dtype=np.int64)
    # the tables' memory bound (MAX_CELLS) caps the frontier, not max_assignments: pruning
    # keeps it far smaller than a full enumeration of as many tasks would be
    budget = max(1, MAX_CELLS // max(1, n + ne))
    must, spread = sensitivity(seg, legal, cost, tt)
    order = [j for j in np.argsort(-spread, kind="stable").tolist() if must[j]] + \
        [j for j in np.argsort(-spread, kind="stable").tolist() if not must[j]]
    cuts = [j for j in (0 if seg.has_prev else -1, n - 1 if seg.has_end else -1) if j >= 0]
    state = _State(inst, seg, legal, cost, rel, tt, groups)
    todo = order
    while todo:  # columns skipped for the budget are retried once pruning shrank the frontier
        left = []
        for j in todo:
            if len(state.dev) * int(legal[j].sum()) > budget:
                if j in cuts:
                    return None
                left.append(j)  # relaxed for now (and for good if never retried)
                continue
            state.branch(j)
        if len(left) == len(todo):
            break
        todo = left
    if state.tables is not None:  # compiled: the least value per cell below its upper bound
        can = state.ub.copy()
        state.below(state.dev, can, update=True)
        return table_from_canonical(seg, can.reshape(nd, nd), groups, nd)
    can = np.full((nd, nd), np.inf)
    if len(state.dev):  # empty: every partial assignment reached its cell's upper bound
        np.minimum.at(can, cut_cells(seg, state.dev), state.values(state.dev))
    return table_from_canonical(seg, np.minimum(can, state.ub.reshape(nd, nd)), groups, nd)


class _State:
    """The partial assignments (``dev`` [m, n], −1 = unassigned; ``used`` [m, groups]: how many
    devices of each interchangeable group are in use, for one assignment per orbit) and the
    upper bounds ``ub`` [D·D] per cut cell."""

    def __init__(self, inst: PlacementInstance, seg: Segment, legal: np.ndarray,
                 cost: np.ndarray, rel: np.ndarray, tt: np.ndarray, groups: list[list[int]]):
        nd = inst.n_devices
        n = seg.cost.shape[0]
        self.seg, self.legal, self.cost, self.rel, self.tt, self.nd = seg, legal, cost, rel, tt, nd
        self.first = 1 if seg.has_prev else 0
        self.grp = np.full(nd, -1)
        self.rank = np.zeros(nd, dtype=np.int64)
        for g, members in enumerate(groups):
            for r, d in enumerate(sorted(members)):
                self.grp[d], self.rank[d] = g, r
        self.dev = np.full((1, n), -1, dtype=np.int64)
        self.used = np.zeros((1, max(len(groups), 1)), dtype=np.int64)
        self.ub = np.full(nd * nd, np.inf)
        self.jit = jit_kernels(inst.n_tasks)
        self.tables = None if self.jit is None else kernel_tables(seg, legal, cost, rel, tt)

    def branch(self, j: int) -> None:
        """Assign column j every legal device (one per orbit), then drop the partial
        assignments whose value reaches their cell's upper bound."""
        if not len(self.dev):
            return
        parts, uparts = [], []
        for x in np.flatnonzero(self.legal[j]).tolist():
            g = int(self.grp[x])
            ok = np.ones(len(self.dev), dtype=bool) if g < 0 else self.used[:, g] >= self.rank[x]
            if not ok.any():
                continue
            d = self.dev[ok].copy()
            d[:, j] = x
            u = self.used[ok].copy()
            if g >= 0:
                u[:, g] = np.maximum(u[:, g], self.rank[x] + 1)
            parts.append(d)
            uparts.append(u)
        self.dev, self.used = np.vstack(parts), np.vstack(uparts)
        if len(self.dev) < PRUNE_ROWS:
            return  # small enough to carry unpruned: saves evaluations
        if self.tables is not None:
            self._prune_compiled()
            return
        val = self.values(self.dev)
        full = self.complete(self.dev)
        pa, pe = cut_cells(self.seg, full)
        np.minimum.at(self.ub, pa * self.nd + pe, self.values(full))
        pa, pe = cut_cells(self.seg, self.dev)
        keep = val < self.ub[np.maximum(pa, 0) * self.nd + np.maximum(pe, 0)]
        if (self.seg.has_prev and (self.dev[:, 0] < 0).any()) or \
                (self.seg.has_end and (self.dev[:, -1] < 0).any()):
            keep[:] = True  # a cut still unassigned: no cell to compare with yet
        self.dev, self.used = self.dev[keep], self.used[keep]

    def _prune_compiled(self) -> None:
        """:meth:`branch`'s pruning, compiled: the same upper bounds and kept rows, each row
        valued only until it reaches its cell's upper bound (none while a cut is open)."""
        full = self.complete(self.dev)
        self.below(full, self.ub, update=True)
        if (self.seg.has_prev and (self.dev[:, 0] < 0).any()) or \
                (self.seg.has_end and (self.dev[:, -1] < 0).any()):
            return  # a cut still unassigned: no cell to compare with yet
        keep = self.below(self.dev, self.ub, update=False)
        self.dev, self.used = self.dev[keep], self.used[keep]

    def below(self, dev: np.ndarray, bound: np.ndarray, update: bool) -> np.ndarray:
        """bool [m]: each row's :meth:`values` below ``bound`` [D·D] of its cut cell (with
        ``update``, ``bound`` lowered to the least value per cell); compiled only."""
        assert self.jit is not None and self.tables is not None
        assigned = np.asarray((dev >= 0).all(axis=0), dtype=bool)
        return compiled_below(self.jit, self.tables, assigned, dev, self.first,
                              cell_index(self.seg, dev, self.nd), bound, update,
                              thresholds=True)

    def complete(self, dev: np.ndarray) -> np.ndarray:
        """Each row completed greedily in topological (local) order: an unassigned task goes
        to the legal device least in its duration plus the transfers from its predecessors."""
        full = dev.copy()
        m = len(dev)
        seg = self.seg
        for j in np.flatnonzero((dev < 0).any(axis=0)).tolist():
            est = np.broadcast_to(np.where(self.legal[j], self.cost[j], BIG), (m, self.nd)).copy()
            for e in np.flatnonzero(seg.edst == j).tolist():
                est += self.tt[e][full[:, int(seg.esrc[e])]]
            full[:, j] = est.argmin(axis=1)
        return full

    def values(self, dev: np.ndarray) -> np.ndarray:
        """float [m]: each row's value with its unassigned tasks relaxed (cheapest duration,
        earliest release, no device, cheapest compatible transfers)."""
        assigned: np.ndarray = np.asarray((dev >= 0).all(axis=0), dtype=bool)
        m, n = dev.shape
        c = np.empty((m, n), dtype=np.int64)
        r = np.empty((m, n), dtype=np.int64)
        rel_cost = np.where(self.legal, self.cost, BIG)
        for j in range(n):
            if assigned[j]:
                c[:, j] = self.cost[j][dev[:, j]]
                r[:, j] = self.rel[j][dev[:, j]]
            else:
                c[:, j] = rel_cost[j].min()
                r[:, j] = np.where(self.legal[j], self.rel[j], BIG).min()
        edur = _edge_durations(self.seg, self.legal, self.tt, assigned, dev)
        return _assignment_values(self.seg, dev, c, r, edur, self.first, self.nd,
                                  thresholds=True)
