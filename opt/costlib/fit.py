"""Calibration fits (docs/measurements.md): a device's latency-model parameters fitted to
measured per-operator latencies with ``scipy.optimize.least_squares`` on log-space residuals
``ln τ_model − ln τ_measured`` (latencies span decades; a relative error weighs the same
everywhere), plus synthetic measurements from perturbed parameters for round-trip checks.

The FLOPs and bytes of a measured point are those of layer 0's operator of the row's model
card (:func:`op_work`) at the row's shape and share; its latency class is the operator's,
with decode attention (tokens 1, context > 1) in the GEMV regime (``attention_decode``).

Fitted parameters — :class:`~opt.costlib.latency.LogisticRoofline` (NPU, PIM): ``u_min``,
``u_max``, ``knee_flops`` and ``slope`` when at least :data:`MIN_LOGISTIC_POINTS` points lie
strictly between ``f_low_flops`` and ``f_high_flops``; for every class with at least
:data:`MIN_CLASS_POINTS` points, its ``slowdown`` when the device model has one (except the
reference class ``gemm``, held: its slowdown and ``u`` scale compute-bound GEMMs alike) and
its ``kernel_overhead_s`` when the model has a non-zero one. ``f_low_flops``/``f_high_flops``
are held. :class:`~opt.costlib.latency.EfficiencyRoofline` (GPU): ``eta_c``, ``eta_m``,
``t0_s``. Everything else keeps the catalog value and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from opt.common.errors import InputError, UnknownNameError
from opt.costlib.hardware import DeviceSpec
from opt.costlib.latency import (
    OP_CLASSES,
    EfficiencyRoofline,
    LatencyModel,
    LogisticRoofline,
    regime_class,
)
from opt.costlib.measured import END_TO_END, KERNEL_KINDS, MeasuredTable, Measurement
from opt.costlib.modelcard import CardSet, ModelCard
from opt.costlib.operators import Op, Precision, head_ops, layer_ops

MIN_CLASS_POINTS = 3
MIN_LOGISTIC_POINTS = 5
REFERENCE_CLASS = "gemm"
#: A fitted parameter whose relative standard error exceeds this is reported as weakly
#: determined by the points.
WEAK_REL_ERR = 0.05
#: A fit whose root-mean-square log residual exceeds this (a typical factor e ≈ 2.7 between
#: model and measurement) is refused: the table is not this device's latencies (units?).
MAX_RMS_LOG_RESIDUAL = 1.0
#: A fitted coordinate within this fraction of its range from a bound "ends at the bound" and
#: the fit is refused (a launch cost at its lower bound 0 is a value, not an edge).
BOUND_FRACTION = 1e-6
HEAD_KINDS = ("embed", "final_norm", "lm_head")


@dataclass(frozen=True)
class FitPoint:
    """One measured operator with its work: FLOPs, bytes, latency class, latency in s."""

    op_kind: str
    op_class: str
    flops: float
    bytes: float
    latency_s: float
    where: str


def _scalar(value: object) -> float:
    """An Op count (float or 0-d array) as a float."""
    return float(np.asarray(value, dtype=np.float64))


def is_decode(tokens: int, context: int) -> bool:
    """A decode-step shape (T_q = 1 after a context); the builder's step 0 is a prefill."""
    return tokens == 1 and context > 1


def op_work(card: ModelCard, kind: str, tokens: int, context: int, batch: int,
            share: float = 1.0, precision: Precision | None = None) -> tuple[Op, str]:
    """(layer 0's op ``kind`` of ``card`` at the shape, its FLOPs and bytes × ``share``; its
    latency class), or :class:`InputError` when the card has no such operator."""
    decode = is_decode(tokens, context)
    if kind in HEAD_KINDS:
        embed, tail = head_ops(card, tokens=tokens, batch=batch, prefill=not decode,
                               precision=precision)
        ops = [embed, *tail]
    else:
        ops = layer_ops(card, 0, tokens=tokens, context=context, batch=batch,
                        precision=precision)
    for op in ops:
        if op.kind == kind:
            scaled = replace(op, flops=_scalar(op.flops) * share,
                             bytes=_scalar(op.bytes) * share)
            return scaled, regime_class(op.op_class, decode)
    raise InputError(f"model '{card.name}' has no operator '{kind}'", field="op_kind")


def fit_points(table: MeasuredTable, device: str, cards: CardSet,
               model: str | None = None, precision: Precision | None = None
               ) -> tuple[FitPoint, ...]:
    """The table's per-operator rows of ``device`` with their work (model: the row's
    ``model``, else ``model``)."""
    points = []
    for m in table.rows:
        if m.op_kind == END_TO_END or m.device.lower() != device.lower():
            continue
        if m.op_kind in KERNEL_KINDS or m.is_collective:
            raise InputError(f"'{m.op_kind}' rows (GPU kernels, collectives) are fitted by "
                             "'hetopt calibrate --gpu'", source=table.path,
                             field=f"{m.where}.op_kind")
        name = m.model or model
        if name is None:
            raise InputError("no model card: give the row a 'model' or pass --model",
                             source=table.path, field=f"{m.where}.model")
        try:
            card = cards[name]
        except UnknownNameError as exc:
            raise InputError(exc.detail, source=table.path, field=f"{m.where}.model") from None
        try:
            op, cls = op_work(card, m.op_kind, m.tokens, m.context, m.batch, m.share,
                              precision)
        except InputError as exc:
            raise InputError(exc.detail, source=table.path, field=f"{m.where}.op_kind") from None
        points.append(FitPoint(m.op_kind, cls, _scalar(op.flops), _scalar(op.bytes),
                               m.latency_s, m.where))
    if not points:
        raise InputError(f"no per-operator rows of device '{device}'", source=table.path,
                         field="device")
    return tuple(points)


# ---- parameters ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """A model parameter: its fitted (or held) value, its start, its box bounds, in the
    parameter's own unit (seconds for overheads); ``rel_std_err``: its standard error
    relative to its value from the Jacobian at the optimum (large = the points do not
    determine it; None when held)."""

    name: str
    value: float
    initial: float
    lower: float
    upper: float
    fitted: bool
    note: str = ""
    rel_std_err: float | None = None


@dataclass(frozen=True)
class _Coord:
    """One coordinate of the optimiser: bounds in internal units and the maps to/from them."""

    name: str
    lower: float
    upper: float
    to_x: Callable[[float], float]
    from_x: Callable[[float], float]


def _log_coord(name: str, lo: float, hi: float) -> _Coord:
    return _Coord(name, math.log(lo), math.log(hi), math.log, math.exp)


def _us_coord(name: str) -> _Coord:
    return _Coord(name, 0.0, 1e5, lambda v: v * 1e6, lambda x: x * 1e-6)


def _logistic_coords(model: LogisticRoofline, counts: Mapping[str, int], n_logistic: int
                     ) -> tuple[list[_Coord], list[Param]]:
    """The fitted coordinates of a logistic roofline and the held parameters (with why)."""
    coords: list[_Coord] = []
    held: list[Param] = []
    if n_logistic >= MIN_LOGISTIC_POINTS:
        coords += [_Coord("u_max", 1e-3, 1.0, float, float),
                   _Coord("u_min", 1e-3, 1.0, float, float),
                   _Coord("knee_flops", math.log10(model.f_low_flops),
                          math.log10(model.f_high_flops), math.log10, lambda x: 10.0 ** x),
                   _Coord("slope", 0.1, 30.0, float, float)]
    else:
        held += [_held(n, getattr(model, n), f"{n_logistic} points inside (f_low, f_high), "
                                             f"need {MIN_LOGISTIC_POINTS}")
                 for n in ("u_min", "u_max", "knee_flops", "slope")]
    for cls in sorted(set(model.slowdown) | set(model.kernel_overhead_s)):
        enough = counts.get(cls, 0) >= MIN_CLASS_POINTS
        why = f"{counts.get(cls, 0)} points of class {cls}, need {MIN_CLASS_POINTS}"
        if cls in model.slowdown:
            if cls == REFERENCE_CLASS:
                why = "reference class (its slowdown and u scale compute-bound GEMMs alike)"
            if enough and cls != REFERENCE_CLASS:
                coords.append(_log_coord(f"slowdown.{cls}", 1e-3, 1e5))
            else:
                held.append(_held(f"slowdown.{cls}", model.slowdown[cls], why))
        if model.kernel_overhead_s.get(cls, 0.0) > 0:
            if enough:
                coords.append(_us_coord(f"kernel_overhead_s.{cls}"))
            else:
                held.append(_held(f"kernel_overhead_s.{cls}", model.kernel_overhead_s[cls], why))
    return coords, held


def _held(name: str, value: float, note: str) -> Param:
    return Param(name, float(value), float(value), float(value), float(value), False, note)


def get_param(model: LatencyModel, name: str) -> float:
    """A parameter by its report name (``u_min``, ``slowdown.softmax``, ``t0_s``, …);
    :class:`InputError` for a name the model does not have."""
    head, _, cls = name.partition(".")
    per_class = ("slowdown", "kernel_overhead_s")
    if cls and head in per_class and hasattr(model, head) and cls in OP_CLASSES:
        return float(getattr(model, head).get(cls, 0.0 if head == "kernel_overhead_s" else 1.0))
    scalars = [f for f in vars(model) if f not in (*per_class, "source")]
    if not cls and name in scalars:
        return float(getattr(model, head))
    known = scalars + [f"{h}.<class>" for h in per_class if hasattr(model, h)]
    classes = f" (classes: {', '.join(OP_CLASSES)})" if len(known) > len(scalars) else ""
    raise InputError(f"unknown parameter '{name}' of a {model.kind} model; known: "
                     f"{', '.join(known)}{classes}", field="parameter")


def with_params(model: LatencyModel, values: Mapping[str, float]) -> LatencyModel:
    """``model`` with the named parameters replaced (dict parameters per class)."""
    scalars = {k: float(v) for k, v in values.items() if "." not in k}
    out: Any = replace(model, **scalars)  # type: ignore[arg-type]
    for head in ("slowdown", "kernel_overhead_s"):
        per_class = {k.partition(".")[2]: float(v) for k, v in values.items()
                     if k.startswith(head + ".")}
        if per_class:
            out = replace(out, **{head: {**getattr(out, head), **per_class}})
    return out  # type: ignore[no-any-return]


# ---- the fit ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClassError:
    """Relative errors |τ_model/τ_measured − 1| of one latency class (or ``all``)."""

    op_class: str
    n: int
    median_before: float
    max_before: float
    median_after: float
    max_after: float


@dataclass(frozen=True)
class FitReport:
    """A calibration: the device with its fitted model, every parameter, errors per class."""

    device: DeviceSpec
    params: tuple[Param, ...]
    errors: tuple[ClassError, ...]
    n_points: int
    cost: float
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device.name, "n_points": self.n_points, "cost": self.cost,
                "status": self.status, "params": [vars(p) for p in self.params],
                "errors": [vars(e) for e in self.errors],
                "latency_model": self.device.latency_model.to_dict()
                if self.device.latency_model else None}


def predict_s(model: LatencyModel, points: Sequence[FitPoint]) -> np.ndarray:
    """Model latencies (s) of ``points``, one class at a time."""
    out = np.empty(len(points))
    for cls in {p.op_class for p in points}:
        idx = [i for i, p in enumerate(points) if p.op_class == cls]
        out[idx] = model.latency_s(cls, np.array([points[i].flops for i in idx]),
                                   np.array([points[i].bytes for i in idx]))
    return out


def _errors(before: LatencyModel, after: LatencyModel, points: Sequence[FitPoint]
            ) -> tuple[ClassError, ...]:
    meas = np.array([p.latency_s for p in points])
    e0 = np.abs(predict_s(before, points) / meas - 1.0)
    e1 = np.abs(predict_s(after, points) / meas - 1.0)
    classes = [(c, np.array([p.op_class == c for p in points]))
               for c in sorted({p.op_class for p in points})]
    return tuple(ClassError(c, int(sel.sum()), float(np.median(e0[sel])), float(e0[sel].max()),
                            float(np.median(e1[sel])), float(e1[sel].max()))
                 for c, sel in [*classes, ("all", np.ones(len(points), dtype=bool))])


def _coords(model: LatencyModel, points: Sequence[FitPoint]) -> tuple[list[_Coord], list[Param]]:
    if isinstance(model, EfficiencyRoofline):
        if len(points) < MIN_CLASS_POINTS:
            return [], [_held(n, getattr(model, n), f"{len(points)} points, need "
                                                    f"{MIN_CLASS_POINTS}")
                        for n in ("eta_c", "eta_m", "t0_s")]
        return [_Coord("eta_c", 1e-3, 1.0, float, float), _Coord("eta_m", 1e-3, 1.0, float, float),
                _us_coord("t0_s")], []
    counts: dict[str, int] = {}
    for p in points:
        counts[p.op_class] = counts.get(p.op_class, 0) + 1
    inside = sum(model.f_low_flops < p.flops < model.f_high_flops for p in points)
    return _logistic_coords(model, counts, inside)


def _solve(model: LatencyModel, coords: Sequence[_Coord], points: Sequence[FitPoint],
           x0: np.ndarray) -> Any:
    log_meas = np.log([p.latency_s for p in points])
    lo = np.array([c.lower for c in coords])
    hi = np.array([c.upper for c in coords])

    def residual(x: np.ndarray) -> np.ndarray:
        m = with_params(model, {c.name: c.from_x(v) for c, v in zip(coords, x)})
        if isinstance(m, LogisticRoofline) and m.u_min > m.u_max:
            m = replace(m, u_min=m.u_max)
        return np.log(np.maximum(predict_s(m, points), 1e-300)) - log_meas

    return least_squares(residual, np.clip(x0, lo, hi), bounds=(lo, hi), method="trf")


def _rel_std_errs(coords: Sequence[_Coord], run: Any, n_points: int) -> list[float]:
    """Relative standard errors of the fitted parameters: cov = s²·(JᵀJ)⁺ in the optimiser's
    coordinates, s² = Σ r²/(n − p), mapped to the parameter (log coordinates are relative
    already; log10 ones × ln 10; linear ones ÷ the value)."""
    jac = np.asarray(run.jac, dtype=np.float64)
    dof = max(n_points - len(coords), 1)
    cov = np.linalg.pinv(jac.T @ jac) * float(np.sum(run.fun ** 2)) / dof
    sigma = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out = []
    for c, x, sd in zip(coords, run.x, sigma):
        value = c.from_x(float(x))
        if c.to_x is math.log:
            out.append(float(sd))
        elif c.name == "knee_flops":
            out.append(float(sd) * math.log(10.0))
        else:
            out.append(float(abs(c.from_x(float(x) + sd) - value) / max(abs(value), 1e-300)))
    return out


def _best_run(model: LatencyModel, coords: Sequence[_Coord], points: Sequence[FitPoint]
              ) -> Any:
    """The lowest-cost least-squares run over a few starts: the catalog values and, when the
    knee is fitted, the knee ±1 decade (a guard against a local minimum)."""
    x0 = np.array([c.to_x(get_param(model, c.name)) for c in coords])
    starts = [x0]
    names = [c.name for c in coords]
    if "knee_flops" in names:
        starts += [x0 + np.eye(len(x0))[names.index("knee_flops")] * s for s in (-1.0, 1.0)]
    runs = [_solve(model, coords, points, start) for start in starts]
    return min(runs, key=lambda r: float(r.cost))


def _check_fit(coords: Sequence[_Coord], run: Any, device: str, source: str) -> None:
    """Refuse a fit that ends at a bound of a fitted coordinate or misses the points by more
    than :data:`MAX_RMS_LOG_RESIDUAL` (:class:`InputError` naming the table and the device)."""
    for c, x in zip(coords, run.x):
        span = (c.upper - c.lower) * BOUND_FRACTION
        for side, b in (("lower", c.lower), ("upper", c.upper)):
            zero_cost = c.name.startswith("kernel_overhead_s") and side == "lower"
            if abs(float(x) - b) <= span and not zero_cost:
                raise InputError(
                    f"the fit ends at the {side} bound {c.name} = {c.from_x(b):g}: the measured "
                    "latencies are not this device's (their unit? the device?); refused",
                    source=source or None, field=device)
    rms = math.sqrt(float(np.mean(np.asarray(run.fun) ** 2)))
    if rms > MAX_RMS_LOG_RESIDUAL:
        raise InputError(
            f"the fit misses the measured latencies by a factor {math.exp(rms):.3g} (rms log "
            f"residual {rms:.3g} > {MAX_RMS_LOG_RESIDUAL:g}): the table is not this device's "
            "(their unit? the device?); refused", source=source or None, field=device)


def fit_device(spec: DeviceSpec, points: Sequence[FitPoint], source: str = "") -> FitReport:
    """Fit ``spec``'s latency model to ``points`` (see the module docstring);
    :class:`InputError` when the fit ends at a bound or misses the points (:func:`_check_fit`)."""
    model = spec.latency_model
    if model is None:
        raise InputError(f"device '{spec.name}' has no latency model to fit", field="device")
    coords, held = _coords(model, points)
    if not coords:
        return FitReport(spec, tuple(held), _errors(model, model, points), len(points), 0.0,
                         "nothing to fit")
    best = _best_run(model, coords, points)
    _check_fit(coords, best, spec.name, source)
    values = {c.name: c.from_x(v) for c, v in zip(coords, best.x)}
    if isinstance(model, LogisticRoofline) and "u_min" in values:
        values["u_min"] = min(values["u_min"], values["u_max"])
    fitted = replace(with_params(model, values),
                     source=f"fitted by hetopt calibrate to {source} ({len(points)} points; "
                            f"catalog: {model.source})")
    errs = _rel_std_errs(coords, best, len(points))
    params = [Param(c.name, get_param(fitted, c.name), get_param(model, c.name),
                    c.from_x(c.lower), c.from_x(c.upper), True,
                    "weakly determined by the points" if e > WEAK_REL_ERR else "", e)
              for c, e in zip(coords, errs)] + held
    return FitReport(device=replace(spec, latency_model=fitted), params=tuple(params),
                     errors=_errors(model, fitted, points), n_points=len(points),
                     cost=float(best.cost), status=str(best.message))


# ---- synthetic measurements ---------------------------------------------------------------------

Shape = tuple[str, int, int, int, float]  #: (op_kind, tokens, context, batch, share)
#: Operators the placement builder splits into attention cells (one per KV head group).
CELL_KINDS = ("kv_write", "qk", "softmax", "sv")


def default_shapes(card: ModelCard, batches: Sequence[int] = (1, 8),
                   cell_shares: Sequence[float] = (), shares: Sequence[float] = (1.0,)
                   ) -> list[Shape]:
    """Shapes of a synthetic profile: every layer-0 operator and the head ops, prefill at
    16, 32, …, 4096 tokens and decode at context 128, 256, …, 8192 (factors of 2: log-linear
    interpolation between them errs by a few per cent at most, docs/measurements.md), for
    each batch and each of ``shares``
    (e.g. 0.5 for tp = 2); attention-cell operators also at each of ``cell_shares`` (e.g. 0.5
    for two KV head groups)."""
    kinds = [o.kind for o in layer_ops(card, 0, tokens=1, context=2, batch=1)] + list(HEAD_KINDS)
    shapes: list[Shape] = []
    for batch in batches:
        for kind in kinds:
            extra = cell_shares if kind in CELL_KINDS else ()
            for share in dict.fromkeys([*shares, *extra]):
                shapes += [(kind, 2 ** e, 2 ** e, batch, share) for e in range(4, 13)]
                shapes += [(kind, 1, 2 ** e, batch, share) for e in range(7, 14)]
    return shapes


#: largest lognormal σ of :func:`synthetic_rows` (a factor of e^10 ≈ 22,000 at one σ)
MAX_SYNTH_NOISE = 10.0


def synthetic_rows(spec: DeviceSpec, card: ModelCard, shapes: Sequence[Shape],
                   *, rel_noise: float, seed: int, source: str) -> tuple[Measurement, ...]:
    """Measurements of ``spec``'s own model at ``shapes``, each × a lognormal factor of
    σ = ``rel_noise`` (seeded): what a profiler of that device would report. ``rel_noise``
    is a finite number in [0, MAX_SYNTH_NOISE], ``seed`` an integer ≥ 0 (InputError naming
    ``noise`` / ``seed``)."""
    if isinstance(rel_noise, bool) or not isinstance(rel_noise, (int, float)) \
            or not 0 <= rel_noise <= MAX_SYNTH_NOISE:
        raise InputError(f"noise must be a lognormal σ in [0, {MAX_SYNTH_NOISE:g}], got "
                         f"{rel_noise!r}", field="noise")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be an integer ≥ 0, got {seed!r}", field="seed")
    rng = np.random.default_rng(seed)
    rows = []
    for i, (kind, tokens, context, batch, share) in enumerate(shapes):
        op, cls = op_work(card, kind, tokens, context, batch, share)
        lat = float(spec.latency_s(cls, op.flops, op.bytes)) * float(rng.lognormal(0.0, rel_noise))
        rows.append(Measurement(spec.name, kind, tokens, context, batch, share, card.name, lat,
                                source, f"synthetic[{i}]"))
    return tuple(rows)
