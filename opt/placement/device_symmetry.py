"""Interchangeable devices of a P1 instance (problems.md §1.2): groups of devices any schedule
may permute, which the exact models and the certified bound use for symmetry breaking."""

from __future__ import annotations

import numpy as np

from opt.placement.instance import PlacementInstance


def interchangeable_devices(inst: PlacementInstance) -> list[list[int]]:
    """Groups (≥ 2) of devices that any schedule may permute: same class and capacity, same
    cost and load columns, and link matrices invariant under swapping them (symmetry
    breaking in the exact models relies on this)."""
    lat, bw, loads = inst.links.latency, inst.links.bandwidth, inst.load_duration
    nd = inst.n_devices

    def same(a: int, b: int) -> bool:
        da, db = inst.devices[a], inst.devices[b]
        if (da.device_class, da.weight_capacity) != (db.device_class, db.weight_capacity):
            return False
        if not (np.array_equal(inst.cost[:, a], inst.cost[:, b])
                and np.array_equal(loads[:, a], loads[:, b])):
            return False
        perm = np.arange(nd)
        perm[a], perm[b] = b, a
        return bool(np.array_equal(lat, lat[np.ix_(perm, perm)])
                    and np.array_equal(bw, bw[np.ix_(perm, perm)]))

    groups: list[list[int]] = []
    for a in range(nd):
        for g in groups:
            if same(g[0], a):
                g.append(a)
                break
        else:
            groups.append([a])
    return [g for g in groups if len(g) > 1]
