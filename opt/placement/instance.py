"""P1 placement instances (problems.md §1.1, §1.2a): immutable columnar data and its JSON writer
(the reader is :mod:`opt.placement.io`).

In memory an instance is columnar (numpy arrays, read-only) so full-size DOPS workloads of
hundreds of thousands of tasks stay compact and fast; on disk it is the JSON shape of problems.md §1.2a
(schema 1, optionally gzip-compressed), its task and edge tables as rows or, by default above
:data:`LARGE_TASKS` tasks, as column tables (§1.2b). Every duration is an integer in ``time_unit``.

Conventions: ``cost[t, d]`` is task t's duration on device d, ``-1`` where d is not legal;
``block_load[fmt][b, d]`` is the load duration of block b onto device d when stored in format
``fmt``, ``-1`` where it cannot be loaded. Transfer of ``n`` bytes over link (i→j):
``latency[i, j] + ceil(n / bandwidth[i, j])`` and 0 when i = j.

Limits (checked by :func:`build_instance`, so by every reader and builder): an instance has at
least one task (an empty task graph is rejected, field ``tasks``: it has nothing to schedule);
every duration and latency is at most :data:`MAX_TICKS` ticks, every byte count (payloads,
block sizes, capacities, the memory budget) at most :data:`MAX_BYTES`, the blocks' bytes
together at most :data:`MAX_BYTES`, and the serial horizon (every task at its slowest device,
every edge at its slowest transfer, every block at its longest load, one after the other) at
most :data:`MAX_HORIZON` ticks, so every time of every schedule, and every sum the exact models
form, is exact in a double and far from int64 overflow (CP-SAT needs sums < 2**62).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.jsonio import json_bytes, write_json
from opt.common.units import MAX_TICKS as UNITS_MAX_TICKS
from opt.common.units import TIME_UNITS

SCHEMA = 1
#: the version of the column-table layout (problems.md §1.2b; a file's ``columns`` field)
COLUMNS_VERSION = 1
#: the version of the binary column container (problems.md §1.2c; its header's ``container``)
CONTAINER_VERSION = 1
#: the optional integer task columns of the container besides ``kind``: member name ->
#: instance field
NPZ_TASK_INTS = MappingProxyType({"block": "task_block", "phase": "phase", "step": "step",
                                  "layer": "layer", "shard": "shard"})
#: integer dtypes a container column may be stored in, smallest first (the writer takes the
#: first that holds the column's values)
_INT_DTYPES = (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64)
DEVICE_CLASSES = ("npu", "pim", "gpu", "cpu")
PHASES = ("prefill", "decode")
LAYOUT_FORMATS = ("linear", "npu_opt", "pim_opt", "dual")
#: when a weight load may run (problems.md §1.2 rule 5): ``prefetch`` (any time, e.g. from 0 on
#: an idle load port; the value of an instance that does not say) or ``at_use`` (DOPS Eq. 1: not
#: before the task it serves is dispatched, its time inside that task's completion)
LOAD_TIMINGS = ("prefetch", "at_use")
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


def _frozen(a: np.ndarray) -> np.ndarray:
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
        return _frozen(self.cost >= 0)

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
        return _frozen(out)

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
        return _frozen(offsets), _frozen(order)

    @cached_property
    def topological_order(self) -> np.ndarray:
        """Tasks in a topological order (Kahn, smallest index first among ready tasks)."""
        order = _topological_order(self.n_tasks, self.edge_src, self.edge_dst)
        if order is None:
            raise InputError(f"the task graph has a cycle through task "
                             f"'{self.task_ids[_cycle_member(self)]}'", source=self.source,
                             field="edges")
        return _frozen(order)

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
        does not apply; read by :mod:`opt.placement.npz`)."""
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
        kind_names, kind_codes = _kind_codes(self.kind)
        header = {**self.header(), "container": CONTAINER_VERSION, "kind_names": kind_names}
        out = {"header": np.frombuffer(json_bytes(header, indent=False), dtype=np.uint8),
               **_id_members(self.task_ids), "tasks.cost": smallest_int(self.cost)}
        columns = {k: getattr(self, f) for k, f in NPZ_TASK_INTS.items()}
        for key, arr in {**columns, "kind": kind_codes}.items():
            if arr is not None and (arr >= 0).any():
                out[f"tasks.{key}"] = smallest_int(arr)
        out["edges.src"], out["edges.dst"] = map(smallest_int, (self.edge_src, self.edge_dst))
        if self.edge_bytes.any():
            out["edges.bytes"] = smallest_int(self.edge_bytes)
        return out


def write_npz(path: str | Path, members: Mapping[str, np.ndarray]) -> None:
    """``members`` as a NumPy ``.npz`` archive (what ``np.load`` reads; no pickles), deflated
    at zlib level 1: ``np.savez_compressed`` has no level and its default took 1.8 s on the
    full-size flagship against ≈ 0.4 s, for a file ≈ 15 % larger (docs/speed.md)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1,
                         allowZip64=True) as archive:
        for name, arr in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(arr), allow_pickle=False)


def smallest_int(arr: np.ndarray) -> np.ndarray:
    """``arr`` in the smallest integer dtype holding its values (uint8 when empty)."""
    lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    dtype = next(t for t in _INT_DTYPES if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
    return np.ascontiguousarray(arr, dtype=dtype)


def _id_members(ids: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``tasks.id`` (the ids' UTF-8 bytes, concatenated) and ``tasks.id_end`` (the end byte
    offset of each)."""
    blob = "".join(ids).encode()
    sizes = map(len, ids) if len(blob) == sum(map(len, ids)) else (len(t.encode()) for t in ids)
    ends = np.cumsum(np.fromiter(sizes, dtype=np.int64, count=len(ids)))
    return {"tasks.id": np.frombuffer(blob, dtype=np.uint8), "tasks.id_end": smallest_int(ends)}


def _kind_codes(kinds: tuple[str | None, ...]) -> tuple[list[str], np.ndarray]:
    """The distinct non-null kinds in first-seen order, and each task's position among them
    (-1: null)."""
    names = list(dict.fromkeys(k for k in kinds if k is not None))
    code: dict[str | None, int] = {None: -1, **{k: i for i, k in enumerate(names)}}
    return names, np.fromiter(map(code.__getitem__, kinds), dtype=np.int64, count=len(kinds))


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


# --------------------------------------------------------------------------------------------
# graph helpers

def _topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """Kahn's order, smallest ready index first (None on a cycle). When every edge points
    to a larger index, that order is 0, 1, …, n−1 (task k is ready once 0 … k−1 are done,
    and no smaller task is left), returned without the walk."""
    if not len(src) or bool((src < dst).all()):
        return np.arange(n, dtype=np.int64)
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order_e = np.argsort(src, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    succ = dst[order_e]
    import heapq

    ready = [int(i) for i in np.flatnonzero(indeg == 0)]
    heapq.heapify(ready)
    out = np.empty(n, dtype=np.int64)
    k = 0
    indeg_l = indeg.tolist()
    offsets_l = offsets.tolist()
    succ_l = succ.tolist()
    while ready:
        u = heapq.heappop(ready)
        out[k] = u
        k += 1
        for j in range(offsets_l[u], offsets_l[u + 1]):
            v = succ_l[j]
            indeg_l[v] -= 1
            if indeg_l[v] == 0:
                heapq.heappush(ready, v)
    return out if k == n else None


def _cycle_member(inst: PlacementInstance) -> int:
    """A task on a cycle (for the error message): peel tasks without predecessors, then walk
    back through remaining predecessors until a task repeats."""
    n = inst.n_tasks
    indeg = np.bincount(inst.edge_dst, minlength=n)
    alive = np.ones(n, bool)
    while True:
        srcs = np.flatnonzero(alive & (indeg == 0))
        if not len(srcs):
            break
        alive[srcs] = False
        mask = np.isin(inst.edge_src, srcs)
        np.subtract.at(indeg, inst.edge_dst[mask], 1)
    # every remaining task has a remaining predecessor: walking back must close a cycle
    pred: dict[int, int] = {}
    for u, v in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        if alive[u] and alive[v]:
            pred.setdefault(v, u)
    t = int(np.flatnonzero(alive)[0])
    seen: set[int] = set()
    while t not in seen:
        seen.add(t)
        t = pred[t]
    return t


# --------------------------------------------------------------------------------------------
# construction with validation (shared by the JSON reader and the builders)

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
                 _frozen(lat), _frozen(bw))


def build_instance(*, time_unit: str, devices: Sequence[Device], links: Links,
                   task_ids: Sequence[str], cost: np.ndarray, task_block: np.ndarray | None = None,
                   edge_src=(), edge_dst=(), edge_bytes=(), block_ids: Sequence[str] = (),
                   block_bytes=(), block_load: Mapping[str, np.ndarray] | None = None,
                   layout: Layout | None = None, kind: Sequence[str | None] | None = None,
                   phase=None, step=None, layer=None, shard=None,
                   meta: Mapping[str, Any] | None = None, source: str | None = None,
                   check_acyclic: bool = True, load_timing: str = "prefetch"
                   ) -> PlacementInstance:
    """Validate columnar data and freeze it into a :class:`PlacementInstance`.

    Errors name the offending task, edge, block or device (and the file when ``source`` is set).
    """
    n, d = len(task_ids), len(devices)

    def err(msg: str, fld: str) -> InputError:
        return InputError(msg, source=source, field=fld)

    names = _check_names(time_unit, devices, task_ids, err)
    if load_timing not in LOAD_TIMINGS:
        raise err(f"unknown load_timing '{load_timing}'; known: {', '.join(LOAD_TIMINGS)}",
                  "load_timing")
    cost = _check_costs(_int64(cost, "tasks.cost", err), task_ids, names, err)
    nb = len(block_ids)
    task_block = (np.full(n, -1, dtype=np.int64) if task_block is None
                  else np.asarray(task_block, dtype=np.int64))
    if len(set(block_ids)) != nb:
        raise err("duplicate block id", "blocks")
    block_bytes = _int64(block_bytes, "blocks.bytes", err).reshape(nb)
    if (block_bytes < 0).any():
        b = int(np.flatnonzero(block_bytes < 0)[0])
        raise err(f"block '{block_ids[b]}' has negative bytes", f"blocks[{b}].bytes")
    layout = layout or Layout()
    _check_layout(layout, err)
    block_load = {f: _int64(a, "blocks.load", err).reshape(nb, d)
                  for f, a in (block_load or {}).items()}
    _check_block_loads(layout, block_ids, block_load, names, err)
    _check_task_blocks(cost, task_block, task_ids, block_ids, block_load, layout, names, err)
    edge_src = np.asarray(edge_src, dtype=np.int64)
    edge_dst = np.asarray(edge_dst, dtype=np.int64)
    edge_bytes = _int64(edge_bytes, "edges.bytes", err)
    _check_edges(edge_src, edge_dst, edge_bytes, task_ids, err)
    _check_magnitudes(cost, block_ids, block_bytes, block_load, edge_bytes, devices, links,
                      layout, err)

    def opt_arr(a, dtype):
        return None if a is None else _frozen(np.asarray(a, dtype=dtype).reshape(n))

    for dev in devices:
        if dev.device_class not in DEVICE_CLASSES:
            raise err(f"device '{dev.name}' has unknown class '{dev.device_class}'; known: "
                      f"{', '.join(DEVICE_CLASSES)}", "devices")
    inst = PlacementInstance(
        time_unit=time_unit, devices=tuple(devices), links=links, task_ids=tuple(task_ids),
        cost=_frozen(cost), task_block=_frozen(task_block), edge_src=_frozen(edge_src),
        edge_dst=_frozen(edge_dst), edge_bytes=_frozen(edge_bytes), block_ids=tuple(block_ids),
        block_bytes=_frozen(block_bytes),
        block_load={f: _frozen(a) for f, a in block_load.items()}, layout=layout,
        kind=tuple(kind) if kind is not None else (), phase=opt_arr(phase, np.int8),
        step=opt_arr(step, np.int64), layer=opt_arr(layer, np.int64),
        shard=opt_arr(shard, np.int64), meta=dict(meta or {}), source=source,
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
