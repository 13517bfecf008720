"""Writers refuse a file name whose suffix does not match what they write: a result and a
serving instance are JSON (``.json``, ``.json.gz``), a placement instance JSON or the binary
column container (``.npz``). The library raises InputError naming the path and the allowed
suffixes; the command line refuses ``-o`` before any work (one line, exit 2)."""

from __future__ import annotations

import pytest

import instances
from opt.app.cli import build_parser, main
from opt.app.cli.run import check_output_args
from opt.common.errors import InputError
from opt.common.outpath import JSON_SUFFIXES, PLACEMENT_SUFFIXES
from opt.common.result import Result
from opt.problems import read_problem_instance

P1, P3 = "heft-topcuoglu-2002", "p3-tiny-gemma-a100-l40s"
RESULT = Result(problem="placement", method="heft", status="ERROR")


def _refused(write, path, allowed) -> None:
    with pytest.raises(InputError) as info:
        write(path)
    text = str(info.value)
    assert str(path) in text and all(s in text for s in allowed), text
    assert not path.exists()


@pytest.mark.parametrize("name", ["r.npz", "r.txt", "r", "r.gz", "r.JSON", "r.json.tmp"])
def test_result_write_refuses_a_name_that_is_not_json(tmp_path, name):
    _refused(RESULT.write, tmp_path / name, JSON_SUFFIXES)


@pytest.mark.parametrize("name", ["s.npz", "s.csv", "s.json.zip"])
def test_serving_instance_write_refuses_a_name_that_is_not_json(tmp_path, name):
    _refused(instances.load(P3).write, tmp_path / name, JSON_SUFFIXES)


@pytest.mark.parametrize("name", ["p.txt", "p.npz.gz", "p.NPZ", "p"])
def test_placement_instance_write_refuses_an_unknown_name(tmp_path, name):
    _refused(instances.load(P1).write, tmp_path / name, PLACEMENT_SUFFIXES)


@pytest.mark.parametrize("name", ["i.json", "i.json.gz", "i.npz"])
def test_every_allowed_name_reads_back(tmp_path, name):
    inst = instances.load(P1)
    inst.write(tmp_path / name)
    assert read_problem_instance(tmp_path / name).fingerprint == inst.fingerprint


@pytest.mark.parametrize("argv", [
    ["solve", P1, "--method", "heft", "-o", "{tmp}/r.npz"],
    ["solve", P1, "--method", "heft", "-o", "{tmp}/r.txt"],
    ["build", "serving-plan", "--model", "gemma-3-27b", "--gpus", "H100", "--context", "8",
     "--slo-ms", "60", "-o", "{tmp}/s.npz"],
    ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "8",
     "--decode", "1", "-o", "{tmp}/p.csv"],
    ["build", "layout", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "8",
     "--decode", "1", "--budget-factor", "2", "-o", "{tmp}/p.json.bz2"],
])
def test_the_command_line_refuses_the_suffix_before_any_work(tmp_path, argv):
    argv = [a.format(tmp=tmp_path) for a in argv]
    args = build_parser().parse_args(argv)
    with pytest.raises(InputError) as info:
        check_output_args(args)  # the check run_command makes before the handler
    assert info.value.field == "--output" and argv[-1] in str(info.value)


def test_solve_with_an_npz_output_exits_2_in_one_line(tmp_path, capsys):
    out = tmp_path / "r.npz"
    assert main(["solve", P1, "--method", "heft", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--output" in err[0] and ".json.gz" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("argv", [
    ["solve", P1, "--method", "heft", "-o", "{tmp}/r.json.gz"],
    ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "8",
     "--decode", "1", "-o", "{tmp}/p.npz"],
])
def test_the_command_line_accepts_the_allowed_suffixes(tmp_path, argv):
    check_output_args(build_parser().parse_args([a.format(tmp=tmp_path) for a in argv]))


def test_a_device_takes_any_name(capsys):
    """``/dev/null`` (a device, read back by no one) is written as JSON, whatever the name."""
    RESULT.write("/dev/null")
    instances.load(P3).write("/dev/null")
    assert main(["solve", P1, "--method", "heft", "-o", "/dev/null"]) == 0
