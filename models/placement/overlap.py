"""The ``overlap`` load rule (problems.md §1.2 rule 5) for the exact models: its prefetch
relaxation, used by the bounds of the models.

Under ``load_timing: overlap`` a load of block b on device d serving task v starts at or after
v's dispatch, may run while v computes and ends by v's end: ls + t_load ≤ s_v + p_v; the other
users of b on d start after v's end. So every user of b on d starts at or after
ls + t_load − max_t p_t,d (the maximum over the users t of b that may run on d), and every
overlap schedule of ``inst`` is a ``prefetch`` schedule of :func:`overlap_relaxation` (the same
instance with each load shortened by that maximum, clipped at 0): the loads stay disjoint on
their ports, the computes are unchanged. Bounds of the relaxation (heads, tails, energies,
group bounds) therefore bound every overlap schedule from below. Times in ticks.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from opt.placement.instance import PlacementInstance


def max_user_cost(inst: PlacementInstance) -> np.ndarray:
    """int64 [b, d]: the longest duration on d of a task of block b that may run there (0 when
    none may)."""
    out = np.zeros((len(inst.block_ids), inst.n_devices), dtype=np.int64)
    users = np.flatnonzero(inst.task_block >= 0)
    if len(users):
        np.maximum.at(out, inst.task_block[users], np.maximum(inst.cost[users], 0))
    return out


def shortened_loads(inst: PlacementInstance, loads: np.ndarray) -> np.ndarray:
    """int64 [b, d]: ``loads`` (one format's load durations, −1 = not loadable) less the
    longest user duration on each device (:func:`max_user_cost`), clipped at 0."""
    out = np.where(loads >= 0, np.maximum(loads - max_user_cost(inst), 0), loads)
    out.setflags(write=False)
    return out


def overlap_relaxation(inst: PlacementInstance) -> PlacementInstance:
    """``inst`` as a ``prefetch`` instance whose loads are shortened by their longest user
    (:func:`shortened_loads`, every format): a relaxation of ``inst`` under ``overlap`` (module
    docstring); ``inst`` itself under the other rules."""
    if inst.load_timing != "overlap":
        return inst
    loads = {f: shortened_loads(inst, np.asarray(a)) for f, a in inst.block_load.items()}
    return dataclasses.replace(inst, block_load=loads, load_timing="prefetch")
