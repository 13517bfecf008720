"""The public API (opt.api, docs/api.md): its names, a free import, and every example of the
API page run as written."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

import opt.api as hetopt

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "api.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)

NAMES = ["Problem", "Status", "Result", "PlacementInstance", "ServingInstance", "InputError",
         "Schedule", "ScheduledTask", "ScheduledTransfer", "ScheduledLoad", "ScheduledEviction",
         "LayoutSolution", "ServingPlan", "PlanMetrics", "SimReport",
         "Workload", "BuildOptions", "Precision", "Sparsity", "Budget", "Goal", "Sources",
         "ServingWorkload", "ServingGrid", "Parallelism", "GpuCost",
         "read_instance", "write_instance", "read_result", "write_result",
         "build_placement", "build_layout", "build_serving", "import_dot", "instance_names",
         "load_instance", "solve", "validate", "lower_bound", "methods", "simulate", "view"]


def test_all_is_the_documented_names():
    assert sorted(hetopt.__all__) == sorted(NAMES)
    text = PAGE.read_text()
    for name in NAMES:
        assert f"| `{name}" in text, f"{name} is not in docs/api.md's table"
        assert getattr(hetopt, name) is not None
    with pytest.raises(AttributeError):
        hetopt.no_such_name  # noqa: B018


def test_import_loads_no_solver_stack():
    code = ("import sys, opt.api; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('solvers', 'models', 'heuristics', 'ortools', 'pyomo', 'highspy', 'scipy', "
            "'instances') or m.startswith(('opt.app', 'opt.placement', 'opt.serving'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_status_and_problem_are_strings():
    assert hetopt.Status.OPTIMAL == "OPTIMAL" and f"{hetopt.Status.ERROR}" == "ERROR"
    assert repr((hetopt.Status.FEASIBLE, 1)) == "('FEASIBLE', 1)"  # reports print tuples
    assert hetopt.Problem("layout") is hetopt.Problem.LAYOUT
    assert [p.value for p in hetopt.Problem] == ["placement", "layout", "serving"]


#: each builder option's field → (its ``hetopt build`` option, how its value is read)
_SAME = lambda v: v  # noqa: E731
_CSV = lambda v: None if v is None else tuple(int(x) for x in v.split(","))  # noqa: E731
PLACEMENT_FIELDS = {
    "Workload": {"batch": ("batch", _SAME)},
    "BuildOptions": {name: (name, _SAME) for name in (
        "layers", "tp", "block_span", "dtype", "time_unit", "kv_layout", "load_timing",
        "formats")},
    "Goal": {name: (name, _SAME) for name in (
        "objective", "slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms")},
    "Sources": {"catalog": ("catalog", _SAME), "models_file": ("models_file", _SAME)},
}
SERVING_FIELDS = {
    "ServingGrid": {"batches": ("batches", _CSV),
                    **{name: (name, _SAME) for name in (
                        "max_gpus", "max_owners", "max_replicas", "max_microbatches")}},
    "Parallelism": {"tp_degrees": ("tp", _CSV), "expert_parallel": ("no_ep", lambda v: not v)},
    "GpuCost": {"kind": ("gpu_cost", _SAME), "unmeasured": ("unmeasured_gpu", _SAME),
                "calibration": ("gpu_calibration", _SAME)},
    "Sources": PLACEMENT_FIELDS["Sources"],
}


#: the builders' arguments that are typed options
TYPED_OPTIONS = {"workload", "options", "budget", "goal", "sources", "grid", "parallelism",
                 "cost"}


def test_builder_defaults_mirror_the_command_line():
    """Each builder option has the default of its ``hetopt build`` option: the fields of the
    typed options (``Goal().slo_ttft_ms`` is ``--slo-ttft-ms``'s) and the plain keywords."""
    import inspect

    from opt.app.cli.parser import build_parser

    parser = build_parser()
    for argv, fn, fields in (
            (["build", "placement", "--model", "m", "--platform", "p", "--prefill", "1",
              "--decode", "0", "-o", "x.json"], hetopt.build_placement, PLACEMENT_FIELDS),
            (["build", "serving", "--model", "m", "--gpus", "H100", "--context", "1",
              "--slo-ms", "1", "-o", "x.json"], hetopt.build_serving, SERVING_FIELDS)):
        args = vars(parser.parse_args(argv))
        for name, p in inspect.signature(fn).parameters.items():
            if name not in TYPED_OPTIONS:
                assert name in args, f"{fn.__name__}({name}) has no option"
                if p.default is not inspect.Parameter.empty:
                    assert p.default == args[name], (fn.__name__, name)
        for kind, by_field in fields.items():
            option = getattr(hetopt, kind)
            defaults = {f.name: f.default for f in dataclasses.fields(option)}
            for field, (dest, read) in by_field.items():
                assert dest in args, f"{kind}.{field} has no option"
                assert defaults[field] == read(args[dest]), (kind, field)


def test_every_builder_option_is_a_typed_option():
    """A builder takes at most 10 arguments; each beyond the names, the workload, the memory
    share and the measurements file is a typed option, a frozen dataclass of opt.api."""
    import typing

    for fn in (hetopt.build_placement, hetopt.build_layout, hetopt.build_serving):
        hints = typing.get_type_hints(fn.__wrapped__)
        hints.pop("return")
        assert len(hints) <= 10, fn.__name__
        for name, hint in hints.items():
            if name in TYPED_OPTIONS:
                kind = next(h for h in typing.get_args(hint) or (hint,) if h is not type(None))
                assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen
                assert getattr(hetopt, kind.__name__) is kind, (fn.__name__, name)


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_page_example_runs(example):
    exec(compile(example, str(PAGE), "exec"), {"__name__": "api_example"})


def test_the_page_has_an_example_per_problem():
    assert len(EXAMPLES) == 4  # the import, then P1, P2 and P3
    for heading in ("## P1: placement", "## P2: weight layout", "## P3: serving plans"):
        assert heading in PAGE.read_text()


# ---- wrong types and values: an InputError naming the argument ------------------------------

P1 = "heft-topcuoglu-2002"
PLACE = ("llama-2-7b", "HP32", hetopt.Workload(prefill=8, decode=1))
LAYER = hetopt.BuildOptions(layers=1)
SERVE = ("llama-2-7b", "H100", hetopt.ServingWorkload(context_tokens=1024, tpot_slo_s=0.05))
GRID = dict(batches=[1], max_gpus=2, max_owners=1, max_replicas=1)


def _refuses(call, field: str, *shown: str) -> hetopt.InputError:
    with pytest.raises(hetopt.InputError) as info:
        call()
    assert info.value.field == field, str(info.value)
    for text in shown:
        assert text in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize("call, field, shown", [
    (lambda: hetopt.Workload(prefill=8.0, decode=1), "prefill", "8.0"),
    (lambda: hetopt.Workload(prefill=True, decode=1), "prefill", "True"),
    (lambda: hetopt.Budget(gb=float("nan")), "budget_gb", "nan"),
    (lambda: hetopt.BuildOptions(formats="linear"), "formats", "'linear'"),
    (lambda: hetopt.Budget(factor="2"), "budget_factor", "'2'"),
    (lambda: hetopt.ServingWorkload(1024, "0.06"), "slo", "'0.06'"),
    (lambda: hetopt.ServingGrid(batches=[1, "4"]), "batches[1]", "'4'"),
    (lambda: hetopt.ServingWorkload(10 ** 30, 0.05), "context", "10000"),
])
def test_a_wrong_option_value_is_an_input_error_naming_its_field(call, field, shown):
    """The typed options check their fields on construction (the command line's names)."""
    _refuses(call, field, shown)


@pytest.mark.parametrize("call, field, shown", [
    (lambda: hetopt.build_placement(None, *PLACE[1:]), "model", "None"),
    (lambda: hetopt.build_placement(PLACE[0], ["HP32"], PLACE[2]), "platform", "['HP32']"),
    (lambda: hetopt.build_placement(*PLACE[:2], {"prefill": 8, "decode": 1}), "workload",
     "'prefill'"),
    (lambda: hetopt.build_placement(*PLACE, options={"layers": 1}), "options", "dict"),
    (lambda: hetopt.build_placement(*PLACE, options=LAYER, budget=8.0), "budget", "8.0"),
    (lambda: hetopt.build_placement(*PLACE, no_such_option=1), "no_such_option", ""),
    (lambda: hetopt.build_layout(*PLACE, options=LAYER, budget=hetopt.Budget()), "budget", ""),
    (lambda: hetopt.build_serving(SERVE[0], None, SERVE[2]), "gpus", "None"),
    (lambda: hetopt.build_serving(*SERVE, grid=GRID), "grid", "dict"),
    (lambda: hetopt.build_serving(*SERVE, memory_fraction="0.5"), "memory_fraction", "'0.5'"),
    (lambda: hetopt.validate(hetopt.load_instance(P1), "r.json"), "result", "'r.json'"),
    (lambda: hetopt.lower_bound("i.json"), "instance", "'i.json'"),
    (lambda: hetopt.write_instance(hetopt.Result("placement", "heft", "ERROR"), "x.json"),
     "instance", "Result"),
    (lambda: hetopt.write_result(hetopt.load_instance(P1), "x.json"), "result", ""),
    (lambda: hetopt.read_instance(None), "path", "None"),
    (lambda: hetopt.read_instance("a\0b.json"), "path", "NUL"),
    (lambda: hetopt.read_result(3), "path", "3"),
    (lambda: hetopt.load_instance(["x"]), "name", "['x']"),
    (lambda: hetopt.solve(hetopt.load_instance(P1), "heft", seed=1.5), "seed", "1.5"),
    (lambda: hetopt.solve(hetopt.load_instance(P1), "heft", time_limit=float("inf")),
     "time_limit", "inf"),
    (lambda: hetopt.methods(3), "problem", "3"),
    (lambda: hetopt.instance_names([]), "problem", "[]"),
])
def test_a_wrong_type_is_an_input_error_naming_the_argument(call, field, shown):
    err = _refuses(call, field, shown)
    assert err.source.startswith("opt.api.")


def test_act_sparsity_takes_one_fraction_as_a_number():
    from opt.placement.request import chosen_sparsity

    def built(act):
        options = hetopt.BuildOptions(layers=1, sparsity=chosen_sparsity(activation=act))
        return hetopt.build_placement(*PLACE, options=options)

    assert built(0.5).fingerprint == built("0.5").fingerprint


def test_numbers_of_other_numeric_types_are_accepted():
    import numpy as np

    inst = hetopt.build_placement(PLACE[0], PLACE[1], hetopt.Workload(np.int64(8), 1),
                                  options=LAYER, budget=hetopt.Budget(gb=np.float64(9)))
    assert inst.problem == "layout"
    assert hetopt.build_serving(*SERVE, grid=hetopt.ServingGrid(**GRID),
                                memory_fraction=np.float64(0.5)).problem == "serving"


def test_a_path_where_an_instance_belongs_says_how_to_read_it():
    err = _refuses(lambda: hetopt.lower_bound("i.json"), "instance", "read_instance(path)")
    assert "str" in str(err)


def test_every_public_function_checks_its_arguments():
    """Each function of opt.api is wrapped by the façade's argument check."""
    import inspect

    functions = [n for n in hetopt.__all__ if inspect.isfunction(getattr(hetopt, n))]
    assert len(functions) == 16
    for name in functions:
        assert getattr(getattr(hetopt, name), "checks_arguments", False), name


def test_a_start_of_the_wrong_kind_is_an_input_error():
    """``initial_solution``: not a solution at all, or a placement result for a serving plan."""
    p1, p3 = hetopt.load_instance(P1), hetopt.load_instance("p3-tiny-gemma-a100-l40s")
    _refuses(lambda: hetopt.solve(p3, "bnb", initial_solution=True), "initial_solution", "True")
    placement = hetopt.solve(p1, "heft")
    _refuses(lambda: hetopt.solve(p3, "bnb", time_limit=5, initial_solution=placement),
             "initial_solution")


@pytest.mark.parametrize("kwargs,field", [({"slo_ttft_ms": 1e308}, "slo_ttft_ms"),
                                          ({"slo_e2e_ms": -1.0}, "slo_e2e_ms")])
def test_a_value_error_names_the_argument_not_the_command_line_option(kwargs, field):
    with pytest.raises(hetopt.InputError) as err:
        hetopt.build_placement("llama-2-7b", "HP32", hetopt.Workload(16, 1), options=LAYER,
                               goal=hetopt.Goal(**kwargs))
    assert err.value.field == field
