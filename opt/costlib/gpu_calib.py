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

import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import f as f_dist

from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import read_json
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
    node), send/recv links (``intra``, ``inter``), where each came from, and the classes
    ``borrowed`` from another measured card (class → card: no rows of this GPU for them, so
    their predictions lie outside this GPU's measured regime)."""

    gpu: str
    peak_flops: float
    mem_bw_bytes_per_s: float
    classes: Mapping[str, ClassParams]
    all_reduce: Mapping[int, Link] = field(default_factory=dict)
    send_recv: Mapping[str, Link] = field(default_factory=dict)
    source: str = ""
    borrowed: Mapping[str, str] = field(default_factory=dict)

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
                "send_recv": {k: l.to_dict() for k, l in self.send_recv.items()},
                **({"borrowed": dict(self.borrowed)} if self.borrowed else {})}


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
        borrowed = {str(c): str(card) for c, card in d.get("borrowed", {}).items()}
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"bad GPU calibration: {exc!r}", source=source,
                         field=str(d.get("gpu", "?"))) from None
    if "elementwise" not in classes:
        raise InputError("a GPU calibration needs the 'elementwise' class", source=source,
                         field=f"{d.get('gpu')}.classes")
    return GpuCalibration(str(d["gpu"]), peak_flops, mem_bw, classes, ar, sr,
                          str(d.get("source", "")), borrowed)


def read_calibrations(path: str | Path, catalog: Any) -> dict[str, GpuCalibration]:
    """Calibrations by GPU name from a file written by ``hetopt calibrate --gpu`` (``.json``
    or ``.json.gz``); :class:`InputError` naming the file for a missing, unreadable, non-JSON
    (binary, not UTF-8) file or one that calibrates no GPU."""
    p = str(path)
    obj = read_json(p)
    if not isinstance(obj, dict) or not isinstance(obj.get("gpus"), list):
        raise InputError("expected an object with a 'gpus' list", source=p, field="gpus")
    if not obj["gpus"]:
        raise InputError("the calibration has no GPU (an empty 'gpus' list)", source=p,
                         field="gpus")
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


#: Parameters a class may leave out, and the value each is held at when the data do not
#: determine it: ``eta_c = 1`` (the compute term binds nowhere it would not bind at the peak)
#: and ``u_half = 0`` (no parallelism curve: ``g = 1``).
NULL_VALUES = {"eta_c": 1.0, "u_half": 0.0}
#: A parameter beyond ``t0_s`` and ``eta_m`` is fitted only when freeing it lowers the sum of
#: squared log residuals significantly: the nested-model F-test at this level.
F_TEST_LEVEL = 0.01
#: The floor of the F-test's residual variance: no measured latency is more precise than
#: 0.01 % (a noiseless table would make any floating-point gain look significant).
MIN_LOG_NOISE = 1e-4
#: A fit whose root-mean-square log residual exceeds this (a typical factor e ≈ 2.7 between
#: model and measurement) is refused: the table is not this GPU's latencies (units?).
MAX_RMS_LOG_RESIDUAL = 1.0
#: A free parameter within this relative distance of a bound "ends at the bound": refused.
BOUND_RTOL = 1e-3
#: Box bounds of the class parameters (seconds, fractions of peak, work units) and the fixed
#: multi-start grid (every combination is a start; the lowest cost wins, ties by grid order).
CLASS_BOUNDS = {"t0_s": (1e-7, 1e-3), "eta_c": (1e-3, 1.0), "eta_m": (1e-3, 1.0),
                "u_half": (1e-3, 1e4)}
CLASS_STARTS = {"t0_s": (0.5,), "eta_c": (0.9, 0.3, 0.05), "eta_m": (0.8, 0.3),
                "u_half": (0.5, 4.0, 32.0)}   # t0_s: × the smallest measured latency
LINK_BOUNDS = {"latency_s": (1e-7, 1e-2), "bandwidth_bytes_per_s": (1e8, 1e13)}
#: Optimiser tolerances: tight, so that the answer does not depend on the start.
_TOL = {"ftol": 1e-12, "xtol": 1e-12, "gtol": 1e-12, "max_nfev": 2000}


def _class_arrays(rows: Sequence[Measurement]) -> tuple[np.ndarray, ...]:
    f = np.array([m.flops or 0.0 for m in rows])
    b = np.array([m.bytes or 0.0 for m in rows])
    u = np.array([m.batch * (m.kv_heads or 1) for m in rows], dtype=np.float64)
    y = np.array([m.latency_s for m in rows])
    return f, b, u, y


@dataclass(frozen=True)
class ParamFit:
    """A parameter of a fit: value, relative standard error (None: held), bounds, whether
    the data determine it (fitted) and, for a held one, why."""

    name: str
    value: float
    rel_std_err: float | None
    lower: float
    upper: float
    determined: bool = True
    note: str = ""


@dataclass(frozen=True)
class ClassFit:
    """One fitted class: its parameters, each :class:`ParamFit`, the condition number of the
    Jacobian of the log residuals in the log of the free parameters, the root-mean-square
    log residual and the number of rows."""

    params: ClassParams
    fits: tuple[ParamFit, ...]
    condition: float
    rms_log_residual: float
    n: int

    def identifiability(self) -> dict[str, Any]:
        """The JSON record of which parameters the data determine (docs/measurements.md)."""
        return {"n": self.n, "condition": self.condition,
                "rms_log_residual": self.rms_log_residual,
                "free": [p.name for p in self.fits if p.determined],
                "held": {p.name: {"value": p.value, "why": p.note}
                         for p in self.fits if not p.determined}}


@dataclass(frozen=True)
class _Run:
    """One least-squares solution: free names, values (all parameters), cost, Jacobian."""

    free: tuple[str, ...]
    values: dict[str, float]
    ssr: float
    jac: np.ndarray
    resid: np.ndarray


def _solve(resid: Callable[[dict[str, float]], np.ndarray], free: Sequence[str],
           fixed: Mapping[str, float], bounds: Mapping[str, tuple[float, float]],
           starts: Sequence[Sequence[float]]) -> _Run:
    """The lowest-cost least-squares run (in the log of the free parameters) over ``starts``
    (in grid order; a later start wins only by a cost lower by more than 1e-12 relative)."""
    lo = np.log([bounds[n][0] for n in free])
    hi = np.log([bounds[n][1] for n in free])

    def values(lx: np.ndarray) -> dict[str, float]:
        return {**fixed, **{n: float(v) for n, v in zip(free, np.exp(lx))}}

    best = None
    for x0 in starts:
        lx0 = np.clip(np.log(np.asarray(x0, dtype=np.float64)), lo, hi)
        run = least_squares(lambda lx: resid(values(lx)), lx0, bounds=(lo, hi), method="trf",
                            **_TOL)
        if best is None or run.cost < best.cost * (1.0 - 1e-12):
            best = run
    assert best is not None
    return _Run(tuple(free), values(best.x), float(np.sum(best.fun ** 2)),
                np.asarray(best.jac, dtype=np.float64), np.asarray(best.fun))


def _grid(free: Sequence[str], t0_scale: float) -> list[list[float]]:
    """The fixed multi-start grid of ``free`` (:data:`CLASS_STARTS`)."""
    axes = [[s * t0_scale for s in CLASS_STARTS[n]] if n == "t0_s" else list(CLASS_STARTS[n])
            for n in free]
    return [list(x) for x in itertools.product(*axes)]


def _condition(jac: np.ndarray) -> float:
    """The 2-norm condition number of ``jac`` (inf when a column is zero)."""
    s = np.linalg.svd(jac, compute_uv=False)
    return float(s[0] / s[-1]) if s.size and s[-1] > 0 else math.inf


def _rel_std_errs(run: _Run) -> list[float]:
    """Standard errors of the log of the free parameters (= relative standard errors):
    cov = s²·(JᵀJ)⁻¹, s² = Σ r² / (n − p)."""
    n, p = run.jac.shape
    if n <= p:
        return [math.inf] * p
    cov = run.ssr / (n - p) * np.linalg.pinv(run.jac.T @ run.jac)
    return [float(math.sqrt(max(cov[i, i], 0.0))) for i in range(p)]


def _f_test(small: _Run, big: _Run, n: int) -> tuple[float, float]:
    """(F statistic, critical value at :data:`F_TEST_LEVEL`) of ``big`` (one more free
    parameter) against ``small``."""
    dof = n - len(big.free)
    if dof <= 0:
        return 0.0, math.inf
    drop = max(small.ssr - big.ssr, 0.0)
    stat = drop / max(big.ssr / dof, MIN_LOG_NOISE ** 2)
    return stat, float(f_dist.ppf(1.0 - F_TEST_LEVEL, 1, dof))


def _select(resid: Callable[[dict[str, float]], np.ndarray], optional: Sequence[str],
            n: int, t0_scale: float) -> tuple[_Run, dict[str, str]]:
    """Forward selection: start from ``t0_s``, ``eta_m``; add the optional parameter that
    lowers the residual most while its F-test passes. Returns the run and, for each optional
    parameter left out, why."""
    free = ["t0_s", "eta_m"]
    held = {k: NULL_VALUES[k] for k in optional}

    def fit(names: list[str]) -> _Run:
        return _solve(resid, names, {k: v for k, v in held.items() if k not in names},
                      CLASS_BOUNDS, _grid(names, t0_scale))

    run = fit(free)
    why: dict[str, str] = {}
    while True:
        left = [k for k in optional if k not in free]
        if not left:
            break
        trials = [(fit(free + [k]), k) for k in left]
        best, name = min(trials, key=lambda t: t[0].ssr)
        stat, crit = _f_test(run, best, n)
        if stat <= crit:
            for trial, k in trials:
                s, c = _f_test(run, trial, n)
                drop = 100.0 * max(run.ssr - trial.ssr, 0.0) / max(run.ssr, 1e-300)
                what = ("its term binds at no row" if drop < 1e-6 else
                        f"freeing it lowers the squared log residual by {drop:.2g} %")
                why[k] = (f"not determined by the data: {what} (F = {s:.3g} ≤ {c:.3g}, "
                          f"{F_TEST_LEVEL:g} level); held at {NULL_VALUES[k]:g}")
            break
        free.append(name)
        held.pop(name)
        run = best
    return run, why


def _check_fit(run: _Run, bounds: Mapping[str, tuple[float, float]], where: str) -> None:
    """Refuse a fit that ends at a bound of a free parameter or whose residual exceeds
    :data:`MAX_RMS_LOG_RESIDUAL` (a held parameter is not "at a bound")."""
    for name in run.free:
        lo, hi = bounds[name]
        v = run.values[name]
        for side, b in (("lower", lo), ("upper", hi)):
            if abs(math.log(v / b)) <= BOUND_RTOL:
                raise InputError(
                    f"the fit ends at the {side} bound {name} = {b:g}: the measured latencies "
                    "are not this GPU's (their unit? the device?); refused", field=where)
    rms = math.sqrt(run.ssr / max(len(run.resid), 1))
    if rms > MAX_RMS_LOG_RESIDUAL:
        raise InputError(
            f"the fit misses the measured latencies by a factor {math.exp(rms):.3g} (rms log "
            f"residual {rms:.3g} > {MAX_RMS_LOG_RESIDUAL:g}): the table is not this GPU's "
            "(their unit? the device?); refused", field=where)


def fit_class_detail(rows: Sequence[Measurement], op_class: str, peak: float, bw: float,
                     where: str = "") -> ClassFit:
    """Fit one class: ``t0_s`` and ``eta_m`` always; ``eta_c`` (and ``u_half`` for the
    attention classes) only where the data determine them (:func:`_select`), else held at
    :data:`NULL_VALUES` with the reason. Deterministic: a fixed multi-start grid, tight
    tolerances. :class:`InputError` (field ``where``) when the fit ends at a bound or misses
    the rows (:func:`_check_fit`)."""
    f, b, u, y = _class_arrays(rows)
    curve = op_class in ("attention", "attention_decode")
    optional = ["eta_c"] + (["u_half"] if curve else [])
    log_y = np.log(y)

    def resid(v: dict[str, float]) -> np.ndarray:
        p = ClassParams(v["t0_s"], v["eta_c"], v["eta_m"], v.get("u_half", 0.0))
        return np.log(p.latency_s(f, b, u, peak, bw)) - log_y

    run, why = _select(resid, optional, len(rows), float(np.min(y)))
    _check_fit(run, CLASS_BOUNDS, where or op_class)
    errs = dict(zip(run.free, _rel_std_errs(run)))
    fits = []
    for name in ["t0_s", "eta_c", "eta_m"] + (["u_half"] if curve else []):
        lo, hi = CLASS_BOUNDS[name]
        if name in run.free:
            fits.append(ParamFit(name, run.values[name], errs[name], lo, hi))
        else:
            fits.append(ParamFit(name, NULL_VALUES[name], None, lo, hi, False, why[name]))
    v = run.values
    params = ClassParams(v["t0_s"], v["eta_c"], v["eta_m"], v.get("u_half", 0.0))
    return ClassFit(params, tuple(fits), _condition(run.jac),
                    math.sqrt(run.ssr / len(rows)), len(rows))


def fit_class(rows: Sequence[Measurement], op_class: str, peak: float, bw: float
              ) -> tuple[ClassParams, list[ParamFit]]:
    """:func:`fit_class_detail`'s parameters and per-parameter fits."""
    cf = fit_class_detail(rows, op_class, peak, bw)
    return cf.params, list(cf.fits)


def fit_link(rows: Sequence[Measurement], where: str = "") -> tuple[Link, list[ParamFit]]:
    """``latency + bytes / bandwidth`` fitted to collective rows of one group (log residuals;
    a fixed start grid); :class:`InputError` as :func:`fit_class_detail`."""
    b = np.array([m.bytes for m in rows], dtype=np.float64)
    log_y = np.log(np.array([m.latency_s for m in rows]))

    def resid(v: dict[str, float]) -> np.ndarray:
        return np.log(v["latency_s"] + b / v["bandwidth_bytes_per_s"]) - log_y

    names = ("latency_s", "bandwidth_bytes_per_s")
    starts = list(itertools.product((1e-6, 1e-4), (1e10, 1e12)))
    run = _solve(resid, names, {}, LINK_BOUNDS, starts)
    _check_fit(run, LINK_BOUNDS, where or "link")
    errs = _rel_std_errs(run)
    link = Link(run.values[names[0]], run.values[names[1]],
                f"fitted to {len(rows)} measured sizes")
    return link, [ParamFit(n, run.values[n], e, *LINK_BOUNDS[n]) for n, e in zip(names, errs)]


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
