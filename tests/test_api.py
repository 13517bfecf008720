"""The public API (opt.api, docs/api.md): its names, a free import, and every example of the
API page run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import opt.api as hetopt

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)

NAMES = ["Problem", "Status", "Result", "PlacementInstance", "ServingInstance",
         "read_instance", "write_instance", "read_result", "write_result",
         "build_placement", "build_layout", "build_serving", "instance_names",
         "load_instance", "solve", "validate", "lower_bound", "methods"]


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


def test_builder_defaults_mirror_the_command_line():
    """Each builder keyword has the default of its ``hetopt build`` option."""
    import inspect

    from opt.app.cli.parser import build_parser

    parser = build_parser()
    for argv, fn in ((["build", "placement", "--model", "m", "--platform", "p", "--prefill",
                       "1", "--decode", "0", "-o", "x.json"], hetopt.build_placement),
                     (["build", "serving", "--model", "m", "--gpus", "H100", "--context", "1",
                       "--slo-ms", "1", "-o", "x.json"], hetopt.build_serving)):
        args = vars(parser.parse_args(argv))
        for name, p in inspect.signature(fn).parameters.items():
            assert name in args, f"{fn.__name__}({name}) has no option"
            if p.default is not inspect.Parameter.empty:
                assert p.default == args[name], (fn.__name__, name)


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_page_example_runs(example):
    exec(compile(example, str(PAGE), "exec"), {"__name__": "api_example"})


def test_the_page_has_an_example_per_problem():
    assert len(EXAMPLES) == 4  # the import, then P1, P2 and P3
    for heading in ("## P1: placement", "## P2: weight layout", "## P3: serving plans"):
        assert heading in PAGE.read_text()
