"""Turn a solver's decisions into the problems.md §1.2a solution dict (shared by every P1 method).

Solvers decide a device and start per task, a start per cross-device edge transfer, and the
start of each (block, device) load; durations always come from the instance, so every method
reports events with the same integer lengths.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from opt.placement.instance import PlacementInstance


def make_solution(inst: PlacementInstance, task_device: Sequence[int], task_start: Sequence[int],
                  transfer_start: Mapping[int, int],
                  loads: Iterable[tuple[int, int, int]] = (),
                  evictions: Iterable[tuple[int, int, int]] = (),
                  formats: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Solution dict from decisions.

    task_device/task_start: per task index; transfer_start: edge index → start, for every edge
    whose endpoints run on different devices; loads: (block, device, start); evictions:
    (block, device, time); formats: block id → format (P2; default the instance's P1 formats).
    """
    names = [d.name for d in inst.devices]
    ids = inst.task_ids
    dev = np.asarray(task_device, dtype=np.int64)
    st = np.asarray(task_start, dtype=np.int64)
    dur = inst.cost[np.arange(inst.n_tasks), dev]
    dev_names = [names[d] for d in dev.tolist()]
    compute = [{"task": tid, "device": dn, "start": s, "end": e}
               for tid, dn, s, e in zip(ids, dev_names, st.tolist(), (st + dur).tolist())]
    fmt_of = list(inst.block_format)
    if formats:
        for bid, fmt in formats.items():
            fmt_of[inst.block_index[bid]] = fmt
    load_events = []
    for b, d, s in loads:
        fmt = fmt_of[b]
        dur_l = int(inst.block_load[fmt][b, d])
        load_events.append({"block": inst.block_ids[b], "device": names[d], "format": fmt,
                            "start": int(s), "end": int(s) + dur_l})
    return {
        "assignment": dict(zip(ids, dev_names)),
        "compute": compute,
        "transfers": _transfer_events(inst, dev, transfer_start, names),
        "loads": load_events,
        "evictions": [{"block": inst.block_ids[b], "device": names[d], "time": int(t)}
                      for b, d, t in evictions],
        "formats": {bid: fmt_of[i] for i, bid in enumerate(inst.block_ids)},
    }


def _transfer_events(inst: PlacementInstance, dev: np.ndarray,
                     transfer_start: Mapping[int, int], names: list[str]) -> list[dict[str, Any]]:
    """The transfer events in edge order; durations as :meth:`Links.transfer` (vectorised:
    latency + ceil(bytes / bandwidth), 0 on one device)."""
    if not transfer_start:
        return []
    e = np.fromiter(transfer_start, dtype=np.int64, count=len(transfer_start))
    s = np.fromiter(transfer_start.values(), dtype=np.int64, count=len(e))
    order = np.argsort(e, kind="stable")
    e, s = e[order], s[order]
    u, v = inst.edge_src[e], inst.edge_dst[e]
    f, t = dev[u], dev[v]
    links = inst.links
    dur = links.latency[f, t] + np.ceil(inst.edge_bytes[e] / links.bandwidth[f, t]).astype(
        np.int64)
    dur[f == t] = 0
    ids = inst.task_ids
    return [{"src": ids[a], "dst": ids[b], "from": names[x], "to": names[y], "start": s0,
             "end": s0 + d0}
            for a, b, x, y, s0, d0 in zip(u.tolist(), v.tolist(), f.tolist(), t.tolist(),
                                          s.tolist(), dur.tolist())]


def cross_edges(inst: PlacementInstance, task_device: Sequence[int]) -> np.ndarray:
    """Indices of edges whose endpoints run on different devices."""
    dev = np.asarray(task_device, dtype=np.int64)
    return np.flatnonzero(dev[inst.edge_src] != dev[inst.edge_dst])
