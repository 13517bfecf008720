"""Hostile option values on the command line and in the builders: one line naming the option
and the value, exit 2 (InputError from the library), never a traceback; a failed write leaves
no half file; no builder writes an instance its reader refuses; a sweep refuses bad options
before any work and a sweep whose every record is ERROR does not exit 0."""

from __future__ import annotations

import argparse
import errno
import json
import os
from pathlib import Path

import pytest

from opt.app.cli import main
from opt.app.cli.argtypes import BoundedInt, BoundedReal
from opt.app.cli.parser import build_parser
from opt.common.errors import InputError
from tests.cli.run import run

MODEL, PLATFORM = "dops-qwen-1.8b", "HP32"
#: a one-layer placement build (about 70 tasks, a fraction of a second)
BUILD = ["build", "placement", "--model", MODEL, "--platform", PLATFORM, "--prefill", "8",
         "--decode", "2", "--layers", "1"]
SERVING = ["build", "serving-plan", "--model", "llama-2-7b", "--gpus", "H100", "--context",
           "1024", "--slo-ms", "60"]
DOT = str(Path(__file__).resolve().parents[2] / "instances" / "data" / "sinnen-dot"
          / "Nodes_7_OutTree.dot")
#: numeric options of the shared argument groups (opt.app.cli.common) whose values the library
#: checks (solvers.api.check_options, opt.placement.layout.budget_from); the tests below run
#: them through the commands
LIBRARY_CHECKED = frozenset({"time_limit", "num_workers", "seed", "budget_gb", "budget_factor"})




def one_line_error(code: int, err: str, *needles: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetopt: error:"), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---- every numeric option of the parser ---------------------------------------------------

def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        seen = set()
        for name, child in action.choices.items():
            if id(child) not in seen:
                seen.add(id(child))
                yield from _leaves(child, (*path, name))


def _numeric_options():
    """(command path, option string, action) of every option with a numeric type."""
    for path, parser in _leaves(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.type in (int, float) or \
                    isinstance(action.type, (BoundedInt, BoundedReal)):
                yield path, action.option_strings[-1], action


NUMERIC = list(_numeric_options())
BOUNDED = [(p, o) for p, o, a in NUMERIC if isinstance(a.type, (BoundedInt, BoundedReal))]


def test_every_numeric_option_has_a_bounded_type():
    raw = {(" ".join(p), o, a.dest) for p, o, a in NUMERIC
           if not isinstance(a.type, (BoundedInt, BoundedReal))}
    assert {dest for *_, dest in raw} <= LIBRARY_CHECKED, raw
    assert len(BOUNDED) > 60


@pytest.mark.parametrize("path,option", BOUNDED, ids=[f"{' '.join(p)} {o}" for p, o in BOUNDED])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "-1", str(10 ** 30), "x"])
def test_hostile_numeric_values_are_one_line(capsys, path, option, value):
    code, _, err = run(capsys, *path, f"{option}={value}")
    one_line_error(code, err, option, repr(value))


def test_parser_errors_are_one_line(capsys):
    one_line_error(*run(capsys, "build", "placement", "--model", MODEL)[::2],
                   "build placement", "--platform")
    one_line_error(*run(capsys, "bogus")[::2], "bogus")


# ---- row: overflow and negative values behind the four commands ------------------------------

@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """A one-layer placement instance and a PD result of it."""
    d = tmp_path_factory.mktemp("solved")
    inst, res = d / "p.json", d / "r.json"
    assert main([*BUILD, "-o", str(inst)]) == 0
    assert main(["solve", str(inst), "--method", "pd", "-o", str(res)]) == 0
    return inst, res


@pytest.mark.parametrize("factor", ["1e308", "1e300"])
def test_budget_factor_overflow(capsys, tmp_path, factor):
    out = tmp_path / "p.json"
    one_line_error(*run(capsys, *BUILD, "--budget-factor", factor, "-o", out)[::2],
                   "budget_factor", repr(float(factor)))
    assert not out.exists()


def test_budget_library_refuses_a_budget_beyond_2_53_bytes(solved):
    from opt.placement.layout import budget_from
    from opt.problems import read_problem_instance

    inst = read_problem_instance(solved[0])
    for kw, field in (({"factor": 1e308}, "budget_factor"), ({"gb": 1e300}, "budget_gb"),
                      ({"gb": 1e10}, "budget_gb")):
        with pytest.raises(InputError) as exc:
            budget_from(inst, **kw)
        assert exc.value.field == field
    assert budget_from(inst, factor=2.0) == 2 * int(inst.block_bytes.sum())


@pytest.mark.parametrize("window", ["0:inf", "0:1e400", "nan:5", "-inf:", "0:1e300"])
def test_gantt_window_must_be_finite(capsys, tmp_path, solved, window):
    pytest.importorskip("matplotlib")
    one_line_error(*run(capsys, "plot", "gantt", *solved, "--window", window,
                        "-o", tmp_path / "g.png")[::2], "window")
    assert not (tmp_path / "g.png").exists()


def test_window_library_check():
    from opt.app.plots.gantt import check_window, parse_window

    for bad in ("0:inf", "inf:", "0:nan", "5:3"):
        with pytest.raises(InputError, match="window"):
            parse_window(bad)
    for bad in ((0, 2 ** 60), (-1, 5), (0.5, 3), (True, 4), "ab", (1, 2, 3)):
        with pytest.raises(InputError, match="window"):
            check_window(bad)
    assert parse_window("10:") == (10, -1) and check_window((0, 5)) == (0, 5)


def test_replay_seed(capsys, tmp_path):
    from opt.app.runs.replay import generate_trace

    one_line_error(*run(capsys, "replay", "--model", MODEL, "--platform", PLATFORM,
                        "--seed", "-1", "--out", tmp_path)[::2], "--seed", "-1")
    with pytest.raises(InputError) as exc:
        generate_trace(5, seed=-1)
    assert exc.value.field == "seed"


def test_synth_noise(capsys, tmp_path):
    from opt.costlib.fit import default_shapes, synthetic_rows
    from opt.costlib.hardware import load_catalog
    from opt.costlib.modelcard import load_cards

    out = tmp_path / "s.csv"
    one_line_error(*run(capsys, "synth-measurements", "--device", "AiM", "--model", MODEL,
                        "--noise", "-1", "-o", out)[::2], "--noise", "-1")
    assert not out.exists()
    spec, card = load_catalog().device("AiM"), load_cards()[MODEL]
    shapes = default_shapes(card, (1,), (), (1.0,))[:2]
    for noise, seed, field in ((-1.0, 0, "noise"), (float("nan"), 0, "noise"),
                               (float("inf"), 0, "noise"), (0.1, -1, "seed")):
        with pytest.raises(InputError) as exc:
            synthetic_rows(spec, card, shapes, rel_noise=noise, seed=seed, source="t")
        assert exc.value.field == field


# ---- row: a failed write (a full disk) ---------------------------------------------------------

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


@needs_dev_full
@pytest.mark.parametrize("argv,name", [
    (BUILD, "full.json"), (BUILD, "full.npz"), (SERVING, "full.json.gz"),
    (["import", "dot", DOT, "--processors", "2"], "full.json"),
], ids=["placement-json", "placement-npz", "serving", "import-dot"])
def test_a_full_disk_is_one_line(capsys, tmp_path, argv, name):
    full = tmp_path / name
    full.symlink_to("/dev/full")
    one_line_error(*run(capsys, *argv, "-o", full)[::2], "--output", str(full),
                   os.strerror(errno.ENOSPC))
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing else left


def test_a_failed_write_keeps_the_previous_file(capsys, tmp_path, monkeypatch):
    from opt.placement.instance import PlacementInstance

    out = tmp_path / "p.json"
    out.write_text("previous")

    def half_then_full(self, path, **_kw):
        Path(path).write_text("{half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(PlacementInstance, "write", half_then_full)
    one_line_error(*run(capsys, *BUILD, "-o", out)[::2], "--output", str(out))
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]


def test_a_symlinked_output_is_written_through(capsys, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run(capsys, *BUILD, "-o", link)[0] == 0
    assert link.is_symlink() and json.loads(real.read_text())["problem"] == "placement"


# ---- row: builders validate their options with the readers' rules -----------------------------

@pytest.mark.parametrize("option", ["--max-owners", "--max-microbatches", "--max-gpus",
                                    "--max-replicas"])
def test_serving_grid_limits_are_refused_before_writing(capsys, tmp_path, option):
    out = tmp_path / "s.json"
    one_line_error(*run(capsys, *SERVING, option, "0", "-o", out)[::2], option, "'0'")
    assert not out.exists()


@pytest.mark.parametrize("field,value", [("max_owners", 0), ("max_microbatches", 0),
                                         ("max_gpus", -1), ("max_replicas", 2 ** 40),
                                         ("batches", ()), ("batches", (1, 2 ** 21))])
def test_serving_grid_is_checked_alike_by_builder_and_reader(field, value):
    from opt.serving.instance import ServingGrid, serving_instance_from_dict

    with pytest.raises(InputError) as exc:
        ServingGrid(**{field: value})
    assert exc.value.field.startswith(field)
    import instances

    doc = instances.load("p3-tiny-gemma-a100-l40s").to_dict()
    doc["grid"][field] = list(value) if isinstance(value, tuple) else value
    with pytest.raises(InputError) as exc:
        serving_instance_from_dict(json.loads(json.dumps(doc)), source="x.json")
    assert exc.value.source == "x.json" and exc.value.field.startswith(f"grid.{field}")


def test_api_build_serving_names_the_grid_field():
    from opt.api import ServingGrid, ServingWorkload, build_serving

    for field, value in (("max_gpus", -1), ("max_owners", 0), ("max_microbatches", 0)):
        with pytest.raises(InputError) as exc:
            build_serving("llama-2-7b", "H100", ServingWorkload(1024, 0.06),
                          grid=ServingGrid(**{field: value}))
        assert exc.value.field == field, exc.value


def test_the_serving_builder_returns_what_its_reader_reads(monkeypatch):
    from opt.costlib.hardware import load_catalog
    from opt.costlib.modelcard import load_cards
    from opt.serving import builder
    from opt.serving.builder import ServingWorkload, build_serving_plan

    monkeypatch.setattr(builder, "microbatch_sizes_for", lambda *_a: ())  # a broken table
    with pytest.raises(InputError, match="microbatch_sizes|model.ops"):
        build_serving_plan(load_cards()["llama-2-7b"], load_catalog(), ["H100"],
                           ServingWorkload(1024, 0.06), gpu_cost="roofline")


def test_tp_is_checked_against_the_model_before_building(capsys, tmp_path, monkeypatch):
    from opt.placement import builder

    def no_build(*_a, **_k):
        raise AssertionError("built before checking tp")

    monkeypatch.setattr(builder, "platform_devices", no_build)
    line = one_line_error(*run(capsys, *BUILD, "--tp", "1024", "-o", tmp_path / "t.json")[::2],
                          "tp", "1024", "heads")
    assert "time_unit" not in line


def test_num_workers_is_capped(capsys):
    from solvers.api import MAX_WORKERS, check_options

    one_line_error(*run(capsys, "solve", "sinnen-Nodes_10_Random-p2", "--method", "heft",
                        "--num-workers", "100000")[::2], "num_workers", "100000")
    with pytest.raises(InputError, match="num_workers"):
        check_options(1.0, MAX_WORKERS + 1, 0)
    check_options(1.0, MAX_WORKERS, 0)


# ---- row: sweeps check their options first, and an all-ERROR sweep is not a success ---------

@pytest.mark.parametrize("argv,needle", [
    (["--budget-gb", "-1"], "budget_gb"), (["--budget-factor", "nan"], "budget_factor"),
    (["--budget-gb", "1e300"], "budget_gb"), (["--time-limit", "inf"], "time_limit"),
    (["--num-workers", "0"], "num_workers"), (["--seed", "-1"], "seed"),
    (["--tp", "4096"], "tp"),
])
def test_sweep_layout_refuses_bad_options_before_any_work(capsys, tmp_path, monkeypatch, argv,
                                                          needle):
    from opt.app.runs import sweep

    monkeypatch.setattr(sweep, "_run", lambda *a, **k: pytest.fail("sweep started"))
    one_line_error(*run(capsys, "sweep", "layout", "--out", tmp_path, *argv)[::2], needle)
    assert not any(tmp_path.iterdir())


def test_a_sweep_of_only_errors_exits_1(capsys, tmp_path, monkeypatch):
    from opt.app.runs import sweep_calls
    from opt.common.result import Result

    monkeypatch.setattr(sweep_calls, "solve", lambda *a, **k: Result(
        "placement", "pd", "ERROR", stats={"message": "it broke"}))
    argv = ["sweep", "placement", "--models", MODEL, "--platforms", PLATFORM, "--prefill", "8",
            "--decode", "1", "--layers", "1", "--methods", "pd", "--executor", "serial",
            "--out", tmp_path]
    code, _, err = run(capsys, *argv)
    assert code == 1 and "every one of the 1 records is ERROR" in err, err
    monkeypatch.undo()
    assert run(capsys, *argv)[0] == 0  # ERROR records are retried: now solved
