"""The compiled kernels' cache is keyed by the source of every kernel module: a change to any
of them (a callee compiled into another module's kernel included) starts a fresh cache, so a
stale kernel is never run (opt.common.numba_cache)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from numba.core import config

from opt.common import numba_cache
from opt.common.numba_cache import KERNEL_MODULES, ROOT, kernel_cache_dir, kernel_digest

PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")


def _imports_numba(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba"
                                                for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            return True
    return False


def test_every_module_that_compiles_a_kernel_is_in_the_digest():
    compiling = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                 if _imports_numba(p) and p.name != "numba_cache.py"}
    assert compiling <= set(KERNEL_MODULES), compiling - set(KERNEL_MODULES)
    for rel in compiling:  # and each points numba's cache at the digest before compiling
        assert "use_kernel_cache()" in (ROOT / rel).read_text(), rel


def test_a_change_to_any_kernel_module_changes_the_cache_directory(tmp_path):
    for rel in KERNEL_MODULES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    base = kernel_digest(tmp_path)
    assert base == kernel_digest(ROOT)
    seen = {base}
    for rel in KERNEL_MODULES:
        original = (tmp_path / rel).read_text()
        (tmp_path / rel).write_text(original + "\n# changed\n")
        seen.add(kernel_digest(tmp_path))
        (tmp_path / rel).write_text(original)
    assert len(seen) == len(KERNEL_MODULES) + 1
    assert kernel_digest(tmp_path) == base


def test_numba_caches_the_kernels_under_the_digest():
    from heuristics.placement import state_kernels

    path = kernel_cache_dir()
    assert Path(path).name == kernel_digest()
    assert config.CACHE_DIR == path == numba_cache.use_kernel_cache()
    assert state_kernels.eft_loop._cache._cache_path.startswith(path)


def test_the_base_directory_follows_numba_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert numba_cache._base() == tmp_path
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert numba_cache._base() == tmp_path / "xdg" / "hetopt" / "numba"
