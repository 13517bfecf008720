"""Hardware catalog: device types, DOPS platforms and GPU node types, read from / written to JSON.

The bundled catalog (``opt/costlib/data/hardware.json``) holds every device of DOPS Table 2 and
OpWeave Table 1 with its source. Users extend it with their own JSON file of the same shape
(``load_catalog(path)`` merges it over the bundled one; ``Catalog.to_dict()`` writes it back).

Device fields (units in the names): ``peak_flops`` (dense fp16/bf16 FLOP/s), ``mem_bw_bytes_per_s``,
``memory_bytes`` (≥ 1, ≤ 2^62), ``price_usd_per_hour`` (> 0, null when unpublished), ``class`` ∈ {npu, pim, gpu, cpu},
``latency_model`` (see :mod:`opt.costlib.latency`), ``native_format`` and ``conversions`` (weight-layout
conversion steps, problems.md §5.4); for GPUs optionally ``memory_technology`` ∈ {HBM, GDDR} and
``interconnect`` ∈ {NVLink, PCIe} (the GPU-to-GPU fabric of its servers), which decide the
closest measured card of a GPU without measurements (:mod:`opt.costlib.gpu_match`).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import Fields, read_json, write_json
from opt.costlib.latency import LatencyModel, Link, latency_model_from_dict

DEVICE_CLASSES = ("npu", "pim", "gpu", "cpu")
#: Memory technologies and GPU-to-GPU interconnects a device may declare.
MEMORY_TECHNOLOGIES = ("HBM", "GDDR")
INTERCONNECTS = ("NVLink", "PCIe")
FORMATS = ("linear", "npu_opt", "pim_opt", "dual")
#: Largest device memory (bytes) a catalog may declare: capacities are int64 in instances.
MAX_MEMORY_BYTES = float(2 ** 62)
#: Most devices of one type on a platform (instances have one column per device).
MAX_PLATFORM_DEVICES = 1024
#: Bytes stored per byte of weights for each layout format (``dual`` keeps both optimised copies).
STORAGE_MULTIPLIER = {"linear": 1.0, "npu_opt": 1.0, "pim_opt": 1.0, "dual": 2.0}


@dataclass(frozen=True)
class Conversion:
    """One format-conversion step on a device: ``bytes/bandwidth + overhead`` seconds."""

    src: str
    dst: str
    bandwidth_bytes_per_s: float
    overhead_s: float = 0.0
    source: str = ""

    def seconds(self, nbytes: float) -> float:
        return nbytes / self.bandwidth_bytes_per_s + self.overhead_s


@dataclass(frozen=True)
class DeviceSpec:
    """One device type (a GPU model, the Ascend 910B NPU, the AiM PIM device, the host)."""

    name: str
    device_class: str
    peak_flops: float
    mem_bw_bytes_per_s: float
    memory_bytes: float | None
    price_usd_per_hour: float | None
    latency_model: LatencyModel | None
    native_format: str = "linear"
    conversions: tuple[Conversion, ...] = ()
    source: str = ""
    memory_technology: str | None = None   # one of MEMORY_TECHNOLOGIES (None: not stated)
    interconnect: str | None = None        # one of INTERCONNECTS (None: not stated)

    def latency_s(self, op_class: str, flops, bytes_):
        """Op latency in seconds from this device's latency model (vectorised)."""
        if self.latency_model is None:
            raise InputError(f"device '{self.name}' has no compute latency model",
                             field="latency_model")
        return self.latency_model.latency_s(op_class, flops, bytes_)

    def conversion_chain(self, stored_format: str, nbytes: float) -> tuple[list[Conversion], float]:
        """Cheapest chain of conversions from ``stored_format`` to this device's native format.

        ``dual`` stores each device's native copy, so it needs no conversion. Returns the steps and
        their total seconds for a block of ``nbytes`` bytes; raises if no chain exists.
        """
        if stored_format not in FORMATS:
            raise UnknownNameError("format", stored_format, FORMATS)
        if stored_format in ("dual", self.native_format):
            return [], 0.0
        dist: dict[str, float] = {stored_format: 0.0}
        prev: dict[str, Conversion] = {}
        heap = [(0.0, stored_format)]
        while heap:
            d, fmt = heapq.heappop(heap)
            if fmt == self.native_format:
                break
            if d > dist.get(fmt, float("inf")):
                continue
            for conv in self.conversions:
                if conv.src != fmt:
                    continue
                nd = d + conv.seconds(nbytes)
                if nd < dist.get(conv.dst, float("inf")):
                    dist[conv.dst] = nd
                    prev[conv.dst] = conv
                    heapq.heappush(heap, (nd, conv.dst))
        if self.native_format not in dist:
            raise InputError(f"device '{self.name}' has no conversion chain from "
                             f"'{stored_format}' to its native '{self.native_format}'",
                             field="conversions")
        steps: list[Conversion] = []
        fmt = self.native_format
        while fmt != stored_format:
            steps.append(prev[fmt])
            fmt = prev[fmt].src
        return steps[::-1], dist[self.native_format]

    def load_s(self, nbytes: float, stored_format: str, host_link: Link) -> float:
        """Seconds to bring a weight block of ``nbytes`` bytes stored in ``stored_format`` in host
        memory onto this device: host-link transfer plus the conversion chain (problems.md §5.4)."""
        return float(host_link.transfer_s(nbytes)) + self.conversion_chain(stored_format, nbytes)[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "class": self.device_class, "peak_flops": self.peak_flops,
            "mem_bw_bytes_per_s": self.mem_bw_bytes_per_s, "memory_bytes": self.memory_bytes,
            "price_usd_per_hour": self.price_usd_per_hour,
            "latency_model": None if self.latency_model is None else self.latency_model.to_dict(),
            "native_format": self.native_format,
            "conversions": [{"from": c.src, "to": c.dst,
                             "bandwidth_bytes_per_s": c.bandwidth_bytes_per_s,
                             "overhead_s": c.overhead_s, "source": c.source}
                            for c in self.conversions],
            "source": self.source,
            **{k: v for k, v in (("memory_technology", self.memory_technology),
                                 ("interconnect", self.interconnect)) if v is not None},
        }


@dataclass(frozen=True)
class PlatformMember:
    """``count`` devices of type ``device`` named ``prefix0``, ``prefix1``, …"""

    device: str
    count: int
    prefix: str


@dataclass(frozen=True)
class PlatformSpec:
    """A DOPS-style platform: devices on a fabric, a host that holds weights and does reductions.

    fabric: device↔device link (topology ``full`` = one channel per ordered pair, ``star`` = via
    per-device up/down links); host_link: host→device link used by weight loads.
    """

    name: str
    members: tuple[PlatformMember, ...]
    host: str
    topology: str
    fabric: Link
    host_link: Link
    source: str = ""

    def device_names(self) -> list[tuple[str, str]]:
        """(instance name, device type) of every device, e.g. ("PIM1", "AiM")."""
        return [(f"{m.prefix}{i}", m.device) for m in self.members for i in range(m.count)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name,
                "devices": [{"device": m.device, "count": m.count, "prefix": m.prefix}
                            for m in self.members],
                "host": self.host, "topology": self.topology, "fabric": self.fabric.to_dict(),
                "host_link": self.host_link.to_dict(), "source": self.source}


@dataclass(frozen=True)
class NodeType:
    """A GPU server type for serving plans: GPUs per node, the intra-node link, the network."""

    name: str
    gpu: str
    gpus_per_node: int
    intra_node: Link
    network: Link
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gpu": self.gpu, "gpus_per_node": self.gpus_per_node,
                "intra_node": self.intra_node.to_dict(), "network": self.network.to_dict(),
                "source": self.source}


def _lookup(table: Mapping[str, Any], what: str, name: str):
    if name in table:
        return table[name]
    folded = {k.lower(): v for k, v in table.items()}
    if name.lower() in folded:
        return folded[name.lower()]
    raise UnknownNameError(what, name, table)


@dataclass(frozen=True)
class Catalog:
    """Immutable hardware catalog; names are looked up case-insensitively."""

    devices: Mapping[str, DeviceSpec]
    platforms: Mapping[str, PlatformSpec] = field(default_factory=dict)
    node_types: Mapping[str, NodeType] = field(default_factory=dict)

    def device(self, name: str) -> DeviceSpec:
        return _lookup(self.devices, "device", name)

    def platform(self, name: str) -> PlatformSpec:
        return _lookup(self.platforms, "platform", name)

    def node_type(self, name: str) -> NodeType:
        """Node type by its own name or by its GPU's name (first match)."""
        try:
            return _lookup(self.node_types, "node type", name)
        except UnknownNameError:
            for nt in self.node_types.values():
                if nt.gpu.lower() == name.lower():
                    return nt
            raise

    def gpus(self) -> list[DeviceSpec]:
        return [d for d in self.devices.values() if d.device_class == "gpu"]

    def merged(self, other: Catalog) -> Catalog:
        """This catalog with ``other``'s entries added (same names replaced)."""
        return replace(self, devices={**self.devices, **other.devices},
                       platforms={**self.platforms, **other.platforms},
                       node_types={**self.node_types, **other.node_types})

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1,
                "devices": [d.to_dict() for d in self.devices.values()],
                "platforms": [p.to_dict() for p in self.platforms.values()],
                "node_types": [n.to_dict() for n in self.node_types.values()]}

    def write(self, path: str | Path) -> None:
        write_json(self.to_dict(), path)


# --------------------------------------------------------------------------------------------
# JSON reading

def _link(f: Fields) -> Link:
    f.check_keys({"latency_s", "bandwidth_bytes_per_s", "source"})
    return Link(latency_s=f.num("latency_s"),
                bandwidth_bytes_per_s=f.num("bandwidth_bytes_per_s", strict=True),
                source=f.str("source", ""))


def _device(f: Fields) -> DeviceSpec:
    f.check_keys({"name", "class", "peak_flops", "mem_bw_bytes_per_s", "memory_bytes",
                  "price_usd_per_hour", "latency_model", "native_format", "conversions",
                  "source", "memory_technology", "interconnect"})
    cls = f.str("class")
    if cls not in DEVICE_CLASSES:
        raise f.error("class", f"unknown device class '{cls}'; known: {', '.join(DEVICE_CLASSES)}")
    peak = f.num("peak_flops")
    bw = f.num("mem_bw_bytes_per_s")
    native = f.str("native_format", "linear")
    if native not in FORMATS or native == "dual":
        raise f.error("native_format", f"unknown format '{native}'; known: linear, npu_opt, pim_opt")
    convs = []
    for c in f.items("conversions") if "conversions" in f.obj else []:
        c.check_keys({"from", "to", "bandwidth_bytes_per_s", "overhead_s", "source"})
        for key in ("from", "to"):
            if c.str(key) not in FORMATS:
                raise c.error(key, f"unknown format '{c.obj[key]}'; known: {', '.join(FORMATS)}")
        convs.append(Conversion(c.str("from"), c.str("to"),
                                c.num("bandwidth_bytes_per_s", strict=True),
                                c.num("overhead_s", 0.0), c.str("source", "")))
    model = latency_model_from_dict(f.get("latency_model", None), peak_flops=peak,
                                    mem_bw_bytes_per_s=bw, source=f.source,
                                    field_path=f._field("latency_model"))
    if model is not None and (peak <= 0 or bw <= 0):
        raise f.error("peak_flops", "a device with a latency model needs peak_flops > 0 and "
                                    "mem_bw_bytes_per_s > 0")
    memory = f.num("memory_bytes", None, minimum=1.0)
    if memory is not None and memory > MAX_MEMORY_BYTES:
        raise f.error("memory_bytes", f"must be ≤ 2^62 bytes, got {memory!r}")
    return DeviceSpec(name=f.str("name"), device_class=cls, peak_flops=peak,
                      mem_bw_bytes_per_s=bw, memory_bytes=memory,
                      price_usd_per_hour=f.num("price_usd_per_hour", None, strict=True),
                      latency_model=model, native_format=native, conversions=tuple(convs),
                      source=f.str("source", ""),
                      memory_technology=_choice(f, "memory_technology", MEMORY_TECHNOLOGIES),
                      interconnect=_choice(f, "interconnect", INTERCONNECTS))


def _choice(f: Fields, key: str, known: tuple[str, ...]) -> str | None:
    """The optional field ``key`` (None when absent), one of ``known``."""
    if f.obj.get(key) is None:
        return None
    value = f.str(key)
    if value not in known:
        raise f.error(key, f"unknown {key.replace('_', ' ')} '{value}'; known: {', '.join(known)}")
    return value


def _platform(f: Fields) -> PlatformSpec:
    f.check_keys({"name", "devices", "host", "topology", "fabric", "host_link", "source"})
    members = []
    for m in f.items("devices"):
        m.check_keys({"device", "count", "prefix"})
        count = m.int("count", minimum=1)
        if count > MAX_PLATFORM_DEVICES:
            raise m.error("count", f"must be ≤ {MAX_PLATFORM_DEVICES}, got {count}")
        members.append(PlatformMember(m.str("device"), count, m.str("prefix")))
    topology = f.str("topology", "full")
    if topology not in ("full", "star"):
        raise f.error("topology", f"unknown topology '{topology}'; known: full, star")
    return PlatformSpec(name=f.str("name"), members=tuple(members), host=f.str("host"),
                        topology=topology, fabric=_link(f.sub("fabric")),
                        host_link=_link(f.sub("host_link")), source=f.str("source", ""))


def _node_type(f: Fields) -> NodeType:
    f.check_keys({"name", "gpu", "gpus_per_node", "intra_node", "network", "source"})
    return NodeType(name=f.str("name"), gpu=f.str("gpu"),
                    gpus_per_node=_gpus_per_node(f),
                    intra_node=_link(f.sub("intra_node")), network=_link(f.sub("network")),
                    source=f.str("source", ""))


def _gpus_per_node(f: Fields) -> int:
    n = f.int("gpus_per_node", minimum=1)
    assert n is not None  # required
    if n > MAX_PLATFORM_DEVICES:
        raise f.error("gpus_per_node", f"must be ≤ {MAX_PLATFORM_DEVICES}, got {n}")
    return n


def catalog_from_dict(obj: Any, source: str | None = None,
                      known_devices: Mapping[str, DeviceSpec] | None = None) -> Catalog:
    """Validate and build a catalog from its JSON form; cross-references are checked against
    the file's own devices plus ``known_devices`` (the bundled ones when merging)."""
    f = Fields(obj, source, "")
    f.check_keys({"schema", "devices", "platforms", "node_types", "source"})
    if f.int("schema", 1) != 1:
        raise f.error("schema", f"unsupported schema version {obj.get('schema')!r}; known: 1")
    devices: dict[str, DeviceSpec] = {}
    for d in f.items("devices") if "devices" in obj else []:
        dev = _device(d)
        if dev.name in devices:
            raise d.error("name", f"duplicate device name '{dev.name}'")
        devices[dev.name] = dev
    all_devices = {**(known_devices or {}), **devices}
    platforms: dict[str, PlatformSpec] = {}
    for p in f.items("platforms") if "platforms" in obj else []:
        plat = _platform(p)
        for i, m in enumerate(plat.members):
            try:
                _lookup(all_devices, "device", m.device)
            except UnknownNameError as exc:
                raise InputError(exc.detail, source=source,
                                 field=f"{p.path}.devices[{i}].device") from None
        try:
            _lookup(all_devices, "device", plat.host)
        except UnknownNameError as exc:
            raise InputError(exc.detail, source=source, field=f"{p.path}.host") from None
        platforms[plat.name] = plat
    node_types: dict[str, NodeType] = {}
    for n in f.items("node_types") if "node_types" in obj else []:
        nt = _node_type(n)
        try:
            _lookup(all_devices, "device", nt.gpu)
        except UnknownNameError as exc:
            raise InputError(exc.detail, source=source, field=f"{n.path}.gpu") from None
        node_types[nt.name] = nt
    return Catalog(devices=devices, platforms=platforms, node_types=node_types)


def bundled_catalog() -> Catalog:
    """The catalog shipped with hetopt (the papers' devices, DOPS platforms, GPU nodes)."""
    text = resources.files("opt.costlib.data").joinpath("hardware.json")
    with resources.as_file(text) as path:
        return catalog_from_dict(read_json(path), source=str(path))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The bundled catalog, with the user's JSON file at ``path`` merged over it when given."""
    base = bundled_catalog()
    if path is None:
        return base
    user = catalog_from_dict(read_json(path), source=str(path), known_devices=base.devices)
    return base.merged(user)
