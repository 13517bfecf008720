"""Cheap lower bounds on the optimal P1 makespan, valid by construction (SPEC §0: heuristics
report "the strongest lower bound they can cheaply certify").

- critical path: longest DAG path with each task at its cheapest legal duration, communication
  taken as 0 (tasks could share a device) — no schedule is shorter;
- average work: the sum of cheapest durations spread over all devices;
- first weight: a task with a block cannot start before the fastest load of that block onto any
  legal device of the task, so the makespan ≥ that load + the task's tail.
"""

from __future__ import annotations

import numpy as np

from opt.instance import PlacementInstance


def heads_tails(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
    """head[t]: earliest start of t from the DAG and first-weight availability with cheapest
    durations (excl. t); tail[t]: longest cheapest path from t to a sink (incl. t)."""
    big = np.iinfo(np.int64).max
    dmin = np.where(inst.cost >= 0, inst.cost, big).min(axis=1)
    release = np.zeros(inst.n_tasks, dtype=np.int64)
    has = np.flatnonzero(inst.task_block >= 0)
    if len(has):
        ld = inst.load_duration[inst.task_block[has]]
        ok = (ld >= 0) & (inst.cost[has] >= 0)
        release[has] = np.where(ok, ld, big).min(axis=1)
    order = inst.topological_order
    head = release.copy()
    tail = dmin.copy()
    p_off, p_idx = inst.predecessors
    s_off, s_idx = inst.successors
    src, dst = inst.edge_src, inst.edge_dst
    for t in order.tolist():
        preds = src[p_idx[p_off[t]:p_off[t + 1]]]
        if len(preds):
            head[t] = max(int(head[t]), int((head[preds] + dmin[preds]).max()))
    for t in order[::-1].tolist():
        succs = dst[s_idx[s_off[t]:s_off[t + 1]]]
        if len(succs):
            tail[t] = dmin[t] + int(tail[succs].max())
    return head, tail


def placement_lower_bound(inst: PlacementInstance) -> int:
    """max(head + tail over tasks, ceil(total cheapest work / devices))."""
    head, tail = heads_tails(inst)
    dmin = np.where(inst.cost >= 0, inst.cost, np.iinfo(np.int64).max).min(axis=1)
    path = int((head + tail).max()) if inst.n_tasks else 0
    work = -(-int(dmin.sum()) // inst.n_devices)
    return max(path, work)
