"""Writing a command's output file so that a failed write (a full disk, a lost mount) is one
line, never a traceback, and never leaves half a file.

:func:`write_output` writes a regular file through a temporary file in the same folder, renamed
over the target only once it is complete: a write that fails leaves the previous file as it
was (or none) and removes the temporary one. A target that exists and is not a regular file (a
device such as ``/dev/full`` or ``/dev/null``, a FIFO) is written in place, as the user asked.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from opt.common.errors import InputError


def write_output(write: Callable[[str], object], path: str, option: str = "--output") -> None:
    """``write(path)``, atomically for a regular file (see the module docstring); an OSError
    becomes an InputError naming ``option``, ``path`` and the OS error (exit 2)."""
    target = Path(os.path.realpath(path))  # a symlink's file is replaced, not the link
    in_place = target.exists() and not target.is_file()
    # the temporary name keeps the given name's ending: writers choose the format by it
    tmp = Path(path) if in_place else target.with_name(f".hetopt-{os.getpid()}-"
                                                       f"{Path(path).name}")
    try:
        write(str(tmp))
        if not in_place:
            tmp.replace(target)
    except OSError as exc:
        _remove(tmp, in_place)
        raise InputError(f"cannot write '{path}': {exc.strerror or exc}", source="<argument>",
                         field=option) from None
    except BaseException:  # Ctrl-C or a bug: no half-written temporary file either
        _remove(tmp, in_place)
        raise


def _remove(tmp: Path, in_place: bool) -> None:
    """Delete the temporary file ``tmp`` (nothing when the target was written in place)."""
    if not in_place:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
