"""Order and cycles of a P1 task graph given as edge arrays (problems.md §1.1): Kahn's
topological order, smallest ready index first, and a task on a cycle for the error message
(:attr:`opt.placement.instance.PlacementInstance.topological_order`)."""

from __future__ import annotations

import heapq

import numpy as np


def topological_order_of(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """Kahn's order, smallest ready index first (None on a cycle). When every edge points
    to a larger index, that order is 0, 1, …, n−1 (task k is ready once 0 … k−1 are done,
    and no smaller task is left), returned without the walk."""
    if not len(src) or bool((src < dst).all()):
        return np.arange(n, dtype=np.int64)
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order_e = np.argsort(src, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    succ = dst[order_e]
    ready = [int(i) for i in np.flatnonzero(indeg == 0)]
    heapq.heapify(ready)
    out = np.empty(n, dtype=np.int64)
    k = 0
    indeg_l = indeg.tolist()
    offsets_l = offsets.tolist()
    succ_l = succ.tolist()
    while ready:
        u = heapq.heappop(ready)
        out[k] = u
        k += 1
        for j in range(offsets_l[u], offsets_l[u + 1]):
            v = succ_l[j]
            indeg_l[v] -= 1
            if indeg_l[v] == 0:
                heapq.heappush(ready, v)
    return out if k == n else None


def cycle_member(n: int, edge_src: np.ndarray, edge_dst: np.ndarray) -> int:
    """A task on a cycle of the ``n`` tasks' graph (for the error message): peel tasks without
    predecessors, then walk back through remaining predecessors until a task repeats."""
    indeg = np.bincount(edge_dst, minlength=n)
    alive = np.ones(n, bool)
    while True:
        srcs = np.flatnonzero(alive & (indeg == 0))
        if not len(srcs):
            break
        alive[srcs] = False
        mask = np.isin(edge_src, srcs)
        np.subtract.at(indeg, edge_dst[mask], 1)
    # every remaining task has a remaining predecessor: walking back must close a cycle
    pred: dict[int, int] = {}
    for u, v in zip(edge_src.tolist(), edge_dst.tolist()):
        if alive[u] and alive[v]:
            pred.setdefault(v, u)
    t = int(np.flatnonzero(alive)[0])
    seen: set[int] = set()
    while t not in seen:
        seen.add(t)
        t = pred[t]
    return t
