"""Output paths checked before any work (issue 33): a command that writes a file or a folder
checks the path first, so a bad path costs one line and exit 2, never a finished result.

A **file** path (``-o FILE``) needs an existing parent folder that can be written, and must not
be a folder itself; a **new file** path is a file whose folder the writer creates (with its
parents) first, so its folder is checked as a folder path. A **folder** path (``--out DIR``) may not exist yet (it is created with
its parents), but no part of it may be a file, and the nearest existing folder must be
writable. "Writable" is tested by creating and removing a probe file (``O_CREAT | O_EXCL``):
``os.access`` alone says yes to root on a read-only mount or a pseudo file system.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from opt.common.errors import InputError

#: The kinds of output path: a file in an existing folder, a folder, a file whose folder is
#: created first.
FILE, FOLDER, NEW_FILE = "file", "folder", "new file"


def _probe_error(folder: Path) -> str | None:
    """Why a new file cannot be created in ``folder`` (None when it can): the probe file is
    created and removed at once."""
    probe = folder / f".hetopt-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def _existing_file_error(path: Path) -> str | None:
    """Why the existing file ``path`` cannot be overwritten (opened for append: not changed)."""
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def output_error(path: str | os.PathLike[str], kind: str = FILE) -> str | None:
    """Why ``path`` cannot be written as a ``kind`` (:data:`FILE`, :data:`FOLDER` or
    :data:`NEW_FILE`); None when it can. Nothing is created but a probe file, removed at once."""
    p = Path(path)
    if str(path) == "":
        return "the path is empty"
    if kind == FILE:
        if p.is_dir():
            return "is a folder, not a file"
        parent = p.parent
        if not parent.exists():
            return f"its folder '{parent}' does not exist"
        if not parent.is_dir():
            return f"'{parent}' is a file, not a folder"
        if p.exists():
            return _existing_file_error(p)
        why = _probe_error(parent)
        return None if why is None else f"its folder '{parent}' is not writable ({why})"
    if kind == NEW_FILE:
        return "is a folder, not a file" if p.is_dir() else output_error(p.parent, FOLDER)
    if kind != FOLDER:
        raise ValueError(f"kind must be {FILE!r}, {FOLDER!r} or {NEW_FILE!r}, got {kind!r}")
    existing = p
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return ("is a file, not a folder" if existing == p
                else f"'{existing}' is a file, not a folder")
    why = _probe_error(existing)
    if why is None:
        return None
    return ("is not writable" if existing == p else f"'{existing}' is not writable") \
        + f" ({why})"


def check_output(path: str | os.PathLike[str], option: str, kind: str = FILE) -> None:
    """:class:`InputError` naming ``option`` and ``path`` unless ``path`` can be written as a
    ``kind`` (see :func:`output_error`)."""
    why = output_error(path, kind)
    if why is not None:
        raise InputError(f"cannot write {kind} '{path}': {why}", source="<argument>",
                         field=option)
