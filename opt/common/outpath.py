"""Output paths checked before any work: a command that writes a file or a folder
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
import stat
from pathlib import Path

from opt.common.errors import InputError

#: The kinds of output path: a file in an existing folder, a folder, a file whose folder is
#: created first.
FILE, FOLDER, NEW_FILE = "file", "folder", "new file"

#: The names a JSON document (a result, a serving instance) is written under: what its readers
#: read as JSON (``.gz`` gzip-compressed).
JSON_SUFFIXES = (".json", ".json.gz")
#: The names a placement (or layout) instance is written under: JSON, or the binary column
#: container (docs/problems.md §1.2c), which the readers tell by ``.npz``.
PLACEMENT_SUFFIXES = (*JSON_SUFFIXES, ".npz")


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
    :data:`NEW_FILE`); None when it can. Nothing is created but a probe file, removed at once.
    A path no file system takes (a name too long, a NUL character) is one such reason."""
    if kind not in (FILE, FOLDER, NEW_FILE):
        raise ValueError(f"kind must be {FILE!r}, {FOLDER!r} or {NEW_FILE!r}, got {kind!r}")
    if str(path) == "":
        return "the path is empty"
    try:
        return _output_error(Path(path), kind)
    except (OSError, ValueError) as exc:  # ENAMETOOLONG from a stat, a NUL character
        return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _output_error(p: Path, kind: str) -> str | None:
    """:func:`output_error` of the path ``p``; may raise what a stat of it raises."""
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
        return "is a folder, not a file" if p.is_dir() else _output_error(p.parent, FOLDER)
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


def suffix_error(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str
                 ) -> str | None:
    """Why ``what`` (e.g. "a result") cannot be written under the name ``path``: its name
    does not end in one of ``suffixes`` (case matters, as it does to the readers). None when
    it does, and for a device or FIFO (``/dev/null``, ``/dev/stdout``): no file is read back
    from those, and they are written as JSON."""
    name = str(os.fspath(path))
    if name.endswith(suffixes) or _special(name):
        return None
    npz = " (the .npz container holds placement instances only)" \
        if name.endswith(".npz") else ""
    return f"{what} is written as {_or(suffixes)}, so its file name must end in one of " \
           f"these{npz}"


def _special(name: str) -> bool:
    """Whether ``name`` is an existing device or FIFO (not a regular file, not a folder)."""
    try:
        mode = os.stat(name).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)


def check_suffix(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str) -> None:
    """:class:`InputError` naming ``path`` and ``suffixes`` unless ``path`` ends in one of
    them (:func:`suffix_error`): a writer's check before it writes anything."""
    why = suffix_error(path, suffixes, what)
    if why is not None:
        raise InputError(why, source=str(path))


def _or(items: tuple[str, ...]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def check_output(path: str | os.PathLike[str], option: str, kind: str = FILE) -> None:
    """:class:`InputError` naming ``option`` and ``path`` unless ``path`` can be written as a
    ``kind`` (see :func:`output_error`)."""
    why = output_error(path, kind)
    if why is not None:
        raise InputError(f"cannot write {kind} '{path}': {why}", source="<argument>",
                         field=option)
