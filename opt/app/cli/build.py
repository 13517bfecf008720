"""Placement instances from the command line: ``build placement`` / ``build layout`` (a P1 or
P2 instance of a model, platform and workload) and ``import dot`` (a DOT task graph)."""

from __future__ import annotations

import argparse
import time

from opt.app.cli.common import TABLES
from opt.app.cli.helpers import instance_summary, print_json
from opt.app.cli.output import write_output
from opt.common.errors import InputError
from opt.costlib.measured import provenance_line
from opt.costlib.sources import Sources
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.dot import dot_to_instance, read_dot
from opt.placement.request import (
    Budget,
    Goal,
    PlacementRequest,
    act_sparsity_ratios,
    build_placement_request,
    chosen_precision,
    chosen_sparsity,
)

# ---- build placement|layout ------------------------------------------------------------------

def placement_request(args: argparse.Namespace) -> PlacementRequest:
    """The :class:`opt.placement.request.PlacementRequest` of ``build placement``'s options."""
    act = None if args.act_sparsity is None else \
        act_sparsity_ratios(args.act_sparsity, "act-sparsity", "<argument>")
    return PlacementRequest(
        model=args.model, platform=args.platform,
        workload=Workload(args.prefill, args.decode, args.batch),
        options=BuildOptions(
            layers=args.layers, tp=args.tp, block_span=args.block_span, dtype=args.dtype,
            kv_layout=args.kv_layout, time_unit=args.time_unit, load_timing=args.load_timing,
            moe_routing=args.moe_routing,
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
    npz = args.output.endswith(".npz")
    if npz and args.tables == "rows":
        raise InputError("an .npz file is always column tables (docs/problems.md §1.2c): "
                         "write rows to a .json or .json.gz file", source="<argument>",
                         field="tables")
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
            print(provenance_line(info["measurements"]))
    return 0


# ---- import dot ------------------------------------------------------------------------------

def cmd_import_dot(args: argparse.Namespace) -> int:
    """``import dot``: a DOT task graph on N identical processors as a placement instance."""
    inst = dot_to_instance(read_dot(args.graph), args.processors, source=args.graph)
    write_output(inst.write, args.output)
    if args.json:
        print_json({**instance_summary(inst), "output": args.output})
    else:
        print(f"{args.output}: {inst.n_tasks} tasks, {inst.n_edges} edges on "
              f"{args.processors} processors")
    return 0
