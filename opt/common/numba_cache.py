"""One numba cache directory per version of the project's kernels.

numba caches a compiled kernel (``cache=True``) under a key of its own source file's time
stamp and size. A kernel that calls a kernel of another module has the callee compiled into
its own machine code, so when only the callee's module changes the caller's cached code is
still found and run: a stale kernel (a changed load rule in ``state_kernels`` was seen to
leave Bifocal, in ``bifocal_kernels``, on the former rule). :func:`use_kernel_cache` points
numba's cache at a directory named after a digest of the source of every module that defines
or types a kernel (:data:`KERNEL_MODULES`), so a change to any of them starts a fresh cache.
Directories of other versions stay until removed (each is a few MB).

The base directory is ``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/hetopt/numba``
(``~/.cache/hetopt/numba``), else, when that cannot be created, the temporary directory's
``hetopt-numba``. Every kernel module calls :func:`use_kernel_cache` before its first
``@njit(cache=True)`` (numba reads the directory when a kernel is decorated).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from numba.core import config as numba_config

#: the modules (paths from the project root) whose source the compiled kernels depend on
KERNEL_MODULES = ("heuristics/placement/kernel_types.py",
                  "heuristics/placement/state_kernels.py",
                  "heuristics/placement/bifocal_kernels.py",
                  "heuristics/placement/bifocal_window.py",
                  "heuristics/placement/order_kernels.py",
                  "heuristics/placement/setup_kernels.py",
                  "opt/placement/bound_jit.py")
#: the project root (the directory holding ``opt`` and ``heuristics``)
ROOT = Path(__file__).resolve().parent.parent.parent


def kernel_digest(root: Path = ROOT) -> str:
    """16 hex digits of the SHA-256 over the kernel modules' paths and sources."""
    h = hashlib.sha256()
    for rel in KERNEL_MODULES:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _base() -> Path:
    """The directory under which each kernel version gets its own cache (see the module)."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given)
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = Path(home) / "hetopt" / "numba"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.gettempdir()) / "hetopt-numba"
    return base


@functools.lru_cache(maxsize=1)
def kernel_cache_dir() -> str:
    """The cache directory of this version of the kernels (created on first use by numba)."""
    return str(_base() / kernel_digest())


def use_kernel_cache() -> str:
    """Point numba's cache at :func:`kernel_cache_dir` (idempotent); returns the directory."""
    path = kernel_cache_dir()
    numba_config.CACHE_DIR = path  # type: ignore[attr-defined]
    return path
