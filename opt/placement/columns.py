"""Column tables of a P1 instance file (problems.md §1.2b): the task and edge tables as one
array per field instead of one object per task or edge, marked by ``"columns": 1``.

A full-size instance (≈ 0.9 million tasks, 1.5 million edges) is read several times faster
this way: the JSON parser builds a few long lists of numbers instead of millions of small
objects, and every check is one numpy expression. :meth:`PlacementInstance.write` writes
this layout by default above ``LARGE_TASKS`` (2,000) tasks and rows up to it (``to_dict`` writes
rows unless told ``columns=True``); :func:`column_tables` reads. Every check of the row
reader has its column counterpart, and every error names the file, the column and the
first offending position (``tasks.cost.NPU0[17]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.jsonio import Fields
from opt.placement.instance import COLUMNS_VERSION, MAX_BYTES, MAX_LABEL, MAX_TICKS, PHASES

TASK_COLUMNS = ("id", "cost", "block", "kind", "phase", "step", "layer", "shard")
EDGE_COLUMNS = ("src", "dst", "bytes")


def _first_bad(values: list, ok) -> int:
    """Position of the first entry of ``values`` for which ``ok`` is false (-1: none)."""
    return next((i for i, v in enumerate(values) if not ok(v)), -1)


def _is_int(v: Any) -> bool:
    return type(v) is int


def int_column(f: Fields, key: str, n: int, lo: int, hi: int, what: str = "value"
               ) -> np.ndarray:
    """Column ``key`` of ``f`` as int64 [n]: a list of n JSON integers in ``lo..hi`` (not
    true/false, not floats); an error names the column and the first bad position."""
    values = f.get(key)
    if not isinstance(values, list):
        raise f.error(key, f"expected a list, got {type(values).__name__}")
    if len(values) != n:
        raise f.error(key, f"expected {n} entries (one per row), got {len(values)}")
    if not set(map(type, values)) <= {int}:
        i = _first_bad(values, _is_int)
        raise f.error(f"{key}[{i}]", f"expected an integer, got {values[i]!r}")
    try:
        arr = np.fromiter(values, dtype=np.int64, count=n)
    except OverflowError:
        i = _first_bad(values, lambda v: lo <= v <= hi)
        raise f.error(f"{key}[{i}]", f"{what} {values[i]!r} is outside {lo}..{hi}") from None
    bad = np.flatnonzero((arr < lo) | (arr > hi))
    if len(bad):
        i = int(bad[0])
        raise f.error(f"{key}[{i}]", f"{what} {values[i]!r} is outside {lo}..{hi}")
    return arr


def _str_column(f: Fields, key: str, n: int, nullable: bool) -> list:
    """Column ``key``: a list of n strings — non-empty task ids, or (``nullable``, the kinds)
    strings or null, as the row form's ``kind`` — never another type."""
    values = f.get(key)
    if not isinstance(values, list):
        raise f.error(key, f"expected a list, got {type(values).__name__}")
    if len(values) != n:
        raise f.error(key, f"expected {n} entries (one per row), got {len(values)}")
    allowed = {str, type(None)} if nullable else {str}
    if not set(map(type, values)) <= allowed or (not nullable and "" in values):
        i = _first_bad(values, lambda v: type(v) in allowed and (nullable or v != ""))
        what = "a string or null" if nullable else "a non-empty string"
        raise f.error(f"{key}[{i}]", f"expected {what}, got {values[i]!r}")
    return values


def _table(obj: Any, source: str | None, name: str, keys: tuple[str, ...]) -> Fields:
    """The ``tasks`` / ``edges`` object of a column file, with only known columns."""
    if not isinstance(obj, dict):
        raise InputError(f"expected an object of columns (the file has \"columns\": "
                         f"{COLUMNS_VERSION}), got {type(obj).__name__}", source=source,
                         field=name)
    f = Fields(obj, source, name)
    f.check_keys(set(keys))
    return f


def column_tables(f: Fields, obj: Mapping[str, Any], dindex: dict[str, int], bindex: dict[str, int],
                  nd: int):
    """The reader's columns (ids, kinds, cost, task_block, phase, step, layer, shard, src,
    dst, bytes) from the column tables of ``obj`` (``"columns": 1``)."""
    version = obj.get("columns")
    if version != COLUMNS_VERSION or type(version) is not int:
        raise f.error("columns", f"unsupported column layout {version!r}; this version "
                                 f"reads {COLUMNS_VERSION}")
    tf = _table(f.get("tasks"), f.source, "tasks", TASK_COLUMNS)
    ids = _str_column(tf, "id", len(tf.get("id")) if isinstance(tf.get("id"), list) else 0,
                      nullable=False)
    n = len(ids)
    cost = _cost_matrix(tf, n, dindex, nd)
    none = np.full(n, -1, dtype=np.int64)

    def opt_int(key: str, lo: int, hi: int, what: str) -> np.ndarray:
        return int_column(tf, key, n, lo, hi, what) if key in tf.obj else none.copy()

    task_block = opt_int("block", -1, len(bindex) - 1, "block index")
    phase = opt_int("phase", -1, len(PHASES) - 1, "phase").astype(np.int8)
    step, layer, shard = (opt_int(k, -1, MAX_LABEL, k) for k in ("step", "layer", "shard"))
    kinds = _str_column(tf, "kind", n, nullable=True) if "kind" in tf.obj else [None] * n
    src, dst, nbytes = _edge_columns(f, obj, n)
    return ids, kinds, cost, task_block, phase, step, layer, shard, src, dst, nbytes


def _cost_matrix(tf: Fields, n: int, dindex: dict[str, int], nd: int) -> np.ndarray:
    """``tasks.cost``: device name → n durations (-1 where the task may not run there)."""
    cf = Fields(tf.get("cost"), tf.source, "tasks.cost")  # not an object: an InputError
    cost = np.full((n, nd), -1, dtype=np.int64)
    for dname in cf.obj:
        if dname not in dindex:
            raise cf.error(dname, f"unknown device '{dname}'")
        cost[:, dindex[dname]] = int_column(cf, dname, n, -1, MAX_TICKS, "duration")
    return cost


def _edge_columns(f: Fields, obj: Mapping[str, Any], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``edges``: task positions ``src`` and ``dst`` and optional ``bytes`` (default 0)."""
    if "edges" not in obj:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    ef = _table(obj["edges"], f.source, "edges", EDGE_COLUMNS)
    src = ef.get("src")
    m = len(src) if isinstance(src, list) else 0
    src, dst = (int_column(ef, k, m, 0, n - 1, "task position") for k in ("src", "dst"))
    nbytes = (int_column(ef, "bytes", m, 0, MAX_BYTES, "bytes") if "bytes" in ef.obj
              else np.zeros(m, dtype=np.int64))
    return src, dst, nbytes
