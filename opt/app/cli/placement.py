"""Solving on the command line: ``solve`` (any problem) and ``lower-bound`` (placement).

The serving side of ``solve`` (simulation and the plan's summary) is loaded through
:data:`SERVING_SOLVE` only for a serving instance: a placement solve loads no ``opt.serving``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from models.interrupt import finishing
from models.options import SolveOptions
from opt.app.cli.helpers import (
    STATUS_EXIT,
    bundled_method,
    load_instance,
    parse_params,
    print_json,
    write_or_rescue,
)
from opt.app.cli.parser import Handler
from opt.common.errors import InputError
from opt.common.report import table
from opt.common.result import Result, read_result
from opt.placement.bound_options import BoundOptions
from opt.placement.bound_process import BoundWorker
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.instance import PlacementInstance
from solvers.api import solve_with
from solvers.registry import methods

#: The serving side of ``solve`` (:func:`opt.app.cli.serving.report_serving_solve`).
SERVING_SOLVE = Handler("opt.app.cli.serving", "report_serving_solve")


# ---- solve ---------------------------------------------------------------------------------

def cmd_solve(args: argparse.Namespace) -> int:
    """``solve``: one method on one instance (placement or serving plan); prints a summary."""
    worker = _bound_worker(args)
    try:
        return _solve_and_report(args, worker)
    finally:
        if worker is not None:
            worker.close()


#: instance files from this size (bytes) get a bound child started before they are read
#: (≈ 100,000 tasks as gzipped column tables; a child below PARALLEL_BOUND_TASKS is stopped)
PRESTART_FILE_BYTES = 1 << 20


def _bound_worker(args: argparse.Namespace) -> BoundWorker | None:
    """A :class:`~opt.placement.bound_process.BoundWorker` for a placement heuristic on a file
    of at least :data:`PRESTART_FILE_BYTES`: its child loads numba while this process reads
    (None otherwise, or when the method name is unknown: ``solve`` reports that)."""
    spec = next((m for m in methods("placement") if m.name == args.method), None)
    if spec is None or spec.exact:  # an exact method's bound is its own
        return None
    try:
        if Path(args.instance).stat().st_size < PRESTART_FILE_BYTES:
            return None
    except OSError:
        return None  # load_instance reports it
    return BoundWorker.start()


def _solve_and_report(args: argparse.Namespace, worker: BoundWorker | None) -> int:
    """Read, solve (the bound in ``worker`` when a heuristic takes it), write and print."""
    inst = load_instance(args.instance)
    is_serving = getattr(inst, "problem", "placement") == "serving"
    if args.simulate and not is_serving:
        raise InputError("--simulate applies to serving-plan instances", field="simulate")
    initial = read_result(args.initial_solution).solution if args.initial_solution else None
    params = parse_params(args.param)
    params.update(serving_only_params(args, is_serving))
    method = args.method if args.method is not None else bundled_method(args.instance)
    warm_start = params.pop("warm_start", "best")  # --param warm_start=...: solve's own
    options = SolveOptions(time_limit=args.time_limit, num_workers=args.num_workers,
                           seed=args.seed, initial_solution=initial, params=params,
                           export_path=args.export, deterministic=args.deterministic,
                           log=args.log)
    res = solve_with(inst, method, options, warm_start=warm_start, bound_worker=worker)
    if is_serving:
        SERVING_SOLVE.function()(inst, res, args)
    else:
        _print_result(res, args)
    # Ctrl-C until here: exit 130, the output file untouched; from here on it comes too late:
    # the file is written whole and the command ends as the result says
    with finishing():
        failed = write_or_rescue(res.write, args.output) if args.output else None
        if failed:
            print(f"hetopt: error: {failed}", file=sys.stderr)
            return 2
        if res.status == "ERROR":
            print(f"hetopt: {res.method}: ERROR: {res.stats.get('message')}", file=sys.stderr)
        return STATUS_EXIT[res.status]


def serving_only_params(args: argparse.Namespace, serving: bool) -> dict[str, bool]:
    """``--no-frontier`` / ``--no-bounds`` of ``solve`` as B&B parameters (serving plans only)."""
    params: dict[str, bool] = {}
    for flag, key in ((args.no_frontier, "frontier"), (args.no_bounds, "bounds")):
        if flag:
            if not serving:
                raise InputError(f"--no-{key} applies to serving-plan instances",
                                 source="<argument>", field=f"no-{key}")
            params[key] = False
    return params


def _print_result(res: Result, args: argparse.Namespace) -> None:
    """A placement result on stdout: JSON (the solution unless --no-solution) or a summary."""
    if args.json:
        print_json(res.body(solution=not args.no_solution))
    else:
        print(table(["method", "status", "objective", "lower bound", "gap", "runtime s"],
                    [[res.method, res.status, res.objective, res.lower_bound, res.gap,
                      res.runtime_s]]))
        if res.stats.get("message") and res.status != "ERROR":
            print(res.stats["message"])
        _print_slo(res)


def _print_slo(res: Result) -> None:
    """One line on the instance's SLO, when it has one."""
    slo = res.stats.get("slo")
    if slo is not None:
        print("SLO met" if slo["met"] else f"SLO broken: {'; '.join(slo['violations'])}")
    if res.stats.get("slo_tightest"):
        t = res.stats["slo_tightest"]
        print(f"SLO infeasible; tightest found ({t['source']}): TTFT {t['ttft']}, mean TPOT "
              f"{t['mean_tpot']}, e2e {t['e2e']}")


# ---- lower-bound ---------------------------------------------------------------------------

def cmd_lower_bound(args: argparse.Namespace) -> int:
    """``lower-bound``: certified makespan lower bound of a P1 instance: every component, its
    value and compute time."""
    inst = load_instance(args.instance)
    if not isinstance(inst, PlacementInstance):
        raise InputError("hetopt lower-bound applies to placement instances", field="instance")
    cert = certified_lower_bound(inst, BoundOptions(max_assignments=args.max_assignments,
                                                    max_evaluations=args.max_evaluations))
    if args.json:
        print_json({"tasks": inst.n_tasks, **cert.to_dict()})
        return 0
    print(table(["component", f"bound ({inst.time_unit})", "seconds"],
                [[c.name, c.value, f"{c.seconds:.2f}"] for c in cert.components]
                + [["max (certified)", cert.value, f"{cert.seconds:.2f}"]]))
    print(f"certified lower bound {cert.value} {inst.time_unit} ({cert.best}), "
          f"{inst.n_tasks} tasks, {cert.seconds:.1f} s")
    return 0
