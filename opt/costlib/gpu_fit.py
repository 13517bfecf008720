"""``hetopt calibrate --gpu``: fit the calibrated GPU model (opt.costlib.gpu_calib) of every GPU
a measured table has kernels for, report every parameter with its standard error and the
measured-vs-model error per class on the calibration and the held-out rows, before (the
catalog roofline, problems.md §5.3) and after (the calibrated model).

A GPU without attention rows (the H100 and the A40 in the Vidur bundle) takes the attention
classes of the closest measured card that has them (:mod:`opt.costlib.gpu_match`), as
efficiencies relative to its own peak and bandwidth; the report, the calibration's ``source``
and its ``borrowed`` classes say so. The report also names the closest measured card of every
catalog GPU without measurements (``closest_measured``) and the transfer errors
(``transfer``: one measured card's classes on another's peaks against the other's rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

import numpy as np

from opt.common.errors import InputError
from opt.costlib.gpu_calib import (
    GPU_CLASSES,
    ClassParams,
    GpuCalibration,
    collective_groups,
    errors_pct,
    fit_class_detail,
    fit_link,
    kernel_class,
    roofline_kernel_s,
    split_held_out,
    table_of,
)
from opt.costlib.gpu_match import closest_measured, closest_measured_cards
from opt.costlib.latency import EfficiencyRoofline, Link, ring_allreduce_s
from opt.costlib.measured import MeasuredTable, Measurement

_T = TypeVar("_T")


def _err_row(name: str, n: int, before: tuple[float, float], after: tuple[float, float]
             ) -> dict[str, Any]:
    return {"class": name, "n": n, "median_before_pct": before[0], "max_before_pct": before[1],
            "median_after_pct": after[0], "max_after_pct": after[1]}


def _kernel_errors(cal: GpuCalibration, roof: EfficiencyRoofline, rows: Sequence[Measurement]
                   ) -> list[dict[str, Any]]:
    out = []
    for c in GPU_CLASSES:
        sel = [m for m in rows if kernel_class(m) == c]
        if not sel:
            continue
        meas = np.array([m.latency_s for m in sel])
        after = np.array([float(cal.kernel_s(c, m.flops, m.bytes, m.batch * (m.kv_heads or 1)))
                          for m in sel])
        out.append(_err_row(c, len(sel), errors_pct(roofline_kernel_s(roof, sel), meas),
                            errors_pct(after, meas)))
    return out


def _link_before(kind: str, key: str, intra: Link, network: Link):
    if kind == "all_reduce":
        g = int(key[1:])
        return lambda b: float(ring_allreduce_s(b, g, intra))
    link = intra if key == "intra" else network
    return lambda b: float(link.transfer_s(b))


def _collective_errors(cal: GpuCalibration, rows: Sequence[Measurement], intra: Link,
                       network: Link) -> list[dict[str, Any]]:
    out = []
    for (kind, key), sel in sorted(collective_groups(rows, cal.gpu).items()):
        link = cal.all_reduce.get(int(key[1:])) if kind == "all_reduce" else cal.send_recv.get(key)
        if link is None:
            continue
        meas = np.array([m.latency_s for m in sel])
        before = _link_before(kind, key, intra, network)
        sizes = [float(m.bytes or 0.0) for m in sel]
        pb = np.array([before(b) for b in sizes])
        pa = np.array([link.latency_s + b / link.bandwidth_bytes_per_s for b in sizes])
        out.append(_err_row(f"{kind} {key}", len(sel), errors_pct(pb, meas),
                            errors_pct(pa, meas)))
    return out


def _refit_in(table: MeasuredTable, fit: Callable[[], _T]) -> _T:
    """``fit()``, its :class:`InputError` (a refused fit) naming the table."""
    try:
        return fit()
    except InputError as exc:
        raise InputError(exc.detail, source=table.path, field=exc.field) from None


def _fit_classes(table: MeasuredTable, dev: Any, cal_rows: Sequence[Measurement]
                 ) -> tuple[dict[str, ClassParams], dict[str, Any]]:
    """The classes of ``dev`` with ≥ 6 calibration rows, fitted, and their report records."""
    fitted: dict[str, ClassParams] = {}
    params: dict[str, Any] = {}
    for c in GPU_CLASSES:
        sel = [m for m in cal_rows if m.device == dev.name and kernel_class(m) == c]
        if len(sel) < 6:
            continue
        cf = _refit_in(table, lambda: fit_class_detail(
            sel, c, dev.peak_flops, dev.mem_bw_bytes_per_s, f"{dev.name}.{c}"))
        fitted[c] = cf.params
        params[c] = {"n": len(sel), "params": [asdict(f) for f in cf.fits],
                     "identifiability": cf.identifiability()}
    return fitted, params


def _borrow_attention(fitted: dict[str, dict[str, ClassParams]], catalog: Any
                      ) -> dict[str, dict[str, str]]:
    """Give each GPU without attention classes those of the closest measured card that has
    them (in place); returns GPU → {class: card}."""
    donors = [catalog.device(g) for g, cl in fitted.items() if "attention_decode" in cl]
    borrowed: dict[str, dict[str, str]] = {}
    for name, classes in fitted.items():
        borrowed[name] = {}
        if not donors or "attention_decode" in classes:
            continue
        card = closest_measured(catalog.device(name), donors).card
        for c in ("attention", "attention_decode"):
            if c not in classes and c in fitted[card]:
                classes[c] = fitted[card][c]
                borrowed[name][c] = card
    return borrowed


def _fit_links(table: MeasuredTable, name: str, cal_rows: Sequence[Measurement],
               params: dict[str, Any]) -> tuple[dict[int, Link], dict[str, Link]]:
    """All-reduce links by group size and send/recv links of ``name`` (records to ``params``)."""
    links: dict[str, Link] = {}
    ar: dict[int, Link] = {}
    for (kind, key), sel in sorted(collective_groups(cal_rows, name).items()):
        link, fits = _refit_in(table, lambda: fit_link(sel, f"{name}.{kind} {key}"))
        params[f"{kind} {key}"] = {"n": len(sel), "params": [asdict(f) for f in fits]}
        if kind == "all_reduce":
            ar[int(key[1:])] = link
        else:
            links[key] = link
    return ar, links


def calibrate_gpus(table: MeasuredTable, catalog: Any, gpus: Sequence[str] | None = None
                   ) -> tuple[list[GpuCalibration], dict[str, Any]]:
    """Fit every GPU of ``table`` (or ``gpus``) on the calibration rows; the report has the
    parameters with standard errors, the errors per class on both sets, the closest measured
    card of every other catalog GPU and the transfer errors between the measured cards."""
    rows = table_of(table)
    if not any(kernel_class(m) is not None for m in rows):
        raise InputError("no GPU kernel rows (gemm, attention, norm, activation or element-wise "
                         "kinds with flops and bytes) to calibrate", source=table.path,
                         field="op_kind")
    cal_rows, held_rows = split_held_out(rows)
    names = sorted({m.device for m in rows}) if gpus is None else list(gpus)
    fitted: dict[str, dict[str, ClassParams]] = {}
    params: dict[str, dict[str, Any]] = {}
    for name in names:
        dev = catalog.device(name)
        if not isinstance(dev.latency_model, EfficiencyRoofline):
            raise InputError(f"'{name}' is not a GPU with a roofline model", field="gpus")
        fitted[dev.name], params[dev.name] = _fit_classes(table, dev, cal_rows)
        if "elementwise" not in fitted[dev.name]:
            raise InputError(f"no element-wise kernel rows of '{name}' to calibrate",
                             source=table.path, field="device")
    own = {g: dict(cl) for g, cl in fitted.items()}
    borrowed = _borrow_attention(fitted, catalog)
    cals: list[GpuCalibration] = []
    gpus_report: dict[str, Any] = {}
    for name, classes in fitted.items():
        dev, node = catalog.device(name), catalog.node_type(name)
        notes = [f"{c} from {card} (no {name} attention rows)"
                 for c, card in borrowed[name].items()]
        ar, links = _fit_links(table, name, cal_rows, params[name])
        cal = GpuCalibration(dev.name, dev.peak_flops, dev.mem_bw_bytes_per_s, classes, ar,
                             links, f"hetopt calibrate --gpu on {table.path}"
                             + (f"; {'; '.join(notes)}" if notes else ""), borrowed[name])
        cals.append(cal)
        errs = {}
        for label, sel in (("calibration", cal_rows), ("held_out", held_rows)):
            mine = [m for m in sel if m.device == dev.name]
            errs[label] = (_kernel_errors(cal, dev.latency_model, mine)
                           + _collective_errors(cal, mine, node.intra_node, node.network))
        gpus_report[name] = {"params": params[name], "errors": errs, "notes": notes}
    report: dict[str, Any] = {
        "gpus": gpus_report,
        "held_out": "model family qwen-72b (kernels); pairwise-NVLink systems (collectives); "
                    "attention batches / chunks at odd powers of two",
        "closest_measured": {g: m.to_dict() for g, m in
                             closest_measured_cards(catalog, list(fitted)).items()},
        "transfer": transfer_errors(own, catalog, rows)}
    return cals, report


def transfer_errors(own: dict[str, dict[str, ClassParams]], catalog: Any,
                    rows: Sequence[Measurement]) -> list[dict[str, Any]]:
    """|τ_model/τ_measured − 1| (median, max, %) of one measured card's own fitted classes on
    another card's datasheet peaks against every kernel row of that other card (calibration
    and held-out sets), per ordered pair of cards and class both fitted; with the target's
    own fit alongside. ``own``: GPU → its fitted (not borrowed) classes."""
    out = []
    for src in sorted(own):
        for dst in sorted(own):
            if src == dst:
                continue
            dev = catalog.device(dst)
            for c in GPU_CLASSES:
                sel = [m for m in rows if m.device == dst and kernel_class(m) == c]
                if c not in own[src] or c not in own[dst] or not sel:
                    continue
                f, b = [m.flops for m in sel], [m.bytes for m in sel]
                u = [m.batch * (m.kv_heads or 1) for m in sel]
                meas = np.array([m.latency_s for m in sel])
                peaks = (dev.peak_flops, dev.mem_bw_bytes_per_s)
                med, mx = errors_pct(own[src][c].latency_s(f, b, u, *peaks), meas)
                omed, omx = errors_pct(own[dst][c].latency_s(f, b, u, *peaks), meas)
                out.append({"from": src, "to": dst, "class": c, "n": len(sel),
                            "median_pct": med, "max_pct": mx,
                            "own_median_pct": omed, "own_max_pct": omx})
    return out


def report_lines(report: dict[str, Any]) -> list[str]:
    """The fit report as text: parameters with standard errors, errors per class and set."""
    lines = [f"held out: {report['held_out']}"]
    for gpu, r in report["gpus"].items():
        lines.append(f"== {gpu}" + (f" ({'; '.join(r['notes'])})" if r["notes"] else ""))
        for c, p in r["params"].items():
            vals = "  ".join(f"{q['name']}={q['value']:.4g}"
                             + (" (held)" if q["rel_std_err"] is None
                                else f" (±{q['rel_std_err'] * 100:.1f} %)")
                             for q in p["params"])
            ident = p.get("identifiability")
            extra = (f"  cond {ident['condition']:.3g}, rms log residual "
                     f"{ident['rms_log_residual']:.3f}" if ident else "")
            lines.append(f"  {c:18s} n={p['n']:<5d} {vals}{extra}")
            for q in p["params"]:
                if q.get("note"):
                    lines.append(f"  {'':18s}   {q['name']}: {q['note']}")
        lines.append(f"  {'set':11s} {'class':18s} {'n':>5s}  |Δ| % before: median   max"
                     "   after: median   max")
        for label in ("calibration", "held_out"):
            for e in r["errors"][label]:
                lines.append(f"  {label:11s} {e['class']:18s} {e['n']:5d}  "
                             f"{e['median_before_pct']:21.1f} {e['max_before_pct']:6.1f} "
                             f"{e['median_after_pct']:15.1f} {e['max_after_pct']:6.1f}")
    lines.extend(_transfer_lines(report))
    return lines


def _transfer_lines(report: dict[str, Any]) -> list[str]:
    """The closest measured card per unmeasured GPU and the transfer errors, as text."""
    lines = []
    if report.get("closest_measured"):
        lines.append("== closest measured card of each GPU without measurements")
        for gpu, m in report["closest_measured"].items():
            lines.append(f"  {gpu:8s} -> {m['card']:6s} {m['why']}")
    if report.get("transfer"):
        lines.append("== transfer: one card's classes on another's peaks, |Δ| % median / max "
                     "(the target's own fit)")
        for e in report["transfer"]:
            lines.append(f"  {e['from']:5s} -> {e['to']:5s} {e['class']:12s} n={e['n']:<5d} "
                         f"{e['median_pct']:6.1f} / {e['max_pct']:6.1f}   "
                         f"({e['own_median_pct']:.1f} / {e['own_max_pct']:.1f})")
    return lines
