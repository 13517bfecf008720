"""Fuzz the output paths of every writing command: a missing parent, a
folder where a file is meant, a file where a folder is meant, a folder that cannot be written
— each gives exit 2 and one line naming the option and the path, before any work (nothing is
written, no solve starts), never a traceback.

Tests run as root, where ``os.access`` says yes to everything: the read-only folder is
``/sys`` (sysfs refuses new files even to root) and, for a non-root user, a folder with mode
0o555 as well. :data:`WRITERS` lists every writing command with its output options.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opt.app.cli import main
from opt.common.outpath import FILE, FOLDER, NEW_FILE, output_error

ROOT = Path(__file__).resolve().parents[2]
BUILD = ["--model", "llama-2-7b", "--platform", "HP32", "--prefill", "16", "--decode", "1",
         "--layers", "1"]
INST, RES = "heft-topcuoglu-2002", "results-not-read.json"

#: (name, argv before the output option, option, kind, argv after it): every command that
#: writes. The commands never get past the path check in this test, so their inputs need only
#: parse.
WRITERS: tuple[tuple[str, list[str], str, str, list[str]], ...] = (
    ("build placement", ["build", "placement", *BUILD], "-o", FILE, []),
    ("build serving-plan", ["build", "serving-plan", "--model", "gemma-3-27b", "--gpus", "H100",
                            "--context", "8192", "--slo-ms", "60"], "-o", FILE, []),
    ("import dot", ["import", "dot", "g.dot", "--processors", "2"], "-o", FILE, []),
    ("solve -o", ["solve", INST, "--method", "heft"], "-o", FILE, []),
    ("solve --export", ["solve", INST, "--method", "milp"], "--export", FILE, []),
    ("view", ["view", INST, RES], "-o", FILE, []),
    ("plot gantt", ["plot", "gantt", INST, RES], "-o", FILE, []),
    ("plot utilisation", ["plot", "utilisation", INST, RES], "-o", FILE, []),
    ("plot sweep", ["plot", "sweep", "results"], "-o", FILE, []),
    ("plot serving", ["plot", "serving", "results"], "-o", FILE, []),
    ("sweep placement", ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32",
                         "--prefill", "8", "--decode", "8", "--methods", "pd"], "--out", FOLDER,
     []),
    ("sweep layout", ["sweep", "layout"], "--out", FOLDER, []),
    ("sweep serving", ["sweep", "serving", "--models", "gemma-3-27b", "--gpus", "H100",
                       "--contexts", "8192", "--slo-ms", "60"], "--out", FOLDER, []),
    ("bench", ["bench", "--case", "none"], "--out", FOLDER, []),
    ("replay", ["replay", "--model", "llama-2-7b", "--platform", "HP32"], "--out", FOLDER, []),
    ("scaling --out", ["scaling"], "--out", FOLDER, []),
    ("scaling --plot", ["scaling"], "--plot", FOLDER, []),
    ("calibrate", ["calibrate", "--device", "AiM", "--measurements", "m.csv"], "-o", FILE, []),
    ("compare-measured", ["compare-measured", INST, RES, "--measurements", "m.csv"], "--plot",
     FILE, []),
    ("synth-measurements", ["synth-measurements", "--device", "AiM", "--model",
                            "llama-2-7b"], "-o", FILE, []),
    ("theory plot", ["theory", "plot"], "--out", FOLDER, []),
    ("theory verify --detailed", ["theory", "verify", "--detailed"], "--out", FOLDER, []),
)


@pytest.fixture(scope="module")
def spots(tmp_path_factory) -> dict[str, Path]:
    """A folder, a file, and read-only folders (``/sys``; 0o555 when not root)."""
    d = tmp_path_factory.mktemp("outpaths")
    (d / "folder").mkdir()
    (d / "file.json").write_text("{}")
    ro = {"sys": Path("/sys")}
    if os.geteuid() != 0:
        (d / "ro").mkdir(mode=0o555)
        ro["ro"] = d / "ro"
    return {"dir": d, **ro}


def bad_paths(spots: dict[str, Path], kind: str) -> dict[str, Path]:
    """The bad paths for an output of ``kind``: each must be refused."""
    d = spots["dir"]
    out = {"missing parent": d / "no_such_dir" / "x" / "out.json",
           "file as parent": d / "file.json" / "out.json"}
    if kind == FILE:
        out["folder as file"] = d / "folder"
    else:
        out["file as folder"] = d / "file.json"
    for name in ("sys", "ro"):
        if name in spots:
            out[f"read-only ({name})"] = spots[name] / ("out.json" if kind == FILE else "out")
    if kind == FOLDER:  # a missing folder is created with its parents: only a file blocks it
        del out["missing parent"]
    return out


def run(argv: list[str]) -> tuple[int, str, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name,head,option,kind,tail", WRITERS, ids=[w[0] for w in WRITERS])
def test_every_writer_refuses_bad_output_paths(spots, name, head, option, kind, tail):
    for case, path in bad_paths(spots, kind).items():
        before = set(spots["dir"].glob("**/*"))
        rc, _, err = run([*head, option, str(path), *tail])
        lines = err.strip().splitlines()
        assert rc == 2, (name, case, rc, err)
        assert len(lines) == 1 and "Traceback" not in err, (name, case, err)
        long = {"-o": "--output"}.get(option, option)
        assert long in lines[0] and str(path) in lines[0], (name, case, lines[0])
        assert set(spots["dir"].glob("**/*")) == before, (name, case)


def test_the_check_knows_the_kinds(spots):
    d = spots["dir"]
    assert output_error(d / "new.json", FILE) is None
    assert output_error(d / "file.json", FILE) is None          # overwritten: allowed
    assert output_error(d / "a" / "b" / "c", FOLDER) is None     # created with its parents
    assert output_error(d / "folder", FOLDER) is None
    assert "is a folder" in output_error(d / "folder", FILE)
    assert "is a file" in output_error(d / "file.json", FOLDER)
    assert "not writable" in output_error(Path("/sys/x.json"), FILE)
    assert "not writable" in output_error(Path("/sys/a/b"), FOLDER)
    assert not list(d.glob(".hetopt-probe-*"))                    # the probe is removed


def test_a_new_file_has_its_folder_checked_as_a_folder(spots):
    """NEW_FILE: a file whose folder the writer creates (benchmarks' --out and --csv)."""
    d = spots["dir"]
    assert output_error(d / "a" / "b" / "new.json", NEW_FILE) is None  # folders created later
    assert output_error(d / "a" / "b" / "new.json", FILE) is not None
    assert "is a folder" in output_error(d / "folder", NEW_FILE)
    assert "is a file" in output_error(d / "file.json" / "new.json", NEW_FILE)
    assert "not writable" in output_error(Path("/sys/a/new.json"), NEW_FILE)


def test_theory_verify_out_only_matters_with_detailed(spots):
    """``theory verify`` without ``--detailed`` writes nothing: its --out is not checked."""
    rc, out, err = run(["theory", "verify", "--samples", "3", "--out",
                        str(spots["dir"] / "file.json")])
    assert rc == 0 and "all claims hold" in out, err


_SEGMENT = st.sampled_from(["a", "no_such_dir", "file.json", "folder", "..", ".", "x.json",
                            "é", " ", "-o"])


@settings(max_examples=120, deadline=None)
@given(writer=st.sampled_from(WRITERS), segments=st.lists(_SEGMENT, min_size=1, max_size=4),
       base=st.sampled_from(["dir", "sys"]))
def test_random_output_paths(spots, writer, segments, base):
    """Random paths under the test folder or /sys: whenever the core check refuses a path,
    the command exits 2 with one line; nothing is ever written outside the test folder."""
    name, head, option, kind, tail = writer
    path = spots[base].joinpath(*segments)
    why = output_error(path, kind)
    if why is None:
        return  # a writable path: the command would run (covered by its own tests)
    before = set(spots["dir"].glob("**/*"))
    rc, _, err = run([*head, option, str(path), *tail])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (
        name, path, err)
    assert set(spots["dir"].glob("**/*")) == before
