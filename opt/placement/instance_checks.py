"""Construction of P1 instances with validation, shared by the JSON reader and the builders
(problems.md §1.1, §1.2a): the link matrices from a default and per-pair overrides, and
:func:`build_instance`, which checks columnar data (names, costs, layout, blocks, edges and the
limits of :mod:`opt.placement.instance`) and freezes it into a
:class:`~opt.placement.instance.PlacementInstance`. Errors name the offending task, edge,
block or device (and the file when ``source`` is set)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.units import TIME_UNITS
from opt.placement.instance import (
    DEVICE_CLASSES,
    LAYOUT_FORMATS,
    LOAD_TIMINGS,
    MAX_BYTES,
    MAX_HORIZON,
    MAX_TICKS,
    Device,
    Layout,
    Links,
    PlacementInstance,
    frozen,
)


def make_links(devices: Sequence[Device], topology: str = "full", contention: bool = True,
               latency: int = 0, bandwidth: float = 1.0,
               pairs: Sequence[tuple[str, str, int, float]] = (), source: str | None = None
               ) -> Links:
    """Build the [d, d] link matrices from a default and per-ordered-pair overrides."""
    if topology not in ("full", "star"):
        raise InputError(f"unknown topology '{topology}'; known: full, star", source=source,
                         field="links.topology")
    if latency < 0 or not bandwidth > 0:
        raise InputError(f"need latency ≥ 0 and bandwidth > 0, got {latency}, {bandwidth}",
                         source=source, field="links.default")
    d = len(devices)
    lat = np.full((d, d), int(latency), dtype=np.int64)
    bw = np.full((d, d), float(bandwidth), dtype=np.float64)
    index = {dev.name: i for i, dev in enumerate(devices)}
    for k, (s, t, la, b) in enumerate(pairs):
        for end in (s, t):
            if end not in index:
                raise InputError(f"unknown device '{end}'", source=source,
                                 field=f"links.pairs[{k}]")
        if la < 0 or not b > 0:
            raise InputError(f"need latency ≥ 0 and bandwidth > 0, got {la}, {b}",
                             source=source, field=f"links.pairs[{k}]")
        lat[index[s], index[t]] = la
        bw[index[s], index[t]] = b
    np.fill_diagonal(lat, 0)
    return Links(topology, contention, int(latency), float(bandwidth), tuple(pairs),
                 frozen(lat), frozen(bw))


@dataclass(frozen=True)
class TaskColumns:
    """The tasks of an instance: ids, durations [n, D] (ticks, −1 = illegal on that device)
    and the optional labels of built instances: kind, phase (0 prefill, 1 decode), step,
    layer and shard per task (None = absent)."""

    ids: Sequence[str]
    cost: Any
    kind: Sequence[str | None] | None = None
    phase: Any = None
    step: Any = None
    layer: Any = None
    shard: Any = None


@dataclass(frozen=True)
class EdgeColumns:
    """The edges of an instance: source and destination task indices and the bytes each
    moves (one entry per edge)."""

    src: Any = ()
    dst: Any = ()
    nbytes: Any = ()


@dataclass(frozen=True)
class BlockColumns:
    """The weight blocks of an instance: ids, bytes, load durations per format [B, D] (ticks,
    −1 = not loadable there), each task's block index (−1 = none; None: no task has one) and
    the layout (formats, fixed formats, memory budget; None: the default layout)."""

    ids: Sequence[str] = ()
    nbytes: Any = ()
    load: Mapping[str, Any] | None = None
    task_block: Any = None
    layout: Layout | None = None


def build_instance(*, time_unit: str, devices: Sequence[Device], links: Links,
                   tasks: TaskColumns, edges: EdgeColumns = EdgeColumns(),
                   blocks: BlockColumns = BlockColumns(), meta: Mapping[str, Any] | None = None,
                   source: str | None = None, check_acyclic: bool = True,
                   load_timing: str = "prefetch") -> PlacementInstance:
    """Validate columnar data and freeze it into a :class:`PlacementInstance`.

    Errors name the offending task, edge, block or device (and the file when ``source`` is set).
    """
    task_ids, kind = tasks.ids, tasks.kind
    block_ids = blocks.ids
    n, d = len(task_ids), len(devices)

    def err(msg: str, fld: str) -> InputError:
        return InputError(msg, source=source, field=fld)

    names = _check_names(time_unit, devices, task_ids, err)
    if load_timing not in LOAD_TIMINGS:
        raise err(f"unknown load_timing '{load_timing}'; known: {', '.join(LOAD_TIMINGS)}",
                  "load_timing")
    cost = _check_costs(_int64(tasks.cost, "tasks.cost", err), task_ids, names, err)
    task_block = (np.full(n, -1, dtype=np.int64) if blocks.task_block is None
                  else np.asarray(blocks.task_block, dtype=np.int64))
    block_bytes = _block_bytes(block_ids, blocks.nbytes, err)
    layout = blocks.layout or Layout()
    _check_layout(layout, err)
    block_load = {f: _int64(a, "blocks.load", err).reshape(len(block_ids), d)
                  for f, a in (blocks.load or {}).items()}
    _check_block_loads(layout, block_ids, block_load, names, err)
    _check_task_blocks(cost, task_block, task_ids, block_ids, block_load, layout, names, err)
    edge_src = np.asarray(edges.src, dtype=np.int64)
    edge_dst = np.asarray(edges.dst, dtype=np.int64)
    edge_bytes = _int64(edges.nbytes, "edges.bytes", err)
    _check_edges(edge_src, edge_dst, edge_bytes, task_ids, err)
    _check_magnitudes(cost, block_ids, block_bytes, block_load, edge_bytes, devices, links,
                      layout, err)

    def opt_arr(a, dtype):
        return None if a is None else frozen(np.asarray(a, dtype=dtype).reshape(n))

    _check_device_classes(devices, err)
    inst = PlacementInstance(
        time_unit=time_unit, devices=tuple(devices), links=links, task_ids=tuple(task_ids),
        cost=frozen(cost), task_block=frozen(task_block), edge_src=frozen(edge_src),
        edge_dst=frozen(edge_dst), edge_bytes=frozen(edge_bytes), block_ids=tuple(block_ids),
        block_bytes=frozen(block_bytes),
        block_load={f: frozen(a) for f, a in block_load.items()}, layout=layout,
        kind=tuple(kind) if kind is not None else (), phase=opt_arr(tasks.phase, np.int8),
        step=opt_arr(tasks.step, np.int64), layer=opt_arr(tasks.layer, np.int64),
        shard=opt_arr(tasks.shard, np.int64), meta=dict(meta or {}), source=source,
        load_timing=load_timing)
    if check_acyclic:
        inst.topological_order  # noqa: B018 — raises on a cycle
    return inst


_Err = Callable[[str, str], InputError]


def _check_names(time_unit: str, devices: Sequence[Device], task_ids: Sequence[str],
                 err: _Err) -> list[str]:
    """The time unit is known, there is a device, device names and task ids are unique."""
    d = len(devices)
    if time_unit not in TIME_UNITS:
        raise err(f"unknown time_unit '{time_unit}'; known: {', '.join(TIME_UNITS)}", "time_unit")
    if d == 0:
        raise err("an instance needs at least one device", "devices")
    names = [x.name for x in devices]
    if len(set(names)) != d:
        dup = next(x for x in names if names.count(x) > 1)
        raise err(f"duplicate device name '{dup}'", "devices")
    if not task_ids:
        raise err("an instance needs at least one task (an empty task graph has nothing to "
                  "schedule)", "tasks")
    if len(set(task_ids)) != len(task_ids):
        seen: set[str] = set()
        dup = next(t for t in task_ids if t in seen or seen.add(t))
        raise err(f"duplicate task id '{dup}'", "tasks")
    return names


def _block_bytes(block_ids: Sequence[str], block_bytes: Any, err: _Err) -> np.ndarray:
    """The blocks' bytes as int64 [B] once block ids are unique and no bytes are negative."""
    nb = len(block_ids)
    if len(set(block_ids)) != nb:
        raise err("duplicate block id", "blocks")
    out = _int64(block_bytes, "blocks.bytes", err).reshape(nb)
    if (out < 0).any():
        b = int(np.flatnonzero(out < 0)[0])
        raise err(f"block '{block_ids[b]}' has negative bytes", f"blocks[{b}].bytes")
    return out


def _check_device_classes(devices: Sequence[Device], err: _Err) -> None:
    """Every device's class is one of DEVICE_CLASSES."""
    for dev in devices:
        if dev.device_class not in DEVICE_CLASSES:
            raise err(f"device '{dev.name}' has unknown class '{dev.device_class}'; known: "
                      f"{', '.join(DEVICE_CLASSES)}", "devices")


def _check_costs(cost: np.ndarray, task_ids: Sequence[str], names: list[str], err: _Err
                 ) -> np.ndarray:
    """The [n, d] cost matrix: durations ≥ 0 or −1 (illegal), every task with a legal device."""
    cost = np.asarray(cost, dtype=np.int64).reshape(len(task_ids), len(names))
    if (cost < -1).any():
        t, dv = map(int, np.argwhere(cost < -1)[0])
        raise err(f"task '{task_ids[t]}' has negative duration {int(cost[t, dv])} on "
                  f"'{names[dv]}'", f"tasks[{t}].cost")
    no_dev = np.flatnonzero((cost < 0).all(axis=1))
    if len(no_dev):
        raise err(f"task '{task_ids[no_dev[0]]}' has no legal device", f"tasks[{no_dev[0]}].cost")
    return cost


def _check_layout(layout: Layout, err: _Err) -> None:
    """Known formats, a default among them, fixed blocks in offered formats."""
    for fmt in layout.formats:
        if fmt not in LAYOUT_FORMATS:
            raise err(f"unknown format '{fmt}'; known: {', '.join(LAYOUT_FORMATS)}",
                      "layout.formats")
    if layout.default not in layout.formats:
        raise err(f"default format '{layout.default}' is not in formats", "layout.default")
    for bid, fmt in layout.fixed.items():
        if fmt not in layout.formats:
            raise err(f"block '{bid}' fixed to unknown format '{fmt}'", "layout.fixed")


def _check_block_loads(layout: Layout, block_ids: Sequence[str],
                       block_load: dict[str, np.ndarray], names: list[str], err: _Err) -> None:
    """Load durations only for offered formats and ≥ −1; fixed blocks that exist."""
    for fmt, arr in block_load.items():
        if fmt not in layout.formats:
            raise err(f"load durations given for format '{fmt}' not in layout.formats",
                      "blocks.load")
        if (arr < -1).any():
            b, dv = map(int, np.argwhere(arr < -1)[0])
            raise err(f"block '{block_ids[b]}' has negative load duration on '{names[dv]}'",
                      f"blocks[{b}].load")
    index_b = {b: i for i, b in enumerate(block_ids)}
    for bid in layout.fixed:
        if bid not in index_b:
            raise err(f"unknown block '{bid}'", "layout.fixed")


def _check_task_blocks(cost: np.ndarray, task_block: np.ndarray, task_ids: Sequence[str],
                       block_ids: Sequence[str], block_load: dict[str, np.ndarray],
                       layout: Layout, names: list[str], err: _Err) -> None:
    """Task blocks in range, and every legal device of a blocked task can load the block in
    its P1 format."""
    nb, d = len(block_ids), len(names)
    if (task_block >= nb).any() or (task_block < -1).any():
        raise err("task block index out of range", "tasks")
    has_block = np.flatnonzero(task_block >= 0)
    if len(has_block):
        fmts = [layout.format_of(b) for b in block_ids]
        load_p1 = np.full((nb, d), -1, dtype=np.int64)
        for b, fmt in enumerate(fmts):
            if fmt in block_load:
                load_p1[b] = block_load[fmt][b]
        bad = (cost[has_block] >= 0) & (load_p1[task_block[has_block]] < 0)
        if bad.any():
            r, dv = map(int, np.argwhere(bad)[0])
            t = int(has_block[r])
            raise err(f"task '{task_ids[t]}' may run on '{names[dv]}' but its block "
                      f"'{block_ids[task_block[t]]}' has no load there in format "
                      f"'{fmts[task_block[t]]}'", f"tasks[{t}].block")


def _check_edges(edge_src: np.ndarray, edge_dst: np.ndarray, edge_bytes: np.ndarray,
                 task_ids: Sequence[str], err: _Err) -> None:
    """Edge bytes ≥ 0, no self-loops, no duplicate edges."""
    n = len(task_ids)
    if (edge_bytes < 0).any():
        e = int(np.flatnonzero(edge_bytes < 0)[0])
        raise err(f"edge {task_ids[edge_src[e]]}->{task_ids[edge_dst[e]]} has negative bytes",
                  f"edges[{e}].bytes")
    loops = np.flatnonzero(edge_src == edge_dst)
    if len(loops):
        raise err(f"self-loop on task '{task_ids[edge_src[loops[0]]]}'", f"edges[{loops[0]}]")
    if len(edge_src):
        key = edge_src * n + edge_dst
        uniq, counts = np.unique(key, return_counts=True)
        if (counts > 1).any():
            k = int(uniq[counts > 1][0])
            raise err(f"duplicate edge {task_ids[k // n]}->{task_ids[k % n]}", "edges")


def _int64(values: Any, what: str, err: _Err) -> np.ndarray:
    """``values`` as an int64 array; a value beyond int64 gives an InputError naming ``what``."""
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        big = max(np.asarray(values, dtype=object).ravel().tolist(), key=abs)
        limit = MAX_BYTES if what.endswith("bytes") else MAX_TICKS
        raise err(f"value {big} exceeds the maximum {limit}", what) from None


def _first_above(a: np.ndarray, limit: int) -> tuple[int, ...] | None:
    """Index of the first entry of ``a`` above ``limit`` (None when there is none)."""
    over = np.argwhere(a > limit)
    return tuple(int(i) for i in over[0]) if len(over) else None


def _check_magnitudes(cost: np.ndarray, block_ids: Sequence[str], block_bytes: np.ndarray,
                      block_load: Mapping[str, np.ndarray], edge_bytes: np.ndarray,
                      devices: Sequence[Device], links: Links, layout: Layout, err: _Err
                      ) -> None:
    """The limits of the module docstring: values ≤ MAX_TICKS / MAX_BYTES, the blocks' total
    ≤ MAX_BYTES and the serial horizon ≤ MAX_HORIZON (sums in float64: no overflow)."""
    names = [dv.name for dv in devices]
    if (at := _first_above(cost, MAX_TICKS)) is not None:
        raise err(f"duration {int(cost[at])} on '{names[at[1]]}' exceeds the maximum "
                  f"{MAX_TICKS} ticks (use a coarser time_unit)", f"tasks[{at[0]}].cost")
    for fmt, arr in block_load.items():
        if (at := _first_above(arr, MAX_TICKS)) is not None:
            raise err(f"load duration {int(arr[at])} ({fmt}) on '{names[at[1]]}' exceeds the "
                      f"maximum {MAX_TICKS} ticks", f"blocks[{at[0]}].load")
    if (at := _first_above(links.latency, MAX_TICKS)) is not None:
        raise err(f"latency {int(links.latency[at])} exceeds the maximum {MAX_TICKS} ticks",
                  "links")
    for what, arr in (("edges", edge_bytes), ("blocks", block_bytes)):
        if (at := _first_above(arr, MAX_BYTES)) is not None:
            raise err(f"{int(arr[at])} bytes exceed the maximum {MAX_BYTES}",
                      f"{what}[{at[0]}].bytes")
    for k, dv in enumerate(devices):
        if dv.weight_capacity is not None and not 0 <= dv.weight_capacity <= MAX_BYTES:
            raise err(f"weight_capacity {dv.weight_capacity} of '{dv.name}' is outside "
                      f"0..{MAX_BYTES} bytes", f"devices[{k}].weight_capacity")
    budget = layout.memory_budget
    if budget is not None and not 0 <= budget <= MAX_BYTES:
        raise err(f"memory_budget {budget} is outside 0..{MAX_BYTES} bytes",
                  "layout.memory_budget")
    if float(block_bytes.sum(dtype=np.float64)) > MAX_BYTES:
        raise err(f"the blocks' bytes add up to {float(block_bytes.sum(dtype=np.float64)):.4g}, "
                  f"above the maximum {MAX_BYTES}", "blocks")
    horizon = serial_horizon(cost, block_load, edge_bytes, links)
    if horizon > MAX_HORIZON:
        raise err(f"the serial horizon (every task at its slowest, every transfer and load "
                  f"at its longest, one after the other) is {horizon:.4g} ticks, above the "
                  f"maximum {MAX_HORIZON} (use a coarser time_unit or smaller durations)",
                  "tasks")


def serial_horizon(cost: np.ndarray, block_load: Mapping[str, np.ndarray],
                   edge_bytes: np.ndarray, links: Links) -> float:
    """Ticks of a serial schedule of everything: every task at its slowest device, every edge
    at the slowest transfer, every load of every block on every device in every format, one
    after the other (float64, no overflow; it bounds the exact models' integer horizons)."""
    work = float(cost.max(axis=1, initial=0).sum(dtype=np.float64))
    max_bytes = float(edge_bytes.max(initial=0))
    max_tr = float(links.latency.max(initial=0)) + np.ceil(
        max_bytes / float(links.bandwidth.min(initial=np.inf)))
    loads = sum(float(np.clip(a, 0, None).sum(dtype=np.float64)) for a in block_load.values())
    return work + float(max_tr) * len(edge_bytes) + loads
