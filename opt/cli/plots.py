"""``hetopt plot gantt|utilisation|sweep|serving``: PNGs of results and sweeps (needs the
``plot`` extra). The closed-form plots are ``hetopt theory plot`` (:mod:`opt.cli.theory`)."""

from __future__ import annotations

import argparse
import sys

from opt.cli.common import load_instance, print_json
from opt.common.errors import InputError
from opt.common.extras import require


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``plot`` group."""
    pp = sub.add_parser("plot", help="plots of results and sweeps (PNG; needs hetopt[plot])")
    psub = pp.add_subparsers(dest="what", required=True)
    for what, help_ in (("gantt", "per-device Gantt chart: compute, transfers, weight loads"),
                        ("utilisation", "NPU/PIM busy over time and co-utilisation (Eq. 5)")):
        s = psub.add_parser(what, parents=[common], help=help_)
        s.add_argument("instance", help="placement instance file or bundled instance name")
        s.add_argument("result", help="result file with a schedule")
        s.add_argument("--window", metavar="START:END",
                       help="time window in the instance's time unit (default: whole schedule)")
        s.add_argument("--resolution", type=int, default=2000,
                       help="gantt: pixel columns; closer events are merged (default 2000)")
        s.add_argument("-o", "--output", required=True, help="PNG file")
        s.set_defaults(func=cmd_plot)
    s = psub.add_parser("sweep", parents=[common],
                        help="speedup heat map over PD from sweep placement/layout records")
    s.add_argument("results", help="results folder of hetopt sweep placement (or layout)")
    s.add_argument("--method", default="bifocal", help="method whose speedup is shown")
    s.add_argument("--baseline", default="pd", help="baseline method (default pd)")
    s.add_argument("-o", "--output", required=True, help="PNG file")
    s.set_defaults(func=cmd_plot)
    s = psub.add_parser("serving", parents=[common],
                        help="cost bars per cell and method from sweep serving records")
    s.add_argument("results", help="results folder of hetopt sweep serving")
    s.add_argument("--methods", nargs="+", metavar="METHOD", help="methods to show (default all)")
    s.add_argument("-o", "--output", required=True, help="PNG file")
    s.set_defaults(func=cmd_plot)


def _placement_pair(args: argparse.Namespace):
    """The placement instance and result of ``plot gantt`` / ``plot utilisation``."""
    from opt.common.result import read_result
    from opt.placement.instance import PlacementInstance

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
    from opt.placement.validator import ScheduleError

    if args.what in ("gantt", "utilisation"):
        from opt.plots.gantt import parse_window, plot_gantt, plot_utilisation

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
        from opt.plots.sweeps import load_records, plot_serving_costs, plot_speedup_heatmap

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
