"""The reader of the binary column container of a P1 instance (problems.md §1.2c): a NumPy
``.npz`` archive holding the header fields as UTF-8 JSON and the task and edge tables as
integer arrays.

A file whose name ends in ``.npz`` is this container: :func:`opt.placement.io.read_instance`
(and so every command that reads an instance) reads it through :func:`open_container`, and
:meth:`PlacementInstance.write` writes it (:meth:`PlacementInstance.npz_members`). At full
size (0.9 million tasks) it reads several times faster than the JSON column tables (§1.2b):
no text is parsed but the header, and the ids are one byte string. The header goes through
the JSON reader's own checks (:func:`opt.placement.io.instance_from_header`) and the graph
through :func:`opt.placement.instance_checks.build_instance`'s; every array is checked here (integer dtype, shape, range),
and every error names the file, the member and the first bad position
(``tasks.cost[17, NPU0]``). The archive is read with ``allow_pickle=False``: nothing in it is
ever unpickled.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from opt.common.errors import InputError
from opt.common.jsonio import Fields
from opt.placement.instance import (
    CONTAINER_VERSION,
    MAX_BYTES,
    MAX_LABEL,
    MAX_TICKS,
    NPZ_TASK_INTS,
    PHASES,
)

#: optional task columns other than ``kind``: name -> dtype read (that of the JSON readers)
TASK_INTS = {k: np.int8 if k == "phase" else np.int64 for k in NPZ_TASK_INTS}
REQUIRED = ("header", "tasks.id", "tasks.id_end", "tasks.cost", "edges.src", "edges.dst")
MEMBERS = frozenset({*REQUIRED, "tasks.kind", "edges.bytes", *(f"tasks.{k}" for k in TASK_INTS)})
#: what reading a damaged zip member may raise (zipfile: NotImplementedError, a RuntimeError,
#: for an unknown version or method; numpy: ValueError for a bad array header, MemoryError
#: for a shape larger than memory)
_READ_ERRORS = (OSError, EOFError, ValueError, RuntimeError, MemoryError, zipfile.BadZipFile,
                zlib.error)


def open_container(path: str | Path) -> tuple[Fields, Callable[..., tuple]]:
    """The container at ``path``: its header (``container`` version checked; the rest is
    for :func:`opt.placement.io.instance_from_header`) and the reader of its task and edge
    tables (:data:`opt.placement.io.TableReader`). Any error is an :class:`InputError`
    naming the file and the member."""
    source = str(path)
    members = _members(path, source)
    f = Fields(_header(members["header"], source), source, "header")
    version = f.get("container")
    if version != CONTAINER_VERSION or type(version) is not int:
        raise f.error("container", f"unsupported container version {version!r}; this "
                                   f"version reads {CONTAINER_VERSION}")
    return f, partial(_tables, members)


def _error(source: str, where: str, message: str) -> InputError:
    return InputError(message, source=source, field=where)


def _members(path: str | Path, source: str) -> dict[str, np.ndarray]:
    """Every member of the archive, loaded without unpickling; only known members, the
    required ones present."""
    with _open(path, source) as archive:
        for name in archive.files:
            if name not in MEMBERS:
                raise _error(source, name, f"unknown member; allowed: {', '.join(sorted(MEMBERS))}")
        for name in REQUIRED:
            if name not in archive.files:
                raise _error(source, name, "missing required member")
        return {name: _member(archive, name, source) for name in archive.files}


def _open(path: str | Path, source: str) -> Any:
    """The archive (``np.load``, ``allow_pickle=False``); a file that is not a zip archive
    of NumPy arrays is one "cannot read" error."""
    if not Path(path).is_file():
        raise InputError("file not found", source=source)
    if not zipfile.is_zipfile(path):
        raise InputError("cannot read: not a zip archive (an .npz file is one)", source=source)
    try:
        archive = np.load(path, allow_pickle=False)
    except ValueError:  # numpy found no zip entry at the start and took it for a pickle
        archive = None
    except _READ_ERRORS as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError("cannot read: not a NumPy .npz archive (no zip entry at its start)",
                         source=source)
    assert archive.zip is not None  # numpy drops it only on close()
    try:
        _check_contiguous(path, archive.zip, source)
    except InputError:
        archive.close()
        raise
    return archive


def _check_contiguous(path: str | Path, zf: zipfile.ZipFile, source: str) -> None:
    """The listed members follow one another from the file's first byte up to the central
    directory, with nothing between them: a member dropped from the directory by a damaged
    entry count or offset (which ``zipfile`` would read as an archive without that member —
    a different instance, an optional column silently defaulted) is an error."""
    members = sorted(zf.infolist(), key=lambda i: i.header_offset)
    starts = [i.header_offset for i in members[1:]] + [zf.start_dir]  # where each one must end
    pos = 0
    with open(path, "rb") as fh:
        for info, nxt in zip(members, starts):
            head = b""
            if info.header_offset == pos:  # else (a negative one too) not read at all
                fh.seek(pos)
                head = fh.read(30)
            if len(head) < 30 or head[:4] != b"PK\x03\x04":
                raise _error(source, info.filename, f"cannot read: member at byte "
                             f"{info.header_offset}, expected at byte {pos} (a damaged "
                             f"zip directory)")
            pos += 30 + int.from_bytes(head[26:28], "little") \
                + int.from_bytes(head[28:30], "little") + info.compress_size
            if info.flag_bits & 0x08:  # a data descriptor: 12 to 24 bytes after the data
                if not 12 <= nxt - pos <= 24:
                    raise _error(source, info.filename, "cannot read: a damaged data "
                                 "descriptor")
                pos = nxt
    if pos != zf.start_dir:
        raise InputError(f"cannot read: {zf.start_dir - pos} bytes between the last listed "
                         f"member and the zip directory (a member missing from the directory)",
                         source=source)


def _member(archive: Any, name: str, source: str) -> np.ndarray:
    """One member as an array (an object array, which would need unpickling, is refused)."""
    try:
        arr = archive[name]
    except _READ_ERRORS as exc:
        raise _error(source, name, f"cannot read: {exc}") from None
    if not isinstance(arr, np.ndarray):
        raise _error(source, name, "cannot read: not a NumPy array (.npy) member")
    return arr


def _header(arr: np.ndarray, source: str) -> Any:
    """The ``header`` member: a uint8 array of UTF-8 JSON, parsed."""
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise _error(source, "header", f"expected a 1-D uint8 array (UTF-8 JSON), got "
                                       f"{arr.dtype} of shape {arr.shape}")
    try:
        return orjson.loads(arr.tobytes())
    except orjson.JSONDecodeError as exc:
        raise _error(source, "header", f"malformed JSON at line {exc.lineno} column "
                                       f"{exc.colno}: {exc.msg}") from None


def _tables(members: dict[str, np.ndarray], f: Fields, dindex: dict[str, int],
            bindex: dict[str, int], nd: int) -> tuple:
    """The reader's columns (:data:`opt.placement.io.TableReader`) from the arrays."""
    source = str(f.source)
    ids = _ids(members["tasks.id"], members["tasks.id_end"], source)
    n = len(ids)
    names = {j: name for name, j in dindex.items()}
    cost = _int_member(members, "tasks.cost", (n, nd), -1, MAX_TICKS, source, "duration",
                      lambda at: f"[{at[0]}, {names.get(at[1], at[1])}]")
    hi = {"block": len(bindex) - 1, "phase": len(PHASES) - 1}
    ints = [_optional(members, f"tasks.{k}", n, hi.get(k, MAX_LABEL), dtype, source)
            for k, dtype in TASK_INTS.items()]
    kinds = _kinds(members, f, n, source)
    src, dst, nbytes = _edges(members, n, source)
    return (ids, kinds, cost, *ints, src, dst, nbytes, None)


def _int_member(members: dict[str, np.ndarray], name: str, shape: tuple[int, ...], lo: int,
               hi: int, source: str, what: str, where=None, dtype: Any = np.int64
               ) -> np.ndarray:
    """Member ``name`` as ``dtype`` (C order): an integer array (any integer dtype; not bool,
    float, str or object) of ``shape`` with values in ``lo..hi``; an error names the member
    and the first bad position (``where(index)``, default ``[i]``)."""
    arr = members[name]
    if arr.dtype.kind not in "iu":
        raise _error(source, name, f"expected an integer array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise _error(source, name, f"expected shape {shape}, got {arr.shape}")
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.uint64(max(hi, 0)):  # beyond int64?
        _out_of_range(arr > np.uint64(max(hi, 0)), arr, name, lo, hi, source, what, where)
    a = np.ascontiguousarray(arr, dtype=np.int64)  # exact: every other value fits
    if a.size and not (lo <= a.min() and a.max() <= hi):
        _out_of_range((a < lo) | (a > hi), a, name, lo, hi, source, what, where)
    return a if dtype is np.int64 else a.astype(dtype)


def _out_of_range(bad: np.ndarray, arr: np.ndarray, name: str, lo: int, hi: int, source: str,
                  what: str, where) -> None:
    """Raise the error naming the first ``bad`` position of member ``name``."""
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    pos = where(at) if where else f"[{', '.join(map(str, at))}]"
    raise _error(source, f"{name}{pos}", f"{what} {int(arr[at])} is outside {lo}..{hi}")


def _length(members: dict[str, np.ndarray], name: str, source: str) -> int:
    """The length of member ``name``, which must be 1-D (it sets a table's length)."""
    shape = members[name].shape
    if len(shape) != 1:
        raise _error(source, name, f"expected a 1-D array, got shape {shape}")
    return shape[0]


def _optional(members: dict[str, np.ndarray], name: str, n: int, hi: int, dtype: Any,
              source: str) -> np.ndarray:
    """An optional task column in ``-1..hi`` (absent: -1, none, for every task)."""
    if name not in members:
        return np.full(n, -1, dtype=dtype)
    what = {"tasks.block": "block index"}.get(name, name.split(".")[1])
    return _int_member(members, name, (n,), -1, hi, source, what, dtype=dtype)


def _ids(blob: np.ndarray, ends: np.ndarray, source: str) -> list[str]:
    """The task ids from ``tasks.id`` (UTF-8 bytes) and ``tasks.id_end`` (end offsets)."""
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise _error(source, "tasks.id", f"expected a 1-D uint8 array (UTF-8 bytes), got "
                                         f"{blob.dtype} of shape {blob.shape}")
    members = {"tasks.id_end": ends}
    n = _length(members, "tasks.id_end", source)
    ends = _int_member(members, "tasks.id_end", (n,), 1, len(blob), source, "byte offset")
    steps = np.diff(ends)
    if (steps <= 0).any():
        i = int(np.flatnonzero(steps <= 0)[0]) + 1
        raise _error(source, f"tasks.id_end[{i}]", f"offset {int(ends[i])} does not follow "
                     f"{int(ends[i - 1])}: offsets increase strictly (ids are non-empty)")
    if len(ends) and ends[-1] != len(blob):
        raise _error(source, f"tasks.id_end[{n - 1}]", f"the last offset {int(ends[-1])} is "
                     f"not the length of tasks.id ({len(blob)} bytes)")
    if not len(ends) and len(blob):
        raise _error(source, "tasks.id_end", f"no offsets for {len(blob)} bytes of ids")
    return _split(blob, ends, source)


def _split(blob: np.ndarray, ends: np.ndarray, source: str) -> list[str]:
    """The ids. Fast path (no id holds a newline): a newline inserted at each offset, the
    whole decoded once and split, all in C; otherwise, or when that does not decode,
    :func:`_slice`, which names the first bad id."""
    if not len(ends):
        return []
    if not (blob == 10).any():
        try:
            return np.insert(blob, ends[:-1], 10).tobytes().decode().split("\n")
        except UnicodeDecodeError:
            pass  # invalid UTF-8, or an offset inside a character: _slice says which
    return _slice(blob, ends, source)


def _slice(blob: np.ndarray, ends: np.ndarray, source: str) -> list[str]:
    """The ids: the blob decoded once, sliced at the character offsets of ``ends``."""
    data = blob.tobytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        i = int(np.searchsorted(ends, exc.start, side="right"))
        raise _error(source, f"tasks.id[{i}]", f"not valid UTF-8 ({exc.reason})") from None
    if len(text) != len(data):  # not ASCII: byte offsets -> character offsets
        starts_char = (blob & 0xC0) != 0x80  # a byte that starts a character
        inside = np.flatnonzero(~starts_char[ends[:-1]])
        if len(inside):
            i = int(inside[0])
            raise _error(source, f"tasks.id_end[{i}]", f"offset {int(ends[i])} falls inside "
                                                       f"a UTF-8 character")
        ends = np.cumsum(starts_char)[ends - 1]
    bounds = ends.tolist()
    return list(map(text.__getitem__, map(slice, [0, *bounds[:-1]], bounds)))


def _kinds(members: dict[str, np.ndarray], f: Fields, n: int, source: str
           ) -> list[str | None]:
    """Each task's kind: ``tasks.kind`` (-1 null, else a position in the header's
    ``kind_names``, distinct strings); null for every task when the member is absent."""
    names = f.list("kind_names", [])
    for i, k in enumerate(names):
        if not isinstance(k, str):
            raise f.error(f"kind_names[{i}]", f"expected a string, got {k!r}")
    if len(set(names)) != len(names):
        raise f.error("kind_names", "kind names repeat")
    if "tasks.kind" not in members:
        return [None] * n
    codes = _int_member(members, "tasks.kind", (n,), -1, len(names) - 1, source, "kind index")
    return np.array([*names, None], dtype=object)[codes].tolist()


def _edges(members: dict[str, np.ndarray], n: int, source: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``edges.src`` and ``edges.dst`` (task positions) and ``edges.bytes`` (default 0)."""
    m = _length(members, "edges.src", source)
    ends = [_int_member(members, f"edges.{k}", (m,), 0, n - 1, source, "task position")
            for k in ("src", "dst")]
    nbytes = (_int_member(members, "edges.bytes", (m,), 0, MAX_BYTES, source, "bytes")
              if "edges.bytes" in members else np.zeros(m, dtype=np.int64))
    return ends[0], ends[1], nbytes
