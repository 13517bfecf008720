"""P3 serving plans on the command line: ``hetopt build serving-plan`` and the serving side of
``solve`` (simulation and summary), which :mod:`opt.app.cli.placement` loads through its
:data:`~opt.app.cli.placement.SERVING_SOLVE` handler only for a serving instance: a placement
solve loads no ``opt.serving``."""

from __future__ import annotations

import argparse

from opt.app.cli.helpers import int_csv, print_json
from opt.app.cli.output import write_output
from opt.common.errors import InputError
from opt.common.report import table
from opt.common.result import Result
from opt.costlib.sources import Sources
from opt.serving.builder import ServingWorkload
from opt.serving.instance import ServingGrid, ServingInstance
from opt.serving.request import GpuCost, ServingRequest, build_serving_request, gpu_names
from opt.serving.simulator import simulate_plan


def grid_from_args(args: argparse.Namespace) -> ServingGrid:
    """The ``ServingGrid`` of ``add_grid_args``' options."""
    return ServingGrid(max_gpus=args.max_gpus, max_owners=args.max_owners,
                       max_replicas=args.max_replicas, max_microbatches=args.max_microbatches,
                       batches=None if args.batches is None else int_csv(args.batches,
                                                                          "batches"))


def serving_request(args: argparse.Namespace) -> ServingRequest:
    """The :class:`opt.serving.request.ServingRequest` of ``build serving``'s options."""
    return ServingRequest(
        model=args.model, gpus=gpu_names(args.gpus),
        workload=ServingWorkload(args.context, args.slo_ms / 1e3), grid=grid_from_args(args),
        tp_degrees=int_csv(args.tp, "tp"), expert_parallel=not args.no_ep,
        memory_fraction=args.memory_fraction,
        cost=GpuCost(args.gpu_cost, args.unmeasured_gpu, args.gpu_calibration),
        measurements=args.measurements, sources=Sources(args.catalog, args.models_file))


def cmd_build_serving(args: argparse.Namespace) -> int:
    """``build serving`` (also ``build serving-plan``): write a P3 instance."""
    if args.output.endswith(".npz"):
        raise InputError("a serving-plan instance is JSON (.json or .json.gz); the .npz "
                         "container holds placement instances only", source="<argument>",
                         field="output")
    inst = build_serving_request(serving_request(args))
    write_output(inst.write, args.output)
    info = {"output": args.output, "model": inst.model, "ops_per_block": inst.n_ops,
            "block_layers": inst.block_layers, "blocks": inst.blocks_total,
            "configs": [c.id for c in inst.configs],
            "microbatch_sizes": list(inst.microbatch_sizes), "gpu_cost": inst.meta["gpu_cost"],
            "gpu_models": {g: m["model"] for g, m in inst.meta["gpu_models"].items()},
            **({"measurements": inst.meta["measurements"]} if "measurements" in inst.meta
               else {})}
    if args.json:
        print_json(info)
    else:
        print(f"{args.output}: {inst.model}, block of {inst.block_layers} layer(s) = "
              f"{inst.n_ops} ops, {inst.blocks_total:g} blocks, {len(inst.configs)} "
              f"configurations ({', '.join(info['configs'])}); GPU costs: {args.gpu_cost}"
              + (" (" + ", ".join(f"{g} {m}" for g, m in info["gpu_models"].items()) + ")"
                 if args.gpu_cost == "calibrated" else ""))
        if "measurements" in info:
            m = info["measurements"]
            print(f"measurements {m['file']}: kernel costs {m['kernel_costs']}")
    return 0


def report_serving_solve(inst: ServingInstance, res: Result, args: argparse.Namespace) -> None:
    """The serving side of ``solve``: with ``--simulate`` the discrete-event simulation of the
    plan (into ``res.stats``), then the result on stdout: JSON (the solution unless
    ``--no-solution``) or the text summary."""
    if args.simulate:
        attach_simulation(inst, res)
    if args.json:
        print_json(res.body(solution=not args.no_solution))
    else:
        print_serving_result(res)


def attach_simulation(inst: ServingInstance, res: Result) -> None:
    """``solve --simulate``: run the discrete-event simulator on the plan, into ``res.stats``."""
    if res.solution is not None:
        res.stats["simulation"] = simulate_plan(inst, res.solution).to_dict()


def print_serving_result(res: Result) -> None:
    """The text summary of a solved serving plan."""
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
              f"{search['nodes']:,} nodes, {search['evaluations']:,} evaluations, "
              f"{search.get('exact_evaluations', 0):,} exact periods")
    sim = res.stats.get("simulation")
    if sim:
        print(f"simulated T_rtt {sim['t_rtt_sim_s'] * 1e3:.4g} ms ({sim['order']} order) vs "
              f"the exact period {sim['t_rtt_exact_s'] * 1e3:.4g} ms (ratio "
              f"{sim['ratio_exact']:.3f}); the "
              f"formula, its lower bound, {sim['t_rtt_formula_s'] * 1e3:.4g} ms")
