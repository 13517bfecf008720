"""Seconds of one GPU kernel of a serving step under the chosen GPU cost model (problems.md §5.3,
§5.3b) and, where a measured table has the kernel, its measured latency (docs/serving.md
"Measured GPU costs").

``gpu_cost``:

- ``"calibrated"`` (default: measured data beats constants): the per-class model fitted to
  measured kernels (:mod:`opt.costlib.gpu_calib`) for every GPU the calibration covers; the
  catalog roofline for the others (the provenance lists which);
- ``"roofline"``: the catalog's ``t0 + max(f/(η_c·F), m/(η_m·β))`` (the model before issue 32).

A measured table (``measurements``) replaces a kernel's modelled seconds when it has an exact
or interpolated row of the same GPU, kernel kind, model card and shape (GEMMs and element-wise
kernels: tokens = microbatch, share = 1/tp; FlashAttention: tokens 1, context s, batch =
microbatch, share = the GPU's KV-head fraction); the counts by origin go to
``meta.measurements``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opt.common.errors import InputError
from opt.costlib.gpu_calib import BUNDLED_CALIBRATION, GpuCalibration, read_calibrations
from opt.costlib.latency import EfficiencyRoofline, Link
from opt.costlib.measured import EXACT, INTERPOLATED, NO_ENTRY, MeasuredTable

GPU_COSTS = ("calibrated", "roofline")
DEFAULT_GPU_COST = "calibrated"
#: Measured kernel kind of a kernel by its member operator kinds (opt.serving.builder.Kernel).
_MEASURED_KIND = {frozenset({"q_proj", "k_proj", "v_proj"}): "qkv_proj",
                  frozenset({"gate_proj", "up_proj"}): "gate_up_proj",
                  frozenset({"o_proj"}): "o_proj", frozenset({"down_proj"}): "down_proj",
                  frozenset({"act"}): "act", frozenset({"attn_norm"}): "attn_norm",
                  frozenset({"ffn_norm"}): "ffn_norm",
                  frozenset({"qk", "softmax", "sv"}): "flash_attn"}


def check_gpu_cost(gpu_cost: str) -> None:
    """InputError naming ``gpu_cost`` unless it is one of :data:`GPU_COSTS`."""
    if gpu_cost not in GPU_COSTS:
        raise InputError(f"unknown GPU cost model '{gpu_cost}'; known: {', '.join(GPU_COSTS)}",
                         field="gpu_cost")


def load_calibrations(catalog: Any, path: str | None = None) -> dict[str, GpuCalibration]:
    """The calibrations of ``path`` (default: the bundled file)."""
    return read_calibrations(path or BUNDLED_CALIBRATION, catalog)


def measured_kind(members: frozenset[str], extra: str | None) -> str | None:
    """The measured-table kind of a kernel (None: not a profiled kernel kind)."""
    if extra == "rope" and not members:
        return "rope"
    return _MEASURED_KIND.get(members)


@dataclass
class KernelCoster:
    """The GPU cost model of one instance build: roofline models, calibrations (empty under
    ``roofline``), the optional measured table and its lookup counts."""

    gpu_cost: str
    roofline: Mapping[str, EfficiencyRoofline]
    calibrations: Mapping[str, GpuCalibration]
    table: MeasuredTable | None = None
    model: str = ""
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("exact", "interpolated", "model_no_entry", "model_outside_range"), 0))
    _memo: dict[tuple, tuple[float | None, str]] = field(default_factory=dict)

    def cal(self, gpu: str) -> GpuCalibration | None:
        """The calibration used for ``gpu`` (None: the roofline)."""
        return self.calibrations.get(gpu) if self.gpu_cost == "calibrated" else None

    def kernel_s(self, gpu: str, op_class: str, flops: float, bytes_: float, *,
                 units: float = 1.0, launches: bool = True,
                 key: tuple[str, int, int, int, float] | None = None) -> float:
        """Seconds of a kernel of ``op_class`` (``gemm``, ``attention_decode``,
        ``elementwise``) on ``gpu``; ``units``: its parallel work units (attention); ``key``:
        (measured kind, tokens, context, batch, share) for the measured table."""
        if key is not None and self.table is not None and launches:
            measured = self._lookup(gpu, key)
            if measured is not None:
                return measured
        cal = self.cal(gpu)
        if cal is None:
            rf = self.roofline[gpu]
            t = max(flops / (rf.eta_c * rf.peak_flops), bytes_ / (rf.eta_m * rf.mem_bw_bytes_per_s))
            return t + (rf.t0_s if launches else 0.0)
        t = float(cal.kernel_s(op_class, flops, bytes_, units))
        if not launches:
            t -= (cal.classes.get(op_class) or cal.classes["elementwise"]).t0_s
        return t

    def _lookup(self, gpu: str, key: tuple[str, int, int, int, float]) -> float | None:
        """The table's seconds for ``key`` on ``gpu`` (None: the model), counted by origin."""
        full = (gpu, *key)
        if full not in self._memo:
            kind, tokens, context, batch, share = key
            assert self.table is not None
            lat, code = self.table.lookup_s(gpu, kind, tokens=tokens, context=context,
                                            batch=batch, share=share, model=self.model)
            c = int(code[0])
            value = float(lat[0]) if c in (EXACT, INTERPOLATED) else None
            name = {EXACT: "exact", INTERPOLATED: "interpolated",
                    NO_ENTRY: "model_no_entry"}.get(c, "model_outside_range")
            self._memo[full] = (value, name)
        value, name = self._memo[full]
        self.counts[name] += 1
        return value

    def all_reduce_s(self, gpu: str, bytes_: float, gpus: int, fallback: float) -> float:
        """All-reduce seconds: the calibration's measured fit for that group size, else
        ``fallback`` (the ring formula on the intra-node link)."""
        cal = self.cal(gpu)
        if cal is None or gpus <= 1:
            return fallback if gpus > 1 else 0.0
        return cal.all_reduce_s(bytes_, gpus, lambda: fallback)

    def intra_link(self, gpu: str, catalog_link: Link) -> Link:
        """The intra-node point-to-point link: the measured send/recv fit when calibrated."""
        cal = self.cal(gpu)
        return cal.send_recv.get("intra", catalog_link) if cal else catalog_link

    def network(self, gpu: str, catalog_link: Link) -> Link:
        """The inter-node link of a network crossing: the measured send/recv fit when
        calibrated (problems.md §3.1 "Network crossings"), else the catalog's."""
        cal = self.cal(gpu)
        return cal.send_recv.get("inter", catalog_link) if cal else catalog_link

    def provenance(self) -> dict[str, Any]:
        """``meta.gpu_cost`` and ``meta.gpu_models``: the model per GPU and its source."""
        per_gpu = {}
        for gpu, rf in self.roofline.items():
            cal = self.cal(gpu)
            per_gpu[gpu] = ({"model": "calibrated", "source": cal.source} if cal else
                            {"model": "roofline", "source": rf.source})
        return {"gpu_cost": self.gpu_cost, "gpu_models": per_gpu}

    def measurements_meta(self) -> dict[str, Any] | None:
        """``meta.measurements`` (None without a table), as for placement instances."""
        if self.table is None:
            return None
        t = self.table
        c = self.counts
        return {"file": t.path, "interpolate": t.interpolate, "rows": len(t.rows),
                "sources": sorted({m.source for m in t.rows}),
                "kernel_costs": {**c, "model": c["model_no_entry"] + c["model_outside_range"]}}

