"""The ``at_use`` and ``overlap`` load rules of problems.md §1.2 rule 5, checked in bulk.

Under ``load_timing: at_use`` a load of block b onto device d *serves* the first task v on d that
uses b and starts at or after the load's end (ties: the lowest task index). The load may not
start before v is **dispatched**::

    dispatch(v) = max( max over edges (u, v) of arrival(u, v),
                       max end of a compute event on σ(v) that starts before v )

with arrival(u, v) = end(u) when u runs on σ(v), else the end of the edge's transfer event. So
between the load's start and v's start the device computes nothing, and v completes at
dispatch + wait + t_load + p_v: Eq. 1's τ_c = τ_s + p_v(σ(v)) + t_reload. The load overlaps
compute on *other* devices and transfers (DOPS §6.1: "maximal overlap between computation and
weight loading"). Every load must serve a task (a load serving none is a prefetch).

Under ``load_timing: overlap`` (DOPS §6.1, "maximal overlap between computation and weight
loading") a load of b onto d serves the first task v on d that uses b and *ends* at or after the
load's end (smallest end; ties: the lowest task index). It starts no earlier than dispatch(v)
and may run while v computes; v completes at dispatch + max(t_load, p_v) at best. As
dispatch(v) is at or after the end of every compute event on d starting before v, and the
events starting after v start at or after v's end, nothing else computes on d between the
load's start and v's end.

Used by :mod:`opt.placement.validator` (which imports nothing from the solvers); times in ticks.
"""

from __future__ import annotations

import numpy as np

from opt.placement.instance import PlacementInstance


def arrivals(inst: PlacementInstance, task_dev: np.ndarray, end: np.ndarray,
             cross_edge: np.ndarray, cross_end: np.ndarray) -> np.ndarray:
    """int64 [n]: the time every input of each task is on its device (0 with no input):
    end(u) over same-device edges, the transfer's end over cross-device ones (``cross_edge``
    the edge index of each transfer, ``cross_end`` its end)."""
    arr = np.zeros(inst.n_tasks, dtype=np.int64)
    src, dst = inst.edge_src, inst.edge_dst
    same = task_dev[src] == task_dev[dst]
    np.maximum.at(arr, dst[same], end[src[same]])
    if len(cross_edge):
        np.maximum.at(arr, dst[cross_edge], cross_end)
    return arr


def previous_ends(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                  end: np.ndarray) -> np.ndarray:
    """int64 [n]: the largest end of a compute event on each task's device that starts
    strictly before the task (0 when none)."""
    out = np.zeros(inst.n_tasks, dtype=np.int64)
    for d in range(inst.n_devices):
        idx = np.flatnonzero(task_dev == d)
        if len(idx) < 2:
            continue
        idx = idx[np.argsort(start[idx], kind="stable")]
        s = start[idx]
        cm = np.maximum.accumulate(end[idx])
        first = np.searchsorted(s, s, side="left")
        out[idx] = np.where(first > 0, cm[np.maximum(first - 1, 0)], 0)
    return out


def served_tasks(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                 ld_block: np.ndarray, ld_dev: np.ndarray, ld_end: np.ndarray) -> np.ndarray:
    """int64 [loads]: the task each load serves (the first user of its block on its device
    whose time in ``start`` is at or after the load's end, ties the lowest index; −1 when there
    is none). ``start`` holds the compute starts under ``at_use`` and the compute ends under
    ``overlap`` (:func:`served_by_rule`)."""
    out = np.full(len(ld_block), -1, dtype=np.int64)
    users = np.flatnonzero(inst.task_block >= 0)
    if not len(users) or not len(ld_block):
        return out
    nd = inst.n_devices
    u_key = inst.task_block[users] * nd + task_dev[users]
    times, rank = np.unique(np.concatenate([start[users], ld_end]), return_inverse=True)
    r_user, r_load = rank[:len(users)], rank[len(users):]
    width = len(times) + 1
    order = np.lexsort((users, r_user, u_key))
    key_sorted = (u_key * width + r_user)[order]
    q = ld_block * nd + ld_dev
    pos = np.searchsorted(key_sorted, q * width + r_load, side="left")
    ok = pos < len(order)
    cand = order[np.minimum(pos, len(order) - 1)]
    ok &= u_key[cand] == q
    out[ok] = users[cand[ok]]
    return out


def served_by_rule(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                   end: np.ndarray, ld_block: np.ndarray, ld_dev: np.ndarray,
                   ld_end: np.ndarray) -> np.ndarray:
    """int64 [loads]: the task each load serves under the instance's ``load_timing`` (the
    first user starting at or after the load's end; under ``overlap`` ending at or after it)."""
    key = end if inst.load_timing == "overlap" else start
    return served_tasks(inst, task_dev, key, ld_block, ld_dev, ld_end)


def overlap_ready_by(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                     end: np.ndarray, ld_block: np.ndarray, ld_dev: np.ndarray,
                     ld_end: np.ndarray) -> np.ndarray:
    """int64 [n]: by when each task needs a load of its block ended under ``overlap``: its end
    for a task some load serves, its start for every other task (a hit)."""
    out = start.copy()
    served = served_tasks(inst, task_dev, end, ld_block, ld_dev, ld_end)
    served = served[served >= 0]
    out[served] = end[served]
    return out


def overlap_violation(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                      end: np.ndarray, cross_edge: np.ndarray, cross_end: np.ndarray,
                      ld_block: np.ndarray, ld_dev: np.ndarray, ld_start: np.ndarray,
                      ld_end: np.ndarray) -> str | None:
    """None when every load serves a task under ``overlap`` (a user ending at or after the
    load's end), starts after that task's inputs arrived and after the device's earlier compute
    events end; else a one-line message naming the first offending load (in the events'
    order), one message per kind: serving no task, before the inputs arrive, during another
    task's compute."""
    if not len(ld_block):
        return None
    served = served_tasks(inst, task_dev, end, ld_block, ld_dev, ld_end)
    names = [d.name for d in inst.devices]

    def head(k: int) -> str:
        return (f"rule 5 (load_timing overlap): load of '{inst.block_ids[ld_block[k]]}' on "
                f"'{names[ld_dev[k]]}' [{ld_start[k]}, {ld_end[k]})")

    bad = np.flatnonzero(served < 0)
    if len(bad):
        k = int(bad[0])
        return (f"{head(k)} serves no task (no use of the block there ends at or after the "
                f"load's end): it ends after its task ends, or is a prefetch")
    arr = arrivals(inst, task_dev, end, cross_edge, cross_end)[served]
    bad = np.flatnonzero(ld_start < arr)
    if len(bad):
        k = int(bad[0])
        return (f"{head(k)} starts before the inputs of task '{inst.task_ids[served[k]]}' it "
                f"serves arrive at {arr[k]}: a prefetched load")
    prev = previous_ends(inst, task_dev, start, end)[served]
    bad = np.flatnonzero(ld_start < prev)
    if not len(bad):
        return None
    k = int(bad[0])
    v = int(served[k])
    d = int(ld_dev[k])
    on_d = np.flatnonzero((task_dev == d) & (start < start[v]) & (end > ld_start[k]))
    w = inst.task_ids[int(on_d[0])] if len(on_d) else "?"
    return (f"{head(k)} runs while task '{w}' computes on '{names[d]}' (until {prev[k]}), "
            f"before task '{inst.task_ids[v]}' it serves: the device is not free")


def at_use_violation(inst: PlacementInstance, task_dev: np.ndarray, start: np.ndarray,
                     end: np.ndarray, cross_edge: np.ndarray, cross_end: np.ndarray,
                     ld_block: np.ndarray, ld_dev: np.ndarray, ld_start: np.ndarray,
                     ld_end: np.ndarray) -> str | None:
    """None when every load serves a task and starts at or after its dispatch; else a
    one-line message naming the first offending load (in the events' order)."""
    if not len(ld_block):
        return None
    served = served_tasks(inst, task_dev, start, ld_block, ld_dev, ld_end)
    names = [d.name for d in inst.devices]
    bad = np.flatnonzero(served < 0)
    if len(bad):
        k = int(bad[0])
        return (f"rule 5 (load_timing at_use): load of '{inst.block_ids[ld_block[k]]}' on "
                f"'{names[ld_dev[k]]}' [{ld_start[k]}, {ld_end[k]}) serves no task (no use "
                f"of the block there after it): a prefetch")
    arr = arrivals(inst, task_dev, end, cross_edge, cross_end)
    prev = previous_ends(inst, task_dev, start, end)
    disp = np.maximum(arr[served], prev[served])
    bad = np.flatnonzero(ld_start < disp)
    if not len(bad):
        return None
    k = int(bad[0])
    v = int(served[k])
    return (f"rule 5 (load_timing at_use): load of '{inst.block_ids[ld_block[k]]}' on "
            f"'{names[ld_dev[k]]}' starts at {ld_start[k]} before task '{inst.task_ids[v]}' "
            f"it serves is dispatched at {disp[k]} (inputs arrived {arr[v]}, device free "
            f"{prev[v]}): a prefetched load")
