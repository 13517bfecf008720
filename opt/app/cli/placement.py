"""Instances and results on the command line: ``build placement``, ``import dot``, ``solve``,
``validate`` and ``lower-bound`` (the serving-plan side of solve / validate is in
:mod:`opt.app.cli.serving`)."""

from __future__ import annotations

import argparse
import sys

from models.options import SolveOptions
from opt.app.cli import serving
from opt.app.cli.common import (
    STATUS_EXIT,
    TABLES,
    bundled_method,
    instance_summary,
    load_instance,
    parse_params,
    print_json,
    write_or_rescue,
)
from opt.app.cli.output import write_output
from opt.common.errors import InputError
from opt.common.report import table
from solvers.api import solve_with
from solvers.registry import methods

# ---- build / import -------------------------------------------------------------------------

def placement_request(args: argparse.Namespace):
    """The :class:`opt.placement.request.PlacementRequest` of ``build placement``'s options."""
    from opt.costlib.sources import Sources
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.request import (
        Budget,
        Goal,
        PlacementRequest,
        act_sparsity_ratios,
        chosen_precision,
        chosen_sparsity,
    )

    act = None if args.act_sparsity is None else \
        act_sparsity_ratios(args.act_sparsity, "act-sparsity", "<argument>")
    return PlacementRequest(
        model=args.model, platform=args.platform,
        workload=Workload(args.prefill, args.decode, args.batch),
        options=BuildOptions(
            layers=args.layers, tp=args.tp, block_span=args.block_span, dtype=args.dtype,
            kv_layout=args.kv_layout, time_unit=args.time_unit, load_timing=args.load_timing,
            formats=tuple(args.formats) if args.formats else None,
            precision=chosen_precision(args.model, args.dtype, weight=args.weight_dtype,
                                       activation=args.act_dtype, kv=args.kv_dtype,
                                       paper=args.paper_precision),
            sparsity=chosen_sparsity(args.weight_sparsity, act, args.attn_sparsity)),
        budget=Budget(getattr(args, "budget_gb", None), getattr(args, "budget_factor", None)),
        goal=Goal(args.objective, args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms),
        measurements=args.measurements, sources=Sources(args.catalog, args.models_file))


def cmd_build_placement(args: argparse.Namespace) -> int:
    """``build placement``: write a P1 (or, with a budget, P2) instance."""
    import time

    npz = args.output.endswith(".npz")
    if npz and args.tables == "rows":
        raise InputError("an .npz file is always column tables (docs/problems.md §1.2c): "
                         "write rows to a .json or .json.gz file", source="<argument>",
                         field="tables")
    from opt.placement.request import build_placement_request

    t0 = time.perf_counter()
    inst = build_placement_request(placement_request(args))
    t1 = time.perf_counter()
    columns = inst.writes_columns(TABLES[args.tables])
    write_output(lambda path: inst.write(path, columns=columns), args.output)
    info = {**instance_summary(inst), "build_s": t1 - t0, "write_s": time.perf_counter() - t1,
            "output": args.output,
            "tables": "npz" if npz else "columns" if columns else "rows"}
    if "measurements" in inst.meta:
        info["measurements"] = inst.meta["measurements"]
    if args.json:
        print_json(info)
    else:
        print(f"{args.output}: {inst.n_tasks:,} tasks, {inst.n_edges:,} edges, "
              f"{len(inst.block_ids)} blocks on {', '.join(info['devices'])} "
              f"(built in {info['build_s']:.2f} s, written as {info['tables']} in "
              f"{info['write_s']:.2f} s)")
        if "measurements" in info:
            from opt.costlib.measured import provenance_line

            print(provenance_line(info["measurements"]))
    return 0


def cmd_import_dot(args: argparse.Namespace) -> int:
    """``import dot``: a DOT task graph on N identical processors as a placement instance."""
    from opt.placement.dot import dot_to_instance, read_dot

    inst = dot_to_instance(read_dot(args.graph), args.processors, source=args.graph)
    write_output(inst.write, args.output)
    if args.json:
        print_json({**instance_summary(inst), "output": args.output})
    else:
        print(f"{args.output}: {inst.n_tasks} tasks, {inst.n_edges} edges on "
              f"{args.processors} processors")
    return 0


# ---- validate / solve / lower-bound ---------------------------------------------------------

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


def _bound_worker(args: argparse.Namespace):
    """A :class:`~opt.placement.bound_process.BoundWorker` for a placement heuristic on a file
    of at least :data:`PRESTART_FILE_BYTES`: its child loads numba while this process reads
    (None otherwise, or when the method name is unknown: ``solve`` reports that)."""
    from pathlib import Path

    spec = next((m for m in methods("placement") if m.name == args.method), None)
    if spec is None or spec.exact:  # an exact method's bound is its own
        return None
    try:
        if Path(args.instance).stat().st_size < PRESTART_FILE_BYTES:
            return None
    except OSError:
        return None  # load_instance reports it
    from opt.placement.bound_process import BoundWorker

    return BoundWorker.start()


def _solve_and_report(args: argparse.Namespace, worker) -> int:
    """Read, solve (the bound in ``worker`` when a heuristic takes it), write and print."""
    from opt.common.result import read_result

    inst = load_instance(args.instance)
    is_serving = getattr(inst, "problem", "placement") == "serving"
    if args.simulate and not is_serving:
        raise InputError("--simulate applies to serving-plan instances", field="simulate")
    initial = read_result(args.initial_solution).solution if args.initial_solution else None
    params = parse_params(args.param)
    params.update(serving.serving_only_params(args, is_serving))
    method = args.method if args.method is not None else bundled_method(args.instance)
    warm_start = params.pop("warm_start", "best")  # --param warm_start=...: solve's own
    options = SolveOptions(time_limit=args.time_limit, num_workers=args.num_workers,
                           seed=args.seed, initial_solution=initial, params=params,
                           export_path=args.export, deterministic=args.deterministic,
                           log=args.log)
    res = solve_with(inst, method, options, warm_start=warm_start, bound_worker=worker)
    if args.simulate:
        serving.attach_simulation(inst, res)
    _print_result(res, args, is_serving)
    from models.interrupt import finishing

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


def _print_result(res, args: argparse.Namespace, is_serving: bool) -> None:
    """The result on stdout: JSON (the solution unless --no-solution) or a summary."""
    if args.json:
        print_json(res.body(solution=not args.no_solution))
    elif is_serving:
        serving.print_serving_result(res)
    else:
        print(table(["method", "status", "objective", "lower bound", "gap", "runtime s"],
                    [[res.method, res.status, res.objective, res.lower_bound, res.gap,
                      res.runtime_s]]))
        if res.stats.get("message") and res.status != "ERROR":
            print(res.stats["message"])
        _print_slo(res)


def _print_slo(res) -> None:
    """One line on the instance's SLO, when it has one."""
    slo = res.stats.get("slo")
    if slo is not None:
        print("SLO met" if slo["met"] else f"SLO broken: {'; '.join(slo['violations'])}")
    if res.stats.get("slo_tightest"):
        t = res.stats["slo_tightest"]
        print(f"SLO infeasible; tightest found ({t['source']}): TTFT {t['ttft']}, mean TPOT "
              f"{t['mean_tpot']}, e2e {t['e2e']}")


def cmd_lower_bound(args: argparse.Namespace) -> int:
    """``lower-bound``: certified makespan lower bound of a P1 instance: every component, its
    value and compute time."""
    from opt.placement.bound_options import BoundOptions
    from opt.placement.certified_bounds import certified_lower_bound
    from opt.placement.instance import PlacementInstance

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
