"""The calibrated GPU model (problems.md §5.3b): per-kernel-class launch cost and efficiencies,
a decode-attention efficiency curve, and measured collectives and point-to-point links, fitted
to measured kernel latencies (the bundled Vidur table, docs/measurements.md "GPU kernels").

Kernel latency of class ``c`` doing ``f`` FLOPs over ``m`` bytes on a GPU of peak ``F`` and
bandwidth ``β``::

    τ = t0[c] + max(f / (η_c[c]·F), m / (η_m[c]·g_c(u)·β))

with ``g_c(u) = u / (u + u_half[c])`` the fraction of the memory system a kernel of ``u``
parallel work units reaches (``u`` = sequences × KV heads per GPU for attention kernels, the
CTAs FlashAttention launches; ``u_half = 0`` for the other classes: ``g = 1``). Classes:
``gemm`` (dense and fused GEMMs), ``attention`` (prefill FlashAttention), ``attention_decode``
(decode FlashAttention, one query token), ``norm`` (RMSNorm), ``activation`` (SiLU/GELU-and-mul),
``elementwise`` (rotary, adds and every other kernel). An ``η_c`` whose compute term binds at no
measured point is not determined by the data and is held at 1 (the report says so).

Collectives: ``all_reduce`` of ``b`` bytes over ``g`` GPUs of one node, and ``send_recv``
between two GPUs of one node (``intra``) or of two nodes (``inter``), each
``latency + b / bandwidth`` fitted per group. The fit is least squares on log latencies
(``scipy.optimize.least_squares``), with the standard error of each parameter and the
residuals per class; :func:`split_held_out` separates a held-out set (one model family, one
network topology, every other attention batch / prefill chunk) for the out-of-sample error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from opt.common.errors import InputError, UnknownNameError
from opt.costlib.latency import EfficiencyRoofline, Link
from opt.costlib.measured import MeasuredTable, Measurement

#: Kernel classes of the calibrated model and the measured kinds that fit each.
GPU_CLASSES = ("gemm", "attention", "attention_decode", "norm", "activation", "elementwise")
KIND_CLASS = {"qkv_proj": "gemm", "o_proj": "gemm", "gate_up_proj": "gemm", "down_proj": "gemm",
              "act": "activation", "attn_norm": "norm", "ffn_norm": "norm",
              "rope": "elementwise", "add_ffn": "elementwise"}
#: The bundled calibration (written by ``hetopt calibrate --gpu``).
BUNDLED_CALIBRATION = Path(__file__).parent / "data" / "gpu_calibration.json"
#: Held out of the fit: a model family (GEMM / element-wise), a network topology.
HELD_OUT_MODELS = ("qwen-72b",)
HELD_OUT_TOPOLOGY = "pairwise_nvlink"


def kernel_class(m: Measurement) -> str | None:
    """The calibrated class of a kernel row (None: a collective or an unknown kind)."""
    if m.op_kind == "flash_attn":
        return "attention_decode" if m.tokens == 1 else "attention"
    return KIND_CLASS.get(m.op_kind)


@dataclass(frozen=True)
class ClassParams:
    """One kernel class: launch ``t0_s``, efficiencies ``eta_c``, ``eta_m``, and ``u_half`` of
    the parallelism curve (0: none)."""

    t0_s: float
    eta_c: float
    eta_m: float
    u_half: float = 0.0

    def latency_s(self, flops, bytes_, units, peak_flops: float, mem_bw: float):
        """Seconds (vectorised over ``flops``, ``bytes_``, ``units``)."""
        f, m = np.asarray(flops, dtype=np.float64), np.asarray(bytes_, dtype=np.float64)
        u = np.maximum(np.asarray(units, dtype=np.float64), 1.0)
        g = u / (u + self.u_half)
        return self.t0_s + np.maximum(f / (self.eta_c * peak_flops),
                                      m / (self.eta_m * g * mem_bw))


@dataclass(frozen=True)
class GpuCalibration:
    """The calibrated model of one GPU type: classes, all-reduce links per group size (one
    node), send/recv links (``intra``, ``inter``), and where each came from."""

    gpu: str
    peak_flops: float
    mem_bw_bytes_per_s: float
    classes: Mapping[str, ClassParams]
    all_reduce: Mapping[int, Link] = field(default_factory=dict)
    send_recv: Mapping[str, Link] = field(default_factory=dict)
    source: str = ""

    def kernel_s(self, op_class: str, flops, bytes_, units=1.0):
        """Seconds of a kernel of ``op_class`` (an unfitted class takes ``elementwise``)."""
        p = self.classes.get(op_class) or self.classes["elementwise"]
        return p.latency_s(flops, bytes_, units, self.peak_flops, self.mem_bw_bytes_per_s)

    def all_reduce_s(self, bytes_: float, gpus: int, fallback: Callable[[], float]) -> float:
        """Measured-fit all-reduce seconds over ``gpus`` GPUs of a node (``fallback()`` when
        that group size was not measured)."""
        if gpus <= 1:
            return 0.0
        link = self.all_reduce.get(gpus)
        return fallback() if link is None else link.latency_s + bytes_ / link.bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "source": self.source,
                "classes": {c: vars(p) for c, p in self.classes.items()},
                "all_reduce": {str(g): l.to_dict() for g, l in self.all_reduce.items()},
                "send_recv": {k: l.to_dict() for k, l in self.send_recv.items()}}


def calibration_from_dict(d: Mapping[str, Any], peak_flops: float, mem_bw: float,
                          source: str) -> GpuCalibration:
    """The JSON form back (``source``: the file, for errors)."""
    try:
        classes = {c: ClassParams(**{k: float(v) for k, v in p.items()})
                   for c, p in d["classes"].items()}
        ar = {int(g): Link(float(v["latency_s"]), float(v["bandwidth_bytes_per_s"]),
                           str(v.get("source", ""))) for g, v in d.get("all_reduce", {}).items()}
        sr = {k: Link(float(v["latency_s"]), float(v["bandwidth_bytes_per_s"]),
                      str(v.get("source", ""))) for k, v in d.get("send_recv", {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"bad GPU calibration: {exc!r}", source=source,
                         field=str(d.get("gpu", "?"))) from None
    if "elementwise" not in classes:
        raise InputError("a GPU calibration needs the 'elementwise' class", source=source,
                         field=f"{d.get('gpu')}.classes")
    return GpuCalibration(str(d["gpu"]), peak_flops, mem_bw, classes, ar, sr,
                          str(d.get("source", "")))


def read_calibrations(path: str | Path, catalog: Any) -> dict[str, GpuCalibration]:
    """Calibrations by GPU name from a file written by ``hetopt calibrate --gpu``."""
    p = str(path)
    if not Path(p).exists():
        raise InputError("no such file", source=p)
    try:
        obj = json.loads(Path(p).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", source=p) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("gpus"), list):
        raise InputError("expected an object with a 'gpus' list", source=p, field="gpus")
    out = {}
    for i, d in enumerate(obj["gpus"]):
        if not isinstance(d, dict):
            raise InputError(f"expected an object, got {d!r}", source=p, field=f"gpus[{i}]")
        try:
            dev = catalog.device(str(d.get("gpu")))
        except UnknownNameError as exc:
            raise InputError(exc.detail, source=p, field=f"gpus[{i}].gpu") from None
        out[dev.name] = calibration_from_dict(d, dev.peak_flops, dev.mem_bw_bytes_per_s, p)
    return out


def write_calibrations(cals: Sequence[GpuCalibration], path: str | Path,
                       report: Mapping[str, Any] | None = None) -> None:
    """Write the calibrations (and the fit report: parameters, errors) as JSON."""
    obj = {"schema": 1, "gpus": [c.to_dict() for c in cals], "report": report or {}}
    Path(path).write_text(json.dumps(obj, indent=1, default=float) + "\n", encoding="utf-8")


# ---- the fit ---------------------------------------------------------------------------------

def split_held_out(rows: Sequence[Measurement]) -> tuple[list[Measurement], list[Measurement]]:
    """(calibration rows, held-out rows): the held-out set is the model family
    :data:`HELD_OUT_MODELS` (kernels), the :data:`HELD_OUT_TOPOLOGY` systems (collectives),
    and the attention rows at odd powers of two of the batch (decode) / chunk (prefill)."""
    cal: list[Measurement] = []
    held: list[Measurement] = []
    for m in rows:
        if m.op_kind == "flash_attn":
            axis = m.batch if m.tokens == 1 else m.tokens
            out = int(math.log2(axis)) % 2 == 1
        elif m.is_collective:
            out = m.topology == HELD_OUT_TOPOLOGY
        else:
            out = m.model in HELD_OUT_MODELS
        (held if out else cal).append(m)
    return cal, held


def _class_arrays(rows: Sequence[Measurement]) -> tuple[np.ndarray, ...]:
    f = np.array([m.flops or 0.0 for m in rows])
    b = np.array([m.bytes or 0.0 for m in rows])
    u = np.array([m.batch * (m.kv_heads or 1) for m in rows], dtype=np.float64)
    y = np.array([m.latency_s for m in rows])
    return f, b, u, y


@dataclass(frozen=True)
class ParamFit:
    """A fitted parameter: value, relative standard error, bounds."""

    name: str
    value: float
    rel_std_err: float | None
    lower: float
    upper: float
    determined: bool = True


def _fit(resid: Callable[[np.ndarray], np.ndarray], x0: Sequence[float], lo: Sequence[float],
         hi: Sequence[float]) -> tuple[np.ndarray, list[float | None]]:
    """Least squares in log parameters; (values, relative standard errors)."""
    lx0 = np.log(np.clip(x0, lo, hi))
    run = least_squares(lambda lx: resid(np.exp(lx)), lx0, bounds=(np.log(lo), np.log(hi)),
                        method="trf")
    n, p = len(run.fun), len(lx0)
    errs: list[float | None] = [None] * p
    if n > p:
        s2 = float(np.sum(run.fun ** 2)) / (n - p)
        cov = s2 * np.linalg.pinv(run.jac.T @ run.jac)
        errs = [float(math.sqrt(max(cov[i, i], 0.0))) for i in range(p)]  # d ln x = dx/x
    for i in range(p):   # a term that binds at no point: the points do not determine it
        if float(np.linalg.norm(run.jac[:, i])) < 1e-9:
            errs[i] = None
    return np.exp(run.x), errs


def fit_class(rows: Sequence[Measurement], op_class: str, peak: float, bw: float
              ) -> tuple[ClassParams, list[ParamFit]]:
    """Fit one class: t0, η_c, η_m (and u_half for the attention classes)."""
    f, b, u, y = _class_arrays(rows)
    curve = op_class in ("attention", "attention_decode")
    names = ["t0_s", "eta_c", "eta_m"] + (["u_half"] if curve else [])
    lo = [1e-7, 1e-3, 1e-3] + ([1e-3] if curve else [])
    hi = [1e-3, 1.0, 1.0] + ([1e4] if curve else [])
    x0 = [5e-6, 0.6, 0.7] + ([4.0] if curve else [])

    def model(x: np.ndarray) -> ClassParams:
        return ClassParams(x[0], x[1], x[2], x[3] if curve else 0.0)

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(model(x).latency_s(f, b, u, peak, bw)) - np.log(y)

    x, errs = _fit(resid, x0, lo, hi)
    if errs[1] is None:   # the compute term binds at no point: held at 1 (never binding)
        x[1] = 1.0
    return model(x), [ParamFit(n, float(v), e, a, z, e is not None)
                      for n, v, e, a, z in zip(names, x, errs, lo, hi)]


def fit_link(rows: Sequence[Measurement]) -> tuple[Link, list[ParamFit]]:
    """``latency + bytes / bandwidth`` fitted to collective rows of one group."""
    b = np.array([m.bytes for m in rows], dtype=np.float64)
    y = np.array([m.latency_s for m in rows])

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(x[0] + b / x[1]) - np.log(y)

    lo, hi = [1e-7, 1e8], [1e-2, 1e13]
    x, errs = _fit(resid, [1e-5, 1e11], lo, hi)
    link = Link(float(x[0]), float(x[1]), f"fitted to {len(rows)} measured sizes")
    return link, [ParamFit(n, float(v), e, a, z)
                  for n, v, e, a, z in zip(("latency_s", "bandwidth_bytes_per_s"), x, errs, lo, hi)]


def collective_groups(rows: Sequence[Measurement], device: str
                      ) -> dict[tuple[str, str], list[Measurement]]:
    """Collective rows of ``device`` by (kind, group key): all_reduce on one node by GPU count
    (``g2``, ``g4``, ``g8``), send_recv by ``intra``/``inter``; other groups dropped."""
    out: dict[tuple[str, str], list[Measurement]] = {}
    for m in rows:
        if not m.is_collective or m.device.lower() != device.lower():
            continue
        if m.op_kind == "all_reduce" and m.nodes == 1:
            key = f"g{m.gpus}"
        elif m.op_kind == "send_recv":
            key = "intra" if m.nodes == 1 else "inter"
        else:
            continue
        out.setdefault((m.op_kind, key), []).append(m)
    return out


def roofline_kernel_s(model: EfficiencyRoofline, rows: Sequence[Measurement]) -> np.ndarray:
    """The uncalibrated roofline's seconds for kernel rows (problems.md §5.3)."""
    f, b, _, _ = _class_arrays(rows)
    return np.asarray(model.latency_s("gemm", f, b))


def errors_pct(pred: np.ndarray, meas: np.ndarray) -> tuple[float, float]:
    """(median, max) of |pred/meas − 1| in %."""
    e = np.abs(np.asarray(pred) / np.asarray(meas) - 1.0) * 100.0
    return (float(np.median(e)), float(np.max(e))) if e.size else (math.nan, math.nan)


def table_of(table: MeasuredTable) -> list[Measurement]:
    """The rows of a measured table that the GPU fit uses (kernels with work, collectives)."""
    return [m for m in table.rows if m.is_collective
            or (kernel_class(m) is not None and m.flops is not None and m.bytes is not None)]
