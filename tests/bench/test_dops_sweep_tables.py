"""benchmarks/dops_sweep_tables.py's readers: only records of the current build enter the
tables — a §6.5 WLA record made by an older Bifocal revision is left out, as a grid record is."""

from __future__ import annotations

import copy
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

from opt.app.runs.sweep_calls import SolveCall

#: the script's functions (run as a module, not as __main__)
tables = SimpleNamespace(**runpy.run_path(
    str(Path(__file__).parents[2] / "benchmarks" / "dops_sweep_tables.py")))


def test_layout_records_of_another_bifocal_revision_are_left_out(tmp_path):
    settings = SolveCall().settings("bifocal/wla")
    older = copy.deepcopy(settings)
    older["bifocal"]["revision"] -= 1
    for name, s in (("now", settings), ("older", older), ("no-kv", settings)):
        rec = {"model": "dops-qwen-1.8b", "platform": "HP32", "prefill": 8, "decode": 8,
               "batch": 1, "method": "bifocal/wla", "status": "FEASIBLE", "makespan": 1,
               "kv_reserved": name != "no-kv", "settings": s, "tag": name}
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    assert [r["tag"] for r in tables.load_layout(str(tmp_path))] == ["now"]
    assert tables.load_layout(None) == []


def test_bad_output_paths_are_refused_before_any_work(tmp_path, capsys):
    """One line naming the option and exit 2, before a record is read: a CSV whose folder is
    a file, a doc without the generated section."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert tables.cli([str(tmp_path / "none"), "--csv", str(blocker / "out.csv")]) == 2
    assert "--csv" in capsys.readouterr().err
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    assert tables.cli([str(tmp_path / "none"), "--docs", str(doc)]) == 2
    err = capsys.readouterr().err
    assert "--docs" in err and len(err.strip().splitlines()) == 1
    assert doc.read_text() == "no markers here\n"
