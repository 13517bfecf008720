"""The ``hetopt`` parser: command groups and their help, the retired names, and a ``--help``
that imports no solver stack."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from opt.app.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]

GROUPS = {
    (): ["models", "hardware", "instances", "methods", "theory", "build", "import", "validate", "solve",
         "lower-bound", "sweep", "bench", "replay", "scaling", "plot", "view", "calibrate",
         "compare-measured", "synth-measurements"],
    ("theory",): ["het", "hom", "verify", "plot"],
    ("build",): ["placement", "layout", "serving", "serving-plan"],  # serving-plan: an alias
    ("import",): ["dot"],
    ("sweep",): ["placement", "layout", "serving"],
    ("plot",): ["gantt", "utilisation", "sweep", "serving"],
}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = _subcommands(parser)
    if not subs:
        yield path, parser
    for name, child in subs.items():
        yield from _leaves(child, (*path, name))


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("group", list(GROUPS), ids=lambda g: " ".join(g) or "hetopt")
def test_group_help_lists_its_subcommands(capsys, group):
    text = _help(capsys, *group)
    for name in GROUPS[group]:
        assert name in text


def test_parser_tree_is_exactly_the_groups():
    parser = build_parser()
    for group, names in GROUPS.items():
        node = parser
        for part in group:
            node = _subcommands(node)[part]
        assert sorted(_subcommands(node)) == sorted(names)


def test_every_handler_names_a_function_of_its_command_group():
    from opt.app.cli.parser import Handler

    for path, parser in _leaves(build_parser()):
        handler = parser.get_default("func")
        assert isinstance(handler, Handler), path
        assert handler.module.startswith("opt.app.cli.") and handler.module != "opt.app.cli.parser", path
        fn = handler.function()
        assert callable(fn) and fn.__module__ == handler.module, path
        assert fn.__name__ == handler.function_name, path


def test_every_command_has_a_handler_and_a_help(capsys):
    leaves = list(_leaves(build_parser()))
    assert len(leaves) == 30  # build serving-plan is build serving (an alias)
    for path, parser in leaves:
        assert callable(parser.get_default("func")), path
        shown = " ".join(path).replace("build serving-plan", "build serving")  # the alias
        assert "usage: hetopt " + shown in _help(capsys, *path)


@pytest.mark.parametrize("argv", [
    ["bounds", "het", "--gpu1", "H100", "--gpu2", "L40S"],
    ["bounds", "hom", "--gpu", "H100", "--model", "llama-2-7b", "--context", "1000"],
    ["verify-bounds", "--samples", "1"],
    ["plot-bounds", "--out", "plots"],
    ["bound", "heft-topcuoglu-2002"],
    ["solve", "heft-topcuoglu-2002", "--workers", "2"],
    ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--prefill", "8",
     "--decode", "1", "--methods", "pd", "--workers", "2"],
    ["sweep", "serving", "--models", "gemma-3-27b", "--gpus", "H100", "--contexts", "8192",
     "--slo-ms", "60", "--workers", "2"],
    ["sweep", "layout", "--workers", "2"],
], ids=lambda a: " ".join(a[:2]) + (" --workers" if "--workers" in a else ""))
def test_retired_names_are_rejected(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "hetopt" in capsys.readouterr().err


def test_num_workers_reaches_the_namespace():
    args = build_parser().parse_args(["solve", "x", "--num-workers", "3",
                                      "--initial-solution", "r.json"])
    assert args.num_workers == 3 and args.initial_solution == "r.json"
    args = build_parser().parse_args(["sweep", "layout", "--num-workers", "2", "--jobs", "4"])
    assert args.num_workers == 2 and args.jobs == 4


_PROBE = """
import json, runpy, sys
sys.argv = ["hetopt", "--help"]
try:
    runpy.run_module("opt", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(
    m for m in ("ortools", "pyomo", "solvers", "highspy") if m in sys.modules)}))
"""


def test_python_dash_m_opt_help_imports_no_solver_stack():
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report == {"code": 0, "loaded": []}
    assert "lower-bound" in proc.stdout and "theory" in proc.stdout
