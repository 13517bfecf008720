"""Fixtures of the cost-library tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def scaled_table(tmp_path: Path) -> Callable[[Path, float], Path]:
    """A function: the measured table at ``src`` with every ``latency_us`` × ``factor``,
    written under the test's temporary folder."""
    def scaled(src: Path, factor: float) -> Path:
        lines = src.read_text(encoding="utf-8").splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("device,"))
        k = lines[header].split(",").index("latency_us")
        out = lines[:header + 1]
        for line in lines[header + 1:]:
            cells = line.split(",")
            cells[k] = repr(float(cells[k]) * factor)
            out.append(",".join(cells))
        path = tmp_path / f"x{factor:g}.csv"
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
        return path
    return scaled
