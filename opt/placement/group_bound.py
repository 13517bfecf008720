"""Energy bounds over groups of identical devices (P1, problems.md §1.2).

A *group* is a set of ≥ 2 devices with identical cost columns; a task whose legal devices are
exactly the group (a *member*) runs on one of them with the same duration whatever the choice,
so the members are a P|prec|Cmax subproblem on ``m = |group|`` machines. Transfers, loads and
capacities only delay tasks, so every bound below — derived from the members' computation
alone with heads and tails that are themselves valid — holds for every schedule of the full
P1 semantics. All times in ticks.

- **Lifted heads** (Fernandez–Bussell style): the member ancestors of a task t with head ≥ h
  all run in [h, S_t) on m machines, so S_t ≥ h + ⌈W/m⌉; symmetrically for tails (the time
  after a task's end until the makespan) with member descendants.
- **Head–tail energy** (Jackson-preemptive relaxation of P|r_j,q_j|Cmax): for thresholds a, b
  the members with head ≥ a and tail ≥ b run in [a, Cmax − b], so
  Cmax ≥ a + ⌈W/m⌉ + b.
- **Energetic reasoning** (Baptiste, Le Pape, Nuijten, *Constraint-Based Scheduling*, 2001,
  §3.3): for a candidate makespan C each member j must run in [r_j, C − q_j]; its minimal
  intersection with a window [t1, t2) is max(0, min(t2−t1, p_j, r_j+p_j−t1, t2−C+q_j+p_j)),
  and the sum over members exceeding m·(t2−t1) for some window proves C infeasible. The bound
  is the smallest C that passes (the test is monotone in C).

Pure numpy; the callers (the exact models) turn the results into constraints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.lower_bounds import heads_tails

#: tasks above which ancestor sets (n² booleans) are not built: no lifted heads/tails
MAX_TASKS_LIFT = 3000
#: members above which the O(k³) energetic test is skipped
MAX_MEMBERS_ENERGETIC = 150


@dataclass(frozen=True)
class GroupBounds:
    """Lifted heads (earliest starts) and tails (time after the end until the makespan) of
    every task, the makespan bound and what each part gave (``parts``: name → ticks)."""

    head: np.ndarray
    tail: np.ndarray
    cmax_lb: int
    groups: list[list[int]]
    parts: dict[str, int] = field(default_factory=dict)


def identical_groups(cost: np.ndarray) -> list[list[int]]:
    """Groups (≥ 2 devices) of devices with identical cost columns."""
    groups: dict[bytes, list[int]] = {}
    for d in range(cost.shape[1]):
        groups.setdefault(np.ascontiguousarray(cost[:, d]).tobytes(), []).append(d)
    return [g for g in groups.values() if len(g) > 1]


def group_members(cost: np.ndarray, group: list[int]) -> np.ndarray:
    """int [k]: tasks whose legal devices are exactly ``group`` (and positive duration)."""
    legal = cost >= 0
    inside = np.zeros(cost.shape[1], dtype=bool)
    inside[group] = True
    only = legal[:, inside].all(axis=1) & ~legal[:, ~inside].any(axis=1)
    return np.flatnonzero(only & (cost[:, group[0]] > 0))


def _ancestors(inst: PlacementInstance) -> np.ndarray:
    """bool [n, n]: anc[t, a] iff a is a strict ancestor of t."""
    n = inst.n_tasks
    anc = np.zeros((n, n), dtype=bool)
    p_off, p_idx = inst.predecessors
    preds = inst.edge_src[p_idx]
    for t in inst.topological_order.tolist():
        for q in preds[p_off[t]:p_off[t + 1]].tolist():
            anc[t] |= anc[q]
            anc[t, q] = True
    return anc


def _lift(value: np.ndarray, work: np.ndarray, m: int) -> int:
    """max over thresholds h of h + ⌈(work of the related members with value ≥ h) / m⌉."""
    if not len(value):
        return 0
    order = np.argsort(-value, kind="stable")
    cum = np.cumsum(work[order])
    return int((value[order] + -(-cum // m)).max())


def _propagate(inst: PlacementInstance, head: np.ndarray, tail: np.ndarray, pmin: np.ndarray,
               anc: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray, int]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """One forward pass (heads) and one backward pass (tails) combining the DAG recurrences
    with the lifts of every group; ``groups``: (members mask, member durations, m)."""
    head, tail = head.copy(), tail.copy()
    p_off, p_idx = inst.predecessors
    s_off, s_idx = inst.successors
    preds, succs = inst.edge_src[p_idx], inst.edge_dst[s_idx]
    order = inst.topological_order.tolist()
    for t in order:
        ps = preds[p_off[t]:p_off[t + 1]]
        if len(ps):
            head[t] = max(head[t], int((head[ps] + pmin[ps]).max()))
        for mask, dur, m in groups:
            rel = np.flatnonzero(anc[t] & mask)
            if len(rel):
                head[t] = max(head[t], _lift(head[rel], dur[rel], m))
    for t in reversed(order):
        ss = succs[s_off[t]:s_off[t + 1]]
        if len(ss):
            tail[t] = max(tail[t], int((tail[ss] + pmin[ss]).max()))
        for mask, dur, m in groups:
            rel = np.flatnonzero(anc[:, t] & mask)
            if len(rel):
                tail[t] = max(tail[t], _lift(tail[rel], dur[rel], m))
    return head, tail


def head_tail_energy(head: np.ndarray, tail: np.ndarray, dur: np.ndarray, m: int) -> int:
    """max over thresholds (a, b) of a + ⌈W(head ≥ a, tail ≥ b) / m⌉ + b (members only)."""
    best = 0
    for a in np.unique(head).tolist():
        sel = head >= a
        q, w = tail[sel], dur[sel]
        order = np.argsort(-q, kind="stable")
        cum = np.cumsum(w[order])
        best = max(best, int((a + q[order] + -(-cum // m)).max()))
    return best


def energetic_feasible(head: np.ndarray, tail: np.ndarray, dur: np.ndarray, m: int,
                       cmax: int) -> bool:
    """Whether the energetic test of the members (heads, tails, durations) on m machines
    passes for makespan ``cmax`` (False proves no schedule has makespan ≤ cmax)."""
    r, p = head.astype(np.int64), dur.astype(np.int64)
    d = cmax - tail.astype(np.int64)
    if (r + p > d).any():
        return False
    t1s = np.unique(np.concatenate([r, r + p, d - p]))
    t2s = np.unique(np.concatenate([d, r + p, d - p]))
    for t1 in t1s.tolist():
        t2 = t2s[t2s > t1]
        if not len(t2):
            continue
        length = t2[:, None] - t1
        inter = np.minimum(np.minimum(length, p[None, :]),
                           np.minimum((r + p - t1)[None, :], t2[:, None] - d[None, :] + p))
        need = np.clip(inter, 0, None).sum(axis=1)
        if (need > m * (t2 - t1)).any():
            return False
    return True


def energetic_bound(head: np.ndarray, tail: np.ndarray, dur: np.ndarray, m: int,
                    lo: int) -> int:
    """The smallest makespan ≥ ``lo`` that passes :func:`energetic_feasible` (binary search
    up to the serial makespan of the members after the latest head, which always passes)."""
    hi = max(lo, int(head.max(initial=0) + dur.sum() + tail.max(initial=0)))
    if energetic_feasible(head, tail, dur, m, lo):
        return lo
    lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        if energetic_feasible(head, tail, dur, m, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def group_bounds(inst: PlacementInstance, head: np.ndarray, tail: np.ndarray,
                 energetic: bool = True) -> GroupBounds | None:
    """Lifted heads and tails and the makespan bound of the identical-device groups of
    ``inst``, from valid ``head`` (earliest starts) and ``tail`` (time after each task's end
    until the makespan, cheapest durations); None when there is no group (or the instance
    is too large for ancestor sets)."""
    cost = inst.cost
    groups = [g for g in identical_groups(cost) if len(group_members(cost, g))]
    if not groups or inst.n_tasks > MAX_TASKS_LIFT:
        return None
    pmin = np.where(cost >= 0, cost, np.iinfo(np.int64).max).min(axis=1)
    anc = _ancestors(inst)
    spec = []
    for g in groups:
        mask = np.zeros(inst.n_tasks, dtype=bool)
        mask[group_members(cost, g)] = True
        spec.append((mask, cost[:, g[0]].clip(0), len(g)))
    h, q = _propagate(inst, np.asarray(head, np.int64), np.asarray(tail, np.int64), pmin, anc,
                      spec)
    parts = {"critical_path": int((h + pmin + q).max(initial=0))}
    lb = parts["critical_path"]
    for k, (mask, dur, m) in enumerate(spec):
        idx = np.flatnonzero(mask)
        ht = head_tail_energy(h[idx], q[idx], dur[idx], m)
        parts[f"head_tail_energy[{k}]"] = ht
        lb = max(lb, ht)
        if energetic and len(idx) <= MAX_MEMBERS_ENERGETIC:
            en = energetic_bound(h[idx], q[idx], dur[idx], m, lb)
            parts[f"energetic[{k}]"] = en
            lb = max(lb, en)
    return GroupBounds(head=h, tail=q, cmax_lb=int(lb), groups=groups, parts=parts)


def trivial_bound(inst: PlacementInstance) -> int:
    """max(critical path, ⌈cheapest work / devices⌉) with cheapest durations (ticks)."""
    pmin = np.where(inst.cost >= 0, inst.cost, np.iinfo(np.int64).max).min(axis=1)
    head, tail = heads_tails(inst)
    return int(max((head + tail).max(initial=0), math.ceil(pmin.sum() / inst.n_devices)))
