"""opt.common.jit: a module imported with another hidden from its probe, and imported as usual
when it truly needs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, code: str) -> list[str]:
    """``code`` in a fresh interpreter with ``tmp_path`` and the project importable."""
    env_path = f"{tmp_path}:{ROOT}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    return proc.stdout.split()


def _modules(tmp_path: Path) -> None:
    (tmp_path / "heavy.py").write_text("VALUE = 1\n")
    (tmp_path / "probe.py").write_text(
        "try:\n    import heavy\n    HAVE = True\nexcept ImportError:\n    HAVE = False\n")
    (tmp_path / "needy.py").write_text("import heavy\nHAVE = True\n")


def test_a_probing_module_loads_without_the_hidden_one(tmp_path: Path) -> None:
    _modules(tmp_path)
    out = _run(tmp_path, "import sys; from opt.common.jit import import_hiding; "
                         "import_hiding('probe', 'heavy'); import probe; "
                         "print(probe.HAVE, 'heavy' in sys.modules); import heavy; "
                         "print(heavy.VALUE)")
    assert out == ["False", "False", "1"]  # hidden for the probe only, importable after


def test_a_module_that_needs_the_hidden_one_is_imported_as_usual(tmp_path: Path) -> None:
    _modules(tmp_path)
    out = _run(tmp_path, "import sys; from opt.common.jit import import_hiding; "
                         "import_hiding('needy', 'heavy'); import needy; "
                         "print(needy.HAVE, 'heavy' in sys.modules)")
    assert out == ["True", "True"]


def test_nothing_is_hidden_once_imported(tmp_path: Path) -> None:
    _modules(tmp_path)
    out = _run(tmp_path, "import heavy; from opt.common.jit import import_hiding; "
                         "import_hiding('probe', 'heavy'); import probe; print(probe.HAVE)")
    assert out == ["True"]
