"""Turn a solver's decisions into the problems.md §1.2a solution (shared by every P1 method).

Solvers decide a device and start per task, a start per cross-device edge transfer, and the
start of each (block, device) load; durations always come from the instance, so every method
reports events with the same integer lengths. The solution is a
:class:`~opt.placement.solution_tables.ColumnarSolution`: numpy columns that read as the §1.2a
dict (event dicts built on first access).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.solution_tables import ColumnarSolution, ComputeColumns, TransferColumns


def compute_end(solution: Mapping) -> int:
    """The latest end of ``solution``'s compute events (0 when there are none), read from the
    columns of a :class:`ColumnarSolution` whose rows were not built (building ~10⁶ event dicts
    to take a maximum cost WLA gigabytes at full size), else from the rows."""
    if isinstance(solution, ColumnarSolution) and not solution.rows_built:
        return int(solution.end.max()) if len(solution.end) else 0
    return max((int(c["end"]) for c in solution["compute"]), default=0)


def make_solution(inst: PlacementInstance, task_device: Sequence[int], task_start: Sequence[int],
                  transfer_start: Mapping[int, int] | np.ndarray,
                  loads: Iterable[tuple[int, int, int]] = (),
                  evictions: Iterable[tuple[int, int, int]] = (),
                  formats: Mapping[str, str] | None = None) -> ColumnarSolution:
    """The solution of these decisions, as columns that read as the §1.2a dict.

    task_device/task_start: per task index; transfer_start: edge index → start for every edge
    whose endpoints run on different devices, or an int64 array over all edges with −1 where
    there is no transfer; loads: (block, device, start); evictions: (block, device, time);
    formats: block id → format (P2; default the instance's P1 formats). Times are in the
    instance's unit; every end is start + the instance's duration.
    """
    names = [d.name for d in inst.devices]
    dev = np.asarray(task_device, dtype=np.int64)
    st = np.asarray(task_start, dtype=np.int64)
    dur = inst.cost[np.arange(inst.n_tasks), dev]
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
    e, ts = _transfer_columns(inst, transfer_start)
    u, v = inst.edge_src[e], inst.edge_dst[e]
    f, t = dev[u], dev[v]
    return ColumnarSolution(
        names, ComputeColumns(inst.task_ids, dev, st, st + dur),
        TransferColumns(u, v, f, t, ts, ts + _transfer_durations(inst, e, f, t)), load_events,
        [{"block": inst.block_ids[b], "device": names[d], "time": int(tm)}
         for b, d, tm in evictions],
        {bid: fmt_of[i] for i, bid in enumerate(inst.block_ids)})


def _transfer_columns(inst: PlacementInstance, transfer_start: Mapping[int, int] | np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(edge indices in increasing order, their transfer starts) from either form of
    ``transfer_start``."""
    if isinstance(transfer_start, np.ndarray):
        ts = np.asarray(transfer_start, dtype=np.int64)
        if ts.shape != (inst.n_edges,):
            raise ValueError(f"transfer_start: expected {inst.n_edges} entries (one per edge), "
                             f"got shape {ts.shape}")
        e = np.flatnonzero(ts >= 0)
        return e, ts[e]
    e = np.fromiter(transfer_start, dtype=np.int64, count=len(transfer_start))
    s = np.fromiter(transfer_start.values(), dtype=np.int64, count=len(e))
    order = np.argsort(e, kind="stable")
    return e[order], s[order]


def _transfer_durations(inst: PlacementInstance, e: np.ndarray, f: np.ndarray, t: np.ndarray
                        ) -> np.ndarray:
    """Durations of transfers of edges ``e`` from devices ``f`` to ``t``, as
    :meth:`Links.transfer` (vectorised: latency + ceil(bytes / bandwidth), 0 on one device)."""
    links = inst.links
    dur = links.latency[f, t] + np.ceil(inst.edge_bytes[e] / links.bandwidth[f, t]).astype(
        np.int64)
    dur[f == t] = 0
    return dur

