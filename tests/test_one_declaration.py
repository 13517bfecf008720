"""Each name shared by the API, the command line and the files is declared once: the problem
names, and the defaults of the builders and of ``solve``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_problem_names_are_one_tuple():
    from opt.common.problem import PROBLEMS
    from opt.common.result import PROBLEMS as result_problems
    from opt.problems import PROBLEMS as instance_problems
    from solvers.registry import PROBLEMS as registry_problems

    assert PROBLEMS == ("placement", "layout", "serving")
    assert result_problems is PROBLEMS and instance_problems is PROBLEMS
    assert registry_problems is PROBLEMS


def test_no_other_module_assigns_a_list_of_problems():
    defined = []
    for folder in ("opt", "solvers", "models", "heuristics", "instances"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                if any(isinstance(t, ast.Name) and t.id.lstrip("_") == "PROBLEMS"
                       for t in targets):
                    defined.append(str(path.relative_to(ROOT)))
    assert defined == ["opt/common/problem.py"]


def _parsed(argv: list[str]) -> dict:
    from opt.app.cli.parser import build_parser

    return vars(build_parser().parse_args(argv))


def test_solve_has_one_default_time_limit():
    """``solvers.solve``, ``opt.api.solve`` and ``hetopt solve`` stop after the same time."""
    import inspect

    import opt.api as hetopt
    from solvers.api import DEFAULT_TIME_LIMIT_S, solve

    assert DEFAULT_TIME_LIMIT_S == 60.0
    for fn in (solve, hetopt.solve):
        assert inspect.signature(fn).parameters["time_limit"].default == DEFAULT_TIME_LIMIT_S
    assert _parsed(["solve", "x.json"])["time_limit"] == DEFAULT_TIME_LIMIT_S


def test_solve_has_one_default_worker_count():
    """``solvers.solve``, ``opt.api.solve`` and ``hetopt solve`` use the same threads."""
    import inspect

    import opt.api as hetopt
    from models.options import SolveOptions
    from solvers.api import DEFAULT_NUM_WORKERS, solve

    assert DEFAULT_NUM_WORKERS == SolveOptions().num_workers == 1
    for fn in (solve, hetopt.solve):
        assert inspect.signature(fn).parameters["num_workers"].default == DEFAULT_NUM_WORKERS
    assert _parsed(["solve", "x.json"])["num_workers"] == DEFAULT_NUM_WORKERS


def test_build_options_default_as_the_core_options():
    """The ``hetopt build`` options' defaults are those of the core options they become."""
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.request import Goal
    from opt.serving.builder import DEFAULT_TP
    from opt.serving.instance import ServingGrid
    from opt.serving.request import GpuCost, ServingRequest

    place = _parsed(["build", "placement", "--model", "m", "--platform", "p", "--prefill", "1",
                     "--decode", "0", "-o", "x.json"])
    options = BuildOptions()
    assert place["batch"] == Workload(1, 0).batch and place["objective"] == Goal().objective
    for name in ("layers", "tp", "block_span", "dtype", "kv_layout", "time_unit",
                 "load_timing", "formats"):
        assert place[name] == getattr(options, name), name
    serve = _parsed(["build", "serving", "--model", "m", "--gpus", "H100", "--context", "1",
                     "--slo-ms", "1", "-o", "x.json"])
    grid, cost = ServingGrid(), GpuCost()
    for name in ("max_gpus", "max_owners", "max_replicas", "max_microbatches"):
        assert serve[name] == getattr(grid, name), name
    assert serve["batches"] is grid.batches is None   # both: derived from memory
    assert serve["tp"] == ",".join(map(str, DEFAULT_TP))
    assert serve["memory_fraction"] == ServingRequest.memory_fraction
    assert (not serve["no_ep"]) is ServingRequest.expert_parallel
    assert (serve["gpu_cost"], serve["unmeasured_gpu"]) == (cost.kind, cost.unmeasured)
