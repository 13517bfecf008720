"""Bring your own measurements (docs/measurements.md): ``hetopt calibrate`` (fit a device's
latency model to a measured table), ``hetopt compare-measured`` (a schedule's predicted
against measured latencies, DOPS' Δ) and ``hetopt synth-measurements`` (a synthetic table
from perturbed parameters, for round trips)."""

from __future__ import annotations

import argparse
from typing import Any

from opt.app.cli.helpers import load_instance, print_json
from opt.app.cli.sources import cards, catalog
from opt.app.plots.common import _pyplot
from opt.common.errors import InputError
from opt.common.jsonio import read_json
from opt.common.report import table
from opt.common.result import read_result
from opt.common.units import TIME_UNITS
from opt.costlib.fit import (
    default_shapes,
    fit_device,
    fit_points,
    get_param,
    synthetic_rows,
    with_params,
)
from opt.costlib.gpu_calib import write_calibrations
from opt.costlib.gpu_fit import calibrate_gpus, report_lines
from opt.costlib.hardware import Catalog, catalog_from_dict
from opt.costlib.measured import (
    END_TO_END,
    MeasuredTable,
    Measurement,
    read_measurements,
    write_measurements_csv,
)
from opt.placement.measured_compare import builder_meta, compare_measured
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement

# ---- calibrate ----------------------------------------------------------------------------------

def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit, print the parameters and the errors per class, write the catalog."""
    cat = catalog(args)
    if args.gpu:   # the calibrated GPU model (opt.costlib.gpu_fit)
        cals, rep = calibrate_gpus(read_measurements(args.measurements, cat), cat)
        if args.output:
            write_calibrations(cals, args.output, rep)
        if args.json:
            print_json({**rep, "output": args.output})
        else:
            print("\n".join(report_lines(rep)))
        return 0
    if args.device is None:
        raise InputError("give --device (or --gpu)", source="<argument>", field="device")
    spec = cat.device(args.device)
    meas = read_measurements(args.measurements, cat)
    report = fit_device(spec, fit_points(meas, spec.name, cards(args), args.model),
                        args.measurements)
    if args.output:
        _user_catalog(args, cat).merged(Catalog(devices={spec.name: report.device})
                                        ).write(args.output)
    if args.json:
        print_json({**report.to_dict(), "output": args.output})
        return 0
    print(f"{spec.name}: {report.n_points} points from {args.measurements} ({report.status})")
    print(table(["parameter", "value", "± rel. s.e.", "catalog", "lower", "upper", "note"],
                [[p.name, p.value, p.rel_std_err, p.initial, p.lower, p.upper,
                  p.note or ("fitted" if p.fitted else "held")] for p in report.params]))
    print(table(["class", "n", "median err before", "max before", "median err after",
                 "max after"],
                [[e.op_class, e.n, e.median_before, e.max_before, e.median_after, e.max_after]
                 for e in report.errors]))
    if args.output:
        print(f"wrote {args.output} (use it with --catalog)")
    return 0


def _user_catalog(args: argparse.Namespace, cat: Any) -> Any:
    """The entries of the ``--catalog`` file alone (empty without one), so that a calibration
    written over it keeps the devices fitted before (chain ``calibrate --catalog A -o B``)."""
    if args.catalog is None:
        return Catalog(devices={})
    return catalog_from_dict(read_json(args.catalog), source=args.catalog,
                             known_devices=cat.devices)


# ---- compare-measured ---------------------------------------------------------------------------

def cmd_compare(args: argparse.Namespace) -> int:
    """Predicted vs measured per class and end to end; table, JSON or a plot."""
    if args.plot:
        _pyplot()  # fail before any work when matplotlib is missing
    cat = catalog(args)
    meas = read_measurements(args.measurements, cat)
    inst = load_instance(args.instance)
    result = read_result(args.result)
    if result.solution is None:
        raise InputError("the result has no solution", source=args.result, field="solution")
    try:
        report = compare_measured(inst, result.solution, meas, cat, cards(args))
    except ScheduleError as exc:
        raise InputError(f"invalid schedule: {exc}", source=args.result,
                         field="solution") from None
    if args.plot:
        _plot_gaps(report, args.plot)
    if args.json:
        print_json(report.to_dict())
        return 0
    print(table(["class", "matched", "interp.", "unmatched", "predicted s", "measured s",
                 "Δ (sums)", "median op Δ"],
                [[c.op_class, c.matched, c.interpolated, c.unmatched, c.predicted_s,
                  c.measured_s, c.delta, c.median_op_delta] for c in report.classes]))
    e = report.end_to_end
    if e is None:
        print(f"end to end: S_sim {report.makespan_s:.6g} s; no end_to_end row for this "
              "workload in the table")
    else:
        print(f"end to end: S_sim {e.s_sim_s:.6g} s, S_ver {e.s_ver_s:.6g} s, "
              f"Δ = (S_sim − S_ver)/S_ver = {e.delta:+.2%} ({e.source})")
    return 0


def _plot_gaps(report: Any, path: str) -> None:
    """Bars of Δ per class (and end to end) in per cent."""
    plt = _pyplot()
    gaps = [(c.op_class, c.delta) for c in report.classes if c.delta is not None]
    if report.end_to_end is not None:
        gaps.append(("end to end", report.end_to_end.delta))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([g[0] for g in gaps], [100 * g[1] for g in gaps], color="#4477aa")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel("Δ, %")
    ax.set_title("Δ = (predicted − measured) / measured", fontsize=10)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ---- synth-measurements -------------------------------------------------------------------------

def _perturbations(items: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for item in items:
        dev, _, rest = item.partition(":")
        name, _, value = rest.partition("=")
        try:
            out.setdefault(dev.lower(), {})[name] = float(value)
        except ValueError:
            raise InputError(f"expected DEVICE:PARAM=VALUE, got {item!r}", source="<argument>",
                             field="set") from None
    return out


def cmd_synth(args: argparse.Namespace) -> int:
    """Measurements of perturbed catalog models (lognormal noise), written as CSV."""
    from dataclasses import replace

    cat, card = catalog(args), cards(args)[args.model]
    changes = _perturbations(args.set)
    rows: list[Measurement] = []
    notes = []
    for name in args.device:
        spec = cat.device(name)
        delta = changes.pop(spec.name.lower(), {})
        if spec.latency_model is None:
            raise InputError(f"device '{spec.name}' has no latency model", source="<argument>",
                             field="device")
        for p in delta:
            try:
                get_param(spec.latency_model, p)
            except InputError as exc:
                raise InputError(exc.detail, source="<argument>", field="set") from None
        true = replace(spec, latency_model=with_params(spec.latency_model, delta))
        src = (f"synthetic: catalog {spec.name} model with {delta or 'no changes'}, lognormal "
               f"noise σ={args.noise}, seed {args.seed}")
        notes.append(src)
        shapes = default_shapes(card, tuple(args.batch or (1, 8)), tuple(args.cell_share),
                                tuple(args.share or (1.0,)))
        rows += synthetic_rows(true, card, shapes, rel_noise=args.noise, seed=args.seed,
                               source=src)
    if changes:
        raise InputError(f"--set names a device not in --device: {', '.join(changes)}",
                         source="<argument>", field="set")
    rows += _end_to_end_rows(args, card.name)
    write_measurements_csv(MeasuredTable(tuple(rows), "log-linear"), args.output,
                           header="\n".join(["hetopt synth-measurements", *notes]))
    print(f"{args.output}: {len(rows)} synthetic rows")
    return 0


def _end_to_end_rows(args: argparse.Namespace, model: str) -> list[Measurement]:
    """end_to_end rows: the validated makespan of each INSTANCE:RESULT pair."""
    rows: list[Measurement] = []
    for item in args.end_to_end:
        inst_ref, _, res_ref = item.partition(":")
        inst = load_instance(inst_ref)
        _, platform, wl = builder_meta(inst)
        try:
            metrics = validate_placement(inst, read_result(res_ref).solution or {})
        except ScheduleError as exc:
            raise InputError(f"invalid schedule: {exc}", source=res_ref,
                             field="solution") from None
        rows.append(Measurement(platform, END_TO_END, int(wl["prefill"]),
                                int(wl["prefill"]) + int(wl["decode"]), int(wl["batch"]), 1.0,
                                model, metrics.makespan * TIME_UNITS[inst.time_unit],
                                f"synthetic: makespan of {res_ref} on {inst_ref}",
                                f"end_to_end[{len(rows)}]"))
    return rows
