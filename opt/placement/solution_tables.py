"""The columnar P1 solution: a schedule's decisions as numpy columns that still read as the
problems.md §1.2a solution mapping, and its column-table JSON layout (``"columns": 1``).

A full-size schedule has ≈ 0.9 million compute and ≈ 0.8 million transfer events; as dicts they
take seconds to build, to validate and to encode. :class:`ColumnarSolution` keeps them as
columns — compute (task, device, start, end), transfers (source and destination compute row,
from and to device, start, end) — and builds the event dicts only when a consumer reads
``solution["compute"]`` (once, cached; ``len`` never builds them). Loads, evictions and formats
(a few hundred entries) stay rows. :meth:`ColumnarSolution.tables` is the JSON object
:meth:`opt.common.result.Result.write` writes above ``LARGE_TASKS`` compute events, and
:func:`solution_from_tables` reads it back with one-line errors naming the file, the column and
the first bad position.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from opt.common.jsonio import Fields

#: Version of the column-table layout of a solution (problems.md §1.2a, "Column tables").
SOLUTION_COLUMNS = 1
#: Largest time a schedule may name (int64 headroom for sums of times).
MAX_TIME = 2 ** 62
#: The keys of the solution mapping, in the order of the row form.
SOLUTION_KEYS = ("assignment", "compute", "transfers", "loads", "evictions", "formats")
COMPUTE_COLUMNS = ("task", "device", "start", "end")
TRANSFER_COLUMNS = ("src", "dst", "from", "to", "start", "end")


class EventRows(MutableSequence):
    """A list of event dicts built from the owner's columns on first use (cached; edits then
    go to the built list, never to the columns); ``len`` reads the column length until then.
    Compares equal to a list with the same events."""

    __slots__ = ("_owner", "_kind", "_len", "_rows")

    def __init__(self, owner: ColumnarSolution, kind: str, length: int):
        self._owner, self._kind, self._len = owner, kind, length
        self._rows: list[dict[str, Any]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        """The events as a list of dicts (built once; edits go to this list)."""
        if self._rows is None:
            self._rows = self._owner.build_rows(self._kind)
        return self._rows

    json_value = rows  # the JSON encoder's hook (opt.common.jsonio.json_default)

    def __len__(self) -> int:
        return self._len if self._rows is None else len(self._rows)

    @property
    def built(self) -> bool:
        """Whether the event dicts were built (and may since have been edited)."""
        return self._rows is not None

    def __getitem__(self, i):  # type: ignore[override]
        return self.rows()[i]

    def __setitem__(self, i, value) -> None:  # type: ignore[override]
        self.rows()[i] = value

    def __delitem__(self, i) -> None:  # type: ignore[override]
        del self.rows()[i]

    def insert(self, index: int, value: dict[str, Any]) -> None:
        self.rows().insert(index, value)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventRows):
            other = other.rows()
        return isinstance(other, list) and self.rows() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventRows({self._kind}, {self._len} events)"


class LazyAssignment(MutableMapping):
    """``assignment`` (task id → device name) of a columnar solution, built on first use
    (edits then go to the built dict)."""

    __slots__ = ("_owner", "_map")

    def __init__(self, owner: ColumnarSolution):
        self._owner = owner
        self._map: dict[str, str] | None = None

    def mapping(self) -> dict[str, str]:
        """The assignment as a dict (built once; edits go to this dict)."""
        if self._map is None:
            o = self._owner
            self._map = dict(zip(o.task, map(o.devices.__getitem__, o.device.tolist())))
        return self._map

    json_value = mapping  # the JSON encoder's hook

    def __getitem__(self, key: str) -> str:
        return self.mapping()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.mapping()[key] = value

    def __delitem__(self, key: str) -> None:
        del self.mapping()[key]

    @property
    def built(self) -> bool:
        """Whether the dict was built."""
        return self._map is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.mapping())

    def __len__(self) -> int:
        return len(self._owner.task) if self._map is None else len(self._map)

    def __repr__(self) -> str:
        return f"LazyAssignment({len(self)} tasks)"


def _int64(values: Any, n: int, what: str) -> np.ndarray:
    """``values`` as an int64 column of length ``n`` (ValueError otherwise)."""
    arr = np.asarray(values, dtype=np.int64)
    if arr.shape != (n,):
        raise ValueError(f"{what}: expected {n} entries, got shape {arr.shape}")
    return arr


def _positions(arr: np.ndarray, size: int, what: str) -> None:
    """Every entry of ``arr`` indexes a table of ``size`` rows (ValueError otherwise)."""
    if len(arr) and (int(arr.min()) < 0 or int(arr.max()) >= size):
        raise ValueError(f"{what}: positions must lie in 0..{size - 1}")


@dataclass(frozen=True)
class ComputeColumns:
    """The compute events of a solution as columns, one row per event: ``task`` ids,
    ``device`` positions in the solution's device names, ``start`` and ``end`` (ticks)."""

    task: Sequence[str]
    device: Any
    start: Any
    end: Any


@dataclass(frozen=True)
class TransferColumns:
    """The transfers of a solution as columns, one row per transfer: ``src`` / ``dst``
    compute rows of its tasks, ``from_dev`` / ``to_dev`` device positions (the JSON ``from``
    / ``to``), ``start`` and ``end`` (ticks)."""

    src: Any
    dst: Any
    from_dev: Any
    to_dev: Any
    start: Any
    end: Any


if TYPE_CHECKING:  # every consumer reads a solution as a dict: type checkers see one
    _SolutionBase = dict[str, Any]
else:  # at run time a mapping, so no code can read an empty dict's storage behind its back
    _SolutionBase = MutableMapping


class ColumnarSolution(_SolutionBase):
    """A §1.2a solution held as columns (all int64 numpy arrays, times in the instance's unit).

    ``devices``: the device names that ``device``/``from_dev``/``to_dev`` index; ``task``: the
    task id of each compute row; ``src``/``dst``: compute rows of each transfer's tasks;
    ``loads``/``evictions``: event dicts; ``formats``: block id → format. Reading it as a
    mapping gives the row form (``"compute"`` a list-like of ``{"task", "device", "start",
    "end"}`` dicts, …); :meth:`rows` gives a plain dict of lists. Once the rows are built
    (:attr:`rows_built`) they are the solution: a consumer may edit them, the columns stay;
    so is replacing or removing ``assignment``, ``compute`` or ``transfers`` or adding a key.
    """

    def __init__(self, devices: Sequence[str], compute: ComputeColumns,
                 transfers: TransferColumns, loads: list[dict[str, Any]] | None = None,
                 evictions: list[dict[str, Any]] | None = None,
                 formats: dict[str, str] | None = None):
        self.devices = tuple(devices)
        task = compute.task
        self.task = task if isinstance(task, tuple) else tuple(task)
        n, nd = len(self.task), len(self.devices)
        self.device, self.start, self.end = (_int64(a, n, k) for a, k in (
            (compute.device, "device"), (compute.start, "start"), (compute.end, "end")))
        t = transfers
        m = len(np.asarray(t.src))
        self.src, self.dst, self.from_dev, self.to_dev, self.t_start, self.t_end = (
            _int64(a, m, k) for a, k in ((t.src, "src"), (t.dst, "dst"), (t.from_dev, "from"),
                                         (t.to_dev, "to"), (t.start, "start"), (t.end, "end")))
        for arr, size, what in ((self.device, nd, "device"), (self.from_dev, nd, "from"),
                                (self.to_dev, nd, "to"), (self.src, n, "src"),
                                (self.dst, n, "dst")):
            _positions(arr, size, what)
        self._values: dict[str, Any] = {
            "assignment": LazyAssignment(self), "compute": EventRows(self, "compute", n),
            "transfers": EventRows(self, "transfers", m), "loads": list(loads or ()),
            "evictions": list(evictions or ()), "formats": dict(formats or {})}
        self._edited = False

    def compute_columns(self) -> ComputeColumns:
        """The compute columns (the arrays themselves, not copies)."""
        return ComputeColumns(self.task, self.device, self.start, self.end)

    def transfer_columns(self) -> TransferColumns:
        """The transfer columns (the arrays themselves, not copies)."""
        return TransferColumns(self.src, self.dst, self.from_dev, self.to_dev, self.t_start,
                               self.t_end)

    # ---- the mapping ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._edited |= key not in ("loads", "evictions", "formats")
        self._values[key] = value

    def __delitem__(self, key: str) -> None:
        self._edited = True
        del self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return (f"ColumnarSolution({len(self.task)} compute, {len(self.src)} transfers, "
                f"{len(self['loads'])} loads, {len(self['evictions'])} evictions)")

    @property
    def rows_built(self) -> bool:
        """Whether the compute or transfer event dicts or the assignment were built: a consumer
        may have edited them, so the validator and the writer then use the rows, not the
        columns."""
        v = self._values
        return self._edited or any(getattr(v[k], "built", True) for k in (
            "assignment", "compute", "transfers"))

    def build_rows(self, kind: str) -> list[dict[str, Any]]:
        """The ``compute`` or ``transfers`` events as dicts (in row order)."""
        names = self.devices
        if kind == "compute":
            return [{"task": t, "device": d, "start": s, "end": e} for t, d, s, e in zip(
                self.task, map(names.__getitem__, self.device.tolist()), self.start.tolist(),
                self.end.tolist())]
        ids = self.task
        return [{"src": a, "dst": b, "from": x, "to": y, "start": s, "end": e}
                for a, b, x, y, s, e in zip(
                    map(ids.__getitem__, self.src.tolist()), map(ids.__getitem__, self.dst.tolist()),
                    map(names.__getitem__, self.from_dev.tolist()),
                    map(names.__getitem__, self.to_dev.tolist()), self.t_start.tolist(),
                    self.t_end.tolist())]

    def rows(self) -> dict[str, Any]:
        """The solution as a plain §1.2a dict of lists (the events built, then cached; the
        lists and dicts are the solution's own)."""
        return {k: (v.rows() if isinstance(v, EventRows) else v.mapping()
                    if isinstance(v, LazyAssignment) else v) for k, v in self._values.items()}

    json_value = rows  # the JSON encoder's hook: the row form

    def tables(self) -> dict[str, Any]:
        """The column-table JSON object (problems.md §1.2a): numpy columns, which the JSON
        encoder writes as arrays of integers."""
        v = self._values
        return {"columns": SOLUTION_COLUMNS, "devices": list(self.devices),
                "compute": {"task": list(self.task), "device": self.device,
                            "start": self.start, "end": self.end},
                "transfers": {"src": self.src, "dst": self.dst, "from": self.from_dev,
                              "to": self.to_dev, "start": self.t_start, "end": self.t_end},
                "loads": v["loads"], "evictions": v["evictions"], "formats": v["formats"]}


def solution_from_tables(obj: dict[str, Any], source: str | None,
                         path: str = "solution") -> ColumnarSolution:
    """A :class:`ColumnarSolution` from its column-table JSON object; every error is an
    :class:`InputError` naming ``source``, the field (``solution.compute.start[17]``) and the
    value. The schedule's rules are the validator's, not checked here."""
    from opt.placement.columns import int_column  # only when reading (not on solve's path)

    f = Fields(obj, source, path)
    f.check_keys({"columns", "devices", "compute", "transfers", "loads", "evictions",
                  "formats"})
    version = f.get("columns")
    if version != SOLUTION_COLUMNS or type(version) is not int:
        raise f.error("columns", f"unsupported column layout {version!r}; this version reads "
                                 f"{SOLUTION_COLUMNS}")
    devices = _names(f, "devices")
    cf = _table(f, "compute", COMPUTE_COLUMNS)
    task = _names(cf, "task")
    n, nd = len(task), len(devices)
    cols = {k: int_column(cf, k, n, lo, hi, what) for k, lo, hi, what in (
        ("device", 0, nd - 1, "device position"), ("start", -MAX_TIME, MAX_TIME, "time"),
        ("end", -MAX_TIME, MAX_TIME, "time"))}
    tf = _table(f, "transfers", TRANSFER_COLUMNS)
    first = tf.get("src")
    m = len(first) if isinstance(first, list) else 0
    tcols = {k: int_column(tf, k, m, lo, hi, what) for k, lo, hi, what in (
        ("src", 0, n - 1, "compute row"), ("dst", 0, n - 1, "compute row"),
        ("from", 0, nd - 1, "device position"), ("to", 0, nd - 1, "device position"),
        ("start", -MAX_TIME, MAX_TIME, "time"), ("end", -MAX_TIME, MAX_TIME, "time"))}
    loads, evictions = (f.list(k, []) for k in ("loads", "evictions"))
    formats = f.get("formats", {})
    if not isinstance(formats, dict):
        raise f.error("formats", f"expected an object, got {type(formats).__name__}")
    return ColumnarSolution(
        devices, ComputeColumns(task, cols["device"], cols["start"], cols["end"]),
        TransferColumns(tcols["src"], tcols["dst"], tcols["from"], tcols["to"], tcols["start"],
                        tcols["end"]), loads, evictions, formats)


def _names(f: Fields, key: str) -> list[str]:
    """Column ``key``: a list of non-empty strings (task ids, device names)."""
    values = f.list(key)
    if not set(map(type, values)) <= {str} or "" in values:
        i = next(i for i, v in enumerate(values) if type(v) is not str or not v)
        raise f.error(f"{key}[{i}]", f"expected a non-empty string, got {values[i]!r}")
    return values


def _table(f: Fields, key: str, columns: tuple[str, ...]) -> Fields:
    """The ``compute`` / ``transfers`` object of columns, with exactly ``columns``."""
    sub = f.get(key)
    if not isinstance(sub, dict):
        raise f.error(key, f"expected an object of columns (the solution has \"columns\": "
                           f"{SOLUTION_COLUMNS}), got {type(sub).__name__}")
    t = Fields(sub, f.source, f"{f.path}.{key}")
    t.check_keys(set(columns))
    for c in columns:
        t.get(c)  # missing: an error naming the column
    return t


def solution_tables(solution: Any) -> dict[str, Any] | None:
    """The column-table JSON object of ``solution``: of its columns when it is columnar and
    its rows were never built, else of its rows (which a consumer may have edited) when
    :func:`columnar_from_rows` can hold them (None: write rows)."""
    if isinstance(solution, ColumnarSolution):
        if not solution.rows_built:
            return solution.tables()
        solution = solution.rows()
    columnar = columnar_from_rows(solution)
    return None if columnar is None else columnar.tables()



def columnar_from_rows(solution: Any) -> ColumnarSolution | None:
    """The :class:`ColumnarSolution` holding exactly the rows of ``solution`` (a §1.2a dict),
    or None when columns cannot hold them as they are: a key or event field beyond §1.2a, a
    name that is not a string, a time that is not an int64 integer, a repeated task, a
    transfer naming a task without a compute event, or an ``assignment`` that is not the
    compute events' tasks and devices in order (rows then stay rows)."""
    if not isinstance(solution, Mapping) or set(solution) - set(SOLUTION_KEYS):
        return None
    compute, transfers = solution.get("compute", []), solution.get("transfers", [])
    loads, evictions = solution.get("loads", []), solution.get("evictions", [])
    formats = solution.get("formats", {})
    if not (all(isinstance(x, list) for x in (compute, transfers, loads, evictions))
            and isinstance(formats, dict)):
        return None
    try:
        c = _event_columns(compute, COMPUTE_COLUMNS)
        t = _event_columns(transfers, TRANSFER_COLUMNS)
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if c is None or t is None or len(set(c["task"])) != len(compute):
        return None
    names = list(dict.fromkeys([*c["device"], *t["from"], *t["to"]]))
    if not _all_str(c["task"]) or not _all_str(names):
        return None
    dpos, row = {n: i for i, n in enumerate(names)}, {n: i for i, n in enumerate(c["task"])}
    if not (set(t["src"]) | set(t["dst"])) <= row.keys():
        return None
    assignment = solution.get("assignment")
    if not isinstance(assignment, dict) or list(assignment.items()) != list(
            zip(c["task"], c["device"])):
        return None
    pos = _positions_of
    return ColumnarSolution(
        names, ComputeColumns(c["task"], pos(dpos, c["device"]), c["start"], c["end"]),
        TransferColumns(pos(row, t["src"]), pos(row, t["dst"]), pos(dpos, t["from"]),
                        pos(dpos, t["to"]), t["start"], t["end"]), loads, evictions, formats)


def _positions_of(index: dict[str, int], values: list[str]) -> np.ndarray:
    """``index[v]`` of every value, as int64."""
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))


def _all_str(values: list) -> bool:
    return set(map(type, values)) <= {str}


def _event_columns(events: list, keys: tuple[str, ...]) -> dict[str, Any] | None:
    """Each field of ``events`` as a list (names) or an int64 array (``start``/``end``); None
    unless every event is a dict with exactly ``keys`` and integer times."""
    if set(map(type, events)) - {dict} or any(ev.keys() != set(keys) for ev in events):
        return None
    out: dict[str, Any] = {k: [ev[k] for ev in events] for k in keys}
    for k in ("start", "end"):
        if set(map(type, out[k])) - {int}:
            return None
        out[k] = np.array(out[k], dtype=np.int64) if events else np.zeros(0, np.int64)
        if len(events) and (int(out[k].min()) < -MAX_TIME or int(out[k].max()) > MAX_TIME):
            return None
    return out
