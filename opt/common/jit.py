"""numba's import without its BLAS probe: shared by the compiled scheduler
(:mod:`heuristics.placement.engine`) and the certified bound's kernels
(:mod:`opt.placement.bound_options`). numba's array implementations
(``numba.np.arraymath``, loaded with the first kernel) probe for a BLAS by importing
``scipy.linalg``: ≈ 0.3 CPU s in every process that loads a kernel (measured before this module
hid it; docs/speed.md, "Schedulers (Bifocal, HEFT)", has today's import cost), although no
kernel here uses a BLAS. :func:`import_numba_arrays` imports that module with
``scipy.linalg`` hidden from this thread, so numba records this process as one without scipy
for that probe: only ``np.correlate`` / ``np.convolve`` in a kernel would take numba's own
loop instead of a BLAS dot; ``np.dot`` and ``np.linalg`` still import scipy.linalg when a
kernel using them compiles. If the hidden import fails (a numba that needs scipy.linalg
there), it is imported again as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any


class _Hidden:
    """A meta path finder (``find_spec`` is all ``sys.meta_path`` asks; not derived from
    ``importlib.abc``, whose import pulls ``importlib.resources``) that fails the import of one
    module in one thread (others are not affected)."""

    def __init__(self, name: str) -> None:
        self.name, self.thread = name, threading.get_ident()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == self.name and threading.get_ident() == self.thread:
            raise ImportError(f"{fullname} hidden while numba probes for a BLAS")
        return None


def import_numba_arrays() -> None:
    """Import ``numba.np.arraymath`` without its ``scipy.linalg`` probe (nothing is hidden
    once either module is imported; raises ImportError only without numba)."""
    import_hiding("numba.np.arraymath", "scipy.linalg")


def import_hiding(module: str, hidden: str) -> None:
    """Import ``module`` with ``hidden`` failing to import in this thread meanwhile; if that
    fails, import ``module`` as usual (so a module that truly needs ``hidden`` still loads).
    Nothing is hidden when either is imported already."""
    if hidden in sys.modules or module in sys.modules:
        return
    finder = _Hidden(hidden)
    sys.meta_path.insert(0, finder)
    try:
        importlib.import_module(module)
    except ImportError:
        failed = True
    else:
        failed = False
    finally:
        sys.meta_path.remove(finder)
    if failed:
        importlib.import_module(module)
