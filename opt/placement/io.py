"""The JSON reader of P1 placement instances (problems.md §1.2a): validate the file's shape
and build a :class:`~opt.placement.instance.PlacementInstance` (errors name file and field).

Large files take a fast path (bulk column extraction with numpy checks); any irregularity
reruns the field-by-field path, whose error names the offending field. A file with
``"columns": 1`` holds its task and edge tables as columns (problems.md §1.2b), read by
:mod:`opt.placement.columns`; a ``.npz`` file is the binary column container (§1.2c,
:mod:`opt.placement.npz`), whose header goes through :func:`instance_from_header` too. The
writer is :meth:`PlacementInstance.to_dict` / :meth:`PlacementInstance.write`.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.common.jsonio import Fields, read_json
from opt.placement.instance import (
    DEFAULT_STORAGE,
    MAX_BYTES,
    MAX_LABEL,
    MAX_TICKS,
    PHASES,
    SCHEMA,
    Device,
    Layout,
    Links,
    PlacementInstance,
)
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.npz import open_container
from opt.placement.slo import Slo, with_goal

#: the top-level fields of an instance file other than its task and edge tables (§1.2a)
HEADER_KEYS = frozenset({"schema", "problem", "time_unit", "devices", "links", "blocks",
                         "layout", "meta", "objective", "slo", "load_timing"})
#: reads the task and edge tables: (the file's top-level fields, device index, block index,
#: number of devices) -> (ids, kinds, cost, task_block, phase, step, layer, shard, src, dst,
#: bytes, the task index or None); errors name the file and the table
TableReader = Callable[[Fields, dict[str, int], dict[str, int], int], tuple]


def instance_from_dict(obj: Any, source: str | None = None) -> PlacementInstance:
    """Validate the problems.md §1.2a JSON form (task and edge tables as rows, or as column
    tables, §1.2b) and build the instance (errors name file and field)."""
    f = Fields(obj, source, "")
    f.check_keys(set(HEADER_KEYS | {"columns", "tasks", "edges"}))
    return instance_from_header(f, _column_tables if "columns" in obj else _row_tables)


def instance_from_header(f: Fields, tables: TableReader) -> PlacementInstance:
    """Build the instance from the top-level fields in ``f`` (schema, devices, links, blocks,
    layout, meta, objective, slo, load_timing; checked here) and the task and edge tables that ``tables``
    reads (rows, JSON columns, or the binary container's arrays)."""
    schema = f.get("schema")
    if schema != SCHEMA:
        raise f.error("schema", f"unsupported schema {schema!r}; this version reads {SCHEMA}")
    problem = f.str("problem")
    if problem not in ("placement", "layout"):
        raise f.error("problem", f"expected 'placement' or 'layout', got {f.obj['problem']!r}")
    time_unit = f.str("time_unit", "ns")
    devices = _devices(f)
    dindex = {dv.name: i for i, dv in enumerate(devices)}
    links = _links(f, devices)
    layout = _layout(f)
    if problem == "layout" and layout.memory_budget is None:
        raise f.error("problem", "a layout instance (problems.md §2) needs "
                                 "layout.memory_budget")
    block_ids, block_bytes, block_load = _blocks(f, dindex, len(devices), layout.formats)
    bindex = {b: i for i, b in enumerate(block_ids)}
    *cols, tindex = tables(f, dindex, bindex, len(devices))
    ids, kinds, cost, task_block, phase, step, layer, shard, src, dst, nbytes = cols
    inst = build_instance(
        time_unit=time_unit, devices=devices, links=links,
        tasks=TaskColumns(ids, cost, kind=kinds, phase=phase, step=step, layer=layer, shard=shard),
        edges=EdgeColumns(src, dst, nbytes),
        blocks=BlockColumns(block_ids, block_bytes, load=block_load, task_block=task_block,
                            layout=layout),
        meta=_object(f, "meta"), source=f.source, load_timing=f.str("load_timing", "prefetch"))
    if tindex is not None:  # ids are unique (build_instance checked): it is task_index
        inst.__dict__["task_index"] = tindex
    return _with_goal(inst, f)


def _devices(f: Fields) -> list[Device]:
    """``devices``: name, class and weight capacity (bytes, null = unlimited) of each."""
    devices = []
    for df in f.items("devices"):
        df.check_keys({"name", "class", "weight_capacity"})
        devices.append(Device(df.str("name"), df.str("class"),
                              df.int("weight_capacity", None, maximum=MAX_BYTES)))
    return devices


def _links(f: Fields, devices: list[Device]) -> Links:
    """``links``: topology, contention, the default latency (ticks) and bandwidth (bytes per
    tick) and the per-pair exceptions."""
    lf = f.sub("links", {})
    assert lf is not None  # a default is given
    lf.check_keys({"topology", "contention", "default", "pairs"})
    default = lf.sub("default", {})
    assert default is not None
    pairs = []
    for pf in lf.items("pairs") if "pairs" in lf.obj else []:
        pf.check_keys({"src", "dst", "latency", "bandwidth"})
        pairs.append((pf.str("src"), pf.str("dst"), pf.int("latency", maximum=MAX_TICKS),
                      pf.num("bandwidth", strict=True)))
    latency = default.int("latency", 0, maximum=MAX_TICKS)
    bandwidth = default.num("bandwidth", 1.0, strict=True)
    assert latency is not None and bandwidth is not None  # defaults are given
    return make_links(devices, lf.str("topology", "full"), lf.bool("contention", True),
                      latency, bandwidth, pairs, f.source)


def _layout(f: Fields) -> Layout:
    """``layout``: the formats offered, fixed blocks, the default, storage multipliers and the
    memory budget (bytes)."""
    lay = f.sub("layout", {})
    assert lay is not None  # a default is given
    lay.check_keys({"formats", "fixed", "default", "storage_multiplier", "memory_budget"})
    default_fmt = lay.str("default", "linear")
    formats = tuple(lay.list("formats", [default_fmt]))
    for i, fmt in enumerate(formats):
        if not isinstance(fmt, str) or not fmt:
            raise lay.error(f"formats[{i}]", f"expected a format name, got {fmt!r}")
    return Layout(formats=formats, fixed=_str_map(lay, "fixed"), default=default_fmt,
                  storage_multiplier={**DEFAULT_STORAGE, **_multipliers(lay)},
                  memory_budget=lay.int("memory_budget", None, maximum=MAX_BYTES))


def _blocks(f: Fields, dindex: dict[str, int], nd: int, formats: tuple[str, ...]
            ) -> tuple[list[str], list[int | None], dict[str, np.ndarray]]:
    """``blocks``: ids, bytes and load durations (format -> int64 [blocks, devices], ticks,
    -1 = cannot be loaded there)."""
    blocks = f.items("blocks") if "blocks" in f.obj else []
    block_ids, block_bytes = [], []
    block_load = {fmt: np.full((len(blocks), nd), -1, dtype=np.int64)
                  for fmt in formats}
    for b, bf in enumerate(blocks):
        bf.check_keys({"id", "bytes", "load"})
        block_ids.append(bf.str("id"))
        block_bytes.append(bf.int("bytes", maximum=MAX_BYTES))
        load = bf.sub("load", {})
        assert load is not None
        for dname, per_fmt in load.obj.items():
            if dname not in dindex:
                raise load.error(dname, f"unknown device '{dname}'")
            pf = load.sub(dname)
            assert pf is not None
            for fmt in per_fmt:
                if fmt not in block_load:
                    raise pf.error(fmt, f"format '{fmt}' is not in layout.formats "
                                        f"{list(formats)}")
                block_load[fmt][b, dindex[dname]] = pf.int(fmt, maximum=MAX_TICKS)
    return block_ids, block_bytes, block_load


def _column_tables(f: Fields, dindex: dict[str, int], bindex: dict[str, int], nd: int
                   ) -> tuple:
    """The column tables of a ``"columns": 1`` file (§1.2b, :mod:`opt.placement.columns`)."""
    # a format seam: the column reader loads only for a column file, never for rows (every
    # bundled instance, a solve's path: tests/cli/test_startup.py)
    from opt.placement.columns import column_tables

    return (*column_tables(f, f.obj, dindex, bindex, nd), None)


def _row_tables(f: Fields, dindex: dict[str, int], bindex: dict[str, int], nd: int):
    """The columns of the row tables (§1.2a) and the task index (id -> position): the fast
    path, and on any irregularity the checked path, whose error names the offending field."""
    raw_tasks = f.list("tasks")
    raw_edges = f.list("edges", [])
    try:
        return _fast_columns(raw_tasks, raw_edges, dindex, bindex, nd)
    except (KeyError, TypeError, ValueError, AttributeError):
        return _checked_columns(f, f.obj, dindex, bindex, nd)


def _object(f: Fields, key: str) -> dict:
    """An optional JSON object (``{}`` when absent or null)."""
    value = f.get(key, None)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise f.error(key, f"expected an object, got {type(value).__name__}")
    return value


def _multipliers(f: Fields) -> dict[str, float]:
    """``layout.storage_multiplier``: format → a finite factor > 0."""
    value = _object(f, "storage_multiplier")
    sub = Fields(value, f.source, f"{f._field('storage_multiplier')}")
    return {k: float(sub.num(k, strict=True) or 0.0) for k in value}


def _str_map(f: Fields, key: str) -> dict[str, str]:
    """An optional object of strings to strings (e.g. ``layout.fixed``: block → format)."""
    value = _object(f, key)
    for k, v in value.items():
        if not isinstance(v, str) or not v:
            raise f.error(f"{key}.{k}", f"expected a format name, got {v!r}")
    return dict(value)


def _with_goal(inst: PlacementInstance, f: Fields) -> PlacementInstance:
    """The optional ``objective`` and ``slo`` (opt.placement.slo), errors naming the file."""
    obj = f.obj
    if "objective" not in obj and "slo" not in obj:
        return inst

    try:
        slo = Slo.from_dict(obj["slo"]) if obj.get("slo") is not None else None
        return with_goal(inst, obj.get("objective", "makespan"), slo)
    except InputError as exc:
        field = f"{f.path}.{exc.field}" if f.path and exc.field else exc.field
        raise InputError(exc.detail, source=f.source, field=field) from None


def _has_bool(values: list) -> bool:
    """JSON true/false where an integer is required (numpy would silently read them as 1/0)."""
    return bool in set(map(type, values))


_TASK_KEYS = frozenset({"id", "cost", "block", "kind", "phase", "step", "layer", "shard"})
_EDGE_KEYS = frozenset({"src", "dst", "bytes"})


def _fast_columns(tasks: list, edges: list, dindex: dict[str, int], bindex: dict[str, int],
                  nd: int):
    """Columns of well-formed task and edge lists, with bulk checks (raises on anything odd).
    Fields are pulled with C-level getters (itemgetter / methodcaller mapped over the lists),
    not per-task Python code."""
    n = len(tasks)
    if not _TASK_KEYS.issuperset(chain.from_iterable(tasks)):
        raise KeyError("unknown task key")
    ids = list(map(itemgetter("id"), tasks))
    if set(map(type, ids)) - {str} or not all(ids):
        raise TypeError("task id")
    costs = list(map(itemgetter("cost"), tasks))
    lens = np.fromiter(map(len, costs), dtype=np.int64, count=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    cols = np.fromiter(map(dindex.__getitem__, chain.from_iterable(costs)), dtype=np.int64,
                       count=len(rows))
    vals = list(chain.from_iterable(map(dict.values, costs)))
    v = np.array(vals)
    if v.dtype.kind != "i" or (len(v) and (v.min() < 0 or v.max() > MAX_TICKS)) \
            or _has_bool(vals):
        raise ValueError("durations")
    cost = np.full((n, nd), -1, dtype=np.int64)
    cost[rows, cols] = v
    block_of: dict[str | None, int] = dict(bindex.items())
    block_of[None] = -1
    task_block = np.fromiter(map(block_of.__getitem__,
                                 map(methodcaller("get", "block"), tasks)), dtype=np.int64,
                             count=n)
    kinds = list(map(methodcaller("get", "kind"), tasks))
    phase_of: dict[str | None, int] = {None: -1, **{p: i for i, p in enumerate(PHASES)}}
    phase = np.fromiter(map(phase_of.__getitem__, map(methodcaller("get", "phase"), tasks)),
                        dtype=np.int8, count=n)
    ints = []
    for key in ("step", "layer", "shard"):
        raw = list(map(methodcaller("get", key, -1), tasks))
        a = np.array(raw)
        if len(a) and (a.dtype.kind != "i" or _has_bool(raw)):
            raise ValueError(key)
        # -1 stands for an absent key: an explicit negative (or too large) value goes to the
        # checked path, which names it
        absent = n - sum(map(methodcaller("__contains__", key), tasks))
        if len(a) and (a.min() < -1 or a.max() > MAX_LABEL or int((a == -1).sum()) != absent):
            raise ValueError(key)
        ints.append(a.astype(np.int64))
    if edges and not _EDGE_KEYS.issuperset(chain.from_iterable(edges)):
        raise KeyError("unknown edge key")
    tindex = dict(zip(ids, range(n)))
    src, dst = (np.fromiter(map(tindex.__getitem__, map(itemgetter(k), edges)),
                            dtype=np.int64, count=len(edges)) for k in ("src", "dst"))
    raw_nb = list(map(methodcaller("get", "bytes", 0), edges))
    nb = np.array(raw_nb)
    if len(nb) and (nb.dtype.kind != "i" or nb.min() < 0 or nb.max() > MAX_BYTES
                    or _has_bool(raw_nb)):
        raise ValueError("bytes")
    return (ids, kinds, cost, task_block, phase, *ints, src, dst, nb.astype(np.int64), tindex)


def _checked_columns(f: Fields, obj: Any, dindex: dict[str, int], bindex: dict[str, int],
                     nd: int):
    """The same columns, field by field, raising an InputError that names the bad field."""
    tasks = f.items("tasks")
    n = len(tasks)
    ids, kinds = [], []
    cost = np.full((n, nd), -1, dtype=np.int64)
    task_block = np.full(n, -1, dtype=np.int64)
    phase = np.full(n, -1, dtype=np.int8)
    step = np.full(n, -1, dtype=np.int64)
    layer = np.full(n, -1, dtype=np.int64)
    shard = np.full(n, -1, dtype=np.int64)
    for i, tf in enumerate(tasks):
        tf.check_keys({"id", "cost", "block", "kind", "phase", "step", "layer", "shard"})
        ids.append(tf.str("id"))
        cf = tf.sub("cost")
        for dname in cf.obj:
            if dname not in dindex:
                raise cf.error(dname, f"unknown device '{dname}' in task '{ids[-1]}'")
            cost[i, dindex[dname]] = cf.int(dname, minimum=-MAX_TICKS, maximum=MAX_TICKS)
            if cost[i, dindex[dname]] < 0:
                raise cf.error(dname, f"task '{ids[-1]}' has negative duration "
                                      f"{cf.obj[dname]!r}")
        blk = tf.get("block", None)
        if blk is not None:
            if not isinstance(blk, str) or blk not in bindex:
                raise tf.error("block", f"unknown block '{blk}' in task '{ids[-1]}'")
            task_block[i] = bindex[blk]
        kinds.append(tf.get("kind", None))
        ph = tf.get("phase", None)
        if ph is not None:
            if ph not in PHASES:
                raise tf.error("phase", f"expected prefill or decode, got {ph!r}")
            phase[i] = PHASES.index(ph)
        for key, arr in (("step", step), ("layer", layer), ("shard", shard)):
            v = tf.int(key, None, maximum=MAX_LABEL)
            if v is not None:
                arr[i] = v
    tindex = {t: i for i, t in enumerate(ids)}
    edges = f.items("edges") if "edges" in obj else []
    m = len(edges)
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    nbytes = np.empty(m, dtype=np.int64)
    for k, ef in enumerate(edges):
        ef.check_keys({"src", "dst", "bytes"})
        for key, arr in (("src", src), ("dst", dst)):
            tid = ef.get(key)
            if not isinstance(tid, str) or tid not in tindex:
                raise ef.error(key, f"edge to an unknown task '{tid}'")
            arr[k] = tindex[tid]
        nbytes[k] = ef.int("bytes", 0, minimum=-MAX_BYTES, maximum=MAX_BYTES)
        if nbytes[k] < 0:
            raise ef.error("bytes", f"negative bytes {ef.obj['bytes']!r}")
    return ids, kinds, cost, task_block, phase, step, layer, shard, src, dst, nbytes, tindex


def read_instance(path: str | Path) -> PlacementInstance:
    """Read a placement instance (``.json``, ``.json.gz``, or the binary column container
    ``.npz``, :mod:`opt.placement.npz`)."""
    if str(path).endswith(".npz"):
        return _read_container(path)
    return instance_from_dict(read_json(path), source=str(path))


def _read_container(path: str | Path) -> PlacementInstance:
    """The binary column container (§1.2c): its header through the checks of the JSON form,
    its arrays through :mod:`opt.placement.npz`'s."""
    f, tables = open_container(path)
    f.check_keys(set(HEADER_KEYS | {"container", "kind_names"}))
    return instance_from_header(f, tables)
