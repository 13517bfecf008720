"""A hand-made P1 schedule whose utilisation figures can be computed by hand (the plot and
utilisation tests share it)."""

from __future__ import annotations

from opt.placement.io import instance_from_dict


def hand_made():
    """NPU0 + PIM0 + PIM1, four independent tasks (no edges, no blocks):
    NPU0 runs a [0, 10) and b [20, 30); PIM0 runs c [5, 25); PIM1 runs d [22, 40).
    makespan 40; NPU busy 20; PIM busy ∪[5, 25) ∪ [22, 40) = [5, 40) = 35;
    both busy: [5, 10) + [20, 30) = 15 → co-utilisation 15/40 = 0.375; NPU only 5/40,
    PIM only 20/40, idle 0."""
    devices = [{"name": "NPU0", "class": "npu", "weight_capacity": None},
               {"name": "PIM0", "class": "pim", "weight_capacity": None},
               {"name": "PIM1", "class": "pim", "weight_capacity": None}]
    costs = {"a": 10, "b": 10, "c": 20, "d": 18}
    tasks = [{"id": t, "cost": {"NPU0": c, "PIM0": c, "PIM1": c}, "block": None}
             for t, c in costs.items()]
    inst = instance_from_dict({"schema": 1, "problem": "placement", "time_unit": "us",
                               "devices": devices,
                               "links": {"topology": "full", "contention": True,
                                         "default": {"latency": 0, "bandwidth": 1.0},
                                         "pairs": []},
                               "tasks": tasks, "edges": [], "blocks": [],
                               "layout": {"default": "linear"}, "meta": {}})
    events = [("a", "NPU0", 0), ("b", "NPU0", 20), ("c", "PIM0", 5), ("d", "PIM1", 22)]
    sol = {"compute": [{"task": t, "device": d, "start": s, "end": s + costs[t]}
                       for t, d, s in events]}
    return inst, sol
