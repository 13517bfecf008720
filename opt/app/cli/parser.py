"""The ``hetopt`` parser (every command's arguments) and ``main``.

Commands: ``models``, ``hardware``, ``instances`` (:mod:`opt.app.cli.info`); ``methods``
(:mod:`opt.app.cli.methods`); ``theory het|hom|verify|plot`` (:mod:`opt.app.cli.theory`);
``build placement|layout``, ``import dot`` (:mod:`opt.app.cli.build`); ``build serving``
(``serving-plan``: the same; :mod:`opt.app.cli.serving`); ``validate``
(:mod:`opt.app.cli.validate`); ``solve``, ``lower-bound`` (:mod:`opt.app.cli.placement`);
``sweep placement|layout|serving``, ``bench``, ``replay``, ``scaling``
(:mod:`opt.app.cli.runs`); ``plot gantt|utilisation|sweep|serving`` (:mod:`opt.app.cli.plots`);
``view`` (:mod:`opt.app.cli.view`). Bad input prints one line naming the file, field and value
and exits 2; ``--json`` prints machine-readable output.

Every command's arguments are defined here, and only here; each leaf's ``func`` is a
:class:`Handler` naming its function in the command-group module, imported when the command runs
(start-up time): building the parser, ``hetopt --help`` included, imports no command
implementation, and a command imports only its own group.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from opt.app.cli.argtypes import (
    COUNT,
    FRACTION,
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    RATIO,
    SEED,
    BoundedInt,
    BoundedReal,
    OneLineParser,
)
from opt.app.cli.common import (
    EXIT_CODES_HELP,
    TABLES,
    add_budget_args,
    add_out_args,
    add_solve_args,
    common_parser,
)

#: ``theory verify --samples``: at most 10 million random draws
MAX_SAMPLES = BoundedInt(1, 10_000_000)
#: ``--jobs``: at most 1,024 parallel workers
JOBS = BoundedInt(1, 1024)
#: ``plot gantt --resolution``: at most 100,000 pixel columns
RESOLUTION = BoundedInt(1, 100_000)
#: ``synth-measurements --noise``: a lognormal σ in [0, 10] (e^10 ≈ 22,000: beyond any
#: meaningful perturbation, and exp() stays finite)
NOISE = BoundedReal(0.0, 10.0)


class Handler:
    """A function by name: ``function`` of ``module``, imported on the first call. A command's
    handler (called with the parsed arguments), or a piece a command or a help text loads only
    when it runs (:data:`PLACEMENT_METHOD_NAMES`, the serving side of ``solve``)."""

    __slots__ = ("module", "function_name")

    def __init__(self, module: str, function_name: str) -> None:
        self.module, self.function_name = module, function_name

    def __repr__(self) -> str:
        return f"Handler({self.module!r}, {self.function_name!r})"

    def function(self) -> Callable[..., Any]:
        """The function itself (its module imported)."""
        # the handler table is an entry seam: ``models`` too loads only when a command runs
        from models.interrupt import deferred

        # __import__, not importlib.import_module: the import statement's machinery, which
        # ``python -X importtime`` reports (it does not see importlib's pure-Python path);
        # Ctrl-C waits for the import's end (C extensions crash when interrupted inside it)
        with deferred():
            module = __import__(self.module, fromlist=[self.function_name])
        return getattr(module, self.function_name)

    def __call__(self, args: argparse.Namespace) -> int:
        return self.function()(args)


#: Runs a parsed command (:func:`opt.app.cli.run.run_command`): loaded once parsing is done.
RUN_COMMAND = Handler("opt.app.cli.run", "run_command")
#: The registered placement methods (a list of names), for help texts: loads ``solvers``.
PLACEMENT_METHOD_NAMES = Handler("opt.app.cli.method_names", "placement_method_names")


class PlacementMethodsHelp(argparse.Action):
    """A store action whose help is a template with ``{methods}``, filled with the registered
    placement methods (:data:`PLACEMENT_METHOD_NAMES`) only when help is printed: importing
    ``solvers`` while building the parser would load it for every command."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self._template: str | None = None
        super().__init__(option_strings, dest, **kwargs)

    @property
    def help(self) -> str | None:  # type: ignore[override]
        if self._template is None:
            return None
        return self._template.format(methods=" | ".join(PLACEMENT_METHOD_NAMES.function()()))

    @help.setter
    def help(self, template: str | None) -> None:
        self._template = template

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)


def build_parser() -> argparse.ArgumentParser:
    """The full ``hetopt`` parser; every leaf command sets ``func``, its :class:`Handler`."""
    p = OneLineParser(prog="hetopt",
                                description="The hetopt command line (also python -m opt).",
                                epilog=EXIT_CODES_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common = common_parser()
    sub = p.add_subparsers(dest="command", required=True)
    add_info_parsers(sub, common)
    add_theory_parsers(sub, common)
    build = sub.add_parser("build", help="build an instance from a model, platform and workload")
    bsub = build.add_subparsers(dest="problem", required=True)
    add_build_placement_parser(bsub, common)
    add_build_placement_parser(bsub, common, layout=True)
    add_build_serving_parser(bsub, common)
    add_placement_parsers(sub, common)
    add_runs_parsers(sub, common)
    add_plot_parsers(sub, common)
    add_view_parser(sub, common)
    add_measure_parsers(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``hetopt`` (and ``python -m opt``): parse ``argv`` and run the command; its exit code
    (Ctrl-C while parsing too: one line, 130, as :func:`opt.app.cli.run.run_command` does)."""
    try:
        args = build_parser().parse_args(argv)
        run_command = RUN_COMMAND.function()
    except KeyboardInterrupt:
        print("hetopt: interrupted", file=sys.stderr)
        return 130
    return run_command(args)


# ---- models / hardware / instances (opt.app.cli.info) -------------------------------------------

def add_info_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The listing commands."""
    s = sub.add_parser("models", parents=[common], help="list model cards")
    s.set_defaults(func=Handler("opt.app.cli.info", "cmd_models"))
    s = sub.add_parser("hardware", parents=[common], help="list devices, platforms, node types")
    s.set_defaults(func=Handler("opt.app.cli.info", "cmd_hardware"))
    s = sub.add_parser("instances", parents=[common], help="list bundled benchmark instances")
    s.set_defaults(func=Handler("opt.app.cli.info", "cmd_instances"))
    s = sub.add_parser("methods", parents=[common], help="list the solve methods and their params")
    s.add_argument("--problem", help="only this problem's methods (placement, layout or "
                   "serving)")
    s.add_argument("--params", action="store_true",
                   help="each method's params: accepted values, default, what they are")
    s.set_defaults(func=Handler("opt.app.cli.methods", "cmd_methods"))



# ---- theory het|hom|verify|plot (opt.app.cli.theory) --------------------------------------------

def add_theory_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``theory`` group and its four commands."""
    t = sub.add_parser("theory", help="OpWeave's closed forms (Theorems 3.1/3.2): het, hom, "
                                      "verify, plot")
    tsub = t.add_subparsers(dest="what", required=True)
    _add_het_parser(tsub, common)
    _add_hom_parser(tsub, common)
    _add_verify_parser(tsub, common)
    _add_theory_plot_parser(tsub, common)


def _add_het_parser(tsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    h = tsub.add_parser("het", parents=[common], help="two GPU types: eta, bound, crossing/peak")
    h.add_argument("--gpu1", required=True)
    h.add_argument("--gpu2", required=True)
    h.add_argument("--price1", type=POSITIVE, help="$ per GPU-hour of gpu1 (default: catalog)")
    h.add_argument("--price2", type=POSITIVE, help="$ per GPU-hour of gpu2 (default: catalog)")
    h.add_argument("--model")
    h.add_argument("--context", type=POSITIVE, help="mean context length s, tokens")
    h.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    h.set_defaults(func=Handler("opt.app.cli.theory", "cmd_het"))


def _add_hom_parser(tsub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    o = tsub.add_parser("hom", parents=[common], help="one GPU type: colocated vs disaggregated")
    o.add_argument("--gpu", required=True)
    o.add_argument("--group-size", type=COUNT, metavar="N",
                   help="GPUs per group (default: fewest that hold weights)")
    o.add_argument("--price", type=POSITIVE, help="$ per GPU-hour (default: catalog)")
    o.add_argument("--model", required=True)
    o.add_argument("--context", type=POSITIVE, required=True, help="mean context length s, tokens")
    o.add_argument("--kv-dtype", help="KV cache dtype (default: the card's)")
    o.set_defaults(func=Handler("opt.app.cli.theory", "cmd_hom"))


def _add_verify_parser(tsub: argparse._SubParsersAction,
                       common: argparse.ArgumentParser) -> None:
    s = tsub.add_parser("verify", parents=[common],
                        help="check Theorems 3.1/3.2 and CAD numerically (exit 1 if any fails)")
    s.add_argument("--samples", type=MAX_SAMPLES, default=2000,
                   help="random GPU types / pairs (default %(default)s)")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--detailed", action="store_true",
                   help="re-check the claims with the detailed cost model (P3 plans)")
    s.add_argument("--models", nargs="+", metavar="M", help="--detailed: models (default all)")
    s.add_argument("--gpu-types", nargs="+", default=["H100", "A100", "L40S"], metavar="GPU",
                   help="--detailed: GPU types; pairs of them for G_het")
    s.add_argument("--contexts", type=COUNT, nargs="+", default=[4096, 16384, 65536, 262144],
                   metavar="S", help="--detailed: contexts in tokens")
    s.add_argument("--slo-ms", type=POSITIVE, default=10000.0,
                   help="--detailed: TPOT SLO (default loose: the theorems have none)")
    s.add_argument("--out", default="results/verify-detailed",
                   help="--detailed: results folder (resumable)")
    s.add_argument("--fresh", action="store_true", help="--detailed: recompute cached results")
    s.set_defaults(func=Handler("opt.app.cli.theory", "cmd_verify"))


def _add_theory_plot_parser(tsub: argparse._SubParsersAction,
                            common: argparse.ArgumentParser) -> None:
    s = tsub.add_parser("plot", parents=[common],
                        help="plot G_hom, G_het and CAD feasibility (PNG; needs hetopt[plot])")
    s.add_argument("--out", required=True, metavar="DIR", help="directory for the three PNGs")
    s.add_argument("--gpu1", default="H100", help="GPU of the G_hom plot and first G_het type")
    s.add_argument("--gpu2", default="H20", help="second G_het type (default %(default)s)")
    s.add_argument("--price1", type=POSITIVE, help="$ per GPU-hour of gpu1 (default: catalog)")
    s.add_argument("--price2", type=POSITIVE,
                   help="$ per GPU-hour of gpu2 (default: catalog, else the tight price "
                        "c1/c2 = sqrt(b1 F1/(b2 F2)))")
    s.add_argument("--model", default="qwen3-235b-a22b", help="model of the G_het plot")
    s.set_defaults(func=Handler("opt.app.cli.theory", "cmd_plot"))



# ---- build placement, import dot (opt.app.cli.build); solve, lower-bound (opt.app.cli.placement)

def add_build_placement_parser(bsub: argparse._SubParsersAction,
                               common: argparse.ArgumentParser, layout: bool = False) -> None:
    """``build placement`` (a P2 layout instance with a budget) or ``build layout`` (the same
    options, a budget required)."""
    pl = bsub.add_parser("layout", parents=[common],
                         help="P2 weight-layout instance (placement with a memory budget)") \
        if layout else bsub.add_parser("placement", parents=[common],
                                       help="P1 operator-placement instance (P2 with a budget)")
    pl.add_argument("--model", required=True)
    pl.add_argument("--platform", required=True)
    pl.add_argument("--prefill", type=COUNT, required=True, help="input tokens L_in")
    pl.add_argument("--decode", type=NON_NEGATIVE_INT, required=True, help="decode steps L_out")
    pl.add_argument("--batch", type=COUNT, default=1)
    pl.add_argument("--layers", type=COUNT, help="use only the first N layers")
    pl.add_argument("--tp", type=COUNT, default=1, help="tensor-parallel shards")
    pl.add_argument("--block-span", type=COUNT, default=4, help="layers per weight block")
    pl.add_argument("--kv-layout", default="heads", choices=["heads", "single"],
                    help="KV cache: 'heads' = head groups over every PIM device (default, "
                         "problems.md 1.4); 'single' = one home per TP shard (the former layout)")
    pl.add_argument("--load-timing", default="overlap", choices=["at_use", "overlap", "prefetch"],
                    help="when weight loads run (problems.md 1.2 rule 5): 'overlap' = DOPS "
                         "6.1 (default), from the dispatch of the task they serve while it "
                         "computes, ending by its end; 'at_use' = DOPS Eq. 1 read as load then "
                         "compute; 'prefetch' = any time, e.g. from 0")
    pl.add_argument("--moe-routing", default="fixed", choices=["fixed", "per_token"],
                    help="MoE routing (problems.md 1.4 MoE): 'fixed' = every token through "
                         "the first top-k experts (default, the DOPS authors' code); "
                         "'per_token' = each token its own top-k of the E experts")
    pl.add_argument("--dtype", default="fp16", help="weight precision (fp16, int8, int4)")
    pl.add_argument("--weight-dtype", help="weight precision (overrides --dtype)")
    pl.add_argument("--act-dtype", help="activation precision (default fp16)")
    pl.add_argument("--kv-dtype", help="KV-cache precision (default fp16)")
    pl.add_argument("--paper-precision", action="store_true",
                    help="DOPS' precision for the model (int8 for mixtral-8x7b, llama-2-70b)")
    pl.add_argument("--weight-sparsity", type=RATIO, metavar="R",
                    help="fraction of zero weights of the linear projections")
    pl.add_argument("--act-sparsity", metavar="prefill=R,decode=R",
                    help="fraction of zero GEMM input activations per phase (or one R)")
    pl.add_argument("--attn-sparsity", type=RATIO, metavar="R",
                    help="fraction of (query, key) pairs skipped")
    pl.add_argument("--time-unit", default="ns", choices=["ns", "us", "ms", "s"])
    pl.add_argument("--formats", nargs="+", metavar="FMT",
                    help="P2 layout formats offered (default linear npu_opt pim_opt dual)")
    add_budget_args(pl, required=layout)
    pl.add_argument("--measurements", metavar="FILE",
                    help="measured-latency table (CSV/JSON, docs/measurements.md) used where "
                         "it has an entry, the cost model elsewhere")
    pl.add_argument("--objective", default="makespan",
                    choices=["makespan", "decode_time", "ttft"],
                    help="what the instance minimises (default makespan)")
    for name, what in (("ttft", "time to first token"), ("tpot", "mean time per output token"),
                       ("e2e", "end-to-end latency (makespan)")):
        pl.add_argument(f"--slo-{name}-ms", type=POSITIVE, metavar="MS",
                        help=f"service-level limit on the {what}, ms (a hard constraint; "
                             f"docs/problems.md §1.5)")
    pl.add_argument("-o", "--output", required=True,
                    help="instance file: .json or .json.gz, or .npz for the binary column "
                         "container (docs/problems.md §1.2c; fastest to read at full size)")
    pl.add_argument("--tables", choices=TABLES, default="auto",
                    help="layout of the task and edge tables (docs/problems.md §1.2b): auto = "
                         "column tables above 2,000 tasks (several times faster to read at full "
                         "size), rows otherwise (default auto); an .npz file is always columns")
    pl.add_argument("--columns", dest="tables", action="store_const", const="columns",
                    default=argparse.SUPPRESS, help="same as --tables columns")
    pl.set_defaults(func=Handler("opt.app.cli.build", "cmd_build_placement"))


def add_placement_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``import dot``, ``validate``, ``solve`` and ``lower-bound``."""
    ip = sub.add_parser("import", help="import a task graph from another format")
    isub = ip.add_subparsers(dest="format", required=True)
    dp = isub.add_parser("dot", parents=[common], help="DOT task graph (Weight on nodes/edges)")
    dp.add_argument("graph")
    dp.add_argument("--processors", type=COUNT, required=True)
    dp.add_argument("-o", "--output", required=True)
    dp.set_defaults(func=Handler("opt.app.cli.build", "cmd_import_dot"))

    s = sub.add_parser("validate", parents=[common],
                       help="check a result against its instance (exit 1 if invalid, 2 if bad input)")
    s.add_argument("instance", help="instance file or bundled instance name")
    s.add_argument("result")
    s.set_defaults(func=Handler("opt.app.cli.validate", "cmd_validate"))

    _add_solve_parser(sub, common)

    s = sub.add_parser("lower-bound", parents=[common],
                       help="certified makespan lower bound of a placement instance "
                            "(each component)")
    s.add_argument("instance", help="instance file or bundled instance name")
    s.add_argument("--max-assignments", type=COUNT, default=20_000,
                   help="device assignments enumerated per segment (default %(default)s)")
    s.add_argument("--max-evaluations", type=COUNT, default=128,
                   help="segment evaluations per shape before bucketing (default %(default)s)")
    s.set_defaults(func=Handler("opt.app.cli.placement", "cmd_lower_bound"))


def _add_solve_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("solve", parents=[common], help="solve an instance; prints a summary",
                       epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("instance", help="instance file or bundled instance name")
    s.add_argument("--method", default=None, action=PlacementMethodsHelp,
                   help="placement: {methods} (default portfolio; cpsat-layout for a layout "
                        "instance); serving plans: bnb | milp | enum | col | afd | cad "
                        "(default bnb); a bundled instance named: the method its index "
                        "records as proving its optimum")
    add_solve_args(s, time_limit=60.0,
                   time_help="seconds of wall clock for the whole solve, warm start and model "
                             "build included (default 60)")
    s.add_argument("--deterministic", action="store_true",
                   help="CP-SAT methods: the same result on every run (the time limit is "
                        "CP-SAT's deterministic time, about seconds; workers interleave)")
    s.add_argument("-v", "--log", action="store_true",
                   help="exact placement methods: stream the solver's progress (CP-SAT search "
                        "log, HiGHS log) to stderr")
    s.add_argument("--no-solution", action="store_true",
                   help="--json: leave the solution out of the printed result (the --output "
                        "file always has it)")
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="parameter passed through to the method's back end (repeatable)")
    s.add_argument("--initial-solution", metavar="RESULT",
                   help="warm start from a result file")
    s.add_argument("--export", metavar="MODEL", help="MILP: write the model (.mps or .lp)")
    s.add_argument("--simulate", action="store_true",
                   help="serving plans: also run the discrete-event simulator on the plan")
    s.add_argument("--no-frontier", action="store_true",
                   help="serving plans, B&B: no Pareto-frontier pruning (= --param frontier=false)")
    s.add_argument("--no-bounds", action="store_true",
                   help="serving plans, B&B: no bound pruning (= --param bounds=false)")
    s.add_argument("-o", "--output", help="result file (.json or .json.gz)")
    s.set_defaults(func=Handler("opt.app.cli.placement", "cmd_solve"))



# ---- build serving-plan and the serving grid (opt.app.cli.serving) ------------------------------

def add_build_serving_parser(bsub: argparse._SubParsersAction,
                             common: argparse.ArgumentParser) -> None:
    """``build serving`` (also ``build serving-plan``)."""
    sp = bsub.add_parser("serving", aliases=["serving-plan"], parents=[common],
                         help="P3 serving-plan instance (OpWeave): model x GPU mix x workload")
    sp.add_argument("--model", required=True)
    sp.add_argument("--gpus", required=True,
                    help="the GPU mix: comma-separated GPU types, e.g. H100,L40S")
    sp.add_argument("--context", type=COUNT, required=True, help="mean context s (tokens)")
    sp.add_argument("--slo-ms", type=POSITIVE, required=True, help="TPOT SLO in milliseconds")
    sp.add_argument("--tp", default="1,2,4,8", help="TP degrees (default %(default)s)")
    sp.add_argument("--no-ep", action="store_true", help="MoE: no expert-parallel configs")
    add_grid_args(sp)
    sp.add_argument("--memory-fraction", type=FRACTION, default=1.0,
                    help="usable share of GPU memory (default %(default)s)")
    add_gpu_cost_arg(sp)
    sp.add_argument("--gpu-calibration", metavar="FILE",
                    help="GPU calibration of hetopt calibrate --gpu (default: the bundled one)")
    sp.add_argument("--measurements", metavar="FILE",
                    help="measured kernel table (docs/measurements.md) used where it has the "
                         "kernel; provenance in meta.measurements")
    sp.add_argument("-o", "--output", required=True, help="instance file (.json or .json.gz)")
    sp.set_defaults(func=Handler("opt.app.cli.serving", "cmd_build_serving"))


def add_gpu_cost_arg(p: argparse.ArgumentParser) -> None:
    """``--gpu-cost calibrated|roofline`` (docs/serving.md "Measured GPU costs")."""
    p.add_argument("--gpu-cost", choices=("calibrated", "roofline"), default="calibrated",
                   help="GPU kernel/network cost model: fitted to measured profiles (default) "
                        "or the catalog roofline")
    p.add_argument("--unmeasured-gpu", choices=("transfer", "roofline"), default="transfer",
                   help="under --gpu-cost calibrated, a GPU type without measurements (L40S, "
                        "H20, B200) takes the nearest measured GPU's fitted classes on its own "
                        "peaks (transfer, default) or the catalog roofline")


def add_grid_args(p: argparse.ArgumentParser) -> None:
    """The plan grid of ``build serving-plan`` and ``sweep serving``."""
    p.add_argument("--batches",
                   help="per-replica batch values, comma-separated (default: powers of two up "
                        "to the largest batch memory allows, OpWeave App. B.4)")
    p.add_argument("--max-gpus", type=COUNT, default=32)
    p.add_argument("--max-owners", type=COUNT, default=3, help="device-group types K")
    p.add_argument("--max-replicas", type=COUNT, default=4, help="replicas per owner")
    p.add_argument("--max-microbatches", type=COUNT, default=4)



# ---- sweep placement|layout|serving, bench, replay, scaling (opt.app.cli.runs) ------------------

def add_runs_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The ``sweep`` group, ``bench``, ``replay`` and ``scaling``."""
    sw = sub.add_parser("sweep", help="solve a grid of workloads with several methods")
    swsub = sw.add_subparsers(dest="problem", required=True)
    _add_sweep_placement_parser(swsub, common)
    _add_sweep_serving_parser(swsub, common)
    _add_sweep_layout_parser(swsub, common)
    _add_bench_parser(sub, common)
    _add_replay_parser(sub, common)
    _add_scaling_parser(sub, common)


def _add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=["serial", "process", "dask"], default=None,
                   help="where work items run: serial (this process), process (a local pool, "
                        "the default), dask (--scheduler, or a local Dask cluster)")
    p.add_argument("--jobs", type=JOBS, metavar="N",
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
    s.add_argument("--prefill", type=COUNT, nargs="+", required=True, metavar="L_IN",
                   help="input tokens (one or more)")
    s.add_argument("--decode", type=NON_NEGATIVE_INT, nargs="+", required=True, metavar="L_OUT",
                   help="decode steps (one or more)")
    s.add_argument("--batch", type=COUNT, nargs="+", default=[1], metavar="B",
                   help="batch sizes (default 1)")
    s.add_argument("--methods", nargs="+", required=True, metavar="METHOD",
                   action=PlacementMethodsHelp,
                   help="placement methods: {methods}; speedups are over pd when it is among "
                        "them")
    s.add_argument("--layers", type=COUNT, help="use only the first N layers")
    s.add_argument("--tp", type=COUNT, default=1, help="tensor-parallel shards")
    s.add_argument("--paper-precision", action="store_true",
                   help="build each model in DOPS' precision (INT8 W8A8KV8 for Mixtral-8x7B and "
                        "Llama-2-70B, fp16 otherwise)")
    s.add_argument("--param", action="append", metavar="METHOD.KEY=VALUE",
                   help="a parameter of one method (repeatable), as solve's --param KEY=VALUE "
                        "prefixed by the method, e.g. bifocal.lam=0; records keep the method's "
                        "resolved parameters and are recomputed when they differ")
    add_solve_args(s, time_limit=60.0, time_help="seconds per exact solve (default 60)")
    add_out_args(s, "results/sweep")
    _add_executor_args(s)
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_sweep_placement"))


def _add_sweep_serving_parser(swsub: argparse._SubParsersAction,
                              common: argparse.ArgumentParser) -> None:
    s = swsub.add_parser("serving", parents=[common],
                         help="P3 serving plans: model x GPU mix x context x SLO x method")
    s.add_argument("--models", nargs="+", required=True, metavar="M")
    s.add_argument("--gpus", nargs="+", required=True, metavar="MIX",
                   help="GPU mixes, each comma-separated GPU types as in build serving "
                        "(H100 H100,L40S H100,A100)")
    s.add_argument("--contexts", type=COUNT, nargs="+", required=True, metavar="S")
    s.add_argument("--slo-ms", type=POSITIVE, nargs="+", required=True, metavar="MS")
    s.add_argument("--methods", nargs="+", default=["col", "afd", "cad", "bnb"],
                   metavar="METHOD", help="bnb | milp | col | afd | cad (default: all but milp)")
    s.add_argument("--tp", default="1,2,4,8", help="TP degrees (default %(default)s)")
    add_gpu_cost_arg(s)
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="B&B parameter (repeatable), e.g. sub_block_layers=1; its records go "
                        "to a sub-folder of --out named after the parameters")
    add_grid_args(s)
    add_solve_args(s, time_limit=600.0, time_help="seconds per solve (default 600)")
    add_out_args(s, "results/serving")
    _add_executor_args(s)
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_sweep_serving"))


def _add_sweep_layout_parser(swsub: argparse._SubParsersAction,
                             common: argparse.ArgumentParser) -> None:
    s = swsub.add_parser("layout", parents=[common],
                         help="P2 weight layout: layout strategies over a workload grid")
    s.add_argument("--models", nargs="+", default=["dops-qwen-1.8b"], metavar="M")
    s.add_argument("--platforms", nargs="+", default=["HP32"], metavar="P")
    s.add_argument("--prefill", type=COUNT, nargs="+", default=[8, 32, 64, 128, 1024],
                   metavar="L_IN")
    s.add_argument("--decode", type=NON_NEGATIVE_INT, nargs="+", default=[8, 32, 64, 128, 1024],
                   metavar="L_OUT")
    s.add_argument("--batch", type=COUNT, nargs="+", default=[1, 4, 8], metavar="B")
    s.add_argument("--methods", nargs="+", metavar="METHOD",
                   default=["pd/linear", "pd/dual", "bifocal/linear", "bifocal/dual",
                            "bifocal/wla"],
                   help="layout strategies (default: the five of DOPS §6.5)")
    s.add_argument("--layers", type=COUNT, help="use only the first N layers")
    s.add_argument("--tp", type=COUNT, default=1, help="tensor-parallel shards")
    add_budget_args(s)
    s.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="passed to the WLA strategies (e.g. budget=20 evaluations)")
    add_solve_args(s, time_limit=60.0, time_help="seconds per exact solve (default 60)")
    add_out_args(s, "results/layout", note="; a budget adds a subfolder")
    _add_executor_args(s)
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_sweep_layout"))


def _add_bench_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("bench", parents=[common], help="run the bundled benchmark suite")
    add_out_args(s, "results/bench", items="cases")
    s.add_argument("--case", action="append", help="run only this case (repeatable)")
    s.add_argument("--suite", default="default",
                   help="default (minutes) | opweave (full OpWeave table + detailed "
                        "theorem check) | dops (DOPS' seven-model grid; resumable)")
    s.add_argument("--jobs", type=JOBS, default=1, metavar="N",
                   help="sweep workers of the opweave and dops suites (default 1: this "
                        "process; 2 on a 2-core machine; the results do not depend on it)")
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_bench"))


def _add_replay_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("replay", parents=[common],
                       help="request-level serving replay of a trace (FCFS batches)")
    s.add_argument("--model", required=True)
    s.add_argument("--platform", required=True)
    s.add_argument("--trace", metavar="CSV", help="BurstGPT-layout CSV (default: generate)")
    s.add_argument("--trace-model", help="CSV: keep only rows of this Model")
    s.add_argument("--requests", type=COUNT, metavar="N",
                   help="generated requests (default 500) / first N rows of the CSV")
    s.add_argument("--mean-input", type=POSITIVE, default=708.0, help="generated mean input tokens")
    s.add_argument("--mean-output", type=POSITIVE, default=286.0,
                   help="generated mean output tokens")
    s.add_argument("--rate", type=POSITIVE, default=1.0, help="generated mean arrivals per second")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--time-scale", type=POSITIVE, default=1.0,
                   help="multiply arrival times (< 1: more back-pressure)")
    s.add_argument("--max-batch", type=COUNT, default=4)
    s.add_argument("--timeout-ms", type=NON_NEGATIVE, default=10.0, help="batch timeout")
    s.add_argument("--input-buckets", type=COUNT, nargs="+", metavar="T",
                   default=[64, 128, 256, 512, 1024, 2048], help="padded prefill lengths")
    s.add_argument("--output-buckets", type=COUNT, nargs="+", metavar="T",
                   default=[32, 64, 128, 256, 512, 1024], help="padded decode steps")
    s.add_argument("--methods", nargs="+", metavar="METHOD",
                   default=["bifocal", "pd", "af", "pd+linear", "pd+attn", "pd+ffn"],
                   help="bifocal (no token term), pd, af, pd+linear, pd+attn, pd+ffn, heft")
    s.add_argument("--layers", type=COUNT, help="build with only the first N layers")
    add_out_args(s, "results/replay")
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_replay"))


def _add_scaling_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("scaling", parents=[common],
                       help="hardware scaling HP0 -> HP128: speedups and marginal PIM returns")
    s.add_argument("--models", nargs="+", default=["llama-2-7b", "llama-2-13b"], metavar="M")
    s.add_argument("--platforms", nargs="+", default=["HP0", "HP32", "HP64", "HP128"],
                   metavar="P", help="the ladder, smallest first (default %(default)s)")
    s.add_argument("--prefill", type=COUNT, nargs="+", default=[128, 512, 1024, 2048])
    s.add_argument("--decode", type=NON_NEGATIVE_INT, nargs="+", default=[128, 256, 512, 1024])
    s.add_argument("--batch", type=COUNT, nargs="+", default=[1, 4, 8, 16])
    s.add_argument("--method", default="bifocal", help="placement heuristic (default bifocal)")
    s.add_argument("--layers", type=COUNT, help="use only the first N layers (reduced run)")
    s.add_argument("--paper-precision", action="store_true",
                   help="build each model in DOPS' precision (INT8 for Mixtral-8x7B and "
                        "Llama-2-70B)")
    s.add_argument("--no-capacity-scaling", action="store_true",
                   help="with --layers: keep full device capacities (default: scale by N/L)")
    s.add_argument("--plot", metavar="DIR", help="write the heatmap and marginal-return PNGs")
    add_out_args(s, "results/scaling")
    s.set_defaults(func=Handler("opt.app.cli.runs", "cmd_scaling"))



# ---- plot gantt|utilisation|sweep|serving (opt.app.cli.plots) -----------------------------------

def add_plot_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
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
        s.add_argument("--resolution", type=RESOLUTION, default=2000,
                       help="gantt: pixel columns; closer events are merged (default 2000)")
        s.add_argument("-o", "--output", required=True, help="PNG file")
        s.set_defaults(func=Handler("opt.app.cli.plots", "cmd_plot"))
    s = psub.add_parser("sweep", parents=[common],
                        help="speedup heat map over PD from sweep placement/layout records")
    s.add_argument("results", help="results folder of hetopt sweep placement (or layout)")
    s.add_argument("--method", default="bifocal", help="method whose speedup is shown")
    s.add_argument("--baseline", default="pd", help="baseline method (default pd)")
    s.add_argument("-o", "--output", required=True, help="PNG file")
    s.set_defaults(func=Handler("opt.app.cli.plots", "cmd_plot"))
    s = psub.add_parser("serving", parents=[common],
                        help="cost bars per cell and method from sweep serving records")
    s.add_argument("results", help="results folder of hetopt sweep serving")
    s.add_argument("--methods", nargs="+", metavar="METHOD", help="methods to show (default all)")
    s.add_argument("-o", "--output", required=True, help="PNG file")
    s.set_defaults(func=Handler("opt.app.cli.plots", "cmd_plot"))



# ---- view (opt.app.cli.view) --------------------------------------------------------------------

def add_view_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``view`` on the ``hetopt`` subparsers ``sub`` (``common``: the shared options)."""
    s = sub.add_parser("view", parents=[common],
                       help="write a self-contained HTML viewer of a schedule or serving plan")
    s.add_argument("instance",
                   help="instance file (.json/.json.gz/.npz) or bundled instance name")
    s.add_argument("result", help="result JSON of `hetopt solve` (its solution is drawn)")
    s.add_argument("-o", "--output", default="schedule.html", metavar="FILE",
                   help="the HTML file to write (default: schedule.html)")
    s.add_argument("--title", help="page title (default: the instance's name or path)")
    s.add_argument("--periods", type=COUNT, default=3,
                   help="serving plans: periods of the steady state drawn (default 3)")
    s.add_argument("--no-compress", action="store_true",
                   help="store the data uncompressed (for browsers without DecompressionStream)")
    s.set_defaults(func=Handler("opt.app.cli.view", "cmd_view"))



# ---- calibrate, compare-measured, synth-measurements (opt.app.cli.measure) ----------------------

def add_measure_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``calibrate``, ``compare-measured`` and ``synth-measurements``."""
    c = sub.add_parser("calibrate", parents=[common],
                       help="fit a device's latency model to a measured-latency table")
    c.add_argument("--device", help="catalog device name (required without --gpu)")
    c.add_argument("--gpu", action="store_true",
                   help="fit the calibrated GPU model (per-class kernels, collectives, "
                        "send/recv) of every GPU of the table; -o writes a GPU calibration "
                        "file (for build serving-plan --gpu-calibration)")
    c.add_argument("--measurements", required=True, metavar="FILE", help="CSV or JSON table")
    c.add_argument("--model", help="model card of rows without a 'model' value")
    c.add_argument("-o", "--output", metavar="FILE",
                   help="catalog JSON with the fitted device and the --catalog file's "
                        "entries (for --catalog)")
    c.set_defaults(func=Handler("opt.app.cli.measure", "cmd_calibrate"))
    m = sub.add_parser("compare-measured", parents=[common],
                       help="predicted vs measured latency of a placement schedule (DOPS Δ)")
    m.add_argument("instance", help="instance file or bundled instance name")
    m.add_argument("result", help="result file of a solve of the instance")
    m.add_argument("--measurements", required=True, metavar="FILE", help="CSV or JSON table")
    m.add_argument("--plot", metavar="FILE", help="PNG of the gaps per class (plot extra)")
    m.set_defaults(func=Handler("opt.app.cli.measure", "cmd_compare"))
    s = sub.add_parser("synth-measurements", parents=[common],
                       help="a synthetic measured table from (perturbed) catalog models")
    s.add_argument("--device", action="append", required=True, help="device (repeatable)")
    s.add_argument("--model", required=True, help="model card")
    s.add_argument("--set", action="append", default=[], metavar="DEVICE:PARAM=VALUE",
                   help="perturbed parameter, e.g. AiM:slowdown.softmax=500 (repeatable)")
    s.add_argument("--noise", type=NOISE, default=0.02, help="lognormal σ (default 0.02)")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--batch", type=COUNT, action="append", help="batch sizes (default 1 and 8)")
    s.add_argument("--share", type=FRACTION, action="append",
                   help="shares of every op (default 1; e.g. 0.5 for tp = 2; repeatable)")
    s.add_argument("--cell-share", type=FRACTION, action="append", default=[],
                   help="extra share of the attention-cell ops (e.g. 0.5 for 2 PIMs)")
    s.add_argument("--end-to-end", metavar="INSTANCE:RESULT", action="append", default=[],
                   help="add an end_to_end row: the makespan of RESULT on INSTANCE")
    s.add_argument("-o", "--output", required=True, metavar="FILE", help="CSV table")
    s.set_defaults(func=Handler("opt.app.cli.measure", "cmd_synth"))
