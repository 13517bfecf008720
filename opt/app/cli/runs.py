"""Resumable runs: ``hetopt sweep placement|layout|serving``, ``bench``, ``replay`` and
``scaling`` (results folders that a rerun resumes; ``--fresh`` recomputes)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.app.bench.report import write_reports
from opt.app.bench.runner import any_failed, render_case, run_cases, summary
from opt.app.bench.suites import suite_cases
from opt.app.cli.helpers import check_methods, int_csv, parse_params, print_json
from opt.app.cli.serving import grid_from_args
from opt.app.cli.sources import cards, catalog
from opt.app.runs import replay, scaling, serving_sweep
from opt.app.runs.executor import make_executor
from opt.app.runs.layout_sweep import format_shares, pair_speedups, render_layout
from opt.app.runs.replay import ReplayOptions, ReplayStore, generate_trace, read_burstgpt_csv
from opt.app.runs.replay_schedules import check_methods as check_replay_methods
from opt.app.runs.replay_schedules import schedule_shape, shape_builder, validated_heuristic
from opt.app.runs.scaling import ScalingOptions, insight_table, plot_scaling, run_scaling
from opt.app.runs.serving_sweep import ServingSweepOptions, cells, run_serving_sweep
from opt.app.runs.sweep import (
    Progress,
    SweepOptions,
    geomean_speedups,
    grid,
    run_sweep,
)
from opt.app.runs.sweep import render as render_sweep
from opt.app.runs.sweep_calls import SolveCall
from opt.common.errors import InputError
from opt.common.extras import require
from opt.common.report import table
from solvers.registry import get_method, names

# ---- sweeps ---------------------------------------------------------------------------------

def parse_method_params(items: Sequence[str] | None, methods: Sequence[str]
                        ) -> dict[str, dict[str, Any]]:
    """``--param METHOD.KEY=VALUE`` items (``hetopt sweep placement``) as {method: {key:
    value}}: KEY=VALUE as :func:`~opt.app.cli.helpers.parse_params` reads it, METHOD one of
    ``methods`` (the part before the first dot). Each method's params are checked against its
    declared ones here, before any solve (InputError naming the item)."""
    out: dict[str, dict[str, Any]] = {}
    for item in items or ():
        method, dot, rest = item.partition(".")
        if not dot or method not in methods or "=" not in rest:
            raise InputError(f"expected METHOD.KEY=VALUE with METHOD one of the sweep's "
                             f"methods ({', '.join(methods)}), got {item!r}",
                             source="<argument>", field="param")
        out.setdefault(method, {}).update(parse_params([rest]))
    for method, params in out.items():
        get_method(method, ("placement", "layout")).params.parse(method, params)
    return out


def _executor(args: argparse.Namespace):
    """The sweep executor of ``--executor`` / ``--jobs`` / ``--scheduler`` (opt.app.runs.executor)."""
    return make_executor(args.executor, args.jobs, args.scheduler, preload=("solvers",))


def _print_sweep_footer(done, out: Path) -> None:
    print(f"{len(done)} results ({sum(cached for _, cached in done)} reused) in {out}/ "
          f"(rerun resumes; --fresh recomputes)")


def sweep_exit(records: list[dict], out: Path) -> int:
    """The exit code of a sweep: 1, with one line on stderr, when it has records and every one
    is ERROR (nothing was solved: never a silent success); else 0."""
    if not records or any(r.get("status") != "ERROR" for r in records):
        return 0
    first = next((r.get("error") or r.get("message") for r in records
                  if r.get("error") or r.get("message")), None)
    print(f"hetopt: every one of the {len(records)} records is ERROR"
          f"{f' (the first: {first})' if first else ''}; records in {out}/", file=sys.stderr)
    return 1


def _run_grid_sweep(args: argparse.Namespace, out: Path, solve_one, cat, crds):
    """``run_sweep`` over the workload grid × methods of a placement / layout sweep."""
    workloads = grid(args.models, args.platforms, args.prefill, args.decode, args.batch)
    methods = list(dict.fromkeys(args.methods))
    progress = Progress(len(workloads) * len(methods), stream=sys.stderr)
    with _executor(args) as executor:
        options = SweepOptions(layers=args.layers, tp=args.tp,
                               paper_precision=getattr(args, "paper_precision", False),
                               resume=not args.fresh, progress=progress, executor=executor)
        return run_sweep(workloads, methods, out, solve_one, catalog=cat, cards=crds,
                         options=options)


def cmd_sweep_placement(args: argparse.Namespace) -> int:
    """``sweep placement``: every model × platform × workload × method, resumable."""
    check_methods(args.methods, names(("placement", "layout")))
    per_method = parse_method_params(args.param, list(dict.fromkeys(args.methods)))
    cat, crds = catalog(args), cards(args)
    out = Path(args.out)
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.num_workers,
                          seed=args.seed,
                          method_params=tuple((m, tuple(p.items()))
                                              for m, p in per_method.items()))
    done = _run_grid_sweep(args, out, solve_one, cat, crds)
    records = [rec for rec, _ in done]
    if args.json:
        print_json({"records": [{**rec, "cached": cached} for rec, cached in done],
                    "geomean_speedup_vs_pd": geomean_speedups(records)
                    if "pd" in args.methods else None})
    else:
        print(render_sweep(records))
        _print_sweep_footer(done, out)
    return sweep_exit(records, out)


def cmd_sweep_layout(args: argparse.Namespace) -> int:
    """Layout strategies over a workload grid; resumable like ``sweep placement``."""
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
    return sweep_exit(records, out)


def cmd_sweep_serving(args: argparse.Namespace) -> int:
    """``sweep serving``: model × GPU mix × context × SLO × method, resumable."""
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
        options = ServingSweepOptions(grid=grid, tp_degrees=tuple(int_csv(args.tp, "tp")),
                                      gpu_cost=args.gpu_cost,
                                      unmeasured_gpu=args.unmeasured_gpu,
                                      resume=not args.fresh, progress=progress,
                                      executor=executor)
        done = run_serving_sweep(todo, args.methods, out, solve_one, catalog=catalog(args),
                                 cards=cards(args), options=options)
    records = [rec for rec, _ in done]
    if args.json:
        print_json({"records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(serving_sweep.render(records))
        _print_sweep_footer(done, out)
    return sweep_exit(records, out)


# ---- bench / replay / scaling ---------------------------------------------------------------

def cmd_bench(args: argparse.Namespace) -> int:
    """``bench``: the bundled benchmark suite (exit 1 if any invariant fails; a paper figure
    that differs from the paper, with its reason, does not fail)."""
    out = Path(args.out)
    cases = suite_cases(args.suite, out, args.jobs)
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
    """Request-level serving replay (opt.app.runs.replay); the schedules of each batch shape
    come from opt.app.runs.replay_schedules."""
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
    done = replay.run_replay(requests, methods, out, schedule_shape,
                             shape_builder(card, platform, cat, layers=args.layers),
                             model=card.name, platform=platform.name, options=opts,
                             store=ReplayStore(fresh=args.fresh, schedule_dir=schedules),
                             progress=progress)
    wall = time.perf_counter() - t0
    summ = replay.trace_summary(requests)
    if args.json:
        print_json({"trace": summ, "out": str(out), "wall_s": wall,
                    "methods": [{k: v for k, v in rec.items() if k != "per_request"}
                                | {"cached": cached} for rec, cached in done]})
        return 0
    print(f"trace: {summ['requests']} requests over {summ['duration_s']:.1f} s, mean input "
          f"{summ['mean_input']:.0f}, mean output {summ['mean_output']:.0f} tokens; "
          f"{card.name} on {platform.name} ({layer_tag} layers)")
    print(replay.render([rec for rec, _ in done]))
    n_sched = sum(rec.get("schedules_computed", 0) for rec, cached in done if not cached)
    print(f"replay took {wall:.1f} s ({n_sched} schedules computed); results in {out}/ "
          f"(rerun resumes; --fresh recomputes)")
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    """Hardware scaling HP0 → HP128 (opt.app.runs.scaling): speedups, marginal returns, plots."""
    if args.plot:
        require("plot", "--plot")  # before minutes of solving, not after
    cat, crds = catalog(args), cards(args)
    n = (len(set(args.models)) * len(set(args.platforms)) * len(set(args.prefill))
         * len(set(args.decode)) * len(set(args.batch)))
    progress = Progress(n, stream=sys.stderr)
    done = run_scaling(args.models, args.platforms, args.prefill, args.decode, args.batch,
                       args.out, lambda inst, m: validated_heuristic(inst, m), catalog=cat,
                       cards=crds,
                       options=ScalingOptions(method=args.method, layers=args.layers,
                                              scale_capacity=not args.no_capacity_scaling,
                                              paper_precision=args.paper_precision,
                                              resume=not args.fresh, progress=progress))
    records = [rec for rec, _ in done]
    summarised = scaling.summarise(records, args.platforms, cat)
    insights = insight_table(summarised, args.platforms)
    plots = plot_scaling(summarised, args.platforms, args.plot) if args.plot else []
    if args.json:
        print_json({"summary": summarised, "insights": insights, "plots": plots,
                    "records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(scaling.render(summarised, args.platforms))
        print()
        print(table(list(insights[0]), [list(x.values()) for x in insights]))
        for path in plots:
            print(f"wrote {path}")
        print(f"{len(records)} results ({sum(c for _, c in done)} reused) in {args.out}/")
    return 0
