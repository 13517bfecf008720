"""Seconds of one GPU kernel of a serving step under the chosen GPU cost model (problems.md §5.3,
§5.3b) and, where a measured table has the kernel, its measured latency (docs/serving.md
"Measured GPU costs").

``gpu_cost``:

- ``"calibrated"`` (default: measured data beats constants): the per-class model fitted to
  measured kernels (:mod:`opt.costlib.gpu_calib`) for every GPU the calibration covers; for the
  others ``unmeasured_gpu`` decides (the provenance lists which GPU got what):

  - ``"transfer"`` (default): the fitted *dimensionless* parameters (per class t0, η_c, η_m,
    u_half) of the closest measured card (:func:`nearest_calibrated`: same memory technology
    and interconnect first, then nearest log peaks — :mod:`opt.costlib.gpu_match`) on the
    GPU's own datasheet peaks (FLOP/s, memory bandwidth); its collectives and network stay
    the catalog's (no measured links) — problems.md §5.3b "Unmeasured GPUs";
  - ``"roofline"``: the catalog roofline (the model before this option);
- ``"roofline"``: the catalog's ``t0 + max(f/(η_c·F), m/(η_m·β))`` (the uncalibrated model).

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
from opt.costlib.gpu_match import CardMatch, closest_measured
from opt.costlib.latency import EfficiencyRoofline, Link
from opt.costlib.measured import EXACT, INTERPOLATED, NO_ENTRY, MeasuredTable

GPU_COSTS = ("calibrated", "roofline")
DEFAULT_GPU_COST = "calibrated"
#: What ``calibrated`` does for a GPU type without measurements (module docstring).
UNMEASURED_GPU = ("transfer", "roofline")
DEFAULT_UNMEASURED_GPU = "transfer"
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


def check_unmeasured_gpu(unmeasured_gpu: str) -> None:
    """InputError naming ``unmeasured_gpu`` unless it is one of :data:`UNMEASURED_GPU`."""
    if unmeasured_gpu not in UNMEASURED_GPU:
        raise InputError(f"unknown unmeasured-GPU rule '{unmeasured_gpu}'; known: "
                         f"{', '.join(UNMEASURED_GPU)}", field="unmeasured_gpu")


def nearest_calibrated(gpu: str, catalog: Any, cals: Mapping[str, GpuCalibration]
                       ) -> CardMatch:
    """The closest measured card of catalog GPU ``gpu`` among the calibrated ones
    (:func:`opt.costlib.gpu_match.closest_measured`)."""
    return closest_measured(catalog.device(gpu), [catalog.device(g) for g in cals])


def transferred_calibration(gpu: str, model: EfficiencyRoofline, donor: GpuCalibration
                            ) -> GpuCalibration:
    """``gpu``'s model under ``unmeasured_gpu="transfer"``: ``donor``'s classes on ``gpu``'s
    own peaks, no measured collectives or links (the catalog's stay); every class is
    borrowed (from the donor, or from the card the donor borrowed it from)."""
    borrowed = {c: donor.borrowed.get(c, donor.gpu) for c in donor.classes}
    return GpuCalibration(gpu, model.peak_flops, model.mem_bw_bytes_per_s, donor.classes, {}, {},
                          f"transferred: {donor.gpu}'s fitted classes ({donor.source}) on "
                          f"{gpu}'s datasheet peaks; collectives and network from the catalog",
                          borrowed)


def outside_measured_regime(cal: GpuCalibration) -> str | None:
    """Why ``cal``'s predictions lie outside its GPU's measured regime (None: every class was
    fitted to that GPU's own rows)."""
    if not cal.borrowed:
        return None
    by_card: dict[str, list[str]] = {}
    for c, card in cal.borrowed.items():
        by_card.setdefault(card, []).append(c)
    parts = "; ".join(f"{', '.join(cs)} from {card}" for card, cs in sorted(by_card.items()))
    return f"{cal.gpu} has no measured rows for these classes, borrowed: {parts}"


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
    transferred: Mapping[str, CardMatch] = field(default_factory=dict)  # GPU -> measured card
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
        per_gpu: dict[str, dict[str, str]] = {}
        for gpu, rf in self.roofline.items():
            cal = self.cal(gpu)
            if cal is None:
                per_gpu[gpu] = {"model": "roofline", "source": rf.source}
            elif gpu in self.transferred:
                match = self.transferred[gpu]
                per_gpu[gpu] = {"model": "transferred", "donor": match.card, "why": match.why,
                                "source": cal.source}
            else:
                per_gpu[gpu] = {"model": "calibrated", "source": cal.source}
            outside = None if cal is None else outside_measured_regime(cal)
            if outside is not None:
                per_gpu[gpu]["outside_measured_regime"] = outside
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

