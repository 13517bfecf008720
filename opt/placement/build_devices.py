"""The devices of a built P1 instance and where the KV cache lives (:mod:`opt.placement.builder`,
problems.md §1.4): the platform's devices with their catalog specs (plus the fabric host when
tp > 1) and links, the KV layout (``heads`` or ``single``) and the KV cache's share of each
KV home's memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from opt.common.errors import InputError
from opt.common.units import TIME_UNITS, seconds_to_ticks
from opt.costlib.hardware import Catalog, DeviceSpec, PlatformSpec
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import Precision
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.instance import Device, Links
from opt.placement.instance_checks import make_links


@dataclass(frozen=True)
class BuildDevices:
    """The instance's devices with their catalog specs, class index sets and the KV homes."""

    specs: list[tuple[str, DeviceSpec]]
    devices: list[Device]
    compute: np.ndarray  # NPU/GPU device indices
    pim: np.ndarray      # PIM device indices
    host: int            # the fabric host (runs the all-reduces) when tp > 1, else -1
    links: Links


@dataclass(frozen=True)
class KvPlan:
    """Where each layer's KV cache lives (problems.md §1.4, KV cache).

    homes: device index of each KV home; cells: (TP shard or −1, home index, fraction of the
    layer's KV heads) of every attention cell — one ``kv_write, qk, softmax, sv`` task set;
    heads: KV heads per home; grouped: whether task names carry the group (``@g{home}``)."""

    layout: str
    homes: list[int]
    cells: list[tuple[int, int, float]]
    heads: list[float]
    grouped: bool


def kv_plan(card: ModelCard, opt: BuildOptions, devs: BuildDevices) -> KvPlan:
    """The KV layout. ``heads``: the H_kv heads of a layer split into G = min(#PIM, H_kv)
    contiguous groups as evenly as the head count allows (group g on PIM g; one group on the
    first NPU/GPU without PIM); TP shard s holds the real head range [s·H_kv/tp, (s+1)·H_kv/tp)
    (the same division of FLOPs and bytes by tp as every sharded op), and every non-empty
    (shard, group) intersection is one attention cell whose share is its heads / H_kv. So with
    tp = 2 and 4 groups each shard has two cells; with tp = 4 and 2 groups two shards share
    each group. ``single``: one cell per TP shard, shard s on PIM s mod #PIM."""
    tp, pim = opt.tp, devs.pim
    shards = list(range(tp)) if tp > 1 else [-1]
    if opt.kv_layout == "single":
        homes = [int(pim[s % len(pim)]) if len(pim) else int(devs.compute[0]) for s in range(tp)]
        cells = [(s, max(s, 0), 1.0 / tp) for s in shards]
        return KvPlan("single", homes, cells, [card.kv_heads / tp] * tp, False)
    h_kv = card.kv_heads
    n_groups = max(1, min(len(pim), h_kv))
    sizes = [h_kv // n_groups + (1 if g < h_kv % n_groups else 0) for g in range(n_groups)]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.float64)
    homes = [int(pim[g]) for g in range(n_groups)] if len(pim) else [int(devs.compute[0])]
    cells = []
    for s in shards:
        lo, hi = (0.0, float(h_kv)) if s < 0 else (s * h_kv / tp, (s + 1) * h_kv / tp)
        for g in range(n_groups):
            width = min(hi, bounds[g + 1]) - max(lo, bounds[g])
            if width > 1e-9:
                cells.append((s, g, float(width / h_kv)))
    return KvPlan("heads", homes, cells, [float(x) for x in sizes], n_groups > 1)


def reserve_kv(card: ModelCard, devs: BuildDevices, kv: KvPlan, workload: Workload,
                prec: Precision, n_layers: int) -> dict[str, int]:
    """Take each KV home's share of the cache at the end of the workload (context L_in + L_out,
    B sequences, the KV precision) out of its weight capacity, in place (problems.md §1.4):
    weights and KV share the device memory, so a long context leaves less room for weights.
    Returns the bytes reserved per device name; :class:`InputError` when the KV alone does not
    fit a home."""
    total = float(card.kv_bytes(workload.prefill + workload.decode, prec.kv)) \
        * workload.batch * n_layers / card.layers
    per_dev: dict[int, float] = {}
    for h, heads in zip(kv.homes, kv.heads):
        per_dev[h] = per_dev.get(h, 0.0) + total * heads / card.kv_heads
    out = {}
    for d, nbytes in per_dev.items():
        dev, need = devs.devices[d], int(math.ceil(nbytes))
        out[dev.name] = need
        if dev.weight_capacity is None:
            continue
        if need > dev.weight_capacity:
            raise InputError(f"the KV cache share of {dev.name} ({need / 1e9:.3g} GB at context "
                             f"{workload.prefill + workload.decode}, batch {workload.batch}) "
                             f"exceeds its memory ({dev.weight_capacity / 1e9:.3g} GB)",
                             field="workload")
        devs.devices[d] = replace(dev, weight_capacity=dev.weight_capacity - need)
    return out


# ---- devices and links ------------------------------------------------------------------------

def platform_devices(platform: PlatformSpec, catalog: Catalog, opt: BuildOptions) -> BuildDevices:
    """The platform's devices (plus the host when tp > 1), KV homes and the fabric links."""
    tp = opt.tp
    tick = TIME_UNITS[opt.time_unit]
    specs = [(name, catalog.device(kind)) for name, kind in platform.device_names()]
    host_spec = catalog.device(platform.host)
    if tp > 1:
        specs.append(("HOST", host_spec))
    devices = [Device(name, s.device_class,
                      None if s.memory_bytes is None or s.device_class == "cpu"
                      else int(s.memory_bytes)) for name, s in specs]
    nd = len(devices)
    cls = np.array([d.device_class for d in devices])
    compute_devs = np.flatnonzero((cls == "npu") | (cls == "gpu"))
    pim_devs = np.flatnonzero(cls == "pim")
    host_dev = nd - 1 if tp > 1 else -1
    if len(compute_devs) == 0:
        raise InputError(f"platform '{platform.name}' has no NPU or GPU", field="platform")
    lat = int(seconds_to_ticks(platform.fabric.latency_s, opt.time_unit))
    bw = platform.fabric.bandwidth_bytes_per_s * tick
    links = make_links(devices, platform.topology, True, lat, bw)
    return BuildDevices(specs, devices, compute_devs, pim_devs, host_dev, links)
