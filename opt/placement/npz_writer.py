"""The writer side of the binary column container of a P1 instance (problems.md §1.2c): the
``.npz`` archive, the smallest integer dtype of a column, the task ids as one UTF-8 blob and
the task kinds as codes (:meth:`opt.placement.instance.PlacementInstance.npz_members`; the
reader is :mod:`opt.placement.npz`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: integer dtypes a container column may be stored in, smallest first (the writer takes the
#: first that holds the column's values)
_INT_DTYPES = (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64)


def write_npz(path: str | Path, members: Mapping[str, np.ndarray]) -> None:
    """``members`` as a NumPy ``.npz`` archive (what ``np.load`` reads; no pickles), deflated
    at zlib level 1: ``np.savez_compressed`` has no level and its default took 1.8 s on the
    full-size flagship against ≈ 0.4 s, for a file ≈ 15 % larger (docs/speed.md)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1,
                         allowZip64=True) as archive:
        for name, arr in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(arr), allow_pickle=False)


def smallest_int(arr: np.ndarray) -> np.ndarray:
    """``arr`` in the smallest integer dtype holding its values (uint8 when empty)."""
    lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    dtype = next(t for t in _INT_DTYPES if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)
    return np.ascontiguousarray(arr, dtype=dtype)


def id_members(ids: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``tasks.id`` (the ids' UTF-8 bytes, concatenated) and ``tasks.id_end`` (the end byte
    offset of each)."""
    blob = "".join(ids).encode()
    sizes = map(len, ids) if len(blob) == sum(map(len, ids)) else (len(t.encode()) for t in ids)
    ends = np.cumsum(np.fromiter(sizes, dtype=np.int64, count=len(ids)))
    return {"tasks.id": np.frombuffer(blob, dtype=np.uint8), "tasks.id_end": smallest_int(ends)}


def task_kind_codes(kinds: tuple[str | None, ...]) -> tuple[list[str], np.ndarray]:
    """The distinct non-null kinds in first-seen order, and each task's position among them
    (-1: null)."""
    names = list(dict.fromkeys(k for k in kinds if k is not None))
    code: dict[str | None, int] = {None: -1, **{k: i for i, k in enumerate(names)}}
    return names, np.fromiter(map(code.__getitem__, kinds), dtype=np.int64, count=len(kinds))
