"""The ``hetopt`` command line (also ``python -m opt``).

Sub-commands: ``models``, ``hardware``, ``bounds het|hom``, ``verify-bounds``,
``plot-bounds``, ``build placement``, ``import dot``, ``instances``, ``validate``, ``solve``,
``bound``, ``sweep placement``, ``replay``, ``scaling``, ``bench``. Bad input prints one
line naming the file, field and value and exits 2; ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.common.errors import InputError
from opt.common.report import table


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=1, default=float))


def _catalog(args):
    from opt.costlib.hardware import load_catalog

    return load_catalog(args.catalog)


def _cards(args):
    from opt.costlib.modelcard import load_cards

    return load_cards(args.models_file)


# ---- models / hardware ------------------------------------------------------------------------

def cmd_models(args) -> int:
    cards = _cards(args)
    rows = [{"name": c.name, "layers": c.layers, "total_params": c.total_params,
             "active_params": c.active_params, "kv_bytes_per_token": c.kv_bytes_per_token(),
             "layer_pattern": list(c.layer_pattern), "source": c.source} for c in cards]
    if args.json:
        _print_json(rows)
        return 0
    print(table(["model", "layers", "total params", "active params", "KV bytes/token", "pattern"],
                [[r["name"], r["layers"], r["total_params"], r["active_params"],
                  int(r["kv_bytes_per_token"]), "/".join(r["layer_pattern"])] for r in rows]))
    return 0


def cmd_hardware(args) -> int:
    cat = _catalog(args)
    if args.json:
        _print_json(cat.to_dict())
        return 0
    print(table(["device", "class", "TFLOPS", "GB/s", "memory GB", "$/h", "latency model"],
                [[d.name, d.device_class, d.peak_flops / 1e12, d.mem_bw_bytes_per_s / 1e9,
                  d.memory_bytes and d.memory_bytes / 1e9, d.price_usd_per_hour,
                  d.latency_model.kind if d.latency_model else "-"] for d in cat.devices.values()]))
    print()
    print(table(["platform", "devices", "topology", "fabric GB/s", "latency us"],
                [[p.name, " + ".join(f"{m.count}x{m.device}" for m in p.members), p.topology,
                  p.fabric.bandwidth_bytes_per_s / 1e9, p.fabric.latency_s * 1e6]
                 for p in cat.platforms.values()]))
    print()
    print(table(["node type", "gpu", "gpus/node", "intra GB/s", "network GB/s", "network us"],
                [[n.name, n.gpu, n.gpus_per_node, n.intra_node.bandwidth_bytes_per_s / 1e9,
                  n.network.bandwidth_bytes_per_s / 1e9, n.network.latency_s * 1e6]
                 for n in cat.node_types.values()]))
    return 0


# ---- bounds -------------------------------------------------------------------------------------

def _kv_value_rows(report: dict[str, Any]) -> None:
    print(table(["quantity", "value"], [[k, v] for k, v in report.items()], digits=5))


def cmd_bounds(args) -> int:
    from opt.theory.gains import GpuGroup, het_report, hom_report, min_gpus

    cat = _catalog(args)
    card = _cards(args)[args.model] if args.model else None
    if args.kind == "het":
        if args.context is not None and card is None:
            raise InputError("--context needs --model", source="<argument>", field="context")
        g1 = GpuGroup(cat.device(args.gpu1), price_usd_per_hour=args.price1)
        g2 = GpuGroup(cat.device(args.gpu2), price_usd_per_hour=args.price2)
        if card is None:  # eta and the bound need no prices
            g1 = GpuGroup(g1.device, price_usd_per_hour=args.price1 or g1.device.price_usd_per_hour or 1.0)
            g2 = GpuGroup(g2.device, price_usd_per_hour=args.price2 or g2.device.price_usd_per_hour or 1.0)
            report = het_report(g1, g2)
            report = {k: report[k] for k in ("gpu1", "gpu2", "eta", "bound")}
        else:
            report = het_report(g1, g2, card, args.context, args.kv_dtype)
    else:
        if card is None or args.context is None:
            raise InputError("bounds hom needs --model and --context", source="<argument>",
                             field="model")
        dev = cat.device(args.gpu)
        gpus = args.gpus or min_gpus(dev, card)
        report = hom_report(GpuGroup(dev, gpus, args.price), card, args.context, args.kv_dtype)
    if args.json:
        _print_json(report)
    else:
        _kv_value_rows(report)
    return 0


def cmd_verify_bounds(args) -> int:
    from opt.theory.verify import (CLAIMS, cad_feasibility, cad_feasibility_summary,
                            verify_closed_forms)

    if args.detailed:
        return _verify_detailed(args)
    results = verify_closed_forms(samples=args.samples, seed=args.seed)
    cad = cad_feasibility()
    if args.json:
        _print_json({"samples": args.samples, "seed": args.seed,
                     "claims": [r.to_dict() for r in results], "cad_feasibility": cad})
    else:
        print(table(["claim", "samples", "pass", "fail", "worst margin", "statement"],
                    [[r.claim, r.samples, r.passed, r.failed, r.worst_margin,
                      CLAIMS.get(r.claim, "")] for r in results], digits=3))
        print()
        print("CAD feasible (ordered catalog GPU pairs, groups sized to hold the weights):")
        print(table(["model", "pairs", "mu=1", "mu=2", "mu=4"],
                    [[s["model"], s["pairs"], s["feasible_mu1"], s["feasible_mu2"],
                      s["feasible_mu4"]] for s in cad_feasibility_summary(cad)]))
        failed = [r.claim for r in results if r.failed]
        print(f"\n{'FAILED: ' + ', '.join(failed) if failed else 'all claims hold'}")
    return 1 if any(r.failed for r in results) else 0


def _verify_detailed(args) -> int:
    from solvers.serving.detailed_gains import DETAILED_CLAIMS, verify_detailed, worst_rows

    res = verify_detailed(catalog=_catalog(args), cards=_cards(args), models=args.models,
                          gpus=args.gpus, contexts=args.contexts, slo_s=args.slo_ms / 1e3,
                          out=args.out, resume=not args.fresh, progress=not args.json)
    if args.json:
        _print_json({"claims": [{**c.to_dict(), "statement": DETAILED_CLAIMS[c.claim]}
                                for c in res["claims"]], "hom": res["hom"], "het": res["het"]})
    else:
        print(table(["claim", "samples", "hold", "fail", "worst margin", "statement"],
                    [[c.claim, c.samples, c.passed, c.failed, c.worst_margin,
                      DETAILED_CLAIMS[c.claim]] for c in res["claims"]], digits=3))
        print("\nworst G_hom against M/(M - M_w) of the colocated group:")
        print(table(["model", "GPU", "context", "tp", "G_hom", "closed form", "limit"],
                    [[r["model"], r["gpu"], r["context"], r["tp"], r["g_hom"],
                      r["closed_g_hom"], r["limit"]]
                     for r in worst_rows(res["hom"], "g_hom", "limit")], digits=4))
        print("\nlargest G_het against (1 + sqrt(eta))/2:")
        print(table(["model", "GPUs", "context", "G_het", "bound"],
                    [[r["model"], r["gpus"], r["context"], r["g_het"], r["bound"]]
                     for r in worst_rows(res["het"], "g_het", "bound")], digits=4))
        print(f"\nresults cached in {args.out}/ (rerun resumes; --fresh recomputes); "
              f"D3.1a/D3.2a failing would be a bug, the other claims are idealisations "
              f"checked against the detailed model (docs/bounds.md)")
    return 0 if res["structural_ok"] else 1


def cmd_plot_bounds(args) -> int:
    from opt.plots.common import plot_cad_regions, plot_het_gain, plot_hom_gain

    cat, cards = _catalog(args), _cards(args)
    out = Path(args.out)
    results = {
        "hom_gain": plot_hom_gain(out / "hom_gain.png", gpu=args.gpu1, catalog=cat, cards=cards),
        "het_gain": plot_het_gain(out / "het_gain.png", gpu1=args.gpu1, gpu2=args.gpu2,
                                  model=args.model, price2=args.price2, price1=args.price1,
                                  catalog=cat, cards=cards),
        "cad_regions": plot_cad_regions(out / "cad_regions.png", catalog=cat, cards=cards),
    }
    if args.json:
        _print_json(results)
    else:
        for r in results.values():
            print(r["path"])
    return 0


# ---- placement: build, import, validate, solve ------------------------------------------------

def _load_instance(ref: str):
    """An instance file path (any problem), or the name of a bundled instance."""
    from opt.problems import read_problem_instance

    if Path(ref).exists() or ref.endswith((".json", ".json.gz")):
        return read_problem_instance(ref)
    import instances

    return instances.load(ref)


def _summary(inst) -> dict[str, Any]:
    return {"tasks": inst.n_tasks, "edges": inst.n_edges, "devices": [d.name for d in inst.devices],
            "blocks": len(inst.block_ids), "time_unit": inst.time_unit}


def cmd_build_placement(args) -> int:
    import time

    from opt.placement.builder import BuildOptions, Workload, build_placement

    cat, cards = _catalog(args), _cards(args)
    t0 = time.perf_counter()
    inst = build_placement(cards[args.model], cat.platform(args.platform), cat,
                           Workload(args.prefill, args.decode, args.batch),
                           BuildOptions(layers=args.layers, tp=args.tp,
                                        block_span=args.block_span, dtype=args.dtype,
                                        time_unit=args.time_unit,
                                        formats=tuple(args.formats) if args.formats else None,
                                        precision=_precision_args(args),
                                        sparsity=_sparsity_args(args)))
    inst = _apply_budget(inst, args)
    t1 = time.perf_counter()
    inst.write(args.output)
    info = {**_summary(inst), "build_s": t1 - t0, "write_s": time.perf_counter() - t1,
            "output": args.output}
    if args.json:
        _print_json(info)
    else:
        print(f"{args.output}: {inst.n_tasks:,} tasks, {inst.n_edges:,} edges, "
              f"{len(inst.block_ids)} blocks on {', '.join(info['devices'])} "
              f"(built in {info['build_s']:.2f} s, written in {info['write_s']:.2f} s)")
    return 0


def _precision_args(args):
    """``Precision`` from --weight-dtype/--act-dtype/--kv-dtype/--paper-precision (None when
    none is given: the builder then uses --dtype for weights, fp16 for the rest)."""
    from opt.placement.builder import paper_precision
    from opt.costlib.operators import Precision

    given = {k: v for k, v in (("weight", args.weight_dtype), ("activation", args.act_dtype),
                               ("kv", args.kv_dtype)) if v is not None}
    if not given and not args.paper_precision:
        return None
    base = paper_precision(args.model) if args.paper_precision else Precision(weight=args.dtype)
    return Precision(**{**base.__dict__, **given}).check()


def _sparsity_args(args):
    """``Sparsity`` from --weight-sparsity, --act-sparsity [prefill=R,decode=R | R],
    --attn-sparsity (None when all are absent)."""
    from opt.costlib.operators import Sparsity

    if args.weight_sparsity is None and args.act_sparsity is None and args.attn_sparsity is None:
        return None
    act = {"prefill": 0.0, "decode": 0.0}
    if args.act_sparsity is not None:
        text = args.act_sparsity.strip()
        try:
            if "=" not in text:
                act = dict.fromkeys(act, float(text))
            else:
                for part in text.split(","):
                    key, _, value = part.partition("=")
                    if key.strip() not in act:
                        raise InputError(f"expected prefill=R,decode=R or one ratio R, got "
                                         f"{text!r}", source="<argument>", field="act-sparsity")
                    act[key.strip()] = float(value)
        except ValueError:
            raise InputError(f"expected prefill=R,decode=R or one ratio R, got {text!r}",
                             source="<argument>", field="act-sparsity") from None
    return Sparsity(weight=args.weight_sparsity or 0.0, activation_prefill=act["prefill"],
                    activation_decode=act["decode"], attention=args.attn_sparsity or 0.0).check()


def _int_csv(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", source="<argument>",
                         field=what) from None
    if not values or min(values) < 1:
        raise InputError(f"expected positive integers, got {text!r}", source="<argument>",
                         field=what)
    return values


def cmd_build_serving(args) -> int:
    from opt.serving.instance import ServingGrid
    from opt.serving.builder import ServingWorkload, build_serving_plan

    cat, cards = _catalog(args), _cards(args)
    grid = ServingGrid(max_gpus=args.max_gpus, max_owners=args.max_owners,
                       max_replicas=args.max_replicas, max_microbatches=args.max_microbatches,
                       batches=_int_csv(args.batches, "batches"))
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    inst = build_serving_plan(cards[args.model], cat, gpus,
                              ServingWorkload(args.context, args.slo_ms / 1e3), grid=grid,
                              tp_degrees=_int_csv(args.tp, "tp"),
                              expert_parallel=not args.no_ep,
                              memory_fraction=args.memory_fraction)
    inst.write(args.output)
    info = {"output": args.output, "model": inst.model, "ops_per_block": inst.n_ops,
            "block_layers": inst.block_layers, "blocks": inst.blocks_total,
            "configs": [c.id for c in inst.configs],
            "microbatch_sizes": list(inst.microbatch_sizes)}
    if args.json:
        _print_json(info)
    else:
        print(f"{args.output}: {inst.model}, block of {inst.block_layers} layer(s) = "
              f"{inst.n_ops} ops, {inst.blocks_total:g} blocks, {len(inst.configs)} "
              f"configurations ({', '.join(info['configs'])})")
    return 0


def _apply_budget(inst, args):
    """``inst`` with the P2 memory budget of ``--budget-gb`` / ``--budget-factor`` (if any)."""
    from opt.placement.layout import budget_from, with_budget

    gb, factor = getattr(args, "budget_gb", None), getattr(args, "budget_factor", None)
    if gb is None and factor is None:
        return inst
    return with_budget(inst, budget_from(inst, gb=gb, factor=factor))


def _add_budget_args(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--budget-gb", type=float, metavar="GB",
                   help="P2 main-memory budget for the stored weight blocks, 10^9 bytes")
    g.add_argument("--budget-factor", type=float, metavar="F",
                   help="P2 memory budget as F x the blocks' linear bytes (2 admits all-dual)")


def cmd_import_dot(args) -> int:
    from opt.placement.dot import dot_to_instance, read_dot

    inst = dot_to_instance(read_dot(args.graph), args.processors, source=args.graph)
    inst.write(args.output)
    if args.json:
        _print_json({**_summary(inst), "output": args.output})
    else:
        print(f"{args.output}: {inst.n_tasks} tasks, {inst.n_edges} edges on "
              f"{args.processors} processors")
    return 0


def cmd_instances(args) -> int:
    import instances

    rows = [instances.info(n) for n in instances.names()]
    if args.json:
        from dataclasses import asdict

        _print_json([asdict(r) for r in rows])
    else:
        print(table(["name", "problem", "optimum", "lower", "upper"],
                    [[r.name, r.problem, r.optimum, r.lower_bound, r.upper_bound] for r in rows]))
    return 0


def cmd_validate(args) -> int:
    from opt.common.result import read_result
    from opt.placement.validator import ScheduleError, validate_placement

    inst = _load_instance(args.instance)
    res = read_result(args.result)
    if res.solution is None:
        print(f"hetopt: {args.result}: no solution to validate (status {res.status})",
              file=sys.stderr)
        return 1
    if getattr(inst, "problem", "placement") == "serving_plan":
        return _validate_serving(inst, res, args)
    try:
        metrics = validate_placement(inst, res.solution)
    except ScheduleError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    if res.objective is not None and res.objective != metrics.makespan:
        print(f"invalid: result reports objective {res.objective} but the schedule's makespan "
              f"is {metrics.makespan}", file=sys.stderr)
        return 1
    from opt.placement.utilisation import utilisation

    util = utilisation(inst, res.solution, metrics)  # DOPS Eq. 5 co-utilisation
    if args.json:
        _print_json({"valid": True, **metrics.to_dict(),
                     "class_busy": util.class_busy, "co_utilisation": util.co_utilisation,
                     "npu_only": util.npu_only, "pim_only": util.pim_only, "idle": util.idle})
    else:
        print(f"valid: makespan {metrics.makespan} {inst.time_unit}"
              + (f", TTFT {metrics.ttft}, decode {metrics.decode_time} over "
                 f"{metrics.decode_steps} steps" if metrics.ttft is not None else ""))
        if util.co_utilisation is not None:
            print(f"co-utilisation (NPU and PIM both computing) {util.co_utilisation:.1%}; "
                  f"NPU only {util.npu_only:.1%}, PIM only {util.pim_only:.1%}, idle "
                  f"{util.idle:.1%}")
    return 0


def _validate_serving(inst, res, args) -> int:
    from opt.serving.plan import PlanError, check_plan

    try:
        met = check_plan(inst, res.solution)
    except PlanError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    if res.objective is not None and abs(res.objective - met.cost_usd_per_mtok) > \
            1e-6 * max(1.0, met.cost_usd_per_mtok):
        print(f"invalid: result reports objective {res.objective} but the plan costs "
              f"{met.cost_usd_per_mtok} $/M tokens", file=sys.stderr)
        return 1
    if args.json:
        _print_json({"valid": True, "cost_usd_per_mtok": met.cost_usd_per_mtok,
                     "t_rtt_s": met.t_rtt_s, "gpus": met.gpus, "memory_bytes": met.memory_bytes})
    else:
        print(f"valid: {met.cost_usd_per_mtok:.6g} $/M tokens, T_rtt {met.t_rtt_s * 1e3:.4g} ms "
              f"(SLO {inst.seconds(inst.tpot_slo) * 1e3:.4g} ms), {met.gpus} GPUs")
    return 0


def _parse_params(items: Sequence[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", source="<argument>",
                             field="param")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


def cmd_solve(args) -> int:
    from opt.common.result import read_result
    from solvers import solve

    inst = _load_instance(args.instance)
    serving = getattr(inst, "problem", "placement") == "serving_plan"
    method = args.method or ("bnb" if serving else "cpsat")
    initial = read_result(args.initial).solution if args.initial else None
    params = _parse_params(args.param)
    for flag, key in ((args.no_frontier, "frontier"), (args.no_bounds, "bounds")):
        if flag:
            if not serving:
                raise InputError(f"--no-{key} applies to serving-plan instances",
                                 source="<argument>", field=f"no-{key}")
            params[key] = False
    res = solve(inst, method, time_limit=args.time_limit, num_workers=args.workers,
                seed=args.seed, initial_solution=initial, export_path=args.export, **params)
    sim = None
    if args.simulate:
        if not serving:
            raise InputError("--simulate applies to serving-plan instances", field="simulate")
        if res.solution is not None:
            from opt.serving.simulator import simulate_plan

            sim = simulate_plan(inst, res.solution).to_dict()
            res.stats["simulation"] = sim
    if args.output:
        res.write(args.output)
    if args.json:
        _print_json({k: v for k, v in res.to_dict().items() if k != "solution"})
    elif serving:
        _print_serving_result(res)
    else:
        print(table(["method", "status", "objective", "lower bound", "gap", "runtime s"],
                    [[res.method, res.status, res.objective, res.lower_bound, res.gap,
                      res.runtime_s]]))
        if res.stats.get("message"):
            print(res.stats["message"])
    return 0


def _print_serving_result(res) -> None:
    print(table(["method", "status", "$/M tokens", "lower bound", "T_rtt ms", "bound by",
                 "GPUs", "runtime s"],
                [[res.method, res.status, res.objective, res.lower_bound,
                  res.stats.get("t_rtt_ms"), res.stats.get("bottleneck"), res.stats.get("gpus"),
                  res.runtime_s]]))
    sol = res.solution
    if sol is not None:
        owners = ", ".join(f"{o['config']} b={o['batch']} x{o['replicas']}" for o in sol["owners"])
        print(f"plan: K={sol['owners_count']} S={sol['stages_per_block']} per block "
              f"({sol['stages_per_token']:g} stages per token), mu={sol['microbatches']}, "
              f"template {sol['template']}, owners: {owners}")
    if "message" in res.stats:
        print(res.stats["message"])
    search = res.stats.get("search")
    if search:
        print(f"search: {search['space']:,} in space, {search['candidates']:,} candidates, "
              f"{search['nodes']:,} nodes, {search['evaluations']:,} evaluations")
    sim = res.stats.get("simulation")
    if sim:
        print(f"simulated T_rtt {sim['t_rtt_sim_s'] * 1e3:.4g} ms vs formula "
              f"{sim['t_rtt_formula_s'] * 1e3:.4g} ms (ratio {sim['ratio']:.3f}; the formula "
              f"stays the objective)")


def cmd_bound(args) -> int:
    """Certified lower bound of a P1 instance: every component, its value and compute time."""
    from opt.placement.bound_options import BoundOptions
    from opt.placement.certified_bounds import certified_lower_bound
    from opt.placement.instance import PlacementInstance

    inst = _load_instance(args.instance)
    if not isinstance(inst, PlacementInstance):
        raise InputError("hetopt bound applies to placement instances", field="instance")
    cert = certified_lower_bound(inst, BoundOptions(max_assignments=args.max_assignments,
                                                    max_evaluations=args.max_evaluations))
    if args.json:
        _print_json({"tasks": inst.n_tasks, **cert.to_dict()})
        return 0
    print(table(["component", f"bound ({inst.time_unit})", "seconds"],
                [[c.name, c.value, f"{c.seconds:.2f}"] for c in cert.components]
                + [["max (certified)", cert.value, f"{cert.seconds:.2f}"]]))
    print(f"certified lower bound {cert.value} {inst.time_unit} ({cert.best}), "
          f"{inst.n_tasks} tasks, {cert.seconds:.1f} s")
    return 0


# ---- plot ---------------------------------------------------------------------------------------

def _placement_pair(args):
    """The placement instance and result of ``plot gantt`` / ``plot utilisation``."""
    from opt.placement.instance import PlacementInstance
    from opt.common.result import read_result

    inst = _load_instance(args.instance)
    if not isinstance(inst, PlacementInstance):
        raise InputError("this plot applies to placement instances", field="instance")
    res = read_result(args.result)
    if res.solution is None:
        raise InputError(f"no schedule to plot (status {res.status})", source=args.result,
                         field="solution")
    return inst, res


def cmd_plot(args) -> int:
    """``hetopt plot gantt|utilisation|sweep|serving`` (PNG; needs the ``plot`` extra)."""
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
        _print_json(info)
    else:
        print(f"wrote {info['path']}")
    return 0


# ---- replay -------------------------------------------------------------------------------------

def cmd_replay(args) -> int:
    """Request-level serving replay (opt.runs.replay); schedules via solvers.placement.replay, lazily."""
    import time

    from opt.runs.replay import (ReplayOptions, generate_trace, read_burstgpt_csv, render,
                            run_replay, trace_summary)
    from opt.runs.sweep import Progress
    from solvers.placement.replay import check_methods, schedule_shape, shape_builder

    methods = check_methods(args.methods)
    cat, cards = _catalog(args), _cards(args)
    card, platform = cards[args.model], cat.platform(args.platform)
    if args.trace:
        requests = read_burstgpt_csv(args.trace, limit=args.requests, model=args.trace_model,
                                     time_scale=args.time_scale)
        tag = f"{Path(args.trace).stem}-n{len(requests)}-ts{args.time_scale:g}"
    else:
        requests = generate_trace(args.requests or 500, mean_input=args.mean_input,
                                  mean_output=args.mean_output, rate_per_s=args.rate,
                                  seed=args.seed, time_scale=args.time_scale)
        tag = (f"gen-n{len(requests)}-in{args.mean_input:g}-out{args.mean_output:g}"
               f"-r{args.rate:g}-s{args.seed}-ts{args.time_scale:g}")
    opts = ReplayOptions(max_batch=args.max_batch, timeout_s=args.timeout_ms / 1e3,
                         input_buckets=tuple(args.input_buckets),
                         output_buckets=tuple(args.output_buckets), layers=args.layers).check()
    if args.layers is not None and not 1 <= args.layers <= card.layers:
        raise InputError(f"layers must be in 1..{card.layers}, got {args.layers}",
                         source="<argument>", field="layers")
    layer_tag = f"L{args.layers}" if args.layers else "full"
    out = Path(args.out) / card.name / platform.name / f"{tag}-{layer_tag}"
    schedules = Path(args.out) / card.name / platform.name / f"schedules-{layer_tag}"
    progress = Progress(len(methods) * 4, stream=sys.stderr)
    t0 = time.perf_counter()
    done = run_replay(requests, methods, out, schedule_shape,
                      shape_builder(card, platform, cat, layers=args.layers), model=card.name,
                      platform=platform.name, options=opts, fresh=args.fresh, progress=progress,
                      schedule_dir=schedules)
    wall = time.perf_counter() - t0
    results = [rec for rec, _ in done]
    if args.json:
        _print_json({"trace": trace_summary(requests), "out": str(out), "wall_s": wall,
                     "methods": [{k: v for k, v in rec.items() if k != "per_request"}
                                 | {"cached": cached} for rec, cached in done]})
    else:
        summ = trace_summary(requests)
        print(f"trace: {summ['requests']} requests over {summ['duration_s']:.1f} s, mean input "
              f"{summ['mean_input']:.0f}, mean output {summ['mean_output']:.0f} tokens; "
              f"{card.name} on {platform.name} ({layer_tag} layers)")
        print(render(results))
        n_sched = sum(rec.get("schedules_computed", 0) for rec, cached in done if not cached)
        print(f"replay took {wall:.1f} s ({n_sched} schedules computed); results in {out}/ "
              f"(rerun resumes; --fresh recomputes)")
    return 0


# ---- scaling ------------------------------------------------------------------------------------

def cmd_scaling(args) -> int:
    """Hardware scaling HP0 → HP128 (opt.runs.scaling): speedups, marginal returns, plots."""
    from opt.runs.scaling import insight_table, plot_scaling, render, run_scaling, summarise
    from opt.runs.sweep import Progress
    from solvers.placement.replay import validated_heuristic

    cat, cards = _catalog(args), _cards(args)
    n = (len(set(args.models)) * len(set(args.platforms)) * len(set(args.prefill))
         * len(set(args.decode)) * len(set(args.batch)))
    progress = Progress(n, stream=sys.stderr)
    done = run_scaling(args.models, args.platforms, args.prefill, args.decode, args.batch,
                       args.out, lambda inst, m: validated_heuristic(inst, m), catalog=cat,
                       cards=cards, method=args.method, layers=args.layers,
                       scale_capacity=not args.no_capacity_scaling, resume=not args.fresh,
                       progress=progress)
    records = [rec for rec, _ in done]
    summary = summarise(records, args.platforms, cat)
    insights = insight_table(summary, args.platforms)
    plots = plot_scaling(summary, args.platforms, args.plot) if args.plot else []
    if args.json:
        _print_json({"summary": summary, "insights": insights, "plots": plots,
                     "records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(render(summary, args.platforms))
        print()
        print(table(list(insights[0]), [list(x.values()) for x in insights]))
        for path in plots:
            print(f"wrote {path}")
        print(f"{len(records)} results ({sum(c for _, c in done)} reused) in {args.out}/")
    return 0


# ---- sweep --------------------------------------------------------------------------------------

def _method_names() -> list[str]:
    """Registered placement methods (solvers imported lazily: the core does not depend on them;
    the registry itself imports no back end)."""
    from solvers.api import PLACEMENT_METHODS

    return list(PLACEMENT_METHODS)


def _add_executor_args(p) -> None:
    p.add_argument("--executor", choices=["serial", "process", "dask"], default=None,
                   help="where work items run: serial (this process), process (a local pool, "
                        "the default), dask (--scheduler, or a local Dask cluster)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="parallel workers of the process pool / local Dask cluster "
                        "(default: the CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler, e.g. tcp://host:8786 (implies --executor dask; "
                        "needs hetopt[dist])")


def _executor(args):
    """The sweep executor of ``--executor`` / ``--jobs`` / ``--scheduler`` (opt.runs.executor)."""
    from opt.runs.executor import make_executor

    return make_executor(args.executor, args.jobs, args.scheduler, preload=("solvers",))


def _check_methods(methods: Sequence[str], registry, *, suggest=None,
                   label: str = "known") -> None:
    """InputError naming every method of ``methods`` not in ``registry``."""
    unknown = [m for m in dict.fromkeys(methods) if m not in registry]
    if unknown:
        raise InputError(f"unknown method(s) {', '.join(unknown)}; {label}: "
                         f"{', '.join(suggest if suggest is not None else registry)}",
                         source="<argument>", field="methods")


def _print_sweep_footer(done, out: Path) -> None:
    print(f"{len(done)} results ({sum(cached for _, cached in done)} reused) in {out}/ "
          f"(rerun resumes; --fresh recomputes)")


def cmd_sweep_placement(args) -> int:
    from opt.runs.sweep import Progress, grid, render, run_sweep
    from solvers.api import PLACEMENT_METHODS
    from solvers.sweep_calls import SolveCall

    _check_methods(args.methods, PLACEMENT_METHODS)
    cat, cards = _catalog(args), _cards(args)
    workloads = grid(args.models, args.platforms, args.prefill, args.decode, args.batch)
    methods = list(dict.fromkeys(args.methods))
    out = Path(args.out)
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.workers, seed=args.seed)
    progress = Progress(len(workloads) * len(methods), stream=sys.stderr)
    with _executor(args) as executor:
        done = run_sweep(workloads, methods, out, solve_one, catalog=cat, cards=cards,
                         layers=args.layers, tp=args.tp, resume=not args.fresh,
                         progress=progress, executor=executor)
    records = [rec for rec, _ in done]
    if args.json:
        from opt.runs.sweep import geomean_speedups

        _print_json({"records": [{**rec, "cached": cached} for rec, cached in done],
                     "geomean_speedup_vs_pd": geomean_speedups(records)
                     if "pd" in methods else None})
    else:
        print(render(records))
        _print_sweep_footer(done, out)
    return 0


def cmd_sweep_layout(args) -> int:
    """Layout strategies over a workload grid; resumable like ``sweep placement``."""
    from opt.runs.layout_sweep import format_shares, pair_speedups, render_layout
    from opt.runs.sweep import Progress, grid, run_sweep
    from solvers.api import PLACEMENT_METHODS
    from solvers.layout.strategies import LAYOUT_METHODS
    from solvers.sweep_calls import SolveCall

    _check_methods(args.methods, PLACEMENT_METHODS, suggest=LAYOUT_METHODS,
                   label="layout strategies")
    cat, cards = _catalog(args), _cards(args)
    workloads = grid(args.models, args.platforms, args.prefill, args.decode, args.batch)
    methods = list(dict.fromkeys(args.methods))
    out = Path(args.out)
    if args.budget_gb is not None:
        out = out / f"budget-{args.budget_gb:g}GB"
    elif args.budget_factor is not None:
        out = out / f"budget-x{args.budget_factor:g}"
    params = _parse_params(args.param)
    # --param goes to the WLA strategies only; the budget applies to every instance
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.workers, seed=args.seed,
                          params=tuple(params.items()), params_prefix="bifocal/wla",
                          budget_gb=args.budget_gb, budget_factor=args.budget_factor)
    progress = Progress(len(workloads) * len(methods), stream=sys.stderr)
    with _executor(args) as executor:
        done = run_sweep(workloads, methods, out, solve_one, catalog=cat, cards=cards,
                         layers=args.layers, tp=args.tp, resume=not args.fresh,
                         progress=progress, executor=executor)
    records = [rec for rec, _ in done]
    if args.json:
        _print_json({"records": [{**rec, "cached": cached} for rec, cached in done],
                     "speedups": pair_speedups(records), "format_mix": format_shares(records)})
    else:
        print(render_layout(records))
        _print_sweep_footer(done, out)
    return 0


def cmd_sweep_serving(args) -> int:
    from opt.serving.instance import ServingGrid
    from opt.runs.serving_sweep import cells, render, run_serving_sweep
    from opt.runs.sweep import Progress
    from solvers.serving.methods import SERVING_METHODS
    from solvers.sweep_calls import SolveCall

    _check_methods(args.methods, SERVING_METHODS)
    todo = cells(args.models, args.gpus, args.contexts, args.slo_ms)
    grid = ServingGrid(max_gpus=args.max_gpus, max_owners=args.max_owners,
                       max_replicas=args.max_replicas, max_microbatches=args.max_microbatches,
                       batches=_int_csv(args.batches, "batches"))
    out = Path(args.out)
    solve_one = SolveCall(time_limit=args.time_limit, num_workers=args.workers, seed=args.seed)
    progress = Progress(len(todo) * len(dict.fromkeys(args.methods)), stream=sys.stderr)
    with _executor(args) as executor:
        done = run_serving_sweep(todo, args.methods, out, solve_one, catalog=_catalog(args),
                                 cards=_cards(args), grid=grid,
                                 tp_degrees=_int_csv(args.tp, "tp"), resume=not args.fresh,
                                 progress=progress, executor=executor)
    records = [rec for rec, _ in done]
    if args.json:
        _print_json({"records": [{**rec, "cached": cached} for rec, cached in done]})
    else:
        print(render(records))
        _print_sweep_footer(done, out)
    return 0


# ---- bench --------------------------------------------------------------------------------------

def cmd_bench(args) -> int:
    from opt.runs.bench import render, run_cases, write_reports
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
    done = run_cases(cases, out, resume=not args.fresh,
                     echo=lambda s: print(s, file=sys.stderr, flush=True))
    if args.json:
        from dataclasses import asdict

        _print_json([{"suite": c.suite, "case": c.name, "cached": cached, **asdict(r)}
                     for c, r, cached in done])
    else:
        print(render(done))
    paths = write_reports(done, out if args.suite == "default" else out / args.suite)
    if not args.json:
        print(f"results in {out}/ (rerun resumes; --fresh recomputes); report: "
              f"{', '.join(str(p) for p in paths)}")
    failed = sum(not ch.passed for _, r, _ in done for ch in r.checks)
    return 1 if failed else 0


# ---- parser -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hetopt", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--catalog", metavar="FILE",
                        help="hardware JSON merged over the bundled catalog")
    common.add_argument("--models-file", metavar="FILE",
                        help="extra model cards: a card set, one card, or a HF config.json")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("models", parents=[common], help="list model cards")
    s.set_defaults(func=cmd_models)
    s = sub.add_parser("hardware", parents=[common], help="list devices, platforms, node types")
    s.set_defaults(func=cmd_hardware)

    b = sub.add_parser("bounds", help="OpWeave closed-form bounds (Theorems 3.1/3.2)")
    bsub = b.add_subparsers(dest="kind", required=True)
    h = bsub.add_parser("het", parents=[common], help="two GPU types: eta, bound, crossing/peak")
    h.add_argument("--gpu1", required=True)
    h.add_argument("--gpu2", required=True)
    h.add_argument("--price1", type=float, help="$ per GPU-hour of gpu1 (default: catalog)")
    h.add_argument("--price2", type=float, help="$ per GPU-hour of gpu2 (default: catalog)")
    h.add_argument("--model")
    h.add_argument("--context", type=float, help="mean context length s, tokens")
    h.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    h.set_defaults(func=cmd_bounds)
    o = bsub.add_parser("hom", parents=[common], help="one GPU type: colocated vs disaggregated")
    o.add_argument("--gpu", required=True)
    o.add_argument("--gpus", type=int, help="GPUs per group (default: fewest that hold weights)")
    o.add_argument("--price", type=float, help="$ per GPU-hour (default: catalog)")
    o.add_argument("--model", required=True)
    o.add_argument("--context", type=float, required=True, help="mean context length s, tokens")
    o.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    o.set_defaults(func=cmd_bounds)

    s = sub.add_parser("verify-bounds", parents=[common],
                       help="check Theorems 3.1/3.2 and CAD numerically (exit 1 if any fails)")
    s.add_argument("--samples", type=int, default=2000,
                   help="random GPU types / pairs (default %(default)s)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--detailed", action="store_true",
                   help="re-check the claims with the detailed cost model (P3 plans)")
    s.add_argument("--models", nargs="+", metavar="M", help="--detailed: models (default all)")
    s.add_argument("--gpus", nargs="+", default=["H100", "A100", "L40S"], metavar="GPU",
                   help="--detailed: GPU types; pairs of them for G_het")
    s.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384, 65536, 262144],
                   metavar="S", help="--detailed: contexts in tokens")
    s.add_argument("--slo-ms", type=float, default=10000.0,
                   help="--detailed: TPOT SLO (default loose: the theorems have none)")
    s.add_argument("--out", default="results/verify-detailed",
                   help="--detailed: results folder (resumable)")
    s.add_argument("--fresh", action="store_true", help="--detailed: recompute cached results")
    s.set_defaults(func=cmd_verify_bounds)

    s = sub.add_parser("plot-bounds", parents=[common],
                       help="plot G_hom, G_het and CAD feasibility (PNG; needs hetopt[plot])")
    s.add_argument("--out", required=True, metavar="DIR", help="directory for the three PNGs")
    s.add_argument("--gpu1", default="H100", help="GPU of the G_hom plot and first G_het type")
    s.add_argument("--gpu2", default="H20", help="second G_het type (default %(default)s)")
    s.add_argument("--price1", type=float, help="$ per GPU-hour of gpu1 (default: catalog)")
    s.add_argument("--price2", type=float,
                   help="$ per GPU-hour of gpu2 (default: catalog, else the tight price "
                        "c1/c2 = sqrt(b1 F1/(b2 F2)))")
    s.add_argument("--model", default="qwen3-235b-a22b", help="model of the G_het plot")
    s.set_defaults(func=cmd_plot_bounds)

    bp = sub.add_parser("build", help="build an instance from a model, platform and workload")
    bsub = bp.add_subparsers(dest="problem", required=True)
    pl = bsub.add_parser("placement", parents=[common], help="P1 operator-placement instance")
    pl.add_argument("--model", required=True)
    pl.add_argument("--platform", required=True)
    pl.add_argument("--prefill", type=int, required=True, help="input tokens L_in")
    pl.add_argument("--decode", type=int, required=True, help="decode steps L_out")
    pl.add_argument("--batch", type=int, default=1)
    pl.add_argument("--layers", type=int, help="use only the first N layers")
    pl.add_argument("--tp", type=int, default=1, help="tensor-parallel shards")
    pl.add_argument("--block-span", type=int, default=4, help="layers per weight block")
    pl.add_argument("--dtype", default="fp16", help="weight precision (fp16, int8, int4)")
    pl.add_argument("--weight-dtype", help="weight precision (overrides --dtype)")
    pl.add_argument("--act-dtype", help="activation precision (default fp16)")
    pl.add_argument("--kv-dtype", help="KV-cache precision (default fp16)")
    pl.add_argument("--paper-precision", action="store_true",
                    help="DOPS' precision for the model (int8 for mixtral-8x7b, llama-2-70b)")
    pl.add_argument("--weight-sparsity", type=float, metavar="R",
                    help="fraction of zero weights of the linear projections")
    pl.add_argument("--act-sparsity", metavar="prefill=R,decode=R",
                    help="fraction of zero GEMM input activations per phase (or one R)")
    pl.add_argument("--attn-sparsity", type=float, metavar="R",
                    help="fraction of (query, key) pairs skipped")
    pl.add_argument("--time-unit", default="ns", choices=["ns", "us", "ms", "s"])
    pl.add_argument("--formats", nargs="+", metavar="FMT",
                    help="P2 layout formats offered (default linear npu_opt pim_opt dual)")
    _add_budget_args(pl)
    pl.add_argument("-o", "--output", required=True, help="instance file (.json or .json.gz)")
    pl.set_defaults(func=cmd_build_placement)
    sp = bsub.add_parser("serving-plan", parents=[common],
                         help="P3 serving-plan instance (OpWeave): model x GPU types x workload")
    sp.add_argument("--model", required=True)
    sp.add_argument("--gpus", required=True, help="comma-separated GPU types, e.g. H100,L40S")
    sp.add_argument("--context", type=int, required=True, help="mean context s (tokens)")
    sp.add_argument("--slo-ms", type=float, required=True, help="TPOT SLO in milliseconds")
    sp.add_argument("--tp", default="1,2,4,8", help="TP degrees (default %(default)s)")
    sp.add_argument("--no-ep", action="store_true", help="MoE: no expert-parallel configs")
    sp.add_argument("--batches", default="1,2,4,8,16,32,64,128,256",
                    help="per-replica batch values (default %(default)s)")
    sp.add_argument("--max-gpus", type=int, default=32)
    sp.add_argument("--max-owners", type=int, default=3, help="device-group types K")
    sp.add_argument("--max-replicas", type=int, default=4, help="replicas per owner")
    sp.add_argument("--max-microbatches", type=int, default=4)
    sp.add_argument("--memory-fraction", type=float, default=1.0,
                    help="usable share of GPU memory (default %(default)s)")
    sp.add_argument("-o", "--output", required=True, help="instance file (.json or .json.gz)")
    sp.set_defaults(func=cmd_build_serving)

    ip = sub.add_parser("import", help="import a task graph from another format")
    isub = ip.add_subparsers(dest="format", required=True)
    dp = isub.add_parser("dot", parents=[common], help="DOT task graph (Weight on nodes/edges)")
    dp.add_argument("graph")
    dp.add_argument("--processors", type=int, required=True)
    dp.add_argument("-o", "--output", required=True)
    dp.set_defaults(func=cmd_import_dot)

    s = sub.add_parser("instances", parents=[common], help="list bundled benchmark instances")
    s.set_defaults(func=cmd_instances)

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

    s = sub.add_parser("validate", parents=[common],
                       help="check a result's schedule against its instance (exit 1 if invalid)")
    s.add_argument("instance", help="instance file or bundled instance name")
    s.add_argument("result")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("solve", parents=[common], help="solve an instance; prints a summary")
    s.add_argument("instance", help="instance file or bundled instance name")
    methods_help = " | ".join(_method_names())
    s.add_argument("--method", default=None,
                   help=f"placement: {methods_help} (default cpsat); serving plans: "
                        f"bnb | milp | enum | col | afd | cad (default bnb)")
    s.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="solver parameter passed through (repeatable)")
    s.add_argument("--initial", metavar="RESULT", help="warm start from a result file")
    s.add_argument("--export", metavar="MODEL", help="MILP: write the model (.mps or .lp)")
    s.add_argument("--simulate", action="store_true",
                   help="serving plans: also run the discrete-event simulator on the plan")
    s.add_argument("--no-frontier", action="store_true",
                   help="serving plans, B&B: no Pareto-frontier pruning (= --param frontier=false)")
    s.add_argument("--no-bounds", action="store_true",
                   help="serving plans, B&B: no bound pruning (= --param bounds=false)")
    s.add_argument("-o", "--output", help="result file (.json or .json.gz)")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("bound", parents=[common],
                       help="certified lower bound of a placement instance (each component)")
    s.add_argument("instance", help="instance file or bundled instance name")
    s.add_argument("--max-assignments", type=int, default=20_000,
                   help="device assignments enumerated per segment (default %(default)s)")
    s.add_argument("--max-evaluations", type=int, default=128,
                   help="segment evaluations per shape before bucketing (default %(default)s)")
    s.set_defaults(func=cmd_bound)

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
    s.add_argument("--out", default="results/replay", help="results folder (default %(default)s)")
    s.add_argument("--fresh", action="store_true", help="recompute results already in --out")
    s.set_defaults(func=cmd_replay)

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
    s.add_argument("--no-capacity-scaling", action="store_true",
                   help="with --layers: keep full device capacities (default: scale by N/L)")
    s.add_argument("--plot", metavar="DIR", help="write the heatmap and marginal-return PNGs")
    s.add_argument("--out", default="results/scaling", help="results folder (default %(default)s)")
    s.add_argument("--fresh", action="store_true", help="recompute results already in --out")
    s.set_defaults(func=cmd_scaling)

    sw = sub.add_parser("sweep", help="solve a grid of workloads with several methods")
    swsub = sw.add_subparsers(dest="problem", required=True)
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
                   help=f"placement methods: {methods_help}; speedups are over pd when "
                        f"it is among them")
    s.add_argument("--layers", type=int, help="use only the first N layers")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel shards")
    s.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds per exact solve (default 60)")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="results/sweep", help="results folder (default %(default)s)")
    s.add_argument("--fresh", action="store_true", help="recompute results already in --out")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_placement)
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
    s.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    s.add_argument("--max-gpus", type=int, default=32)
    s.add_argument("--max-owners", type=int, default=3)
    s.add_argument("--max-replicas", type=int, default=4)
    s.add_argument("--max-microbatches", type=int, default=4)
    s.add_argument("--time-limit", type=float, default=600.0, help="seconds per solve")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="results/serving", help="results folder (default %(default)s)")
    s.add_argument("--fresh", action="store_true", help="recompute results already in --out")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_serving)

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
    _add_budget_args(s)
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="passed to the WLA strategies (e.g. budget=20 evaluations)")
    s.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds per exact solve (default 60)")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="results/layout",
                   help="results folder (default %(default)s; a budget adds a subfolder)")
    s.add_argument("--fresh", action="store_true", help="recompute results already in --out")
    _add_executor_args(s)
    s.set_defaults(func=cmd_sweep_layout)

    s = sub.add_parser("bench", parents=[common], help="run the bundled benchmark suite")
    s.add_argument("--out", default="results/bench", help="results folder (default %(default)s)")
    s.add_argument("--fresh", action="store_true", help="recompute cases already in --out")
    s.add_argument("--case", action="append", help="run only this case (repeatable)")
    s.add_argument("--suite", default="default",
                   help="default (about 5 min) | opweave (full OpWeave table + detailed "
                        "theorem check) | dops (full DOPS sweep for dops-qwen-1.8b)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"hetopt: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
