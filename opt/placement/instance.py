"""P1 placement instances (problems.md §1.1, §1.2a): immutable columnar data and its JSON writer
(the reader is :mod:`opt.placement.io`; construction with validation
:mod:`opt.placement.instance_checks`).

In memory an instance is columnar (numpy arrays, read-only) so full-size DOPS workloads of
hundreds of thousands of tasks stay compact and fast; on disk it is the JSON shape of problems.md §1.2a
(schema 1, optionally gzip-compressed), its task and edge tables as rows or, by default above
:data:`LARGE_TASKS` tasks, as column tables (§1.2b). Every duration is an integer in ``time_unit``.

Conventions: ``cost[t, d]`` is task t's duration on device d, ``-1`` where d is not legal;
``block_load[fmt][b, d]`` is the load duration of block b onto device d when stored in format
``fmt``, ``-1`` where it cannot be loaded. Transfer of ``n`` bytes over link (i→j):
``latency[i, j] + ceil(n / bandwidth[i, j])`` and 0 when i = j.

Limits (checked by :func:`opt.placement.instance_checks.build_instance`, so by every reader and builder): an instance has at
least one task (an empty task graph is rejected, field ``tasks``: it has nothing to schedule);
every duration and latency is at most :data:`MAX_TICKS` ticks, every byte count (payloads,
block sizes, capacities, the memory budget) at most :data:`MAX_BYTES`, the blocks' bytes
together at most :data:`MAX_BYTES`, and the serial horizon (every task at its slowest device,
every edge at its slowest transfer, every block at its longest load, one after the other) at
most :data:`MAX_HORIZON` ticks, so every time of every schedule, and every sum the exact models
form, is exact in a double and far from int64 overflow (CP-SAT needs sums < 2**62).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.fingerprint import instance_fingerprint
from opt.common.jsonio import json_bytes, write_json
from opt.common.outpath import PLACEMENT_SUFFIXES, check_suffix
from opt.common.units import MAX_TICKS as UNITS_MAX_TICKS
from opt.placement.npz_writer import id_members, smallest_int, task_kind_codes, write_npz
from opt.placement.task_graph import cycle_member, topological_order_of

SCHEMA = 1
#: the version of the column-table layout (problems.md §1.2b; a file's ``columns`` field)
COLUMNS_VERSION = 1
#: the version of the binary column container (problems.md §1.2c; its header's ``container``)
CONTAINER_VERSION = 1
#: the optional integer task columns of the container besides ``kind``: member name ->
#: instance field
NPZ_TASK_INTS = MappingProxyType({"block": "task_block", "phase": "phase", "step": "step",
                                  "layer": "layer", "shard": "shard"})
DEVICE_CLASSES = ("npu", "pim", "gpu", "cpu")
PHASES = ("prefill", "decode")
LAYOUT_FORMATS = ("linear", "npu_opt", "pim_opt", "dual")
#: when a weight load may run (problems.md §1.2 rule 5): ``prefetch`` (any time, e.g. from 0 on
#: an idle load port; the value of an instance that does not say), ``at_use`` (DOPS Eq. 1: not
#: before the task it serves is dispatched, its time inside that task's completion) or
#: ``overlap`` (DOPS §6.1: from that dispatch, running while the task computes, ending by its end)
LOAD_TIMINGS = ("prefetch", "at_use", "overlap")
DEFAULT_STORAGE = {"linear": 1.0, "npu_opt": 1.0, "pim_opt": 1.0, "dual": 2.0}
#: largest duration, load duration or link latency (ticks; opt.common.units.MAX_TICKS, where
#: seconds become ticks): 2**53 ≈ 9.0e15, 104 days in ns
MAX_TICKS = UNITS_MAX_TICKS
#: largest serial horizon (ticks): the sum bounding every schedule's times
MAX_HORIZON = 2**53
#: largest byte count (edge payload, block size, capacity, budget; also the blocks' total), ≈ 9 PB
MAX_BYTES = 2**53
#: the largest step, layer or shard label a task may carry
MAX_LABEL = 2**62
#: tasks above which :meth:`PlacementInstance.write` writes compact (unindented) JSON and, unless
#: told otherwise, column tables (problems.md §1.2b): such a file is not read by hand anyway,
#: and columns read several times faster at full size
LARGE_TASKS = 2000


def frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Device:
    """A device of an instance; ``weight_capacity`` in bytes (None = unlimited)."""

    name: str
    device_class: str
    weight_capacity: int | None = None


@dataclass(frozen=True, eq=False)
class Links:
    """Link model. ``latency`` [d, d] integer ticks; ``bandwidth`` [d, d] bytes per tick."""

    topology: str
    contention: bool
    default_latency: int
    default_bandwidth: float
    pairs: tuple[tuple[str, str, int, float], ...]
    latency: np.ndarray
    bandwidth: np.ndarray

    # ---- the channel rule (problems.md §1.2 rule 4), defined here once --------------------
    @property
    def n_channels(self) -> int:
        """Number of channel ids: d·d ordered pairs, then d uplinks, then d downlinks."""
        d = self.latency.shape[0]
        return d * d + 2 * d

    def channels(self, src: int, dst: int) -> tuple[int, ...]:
        """Channel ids a transfer src → dst occupies: ``full`` one per ordered pair
        (src·d + dst); ``star`` the source's uplink (d² + src) and the destination's downlink
        (d² + d + dst). Meaningful only when ``contention`` is true."""
        d = self.latency.shape[0]
        if self.topology == "full":
            return (src * d + dst,)
        return (d * d + src, d * d + d + dst)

    def channel_ids(self, src: np.ndarray, dst: np.ndarray) -> list[np.ndarray]:
        """:meth:`channels` vectorised: one array of channel ids per channel a transfer
        occupies (``full``: one array; ``star``: uplinks, then downlinks)."""
        d = self.latency.shape[0]
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if self.topology == "full":
            return [src * d + dst]
        return [d * d + src, d * d + d + dst]

    def channel_label(self, channel: int) -> str:
        """'channel A->B', 'uplink of A' or 'downlink of B' as device indices for messages."""
        d = self.latency.shape[0]
        if channel < d * d:
            return f"channel {channel // d}->{channel % d}"
        if channel < d * d + d:
            return f"uplink of device {channel - d * d}"
        return f"downlink of device {channel - d * d - d}"

    def transfer(self, i: int, j: int, nbytes: int) -> int:
        """Ticks to move ``nbytes`` from device i to device j (0 on the same device)."""
        if i == j:
            return 0
        return int(self.latency[i, j]) + int(np.ceil(nbytes / self.bandwidth[i, j]))

    def transfer_durations(self, nbytes: np.ndarray) -> np.ndarray:
        """[m, d, d] ticks for every edge size in ``nbytes`` and device pair (diagonal 0)."""
        nb = np.asarray(nbytes, dtype=np.float64)[:, None, None]
        t = self.latency[None, :, :] + np.ceil(nb / self.bandwidth[None, :, :]).astype(np.int64)
        d = self.latency.shape[0]
        t[:, np.arange(d), np.arange(d)] = 0
        return t


@dataclass(frozen=True)
class Layout:
    """Weight storage formats (problems.md §2). In P1 ``fixed`` / ``default`` give each block's format."""

    formats: tuple[str, ...] = ("linear",)
    fixed: Mapping[str, str] = field(default_factory=dict)
    default: str = "linear"
    storage_multiplier: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_STORAGE))
    memory_budget: int | None = None

    def format_of(self, block_id: str) -> str:
        return self.fixed.get(block_id, self.default)


@dataclass(frozen=True, eq=False)
class PlacementInstance:
    """A P1 instance. Arrays are read-only; index tasks/devices/blocks by position."""

    time_unit: str
    devices: tuple[Device, ...]
    links: Links
    task_ids: tuple[str, ...]
    cost: np.ndarray                 # int64 [n, d], -1 = illegal
    task_block: np.ndarray           # int64 [n], -1 = no block
    edge_src: np.ndarray             # int64 [m]
    edge_dst: np.ndarray             # int64 [m]
    edge_bytes: np.ndarray           # int64 [m]
    block_ids: tuple[str, ...] = ()
    block_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    block_load: Mapping[str, np.ndarray] = field(default_factory=dict)  # fmt -> int64 [b, d]
    layout: Layout = field(default_factory=Layout)
    kind: tuple[str | None, ...] = ()
    phase: np.ndarray | None = None  # int8 [n]: 0 prefill, 1 decode, -1 none
    step: np.ndarray | None = None   # int64 [n], -1 none
    layer: np.ndarray | None = None
    shard: np.ndarray | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    objective: str = "makespan"      # opt.placement.slo.OBJECTIVES
    slo: Any = None                  # opt.placement.slo.Slo | None (limits in ticks)
    load_timing: str = "prefetch"    # LOAD_TIMINGS (problems.md §1.2 rule 5)

    # ---- sizes and lookups ---------------------------------------------------------------
    @property
    def problem(self) -> str:
        """``layout`` (P2, problems.md §2: the blocks' formats are chosen under
        ``layout.memory_budget``) when the instance has a memory budget, else ``placement``
        (P1: each block's format is fixed); the ``problem`` field of its JSON form."""
        return "placement" if self.layout.memory_budget is None else "layout"

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def n_edges(self) -> int:
        return len(self.edge_src)

    @cached_property
    def fingerprint(self) -> str:
        """:func:`opt.common.fingerprint.instance_fingerprint` of this instance, computed once
        (the data is immutable; seconds on a million-task instance, asked for by every solve)."""
        return instance_fingerprint(self)

    @cached_property
    def task_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.task_ids)}

    @cached_property
    def device_index(self) -> dict[str, int]:
        return {d.name: i for i, d in enumerate(self.devices)}

    @cached_property
    def block_index(self) -> dict[str, int]:
        return {b: i for i, b in enumerate(self.block_ids)}

    @cached_property
    def legal(self) -> np.ndarray:
        """bool [n, d]: device d may run task t."""
        return frozen(self.cost >= 0)

    @cached_property
    def block_format(self) -> tuple[str, ...]:
        """Each block's P1 storage format (``layout.fixed`` or ``layout.default``)."""
        return tuple(self.layout.format_of(b) for b in self.block_ids)

    @cached_property
    def load_duration(self) -> np.ndarray:
        """int64 [b, d]: load duration of each block in its P1 format (-1 = not loadable)."""
        out = np.full((len(self.block_ids), self.n_devices), -1, dtype=np.int64)
        for fmt in set(self.block_format):
            rows = np.array([f == fmt for f in self.block_format])
            if fmt in self.block_load:
                out[rows] = self.block_load[fmt][rows]
        return frozen(out)

    @cached_property
    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (offsets [n+1], edge indices sorted by source)."""
        return self._csr(self.edge_src)

    @cached_property
    def predecessors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (offsets [n+1], edge indices sorted by destination)."""
        return self._csr(self.edge_dst)

    def _csr(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=self.n_tasks)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return frozen(offsets), frozen(order)

    @cached_property
    def topological_order(self) -> np.ndarray:
        """Tasks in a topological order (Kahn, smallest index first among ready tasks)."""
        order = topological_order_of(self.n_tasks, self.edge_src, self.edge_dst)
        if order is None:
            cyc = cycle_member(self.n_tasks, self.edge_src, self.edge_dst)
            raise InputError(f"the task graph has a cycle through task "
                             f"'{self.task_ids[cyc]}'", source=self.source, field="edges")
        return frozen(order)

    def is_prefill(self) -> np.ndarray:
        return np.zeros(self.n_tasks, bool) if self.phase is None else self.phase == 0

    def is_decode(self) -> np.ndarray:
        return np.zeros(self.n_tasks, bool) if self.phase is None else self.phase == 1

    # ---- JSON -----------------------------------------------------------------------------
    def to_dict(self, columns: bool = False) -> dict[str, Any]:
        """The JSON form (problems.md §1.2a); ``columns``: the task and edge tables as
        column tables (§1.2b, :mod:`opt.placement.columns`) instead of rows."""
        if columns:
            tables = self._column_tables()
        else:
            tables = {"tasks": self._task_rows(), "edges": self._edge_rows()}
        return self._with_tables(tables)

    def _task_rows(self) -> list[dict[str, Any]]:
        """The ``tasks`` list of the row form: one object per task."""
        names = [d.name for d in self.devices]
        tasks = []
        kind = self.kind or (None,) * self.n_tasks
        cost = self.cost.tolist()
        blk = self.task_block.tolist()
        ph = self.phase.tolist() if self.phase is not None else None
        st = self.step.tolist() if self.step is not None else None
        la = self.layer.tolist() if self.layer is not None else None
        sh = self.shard.tolist() if self.shard is not None else None
        for i, tid in enumerate(self.task_ids):
            t: dict[str, Any] = {"id": tid,
                                 "cost": {names[d]: c for d, c in enumerate(cost[i]) if c >= 0},
                                 "block": self.block_ids[blk[i]] if blk[i] >= 0 else None}
            if kind[i] is not None:
                t["kind"] = kind[i]
            if ph is not None and ph[i] >= 0:
                t["phase"] = PHASES[ph[i]]
            for key, arr in (("step", st), ("layer", la), ("shard", sh)):
                if arr is not None and arr[i] >= 0:
                    t[key] = arr[i]
            tasks.append(t)
        return tasks

    def _edge_rows(self) -> list[dict[str, Any]]:
        """The ``edges`` list of the row form: one object per edge, tasks by id."""
        src, dst, nb = self.edge_src.tolist(), self.edge_dst.tolist(), self.edge_bytes.tolist()
        return [{"src": self.task_ids[s], "dst": self.task_ids[d], "bytes": b}
                for s, d, b in zip(src, dst, nb)]

    def _column_tables(self) -> dict[str, Any]:
        """The ``tasks`` and ``edges`` column tables (problems.md §1.2b; read by
        :mod:`opt.placement.columns`) and ``"columns": 1``. Optional columns whose every entry
        is none (-1 / null) are left out."""
        n = self.n_tasks
        tasks: dict[str, Any] = {"id": list(self.task_ids),
                                 "cost": {dv.name: np.ascontiguousarray(self.cost[:, d])
                                          for d, dv in enumerate(self.devices)
                                          if (self.cost[:, d] >= 0).any()}}
        for key in ("block", "phase", "step", "layer", "shard"):
            arr = self.task_block if key == "block" else getattr(self, key)
            if arr is not None and (arr >= 0).any():
                tasks[key] = np.asarray(arr, dtype=np.int64)
        kind = self.kind or (None,) * n
        if any(k is not None for k in kind):
            tasks["kind"] = list(kind)
        edges = {"src": self.edge_src, "dst": self.edge_dst, "bytes": self.edge_bytes}
        return {"columns": COLUMNS_VERSION, "tasks": tasks, "edges": edges}

    def _with_tables(self, tables: dict[str, Any]) -> dict[str, Any]:
        """The whole JSON object around the task and edge ``tables`` (rows or columns)."""
        head = self.header()
        top = {k: head.pop(k) for k in ("schema", "problem")}
        mid = {k: head.pop(k) for k in ("time_unit", "devices", "links")}
        return {**top, **({"columns": tables["columns"]} if "columns" in tables else {}),
                **mid, "tasks": tables["tasks"], "edges": tables["edges"], **head}

    def header(self) -> dict[str, Any]:
        """Every top-level field of the JSON form except the task and edge tables: schema,
        problem, time_unit, devices, links, blocks, layout, meta and (when set) objective,
        slo and load_timing (written only when it is not ``prefetch``)."""
        names = [d.name for d in self.devices]
        blocks = []
        for b, bid in enumerate(self.block_ids):
            load: dict[str, dict[str, int]] = {}
            for fmt, arr in self.block_load.items():
                for d, v in enumerate(arr[b].tolist()):
                    if v >= 0:
                        load.setdefault(names[d], {})[fmt] = v
            blocks.append({"id": bid, "bytes": int(self.block_bytes[b]), "load": load})
        lay = self.layout
        return {
            "schema": SCHEMA, "problem": self.problem, "time_unit": self.time_unit,
            "devices": [{"name": d.name, "class": d.device_class,
                         "weight_capacity": d.weight_capacity} for d in self.devices],
            "links": {"topology": self.links.topology, "contention": self.links.contention,
                      "default": {"latency": self.links.default_latency,
                                  "bandwidth": self.links.default_bandwidth},
                      "pairs": [{"src": s, "dst": d, "latency": lat, "bandwidth": bw}
                                for s, d, lat, bw in self.links.pairs]},
            "blocks": blocks,
            "layout": {"formats": list(lay.formats), "fixed": dict(lay.fixed),
                       "default": lay.default, "storage_multiplier": dict(lay.storage_multiplier),
                       "memory_budget": lay.memory_budget},
            "meta": dict(self.meta),
            **({"objective": self.objective} if self.objective != "makespan" else {}),
            **({"slo": self.slo.to_dict()} if self.slo is not None else {}),
            **({"load_timing": self.load_timing} if self.load_timing != "prefetch" else {}),
        }

    def writes_columns(self, columns: bool | None = None) -> bool:
        """Whether :meth:`write` with this ``columns`` writes column tables: ``columns`` when
        given, else (automatic) whether the instance has more than :data:`LARGE_TASKS` tasks."""
        return self.n_tasks > LARGE_TASKS if columns is None else bool(columns)

    def write(self, path: str | Path, columns: bool | None = None) -> None:
        """Write as JSON (gzip when the name ends in ``.gz``). Above :data:`LARGE_TASKS` tasks
        the JSON is compact and, with ``columns`` None (automatic), the task and edge tables
        are column tables (problems.md §1.2b), else rows (§1.2a); True / False force columns /
        rows (:meth:`writes_columns`). A name ending in ``.npz`` is the binary column
        container instead (§1.2c, :meth:`npz_members`, :func:`write_npz`; ``columns``
        does not apply; read by :mod:`opt.placement.npz`). Any other name is refused
        (InputError naming it and the allowed suffixes)."""
        check_suffix(path, PLACEMENT_SUFFIXES, "a placement instance")
        if str(path).endswith(".npz"):
            write_npz(path, self.npz_members())
            return
        write_json(self.to_dict(self.writes_columns(columns)), path,
                   indent=None if self.n_tasks > LARGE_TASKS else 1)

    def npz_members(self) -> dict[str, np.ndarray]:
        """The members of the binary column container (problems.md §1.2c): ``header`` (the
        :meth:`header` fields, ``container`` and ``kind_names`` as UTF-8 JSON), the task and
        edge columns, each in the smallest integer dtype holding its values. Optional
        columns whose every entry is none (-1 / null; bytes 0) are left out."""
        kind_names, kind_codes = task_kind_codes(self.kind)
        header = {**self.header(), "container": CONTAINER_VERSION, "kind_names": kind_names}
        out = {"header": np.frombuffer(json_bytes(header, indent=False), dtype=np.uint8),
               **id_members(self.task_ids), "tasks.cost": smallest_int(self.cost)}
        columns = {k: getattr(self, f) for k, f in NPZ_TASK_INTS.items()}
        for key, arr in {**columns, "kind": kind_codes}.items():
            if arr is not None and (arr >= 0).any():
                out[f"tasks.{key}"] = smallest_int(arr)
        out["edges.src"], out["edges.dst"] = map(smallest_int, (self.edge_src, self.edge_dst))
        if self.edge_bytes.any():
            out["edges.bytes"] = smallest_int(self.edge_bytes)
        return out
