"""The relaxation that carries the P1 lower bounds to ``load_timing: overlap``
(docs/lower_bounds.md "Bounds under overlap"; problems.md §1.2 rule 5).

Under ``overlap`` a load may end as late as its task's end, so a bound proven for ``prefetch``
(where it ends by the task's start) does not hold as it stands. Every overlap schedule of an
instance I maps to a schedule of the same makespan of :func:`bound_instance` (I): the
``prefetch`` instance with capacities dropped and each load of block b onto device d shortened
to ``max(0, load − P(b, d))``, P(b, d) the longest duration on d of b's users legal there
(:func:`hidden_load`); the bounds computed on it therefore bound I. Durations in ticks.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from opt.placement.instance import PlacementInstance

#: cached graph properties that the relaxed instance shares with the original (same tasks and
#: edges; :class:`PlacementInstance` is immutable)
_SHARED = ("predecessors", "successors", "topological_order", "legal", "task_index",
           "device_index", "block_index")


def hidden_load(inst: PlacementInstance) -> np.ndarray:
    """int64 [blocks, devices]: P(b, d), the longest duration on d of a task using b that may
    run on d (0 when none may): the part of a load onto d that its task's computation can
    hide under ``overlap``."""
    nb, nd = len(inst.block_ids), inst.n_devices
    out = np.zeros((nb, nd), dtype=np.int64)
    users = np.flatnonzero(inst.task_block >= 0)
    if len(users) and nb:
        np.maximum.at(out, inst.task_block[users], np.maximum(inst.cost[users], 0))
    return out


def shortened_loads(inst: PlacementInstance) -> dict[str, np.ndarray]:
    """Each format's load table with every legal load (≥ 0) cut to max(0, load − P(b, d))
    (:func:`hidden_load`); −1 (not loadable) stays."""
    hidden = hidden_load(inst)
    return {fmt: np.where(a >= 0, np.maximum(a - hidden, 0), a).astype(np.int64)
            for fmt, a in inst.block_load.items()}


def bound_instance(inst: PlacementInstance) -> PlacementInstance:
    """``inst`` itself unless its ``load_timing`` is ``overlap``; then the ``prefetch``
    instance with unlimited capacities and the loads of :func:`shortened_loads`, whose every
    valid schedule's makespan bound is one for ``inst`` (docs/lower_bounds.md)."""
    if inst.load_timing != "overlap":
        return inst
    devices = tuple(dataclasses.replace(d, weight_capacity=None) for d in inst.devices)
    out = dataclasses.replace(inst, devices=devices, block_load=shortened_loads(inst),
                              load_timing="prefetch")
    for name in _SHARED:
        if name in inst.__dict__:
            out.__dict__[name] = inst.__dict__[name]
    return out
