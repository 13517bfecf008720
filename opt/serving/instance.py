"""P3 serving-plan instances (problems.md §3.1): the decode-step operator sequence of one partition
block, GPU types, device-group configurations, the workload, the search grid and the integer
latency tables every P3 solver reads.

Like P1, an instance is self-contained: the builder (``opt.serving.builder``) evaluates the cost
library once and stores integer durations in ``time_unit`` (ns by default); exact models, the
branch-and-bound, the baselines and the plan checker all read the same tables, so their
objectives are comparable to the last digit.

Tables (``mb`` indexes ``microbatch_sizes``, ``c`` indexes ``configs``, ``i`` the block's ops):

- ``op_duration[c, mb, i]``: latency of op i of the block on one replica of config c at
  microbatch b̂ (incl. its tensor-parallel collectives);
- ``head_duration[c, mb, 0|1]``: the token's embedding gather / final norm + LM head;
- ``transfer_duration[n, mb, i]``: network latency + ceil(bytes / bandwidth) of the activation
  after op i (i = N−1: the boundary into the next block) over network ``n``;
  ``transfer_busy[n, mb, i]``: its serialisation part ceil(bytes / bandwidth) only (what a NIC is
  busy for);
- ``token_transfer_duration[n, mb]`` / ``token_transfer_busy[n, mb]``: the sampled token ids
  returning from the LM-head owner to the embedding owner;
- ``reshard_out[c, mb, i]`` / ``reshard_in[c, mb, i]``: the all-gather a replica of config c
  runs before sending the boundary after op i to a replica of another TP degree, and the
  scatter it runs after receiving one (:mod:`opt.serving.crossing`; ``reshard`` None — every
  file written before the rule — means zeros: crossings are the send/recv alone).

Networks (problems.md §3.1 "Network model"): ``networks[n]`` are the links a stage-boundary
crossing may take and ``crossing_network[a, b]`` the one a crossing from an owner on GPU type
``a`` to one on type ``b`` takes (indices in ``gpus`` order; OpWeave App. B.3 Eq. 39: the
transfer depends on the source and the destination device groups). An instance with one
network (every file written before, and every single-type instance) stores the 2-D tables
``[mb, i]`` and ``[mb]`` and no ``networks``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import numpy as np

from opt.common.errors import InputError
from opt.common.fingerprint import instance_fingerprint
from opt.common.jsonio import Fields, read_json, write_json
from opt.common.outpath import JSON_SUFFIXES, check_suffix
from opt.common.units import TIME_UNITS
from opt.costlib.latency import Link
from opt.serving.crossing import layouts_differ

SCHEMA = 1


@dataclass(frozen=True)
class GpuType:
    """One GPU type: peak FLOP/s, memory bandwidth (bytes/s), memory (bytes), price ($/GPU-hour)
    and the server it sits in (GPUs per node, intra-node link used by TP collectives)."""

    name: str
    peak_flops: float
    mem_bw_bytes_per_s: float
    memory_bytes: float
    price_usd_per_hour: float
    gpus_per_node: int
    intra_node: Link

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "peak_flops": self.peak_flops,
                "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s, "memory_bytes": self.memory_bytes,
                "price_usd_per_hour": self.price_usd_per_hour,
                "gpus_per_node": self.gpus_per_node, "intra_node": self.intra_node.to_dict()}


@dataclass(frozen=True)
class ServingConfig:
    """A device-group configuration: ``tp`` GPUs of type ``gpu`` in tensor parallelism; MoE
    experts in expert parallelism over ``ep`` of them (1 = experts tensor-parallel too)."""

    id: str
    gpu: str
    tp: int
    ep: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "gpu": self.gpu, "tp": self.tp, "ep": self.ep}


@dataclass(frozen=True)
class ServingOp:
    """One operator of the partition block (decode step).

    layer: index of its layer inside the block; module: ``attention`` / ``ffn`` / ``moe``;
    weight_bytes: resident parameter bytes; kv_bytes_per_request: KV cache / recurrent state
    bytes one request keeps for this op at the workload's context (0 unless the op holds state);
    out_bytes_per_request: activation bytes crossing a stage boundary placed right after it.
    """

    id: str
    kind: str
    layer: int
    module: str
    weight_bytes: int
    kv_bytes_per_request: int
    out_bytes_per_request: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "layer": self.layer, "module": self.module,
                "weight_bytes": self.weight_bytes,
                "kv_bytes_per_request": self.kv_bytes_per_request,
                "out_bytes_per_request": self.out_bytes_per_request}


#: largest GPU / owner / replica / microbatch limit of a search grid
MAX_GRID_LIMIT = 2 ** 31 - 1
#: per-replica batches of an instance file whose grid names none: the powers of two 1..256
FILE_BATCHES = tuple(2 ** k for k in range(9))
#: largest per-replica batch value of a search grid (requests): durations of a microbatch stay
#: far inside the latency tables' 2^48 ticks
MAX_GRID_BATCH = 1 << 20


def _check_grid_int(name: str, value: Any, high: int) -> None:
    """InputError naming ``name`` unless ``value`` is an integer in 1..``high``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not 1 <= value <= high:
        raise InputError(f"{name} must be an integer in 1..{high:,}, got {value!r}",
                         field=name)


@dataclass(frozen=True)
class ServingGrid:
    """Search limits (OpWeave §6): GPUs in total, owners (device-group types) K, replicas per
    owner, microbatches μ, and the per-replica batch values b_m to consider (None: the
    builder derives them from memory, OpWeave App. B.4 — ``opt.serving.builder.memory_batches``;
    a built instance always holds the values)."""

    max_gpus: int = 32
    max_owners: int = 3
    max_replicas: int = 4
    max_microbatches: int = 4
    batches: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """Every limit an integer in 1..MAX_GRID_LIMIT, ``batches`` one or more integers in
        1..MAX_GRID_BATCH (stored as a tuple): the rule of the builder and of the reader alike
        (InputError naming the field, e.g. ``max_owners`` or ``batches[2]``)."""
        for name in ("max_gpus", "max_owners", "max_replicas", "max_microbatches"):
            _check_grid_int(name, getattr(self, name), MAX_GRID_LIMIT)
        batches = self.batches
        if batches is None:
            return
        if isinstance(batches, (str, bytes)) or not hasattr(batches, "__len__") \
                or not len(batches):
            raise InputError(f"batches must be one or more integers in 1..{MAX_GRID_BATCH:,}, "
                             f"got {batches!r}", field="batches")
        for i, b in enumerate(batches):
            _check_grid_int(f"batches[{i}]", b, MAX_GRID_BATCH)
        object.__setattr__(self, "batches", tuple(int(b) for b in batches))

    def to_dict(self) -> dict[str, Any]:
        return {"max_gpus": self.max_gpus, "max_owners": self.max_owners,
                "max_replicas": self.max_replicas, "max_microbatches": self.max_microbatches,
                "batches": None if self.batches is None else list(self.batches)}


@dataclass(frozen=True, eq=False)
class ServingInstance:
    """A P3 instance. Durations are integers in ``time_unit``; bytes are integers."""

    model: str
    layers: int
    block_layers: int
    ops: tuple[ServingOp, ...]
    embed_weight_bytes: int
    lm_head_weight_bytes: int
    tied_embeddings: bool
    gpus: dict[str, GpuType]
    network: Link
    configs: tuple[ServingConfig, ...]
    context_tokens: int
    tpot_slo: int
    grid: ServingGrid
    microbatch_sizes: tuple[int, ...]
    op_duration: np.ndarray
    head_duration: np.ndarray
    transfer_duration: np.ndarray
    transfer_busy: np.ndarray
    token_transfer_duration: np.ndarray
    token_transfer_busy: np.ndarray
    memory_fraction: float = 1.0
    time_unit: str = "ns"
    meta: dict[str, Any] = field(default_factory=dict)
    networks: tuple[Link, ...] = ()
    crossing_network: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    reshard: tuple[np.ndarray, np.ndarray] | None = None  # (reshard_out, reshard_in) ticks

    problem = "serving"  # P3 (problems.md §3); files written before say "serving_plan"

    @cached_property
    def fingerprint(self) -> str:
        """:func:`opt.common.fingerprint.instance_fingerprint` of this instance, computed once
        (as :attr:`opt.placement.instance.PlacementInstance.fingerprint`)."""
        return instance_fingerprint(self)

    @property
    def batches(self) -> tuple[int, ...]:
        """The per-replica batch values b_m of the grid (an instance's grid always holds them)."""
        assert self.grid.batches is not None  # __post_init__ refused an instance without them
        return self.grid.batches

    def __post_init__(self) -> None:
        """One network unless ``networks`` says otherwise: 2-D transfer tables become
        ``[1, mb, i]`` and every crossing (an empty ``crossing_network``) takes network 0.
        The grid holds its batch values (the builder derives them when none are given)."""
        if self.grid.batches is None:
            raise InputError("a serving instance's grid needs its batch values",
                             field="grid.batches")
        nets = self.networks or (self.network,)
        g = len(self.gpus)
        cross = np.asarray(self.crossing_network, dtype=np.int64)
        if cross.size == 0:
            cross = np.zeros((g, g), dtype=np.int64)
        if cross.shape != (g, g) or cross.min(initial=0) < 0 or cross.max(initial=0) >= len(nets):
            raise InputError(f"crossing_network must be a {g}×{g} matrix of indices into the "
                             f"{len(nets)} networks", field="hardware.crossing_network")
        object.__setattr__(self, "networks", tuple(nets))
        object.__setattr__(self, "crossing_network", cross)
        for name, nd in (("transfer_duration", 3), ("transfer_busy", 3),
                         ("token_transfer_duration", 2), ("token_transfer_busy", 2)):
            arr = np.asarray(getattr(self, name))
            if arr.ndim == nd - 1:
                arr = arr[None]
            if arr.ndim != nd or arr.shape[0] != len(nets):
                raise InputError(f"{name}: expected one table per network ({len(nets)}), got "
                                 f"shape {list(arr.shape)}", field=f"latency.{name}")
            object.__setattr__(self, name, arr)
        self._check_reshard()

    def _check_reshard(self) -> None:
        """``reshard`` is None or two int64 tables ``[configs, microbatch sizes, ops]`` (at
        least one row per configuration, as ``op_duration``)."""
        if self.reshard is None:
            return
        shape = (len(self.configs), len(self.microbatch_sizes), len(self.ops))
        tabs = tuple(np.asarray(t, dtype=np.int64) for t in self.reshard)
        if len(tabs) != 2 or any(t.ndim != 3 or t.shape[1:] != shape[1:] or t.shape[0] < shape[0]
                                 for t in tabs):
            raise InputError(f"reshard_out / reshard_in: expected two tables of shape "
                             f"{list(shape)}", field="latency.reshard_out")
        object.__setattr__(self, "reshard", tabs)

    # ---- crossings (opt.serving.crossing) ---------------------------------------------------
    @cached_property
    def reshard_out(self) -> np.ndarray:
        """int64 [c, mb, i]: the source-side all-gather of a crossing whose TP degrees differ
        (zeros without ``reshard``)."""
        return self._reshard_table(0)

    @cached_property
    def reshard_in(self) -> np.ndarray:
        """int64 [c, mb, i]: the destination-side scatter of such a crossing."""
        return self._reshard_table(1)

    def _reshard_table(self, k: int) -> np.ndarray:
        if self.reshard is None:
            out = np.zeros((len(self.op_duration), len(self.microbatch_sizes), len(self.ops)),
                           dtype=np.int64)
        else:
            out = np.array(self.reshard[k], dtype=np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def has_reshard(self) -> bool:
        """Whether some crossing redistributes (a non-zero reshard table)."""
        return self.reshard is not None and bool(self.reshard_out.any() or self.reshard_in.any())

    @cached_property
    def config_reshard(self) -> np.ndarray:
        """bool [c_sender, c_receiver]: a crossing between the two configurations
        redistributes sharded activations (:func:`opt.serving.crossing.layouts_differ`)."""
        out = np.array([[layouts_differ(a, b) for b in self.configs] for a in self.configs],
                       dtype=bool).reshape(len(self.configs), len(self.configs))
        out.setflags(write=False)
        return out

    # ---- networks ---------------------------------------------------------------------------
    @property
    def n_networks(self) -> int:
        return len(self.networks)

    @cached_property
    def config_network(self) -> np.ndarray:
        """int64 [c_sender, c_receiver]: the network a crossing between two configurations
        takes (``crossing_network`` of their GPU types)."""
        g = self.config_gpu
        out = self.crossing_network[g[:, None], g[None, :]]
        out.setflags(write=False)
        return out

    @cached_property
    def config_gpu(self) -> np.ndarray:
        """int64 [c]: the index (``gpus`` order) of each configuration's GPU type."""
        gi = {name: k for k, name in enumerate(self.gpus)}
        return np.array([gi[c.gpu] for c in self.configs], dtype=np.int64)

    @cached_property
    def gpu_network_dominates(self) -> np.ndarray:
        """bool [a, b]: every crossing with an owner on GPU type a instead of b (either
        direction, any partner type) costs at most as much in every table — what lets the
        search's frontier compare configurations of different GPU types."""
        g = len(self.gpus)
        tabs = [np.concatenate([self.transfer_duration[n].ravel(), self.transfer_busy[n].ravel(),
                                self.token_transfer_duration[n], self.token_transfer_busy[n]])
                for n in range(self.n_networks)]
        le = np.array([[all((tabs[na] <= tabs[nb]).all() for na, nb in
                            ((self.crossing_network[a, p], self.crossing_network[b, p])
                             for p in range(g)))
                        and all((tabs[na] <= tabs[nb]).all() for na, nb in
                                ((self.crossing_network[p, a], self.crossing_network[p, b])
                                 for p in range(g)))
                        for b in range(g)] for a in range(g)])
        return le

    # ---- derived structure ----------------------------------------------------------------
    @property
    def n_ops(self) -> int:
        """N_block: operators in one partition block."""
        return len(self.ops)

    @property
    def full_blocks(self) -> int:
        return self.layers // self.block_layers

    @property
    def partial_layers(self) -> int:
        """Layers of the last, truncated block (0 when the period divides the layer count)."""
        return self.layers % self.block_layers

    @property
    def partial_ops(self) -> int:
        """Ops of the truncated last block: those of its first ``partial_layers`` layers."""
        return sum(1 for o in self.ops if o.layer < self.partial_layers)

    @property
    def blocks_total(self) -> float:
        """B_total = layers / L_block (fractional when the last block is truncated)."""
        return self.layers / self.block_layers

    @property
    def op_count(self) -> np.ndarray:
        """int64 [i]: how many times op i of the block runs per token (full blocks + the
        truncated one)."""
        cnt = np.full(self.n_ops, self.full_blocks, dtype=np.int64)
        cnt[:self.partial_ops] += 1
        return cnt

    @property
    def blocks_run(self) -> int:
        """Blocks a token passes through (a truncated last block counts once)."""
        return self.full_blocks + (1 if self.partial_layers else 0)

    @property
    def last_op(self) -> int:
        """Index (within the block) of the last op a token runs before the LM head."""
        return (self.partial_ops if self.partial_ops else self.n_ops) - 1

    def config_index(self, config_id: str) -> int:
        for k, c in enumerate(self.configs):
            if c.id == config_id:
                return k
        raise InputError(f"unknown config '{config_id}'; known: "
                         f"{', '.join(c.id for c in self.configs)}", field="configs")

    def mb_index(self, microbatch: int) -> int:
        try:
            return self.microbatch_sizes.index(int(microbatch))
        except ValueError:
            raise InputError(f"microbatch size {microbatch} has no latency table; tabulated: "
                             f"{list(self.microbatch_sizes)}", field="microbatch_sizes") from None

    def gpu_of(self, config: ServingConfig) -> GpuType:
        return self.gpus[config.gpu]

    def replica_memory_bytes(self, config: ServingConfig) -> float:
        """Usable memory of one replica (tp GPUs × memory × memory_fraction), bytes."""
        return config.tp * self.gpu_of(config).memory_bytes * self.memory_fraction

    def replica_price_usd_per_s(self, config: ServingConfig) -> float:
        """c_m: price of one replica per second."""
        return config.tp * self.gpu_of(config).price_usd_per_hour / 3600.0

    def seconds(self, ticks: float) -> float:
        """Convert a duration in ``time_unit`` to seconds."""
        return float(ticks) * TIME_UNITS[self.time_unit]

    # ---- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        one = self.n_networks == 1
        lat = {"microbatch_sizes": list(self.microbatch_sizes),
               "op_duration": self.op_duration.tolist(),
               "head_duration": self.head_duration.tolist()}
        for name in ("transfer_duration", "transfer_busy", "token_transfer_duration",
                     "token_transfer_busy"):
            arr = getattr(self, name)
            lat[name] = (arr[0] if one else arr).tolist()
        if self.reshard is not None:
            lat["reshard_out"] = self.reshard_out.tolist()
            lat["reshard_in"] = self.reshard_in.tolist()
        hardware: dict[str, Any] = {"gpus": [g.to_dict() for g in self.gpus.values()],
                                    "network": self.network.to_dict()}
        if not one:
            hardware["networks"] = [n.to_dict() for n in self.networks]
            hardware["crossing_network"] = self.crossing_network.tolist()
        hardware["memory_fraction"] = self.memory_fraction
        return {
            "schema": SCHEMA, "problem": self.problem, "time_unit": self.time_unit,
            "model": {"name": self.model, "layers": self.layers,
                      "block_layers": self.block_layers,
                      "ops": [o.to_dict() for o in self.ops],
                      "embed_weight_bytes": self.embed_weight_bytes,
                      "lm_head_weight_bytes": self.lm_head_weight_bytes,
                      "tied_embeddings": self.tied_embeddings},
            "hardware": hardware,
            "configs": [c.to_dict() for c in self.configs],
            "workload": {"context_tokens": self.context_tokens, "tpot_slo": self.tpot_slo},
            "grid": self.grid.to_dict(),
            "latency": lat,
            "meta": self.meta,
        }

    def write(self, path: str | Path) -> None:
        """Write as JSON (gzip when the name ends in ``.gz``); the name must end in ``.json``
        or ``.json.gz`` (InputError naming it)."""
        check_suffix(path, JSON_SUFFIXES, "a serving instance")
        write_json(self.to_dict(), path)


def _link(f: Fields) -> Link:
    f.check_keys({"latency_s", "bandwidth_bytes_per_s", "source"})
    return Link(f.num("latency_s"), f.num("bandwidth_bytes_per_s", strict=True),
                f.get("source", ""))


#: Largest duration (ticks) a latency table may hold: sums over a token's op executions
#: stay far inside int64.
MAX_TICKS = 2 ** 48
#: Most layers a model may have (op counts per token stay small against int64).
MAX_LAYERS = 10_000


def _table(f: Fields, key: str, shape: tuple[int, ...]) -> np.ndarray:
    """The integer latency table ``key`` of the given shape (entries in [0, MAX_TICKS])."""
    raw = f.get(key)
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise f.error(key, "expected a (nested) list of integers") from None
    if arr.shape != shape:
        raise f.error(key, f"expected shape {list(shape)}, got {list(arr.shape)}")
    bad_mask = ~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 0) | (arr > MAX_TICKS)
    if np.any(bad_mask):
        bad = np.argwhere(bad_mask)[0]
        raise f.error(key, f"entry {bad.tolist()} = {arr[tuple(bad)]!r}: durations are "
                           f"integers in [0, 2^48]")
    out = arr.astype(np.int64)
    out.setflags(write=False)
    return out


def serving_instance_from_dict(obj: Any, source: str | None = None) -> ServingInstance:
    """Validate and build a :class:`ServingInstance`; errors name the file, field and value."""
    f = Fields(obj, source, "")
    f.check_keys({"schema", "problem", "time_unit", "model", "hardware", "configs", "workload",
                  "grid", "latency", "meta"})
    if f.get("schema", SCHEMA) != SCHEMA:
        raise f.error("schema", f"unsupported schema {obj.get('schema')!r}; this version reads "
                                f"{SCHEMA}")
    if f.str("problem") not in ("serving", "serving_plan"):
        raise f.error("problem", f"expected 'serving', got {obj.get('problem')!r}")
    unit = f.str("time_unit", "ns")
    if unit not in TIME_UNITS:
        raise f.error("time_unit", f"unknown unit '{unit}'; known: {', '.join(TIME_UNITS)}")
    m = f.sub("model")
    layers, block_layers, ops = _read_block(m)
    hw = f.sub("hardware")
    assert hw is not None  # required: Fields.sub raised when it is missing
    gpus, network, frac = _read_hardware(hw)
    networks, cross = _read_networks(hw, len(gpus))
    nn = len(networks) or 1
    lead = (nn,) if networks else ()
    configs = _read_configs(f, gpus)
    w = f.sub("workload")
    w.check_keys({"context_tokens", "tpot_slo"})
    grid = _read_grid(f.sub("grid", {}))
    lat = f.sub("latency")
    assert lat is not None  # required: Fields.sub raised when it is missing
    lat.check_keys({"microbatch_sizes", "op_duration", "head_duration", "transfer_duration",
                    "transfer_busy", "token_transfer_duration", "token_transfer_busy",
                    "reshard_out", "reshard_in"})
    mbs = _int_list(lat, "microbatch_sizes")
    if not mbs or any(x < 1 for x in mbs) or list(mbs) != sorted(set(mbs)):
        raise lat.error("microbatch_sizes", f"expected increasing positive sizes, got {list(mbs)}")
    nc, nm, n = len(configs), len(mbs), len(ops)
    return ServingInstance(
        model=m.str("name"), layers=layers, block_layers=block_layers, ops=tuple(ops),
        embed_weight_bytes=m.int("embed_weight_bytes", 0),
        lm_head_weight_bytes=m.int("lm_head_weight_bytes", 0),
        tied_embeddings=m.bool("tied_embeddings", False), gpus=gpus, network=network,
        configs=tuple(configs), context_tokens=w.int("context_tokens", minimum=1),
        tpot_slo=w.int("tpot_slo", minimum=1), grid=grid, microbatch_sizes=mbs,
        op_duration=_table(lat, "op_duration", (nc, nm, n)),
        head_duration=_table(lat, "head_duration", (nc, nm, 2)),
        transfer_duration=_table(lat, "transfer_duration", (*lead, nm, n)),
        transfer_busy=_table(lat, "transfer_busy", (*lead, nm, n)),
        token_transfer_duration=_table(lat, "token_transfer_duration", (*lead, nm)),
        token_transfer_busy=_table(lat, "token_transfer_busy", (*lead, nm)),
        memory_fraction=frac, time_unit=unit, meta=_meta(f), networks=networks,
        crossing_network=cross, reshard=_read_reshard(lat, (nc, nm, n)))


def _read_reshard(lat: Fields, shape: tuple[int, int, int]
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The crossing's redistribution tables (both or neither; None: a file written before
    crossings redistributed)."""
    have = [lat.get(k, None) is not None for k in ("reshard_out", "reshard_in")]
    if not any(have):
        return None
    if not all(have):
        raise lat.error("reshard_in" if have[0] else "reshard_out",
                        "reshard_out and reshard_in come together")
    return _table(lat, "reshard_out", shape), _table(lat, "reshard_in", shape)


def _meta(f: Fields) -> dict[str, Any]:
    meta = f.get("meta", {}) or {}
    if not isinstance(meta, dict):
        raise f.error("meta", f"expected an object, got {type(meta).__name__}")
    return meta


def _int_list(f: Fields, key: str, default: Any = None) -> tuple[int, ...]:
    """A list of integers (integral floats accepted; anything else names the entry)."""
    values = f.list(key) if default is None else f.list(key, default)
    out = []
    for i, x in enumerate(values):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or \
                (isinstance(x, float) and not x.is_integer()) or abs(x) > 2 ** 62:
            raise f.error(f"{key}[{i}]", f"expected an integer, got {x!r}")
        out.append(int(x))
    return tuple(out)


def _read_block(m: Fields) -> tuple[int, int, list[ServingOp]]:
    """(layers, block layers, the block's ops in execution order) of the ``model`` object."""
    m.check_keys({"name", "layers", "block_layers", "ops", "embed_weight_bytes",
                  "lm_head_weight_bytes", "tied_embeddings"})
    layers = m.int("layers", minimum=1)
    block_layers = m.int("block_layers", minimum=1)
    assert layers is not None and block_layers is not None  # required: Fields.int raised
    if layers > MAX_LAYERS:
        raise m.error("layers", f"must be ≤ {MAX_LAYERS:,}, got {layers}")
    if block_layers > layers:
        raise m.error("block_layers", f"{block_layers} exceeds layers {layers}")
    ops = []
    for of in m.items("ops"):
        of.check_keys({"id", "kind", "layer", "module", "weight_bytes", "kv_bytes_per_request",
                       "out_bytes_per_request"})
        layer = of.int("layer", 0)
        if layer >= block_layers:
            raise of.error("layer", f"{layer} is not a layer of the block (0..{block_layers - 1})")
        ops.append(ServingOp(of.str("id"), of.str("kind", "op"), layer, of.str("module", "other"),
                             of.int("weight_bytes", 0), of.int("kv_bytes_per_request", 0),
                             of.int("out_bytes_per_request", 0)))
    if not ops:
        raise m.error("ops", "a block needs at least one operator")
    layers_seen = [o.layer for o in ops]
    if layers_seen != sorted(layers_seen):
        raise m.error("ops", "ops must be listed in execution order (non-decreasing layer)")
    ids = [o.id for o in ops]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise m.error("ops", f"duplicate op id '{dup}'")
    return layers, block_layers, ops


def _read_hardware(h: Fields) -> tuple[dict[str, GpuType], Link, float]:
    """(GPU types by name, network, memory fraction) of the ``hardware`` object."""
    h.check_keys({"gpus", "network", "networks", "crossing_network", "memory_fraction"})
    gpus: dict[str, GpuType] = {}
    for gf in h.items("gpus"):
        gf.check_keys({"name", "peak_flops", "mem_bw_bytes_per_s", "memory_bytes",
                       "price_usd_per_hour", "gpus_per_node", "intra_node"})
        name = gf.str("name")
        if name in gpus:
            raise gf.error("name", f"duplicate GPU type '{name}'")
        gpus[name] = GpuType(name, gf.num("peak_flops", strict=True),
                             gf.num("mem_bw_bytes_per_s", strict=True),
                             gf.num("memory_bytes", strict=True),
                             gf.num("price_usd_per_hour", strict=True),
                             gf.int("gpus_per_node", minimum=1), _link(gf.sub("intra_node")))
    network = _link(h.sub("network"))
    frac = h.num("memory_fraction", 1.0, strict=True)
    if frac > 1:
        raise h.error("memory_fraction", f"must be ≤ 1, got {frac}")
    return gpus, network, frac


def _read_networks(h: Fields, n_gpus: int) -> tuple[tuple[Link, ...], np.ndarray]:
    """(networks, crossing_network) of the ``hardware`` object; ``((), empty)`` when it has
    one network (``network``) for every crossing."""
    if h.get("networks", None) is None:
        if h.get("crossing_network", None) is not None:
            raise h.error("crossing_network", "needs 'networks'")
        return (), np.zeros((0, 0), dtype=np.int64)
    nets = tuple(_link(nf) for nf in cast("list[Fields]", h.items("networks")))
    raw = h.get("crossing_network", None)
    try:
        cross = np.asarray(raw, dtype=np.int64)
        ok = np.array_equal(cross, np.asarray(raw, dtype=np.float64))
    except (TypeError, ValueError):
        ok = False
    if not nets or not ok or cross.shape != (n_gpus, n_gpus) or cross.min() < 0 \
            or cross.max() >= len(nets):
        raise h.error("crossing_network", f"expected a {n_gpus}×{n_gpus} matrix of indices "
                                          f"into the {len(nets)} networks, got {raw!r}")
    return nets, cross


def _read_configs(f: Fields, gpus: dict[str, GpuType]) -> list[ServingConfig]:
    """The device-group configurations (known GPU types, ep dividing tp, unique ids)."""
    configs = []
    for cf in f.items("configs"):
        cf.check_keys({"id", "gpu", "tp", "ep"})
        gpu = cf.str("gpu")
        if gpu not in gpus:
            raise cf.error("gpu", f"unknown GPU type '{gpu}'; known: {', '.join(gpus)}")
        tp = cf.int("tp", 1, minimum=1)
        ep = cf.int("ep", 1, minimum=1)
        if tp % ep:
            raise cf.error("ep", f"expert-parallel degree {ep} must divide tp {tp}")
        configs.append(ServingConfig(cf.str("id"), gpu, tp, ep))
    if not configs:
        raise f.error("configs", "at least one device-group configuration is needed")
    cids = [c.id for c in configs]
    if len(set(cids)) != len(cids):
        raise f.error("configs", f"duplicate config id '{next(c for c in cids if cids.count(c) > 1)}'")
    return configs


def _read_grid(g: Fields) -> ServingGrid:
    """The search grid (defaults of :class:`ServingGrid` for missing fields)."""
    g.check_keys({"max_gpus", "max_owners", "max_replicas", "max_microbatches", "batches"})
    batches = _int_list(g, "batches", list(FILE_BATCHES))
    if not batches or any(b < 1 for b in batches):
        raise g.error("batches", f"expected positive batch sizes, got {list(batches)}")
    try:  # the builder's rule (ServingGrid.__post_init__), errors naming this file's field
        return ServingGrid(g.int("max_gpus", 32, minimum=1), g.int("max_owners", 3, minimum=1),
                           g.int("max_replicas", 4, minimum=1),
                           g.int("max_microbatches", 4, minimum=1), tuple(sorted(set(batches))))
    except InputError as exc:
        if exc.source is not None:
            raise
        raise g.error(exc.field or "", exc.detail) from None


def read_serving_instance(path: str | Path) -> ServingInstance:
    return serving_instance_from_dict(read_json(path), source=str(path))


def microbatch_sizes_for(batches: tuple[int, ...], max_microbatches: int) -> tuple[int, ...]:
    """Every b̂ = b/μ with b in ``batches`` and μ ≤ ``max_microbatches`` dividing b (μ ≤ b:
    work grows with the batches, not with ``max_microbatches``)."""
    return tuple(sorted({b // mu for b in batches for mu in range(1, min(max_microbatches, b) + 1)
                         if b % mu == 0}))


def microbatch_counts(grid: ServingGrid) -> list[int]:
    """The microbatch counts μ a plan of ``grid`` can use: 1..max_microbatches, and no more
    than the largest batch (μ divides the batch; a grid without batch values: up to
    max_microbatches)."""
    largest = MAX_GRID_BATCH if grid.batches is None else max(grid.batches)
    return list(range(1, min(grid.max_microbatches, largest) + 1))


def lcm_all(values) -> int:
    out = 1
    for v in values:
        out = out * int(v) // math.gcd(out, int(v))
    return out
