"""The bad-input audit (benchmarks/hardening_audit.py) as a slow test: every case
refused with one line (or, for the cache rows, recomputed with a warning); no traceback, no
silent wrong result. ``pytest -m slow tests/fuzz/test_audit.py`` (about 2.5 min on 2 cores)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

AUDIT = Path(__file__).resolve().parents[2] / "benchmarks" / "hardening_audit.py"


@pytest.mark.slow
def test_hardening_audit_has_no_traceback_and_no_silent_result(capsys):
    spec = importlib.util.spec_from_file_location("hardening_audit", AUDIT)
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    assert audit.main([]) == 0, capsys.readouterr().out
    assert "traceback" not in capsys.readouterr().out.split("bad inputs:")[-1]
