"""``hetopt plot gantt|utilisation|sweep|serving``: PNGs of results and sweeps (needs the
``plot`` extra). The closed-form plots are ``hetopt theory plot`` (:mod:`opt.app.cli.theory`)."""

from __future__ import annotations

import argparse
import sys

from opt.app.cli.helpers import load_instance, print_json
from opt.app.plots.gantt import parse_window, plot_gantt, plot_utilisation
from opt.app.plots.sweeps import load_records, plot_serving_costs, plot_speedup_heatmap
from opt.common.errors import InputError
from opt.common.extras import require
from opt.common.result import read_result
from opt.placement.instance import PlacementInstance
from opt.placement.schedule_error import ScheduleError


def _placement_pair(args: argparse.Namespace):
    """The placement instance and result of ``plot gantt`` / ``plot utilisation``."""
    inst = load_instance(args.instance)
    if not isinstance(inst, PlacementInstance):
        raise InputError("this plot applies to placement instances", field="instance")
    res = read_result(args.result)
    if res.solution is None:
        raise InputError(f"no schedule to plot (status {res.status})", source=args.result,
                         field="solution")
    return inst, res


def cmd_plot(args: argparse.Namespace) -> int:
    """``hetopt plot gantt|utilisation|sweep|serving`` (PNG; needs the ``plot`` extra)."""
    require("plot", f"plot {args.what}")  # before reading and validating the inputs

    if args.what in ("gantt", "utilisation"):
        inst, res = _placement_pair(args)
        window = parse_window(args.window)
        try:
            if args.what == "gantt":
                info = plot_gantt(inst, res.solution, args.output, window=window,
                                  resolution=args.resolution)
            else:
                info = plot_utilisation(inst, res.solution, args.output, window=window)
        except ScheduleError as exc:
            print(f"invalid: {exc}", file=sys.stderr)
            return 1
    else:
        if args.what == "sweep":
            info = plot_speedup_heatmap(load_records(args.results), args.output,
                                        method=args.method, baseline=args.baseline)
        else:
            info = plot_serving_costs(load_records(args.results, "serving"), args.output,
                                      methods=args.methods)
    if args.json:
        print_json(info)
    else:
        print(f"wrote {info['path']}")
    return 0
