"""Resumable runs: ``hetopt sweep placement|layout|serving``, ``bench``, ``replay`` and
``scaling`` (results folders that a rerun resumes; ``--fresh`` recomputes)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from opt.cli.common import (
    PlacementMethodsHelp,
    add_budget_args,
    add_out_args,
    add_solve_args,
    cards,
    catalog,
    check_methods,
    int_csv,
    parse_params,
    print_json,
)
from opt.cli.serving import add_grid_args, grid_from_args
from opt.common.errors import InputError
from opt.common.extras import require
from opt.common.report import table


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``sweep`` group, ``bench``, ``replay`` and ``scaling``."""
    sw = sub.add_parser("sweep", help="solve a grid of workloads with several methods")
    swsub = sw.add_subparsers(dest="problem", required=True)
    _add_sweep_placement_parser(swsub, common)
    _add_sweep_serving_parser(swsub, common)
    _add_sweep_layout_parser(swsub, common)
    _add_bench_parser(sub, common)
    _add_replay_parser(sub, common)
    _add_scaling_parser(sub, common)


# ---- parsers --------------------------------------------------------------------------------

def _add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=["serial", "process", "dask"], default=None,
                   help="where work items run: serial (this process), process (a local pool, "
                        "the default), dask (--scheduler, or a local Dask cluster)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="parallel workers of the process pool / local Dask cluster "
                        "(default: the CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler, e.g. tcp://host:8786 (implies --executor dask; "
                        "needs hetopt[dist])")


def _add_sweep_placement_parser(swsub: argparse._SubParsersAction,
                                common: argparse.ArgumentParser) -> None:
    s = swsub.add_parser("placement", parents=[common],
                         help="P1 placement: every model x platform x workload x method")
    s.add_argument("--models", nargs="+", required=True, metavar="M")
    s.add_argument("--platforms", nargs="+", required=True, metavar="P")
    s.add_argument("--prefill", type=int, nargs="+", required=True, metavar="L_IN",
                   help="input tokens (one or more)")
    s.add_argument("--decode", type=int, nargs="+", required=True, metavar="L_OUT",
                   help="decode steps (one or more)")
    s.add_argument("--batch", type=int, nargs="+", default=[1], metavar="B",
                   help="batch sizes (default 1)")
    s.add_argument("--methods", nargs="+", required=True, metavar="METHOD",
                   action=PlacementMethodsHelp,
                   help="placement methods: {methods}; speedups are over pd when it is among "
                        "them")
    s.add_argument("--layers", type=int, help="use only the first N layers")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel shards")
    s.add_argument("--paper-precision", action="store_true",
                   help="build each model in DOPS' precision (INT8 W8A8KV8 for Mixtral-8x7B and "
                        "Llama-2-70B, fp16 otherwise)")
    add_solve_args(s, time_limit=60.0, time_help="seconds per exact solve (default 60)")
    add_out_args(s, "results/sweep")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_placement)


def _add_sweep_serving_parser(swsub: argparse._SubParsersAction,
                              common: argparse.ArgumentParser) -> None:
    s = swsub.add_parser("serving", parents=[common],
                         help="P3 serving plans: model x GPU mix x context x SLO x method")
    s.add_argument("--models", nargs="+", required=True, metavar="M")
    s.add_argument("--gpus", nargs="+", required=True, metavar="MIX",
                   help="GPU mixes, each comma-separated (H100 H100,L40S H100,A100)")
    s.add_argument("--contexts", type=int, nargs="+", required=True, metavar="S")
    s.add_argument("--slo-ms", type=float, nargs="+", required=True, metavar="MS")
    s.add_argument("--methods", nargs="+", default=["col", "afd", "cad", "bnb"],
                   metavar="METHOD", help="bnb | milp | col | afd | cad (default: all but milp)")
    s.add_argument("--tp", default="1,2,4,8", help="TP degrees (default %(default)s)")
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="B&B parameter (repeatable), e.g. sub_block_layers=1; its records go "
                        "to a sub-folder of --out named after the parameters")
    add_grid_args(s)
    add_solve_args(s, time_limit=600.0, time_help="seconds per solve (default 600)")
    add_out_args(s, "results/serving")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_serving)


def _add_sweep_layout_parser(swsub: argparse._SubParsersAction,
                             common: argparse.ArgumentParser) -> None:
    s = swsub.add_parser("layout", parents=[common],
                         help="P2 weight layout: layout strategies over a workload grid")
    s.add_argument("--models", nargs="+", default=["dops-qwen-1.8b"], metavar="M")
    s.add_argument("--platforms", nargs="+", default=["HP32"], metavar="P")
    s.add_argument("--prefill", type=int, nargs="+", default=[8, 32, 64, 128, 1024],
                   metavar="L_IN")
    s.add_argument("--decode", type=int, nargs="+", default=[8, 32, 64, 128, 1024],
                   metavar="L_OUT")
    s.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8], metavar="B")
    s.add_argument("--methods", nargs="+", metavar="METHOD",
                   default=["pd/linear", "pd/dual", "bifocal/linear", "bifocal/dual",
                            "bifocal/wla"],
                   help="layout strategies (default: the five of DOPS §6.5)")
    s.add_argument("--layers", type=int, help="use only the first N layers")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel shards")
    add_budget_args(s)
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="passed to the WLA strategies (e.g. budget=20 evaluations)")
    add_solve_args(s, time_limit=60.0, time_help="seconds per exact solve (default 60)")
    add_out_args(s, "results/layout", note="; a budget adds a subfolder")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_layout)


def _add_bench_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("bench", parents=[common], help="run the bundled benchmark suite")
    add_out_args(s, "results/bench", items="cases")
    s.add_argument("--case", action="append", help="run only this case (repeatable)")
    s.add_argument("--suite", default="default",
                   help="default (about 10 min on 2 cores) | opweave (full OpWeave table + detailed "
                        "theorem check) | dops (DOPS' seven-model sweep, hours; resumable)")
    s.set_defaults(func=cmd_bench)


def _add_replay_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("replay", parents=[common],
                       help="request-level serving replay of a trace (FCFS batches)")
    s.add_argument("--model", required=True)
    s.add_argument("--platform", required=True)
    s.add_argument("--trace", metavar="CSV", help="BurstGPT-layout CSV (default: generate)")
    s.add_argument("--trace-model", help="CSV: keep only rows of this Model")
    s.add_argument("--requests", type=int, metavar="N",
                   help="generated requests (default 500) / first N rows of the CSV")
    s.add_argument("--mean-input", type=float, default=708.0, help="generated mean input tokens")
    s.add_argument("--mean-output", type=float, default=286.0,
                   help="generated mean output tokens")
    s.add_argument("--rate", type=float, default=1.0, help="generated mean arrivals per second")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply arrival times (< 1: more back-pressure)")
    s.add_argument("--max-batch", type=int, default=4)
    s.add_argument("--timeout-ms", type=float, default=10.0, help="batch timeout")
    s.add_argument("--input-buckets", type=int, nargs="+", metavar="T",
                   default=[64, 128, 256, 512, 1024, 2048], help="padded prefill lengths")
    s.add_argument("--output-buckets", type=int, nargs="+", metavar="T",
                   default=[32, 64, 128, 256, 512, 1024], help="padded decode steps")
    s.add_argument("--methods", nargs="+", metavar="METHOD",
                   default=["bifocal", "pd", "af", "pd+linear", "pd+attn", "pd+ffn"],
                   help="bifocal (no token term), pd, af, pd+linear, pd+attn, pd+ffn, heft")
    s.add_argument("--layers", type=int, help="build with only the first N layers")
    add_out_args(s, "results/replay")
    s.set_defaults(func=cmd_replay)


def _add_scaling_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("scaling", parents=[common],
                       help="hardware scaling HP0 -> HP128: speedups and marginal PIM returns")
    s.add_argument("--models", nargs="+", default=["llama-2-7b", "llama-2-13b"], metavar="M")
    s.add_argument("--platforms", nargs="+", default=["HP0", "HP32", "HP64", "HP128"],
                   metavar="P", help="the ladder, smallest first (default %(default)s)")
    s.add_argument("--prefill", type=int, nargs="+", default=[128, 512, 1024, 2048])
    s.add_argument("--decode", type=int, nargs="+", default=[128, 256, 512, 1024])
    s.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8, 16])
    s.add_argument("--method", default="bifocal", help="placement heuristic (default bifocal)")
    s.add_argument("--layers", type=int, help="use only the first N layers (reduced run)")
    s.add_argument("--paper-precision", action="store_true",
                   help="build each model in DOPS' precision (INT8 for Mixtral-8x7B and "
                        "Llama-2-70B)")
    s.add_argument("--no-capacity-scaling", action="store_true",
                   help="with --layers: keep full device capacities (default: scale by N/L)")
    s.add_argument("--plot", metavar="DIR", help="write the heatmap and marginal-return PNGs")
    add_out_args(s, "results/scaling")
    s.set_defaults(func=cmd_scaling)


# ---- sweeps ---------------------------------------------------------------------------------

def _executor(args: argparse.Namespace):
    """The sweep executor of ``--executor`` / ``--jobs`` / ``--scheduler`` (opt.runs.executor)."""
    from opt.runs.executor import make_executor

    return make_executor(args.executor, args.jobs, args.scheduler, preload=("solvers",))


def _print_sweep_footer(done, out: Path) -> None:
    print(f"{len(done)} results ({sum(cached for _, cached in done)} reused) in {out}/ "
          f"(rerun resumes; --fresh recomputes)")


def _run_grid_sweep(args: argparse.Namespace, out: Path, solve_one, cat, crds):
    """``run_sweep`` over the workload grid × methods of a placement / layout sweep."""
    from opt.runs.sweep import Progress, grid, run_sweep

    workloads = grid(args.models, args.platforms, args.prefill, args.decode, args.batch)
    methods = list(dict.fromkeys(args.methods))
    progress = Progress(len(workloads) * len(methods), stream=sys.stderr)
    with _executor(args) as executor:
        return run_sweep(workloads, methods, out, solve_one, catalog=cat, cards=crds,
                         layers=args.layers, tp=args.tp, resume=not args.fresh,
                         progress=progress, executor=executor,
                         paper_precision=getattr(args, "paper_precision", False))


def cmd_sweep_placement(args: argparse.Namespace) -> int:
    """``sweep placement``: every model × platform × workload × method, resumable."""
    from opt.runs.sweep import geomean_speedups, render
    from solvers.registry import names
    from solvers.sweep_calls import SolveCall

    check_methods(args.methods, names(("placement", "layout")))
    cat, crds = catalog(args), cards(args)
    out = Path(args.out)
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.num_workers,
                          seed=args.seed)
    done = _run_grid_sweep(args, out, solve_one, cat, crds)
    records = [rec for rec, _ in done]
    if args.json:
        print_json({"records": [{**rec, "cached": cached} for rec, cached in done],
                    "geomean_speedup_vs_pd": geomean_speedups(records)
                    if "pd" in args.methods else None})
    else:
        print(render(records))
        _print_sweep_footer(done, out)
    return 0


def cmd_sweep_layout(args: argparse.Namespace) -> int:
    """Layout strategies over a workload grid; resumable like ``sweep placement``."""
    from opt.runs.layout_sweep import format_shares, pair_speedups, render_layout
    from solvers.registry import names
    from solvers.sweep_calls import SolveCall

    check_methods(args.methods, names(("placement", "layout")), suggest=names("layout"),
                  label="layout strategies")
    cat, crds = catalog(args), cards(args)
    out = Path(args.out)
    if args.budget_gb is not None:
        out = out / f"budget-{args.budget_gb:g}GB"
    elif args.budget_factor is not None:
        out = out / f"budget-x{args.budget_factor:g}"
    params = parse_params(args.param)
    # --param goes to the WLA strategies only; the budget applies to every instance
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.num_workers,
                          seed=args.seed, params=tuple(params.items()),
                          params_prefix="bifocal/wla", budget_gb=args.budget_gb,
                          budget_factor=args.budget_factor)
    done = _run_grid_sweep(args, out, solve_one, cat, crds)
    records = [rec for rec, _ in done]
    if args.json:
        print_json({"records": [{**rec, "cached": cached} for rec, cached in done],
                    "speedups": pair_speedups(records), "format_mix": format_shares(records)})
    else:
        print(render_layout(records))
        _print_sweep_footer(done, out)
    return 0


def cmd_sweep_serving(args: argparse.Namespace) -> int:
    """``sweep serving``: model × GPU mix × context × SLO × method, resumable."""
    from opt.runs.serving_sweep import cells, render, run_serving_sweep
    from opt.runs.sweep import Progress
    from solvers.registry import get_method, names
    from solvers.sweep_calls import SolveCall

    check_methods(args.methods, names("serving"))
    todo = cells(args.models, args.gpus, args.contexts, args.slo_ms)
    grid = grid_from_args(args)
    out = Path(args.out)
    params = parse_params(args.param)
    get_method("bnb", "serving").params.parse("bnb", params)  # bad names fail before solving
    if params:  # other B&B settings, other records
        out = out / ("bnb-" + "-".join(f"{k}={v}" for k, v in sorted(params.items())))
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.num_workers,
                          seed=args.seed, params=tuple(params.items()), params_prefix="bnb")
    progress = Progress(len(todo) * len(dict.fromkeys(args.methods)), stream=sys.stderr)
    with _executor(args) as executor:
        done = run_serving_sweep(todo, args.methods, out, solve_one, catalog=catalog(args),
                                 cards=cards(args), grid=grid,
                                 tp_degrees=int_csv(args.tp, "tp"), resume=not args.fresh,
                                 progress=progress, executor=executor)
    records = [rec for rec, _ in done]
    if args.json:
        print_json({"records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(render(records))
        _print_sweep_footer(done, out)
    return 0


# ---- bench / replay / scaling ---------------------------------------------------------------

def cmd_bench(args: argparse.Namespace) -> int:
    """``bench``: the bundled benchmark suite (exit 1 if any invariant fails; a paper figure
    that differs from the paper, with its reason, does not fail)."""
    from opt.runs.bench import any_failed, render_case, run_cases, summary
    from opt.runs.bench_report import write_reports
    from solvers.bench.suites import suite_cases

    out = Path(args.out)
    cases = suite_cases(args.suite, out)
    if args.case:
        wanted = set(args.case)
        unknown = wanted - {c.name for c in cases}
        if unknown:
            raise InputError(f"unknown bench case(s) {', '.join(sorted(unknown))}; known: "
                             f"{', '.join(c.name for c in cases)}", source="<argument>",
                             field="case")
        cases = [c for c in cases if c.name in wanted]
    def show(case, result, cached) -> None:  # each case's table as soon as it is done
        if not args.json:
            print(render_case(case, result, cached), flush=True)

    done = run_cases(cases, out, resume=not args.fresh,
                     echo=lambda s: print(s, file=sys.stderr, flush=True), on_done=show)
    if args.json:
        print_json([{"suite": c.suite, "case": c.name, "cached": cached, **r.to_dict()}
                    for c, r, cached in done])
    else:
        print(summary(done))
    paths = write_reports(done, out if args.suite == "default" else out / args.suite,
                          root=out)
    if not args.json:
        print(f"results in {out}/ (rerun resumes; --fresh recomputes); report: "
              f"{', '.join(str(p) for p in paths)}")
    return 1 if any_failed(done) else 0


def _replay_trace(args: argparse.Namespace):
    """The requests of ``replay`` (a BurstGPT CSV or a generated trace) and their tag."""
    from opt.runs.replay import generate_trace, read_burstgpt_csv

    if args.trace:
        requests = read_burstgpt_csv(args.trace, limit=args.requests, model=args.trace_model,
                                     time_scale=args.time_scale)
        return requests, f"{Path(args.trace).stem}-n{len(requests)}-ts{args.time_scale:g}"
    requests = generate_trace(500 if args.requests is None else args.requests,
                              mean_input=args.mean_input,
                              mean_output=args.mean_output, rate_per_s=args.rate,
                              seed=args.seed, time_scale=args.time_scale)
    return requests, (f"gen-n{len(requests)}-in{args.mean_input:g}-out{args.mean_output:g}"
                      f"-r{args.rate:g}-s{args.seed}-ts{args.time_scale:g}")


def cmd_replay(args: argparse.Namespace) -> int:
    """Request-level serving replay (opt.runs.replay); schedules via solvers.placement.replay,
    lazily."""
    import time

    from opt.runs.replay import ReplayOptions, render, run_replay, trace_summary
    from opt.runs.sweep import Progress
    from solvers.placement.replay import check_methods as check_replay_methods
    from solvers.placement.replay import schedule_shape, shape_builder

    if args.requests is not None and args.requests < 1:
        raise InputError(f"must be ≥ 1, got {args.requests}", source="<argument>",
                         field="requests")
    methods = check_replay_methods(args.methods)
    cat, crds = catalog(args), cards(args)
    card, platform = crds[args.model], cat.platform(args.platform)
    requests, tag = _replay_trace(args)
    opts = ReplayOptions(max_batch=args.max_batch, timeout_s=args.timeout_ms / 1e3,
                         input_buckets=tuple(args.input_buckets),
                         output_buckets=tuple(args.output_buckets), layers=args.layers).check()
    if args.layers is not None and not 1 <= args.layers <= card.layers:
        raise InputError(f"layers must be in 1..{card.layers}, got {args.layers}",
                         source="<argument>", field="layers")
    layer_tag = f"L{args.layers}" if args.layers else "full"
    out = Path(args.out) / card.name / platform.name / f"{tag}-{layer_tag}"
    schedules = Path(args.out) / card.name / platform.name / f"schedules-{layer_tag}"
    progress = Progress(0, stream=sys.stderr)  # run_replay sets the total: methods x requests
    t0 = time.perf_counter()
    done = run_replay(requests, methods, out, schedule_shape,
                      shape_builder(card, platform, cat, layers=args.layers), model=card.name,
                      platform=platform.name, options=opts, fresh=args.fresh, progress=progress,
                      schedule_dir=schedules)
    wall = time.perf_counter() - t0
    summ = trace_summary(requests)
    if args.json:
        print_json({"trace": summ, "out": str(out), "wall_s": wall,
                    "methods": [{k: v for k, v in rec.items() if k != "per_request"}
                                | {"cached": cached} for rec, cached in done]})
        return 0
    print(f"trace: {summ['requests']} requests over {summ['duration_s']:.1f} s, mean input "
          f"{summ['mean_input']:.0f}, mean output {summ['mean_output']:.0f} tokens; "
          f"{card.name} on {platform.name} ({layer_tag} layers)")
    print(render([rec for rec, _ in done]))
    n_sched = sum(rec.get("schedules_computed", 0) for rec, cached in done if not cached)
    print(f"replay took {wall:.1f} s ({n_sched} schedules computed); results in {out}/ "
          f"(rerun resumes; --fresh recomputes)")
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    """Hardware scaling HP0 → HP128 (opt.runs.scaling): speedups, marginal returns, plots."""
    if args.plot:
        require("plot", "--plot")  # before minutes of solving, not after
    from opt.runs.scaling import insight_table, plot_scaling, render, run_scaling, summarise
    from opt.runs.sweep import Progress
    from solvers.placement.replay import validated_heuristic

    cat, crds = catalog(args), cards(args)
    n = (len(set(args.models)) * len(set(args.platforms)) * len(set(args.prefill))
         * len(set(args.decode)) * len(set(args.batch)))
    progress = Progress(n, stream=sys.stderr)
    done = run_scaling(args.models, args.platforms, args.prefill, args.decode, args.batch,
                       args.out, lambda inst, m: validated_heuristic(inst, m), catalog=cat,
                       cards=crds, method=args.method, layers=args.layers,
                       scale_capacity=not args.no_capacity_scaling, resume=not args.fresh,
                       progress=progress, paper_precision=args.paper_precision)
    records = [rec for rec, _ in done]
    summary = summarise(records, args.platforms, cat)
    insights = insight_table(summary, args.platforms)
    plots = plot_scaling(summary, args.platforms, args.plot) if args.plot else []
    if args.json:
        print_json({"summary": summary, "insights": insights, "plots": plots,
                    "records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(render(summary, args.platforms))
        print()
        print(table(list(insights[0]), [list(x.values()) for x in insights]))
        for path in plots:
            print(f"wrote {path}")
        print(f"{len(records)} results ({sum(c for _, c in done)} reused) in {args.out}/")
    return 0
