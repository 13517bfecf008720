"""benchmarks/bifocal_ablation.py reads its records as a file from anyone: every record is
checked before it is trusted for a resume or printed into a table; a bad one is one line
naming the file, the line and the field, and exit 2 — no traceback, no markup in the table."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

#: the script's functions (run as a module, not as __main__)
ablation = SimpleNamespace(**runpy.run_path(
    str(Path(__file__).parents[2] / "benchmarks" / "bifocal_ablation.py")))

GOOD = {"model": "dops-qwen-1.8b", "prefill": 128, "decode": 128, "batch": 8, "variant": "all",
        "makespan": 737_100_000, "tasks": 1, "evictions": 0,
        "flips": {"window": 0, "phase": 0, "token": 21, "evict": 0, "copy": 0},
        "wall_s": 1.0, "revision": 7, "load_timing": "at_use"}


def _write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_good_records_make_the_table(tmp_path, capsys):
    out = _write(tmp_path / "a.jsonl", json.dumps(GOOD),
                 json.dumps({**GOOD, "variant": "-token", "makespan": 778_300_000}))
    assert ablation.main(["--out", str(out), "--table"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| dops-qwen-1.8b | 8 | 128 | 128 |"))
    assert "| 737.1 |" in row and "1.0559" in row


@pytest.mark.parametrize("line, field", [
    ("{not json", "line 2"),
    ("[1, 2]", "line 2"),
    (json.dumps({**GOOD, "model": "<b>x</b>"}), "line 2.model"),
    (json.dumps({**GOOD, "batch": "8"}), "line 2.batch"),
    (json.dumps({**GOOD, "variant": "| evil |"}), "line 2.variant"),
    (json.dumps({**GOOD, "makespan": True}), "line 2.makespan"),
    (json.dumps({**GOOD, "flips": {"window": -1}}), "line 2.flips"),
])
def test_a_bad_record_is_one_line_and_exit_2(tmp_path, capsys, line, field):
    out = _write(tmp_path / "a.jsonl", json.dumps(GOOD), line)
    assert ablation.main(["--out", str(out), "--table"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and f"field '{field}'" in err


def test_a_missing_file_is_one_line(tmp_path, capsys):
    assert ablation.main(["--out", str(tmp_path / "none.jsonl"), "--table"]) == 2
    assert "file not found" in capsys.readouterr().err
