"""The static data of Bifocal's DAG window (DOPS §5.1.2; docs/problems.md §6 "The window
T̂_H"), vectorised over all tasks: each task's heaviest-payload successor and that edge's
payload type, the payload type of its heaviest incident edge (the consistency penalty's
representative activation), and the loop's :class:`~heuristics.placement.kernel_types.Window`.
The simulation itself runs in the loop (:mod:`heuristics.placement.bifocal_window`), from the
partial schedule of the moment.
"""

from __future__ import annotations

import numpy as np

from heuristics.placement.kernel_types import Window
from opt.placement.instance import PlacementInstance


def heaviest_successor(inst: PlacementInstance, prio: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(successor, edge) over each task's heaviest outgoing edge, −1 for sinks: the largest
    payload (bytes), ties to the successor earlier in HEFT's order (``prio``: each task's
    position; the authors break the tie by the higher upward rank), then the lower edge
    index."""
    n, m = inst.n_tasks, inst.n_edges
    hs = np.full(n, -1, dtype=np.int64)
    he = np.full(n, -1, dtype=np.int64)
    if m:
        src, dst = inst.edge_src, inst.edge_dst
        order = np.lexsort((np.arange(m), prio[dst], -inst.edge_bytes, src))
        s = src[order]
        first = np.concatenate([[True], s[1:] != s[:-1]])
        sel = order[first]
        hs[src[sel]] = dst[sel]
        he[src[sel]] = sel
    return hs, he


def heaviest_incident(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: per task the edge of largest payload among its inputs and outputs (ties: the
    lower edge index), −1 for a task without edges — the representative activation whose
    transfer time the consistency penalty charges (the authors' ``max(read, write)``)."""
    n, m = inst.n_tasks, inst.n_edges
    out = np.full(n, -1, dtype=np.int64)
    if m:
        eid = np.arange(m, dtype=np.int64)
        task = np.concatenate([inst.edge_src, inst.edge_dst]).astype(np.int64)
        edge = np.concatenate([eid, eid])
        nbytes = inst.edge_bytes[edge]
        order = np.lexsort((edge, -nbytes, task))
        t = task[order]
        first = np.concatenate([[True], t[1:] != t[:-1]])
        out[t[first]] = edge[order][first]
    return out


def window_arrays(inst: PlacementInstance, etype: np.ndarray, prio: np.ndarray | None,
                  hint_max: int, H: int) -> Window:
    """The loop's window: per task the heaviest successor and that edge's payload type, the
    payload type of its heaviest incident edge (``etype``: each edge's payload type in the
    kernels' transfer table), no hints yet (room for ``hint_max`` + H); placeholders when
    ``prio`` is None (the window off)."""
    i64, n = np.int64, inst.n_tasks
    if prio is None:
        one = np.full(1, -1, dtype=i64)
        return Window(one, one, one, one.copy(), np.zeros(1, dtype=i64),
                      np.zeros(1, dtype=i64), np.zeros(1, dtype=i64))
    hs, he = heaviest_successor(inst, prio)
    inc = heaviest_incident(inst)
    et = np.concatenate([np.asarray(etype, dtype=i64), [-1]])  # edge −1: type −1
    hetype, rtype = et[he], et[inc]
    return Window(hs, hetype, rtype, np.full(n, -1, dtype=i64), np.zeros(n, dtype=i64),
                  np.zeros(min(max(hint_max, 0), n) + H + 1, dtype=i64), np.zeros(1, dtype=i64))
