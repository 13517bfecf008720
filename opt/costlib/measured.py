"""Measured latency tables (docs/measurements.md): per-operator latencies profiled on real
devices, read from CSV or JSON, validated, and looked up exactly or by a declared
interpolation; the placement builder uses them where an entry exists and the model elsewhere.

A row is one measured operator: ``device`` (catalog device name), ``op_kind`` (an operator
kind of :mod:`opt.costlib.operators`, or ``end_to_end`` for a whole workload), the shape
``tokens`` (T_q), ``context`` (T_kv after the step), ``batch``, the optional ``share`` (the
fraction of the layer's operator the kernel computed: 1/tp for a TP shard, heads/H_kv for an
attention head group; default 1) and ``model`` (the model card; empty = any model), the
latency (``latency`` + ``unit`` s|ms|us|ns, or ``latency_us``) and ``source`` (free text).
``end_to_end`` rows name a *platform* in ``device`` and the workload in the shape columns:
``tokens`` = L_in, ``context`` = L_in + L_out, ``batch`` = B.

Interpolation (the table declares it: ``none`` or ``log-linear``) is log latency linear in
log context at equal tokens (decode sweeps) or in log tokens along tokens = context (prefill
sweeps), between two measured points of the same (device, op_kind, batch, share, model);
never outside the measured range: there the model is used and the provenance says so.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import read_json
from opt.common.units import seconds_to_ticks

#: Seconds per unit of the ``unit`` column.
UNIT_S: Mapping[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
INTERPOLATIONS = ("none", "log-linear")
END_TO_END = "end_to_end"
#: Operator kinds with a fixed name (:mod:`opt.costlib.operators`); experts match the pattern.
FIXED_KINDS = frozenset({
    "embed", "final_norm", "lm_head", "attn_norm", "q_proj", "k_proj", "v_proj", "kv_write",
    "qk", "softmax", "sv", "attn_gate", "o_proj", "add_attn", "in_proj_qkvz", "in_proj_ba",
    "conv1d", "gdn_recurrence", "gated_norm", "out_proj", "ffn_norm", "gate_proj", "up_proj",
    "act", "down_proj", "add_ffn", "router", "moe_experts", "combine"})
#: GPU kernels of a serving step that fuse several operators (vLLM's kernels, docs/measurements.md
#: "GPU kernels and collectives"): the fused QKV and gate/up GEMMs, rotary, FlashAttention
#: (qk + softmax + sv in one kernel); and the collectives, keyed by message ``bytes``,
#: ``gpus``, ``nodes`` and ``topology``.
KERNEL_KINDS = frozenset({"qkv_proj", "gate_up_proj", "rope", "flash_attn"})
COLLECTIVE_KINDS = frozenset({"all_reduce", "send_recv"})
EXPERT_KIND = re.compile(r"(expert|shared)\d+_(gate|up|act|down)")
REQUIRED = ("device", "op_kind", "tokens", "context", "batch", "source")
#: Optional work columns (kernel rows: FLOPs and bytes per GPU of the measured kernel, KV heads
#: per GPU of an attention kernel; collective rows: message bytes, GPUs, nodes, topology).
WORK_COLUMNS = ("flops", "bytes", "kv_heads", "gpus", "nodes", "topology")
COLUMNS = (frozenset(REQUIRED) | {"latency", "unit", "latency_us", "share", "model"}
           | frozenset(WORK_COLUMNS))
#: Lookup outcome codes (arrays of :meth:`MeasuredTable.lookup_s`).
NO_ENTRY, EXACT, INTERPOLATED, OUTSIDE = 0, 1, 2, 3


def known_op_kind(kind: str) -> bool:
    """Whether ``kind`` is an operator kind of :mod:`opt.costlib.operators` (or end_to_end)."""
    return (kind in FIXED_KINDS or kind in KERNEL_KINDS or kind in COLLECTIVE_KINDS
            or kind == END_TO_END or EXPERT_KIND.fullmatch(kind) is not None)


@dataclass(frozen=True)
class Measurement:
    """One validated row; ``latency_s`` in seconds; ``where`` names its file and row."""

    device: str
    op_kind: str
    tokens: int
    context: int
    batch: int
    share: float
    model: str | None
    latency_s: float
    source: str
    where: str
    flops: float | None = None
    bytes: float | None = None
    kv_heads: int | None = None
    gpus: int = 1
    nodes: int = 1
    topology: str | None = None

    def key(self) -> tuple:
        """The identity of the measured point (duplicates share it)."""
        return (self.device.lower(), self.op_kind, self.tokens, self.context, self.batch,
                round(self.share, 9), self.model, self.bytes if self.is_collective else None,
                self.gpus, self.nodes, self.topology)

    @property
    def is_collective(self) -> bool:
        """Whether the row is a collective (``all_reduce``/``send_recv``: keyed by bytes)."""
        return self.op_kind in COLLECTIVE_KINDS


@dataclass(frozen=True)
class _Line:
    """Points of one group along one axis: log axis values (sorted) and log latencies."""

    log_x: np.ndarray
    log_lat: np.ndarray
    rows: tuple[Measurement, ...]


@dataclass(frozen=True)
class _Group:
    """The points of one (device, op_kind, batch, share, model): lines at fixed tokens
    (axis: context) and the prefill diagonal tokens = context (axis: tokens)."""

    by_tokens: Mapping[int, _Line]
    diagonal: _Line | None


def _line(points: Sequence[tuple[int, Measurement]]) -> _Line:
    pts = sorted(points, key=lambda p: p[0])
    return _Line(np.log([float(x) for x, _ in pts]), np.log([m.latency_s for _, m in pts]),
                 tuple(m for _, m in pts))


def _index(rows: Sequence[Measurement]) -> dict[tuple, _Group]:
    grouped: dict[tuple, list[Measurement]] = {}
    for m in rows:
        if m.op_kind != END_TO_END and not m.is_collective:
            k = (m.device.lower(), m.op_kind, m.batch, round(m.share, 9), m.model)
            grouped.setdefault(k, []).append(m)
    out = {}
    for k, ms in grouped.items():
        tok: dict[int, list[tuple[int, Measurement]]] = {}
        for m in ms:
            tok.setdefault(m.tokens, []).append((m.context, m))
        diag = [(m.tokens, m) for m in ms if m.tokens == m.context]
        out[k] = _Group({t: _line(p) for t, p in tok.items()},
                        _line(diag) if len(diag) >= 2 else None)
    return out


def _on_line(line: _Line, x: np.ndarray, interpolate: bool
             ) -> tuple[np.ndarray, np.ndarray]:
    """(latency s or nan, code) of queries ``x`` on ``line``: exact, interpolated, outside."""
    lx = np.log(x)
    pos = np.clip(np.searchsorted(line.log_x, lx), 0, len(line.log_x) - 1)
    exact = np.isclose(line.log_x[pos], lx, rtol=0.0, atol=1e-12)
    lat = np.where(exact, np.exp(line.log_lat[pos]), np.nan)
    code = np.where(exact, EXACT, OUTSIDE)
    if interpolate and len(line.log_x) >= 2:
        inside = ~exact & (lx > line.log_x[0]) & (lx < line.log_x[-1])
        lat = np.where(inside, np.exp(np.interp(lx, line.log_x, line.log_lat)), lat)
        code = np.where(inside, INTERPOLATED, code)
    return lat, code


@dataclass(frozen=True)
class MeasuredTable:
    """A validated measured-latency table: its rows, the declared interpolation and its file."""

    rows: tuple[Measurement, ...]
    interpolate: str = "none"
    path: str = ""
    _groups: Mapping[tuple, _Group] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.interpolate not in INTERPOLATIONS:
            raise InputError(f"unknown interpolation {self.interpolate!r}; known: "
                             f"{', '.join(INTERPOLATIONS)}", source=self.path, field="interpolate")
        seen: dict[tuple, Measurement] = {}
        for m in self.rows:
            if m.key() in seen:
                raise InputError(f"duplicate measurement of {m.device} {m.op_kind} at tokens "
                                 f"{m.tokens}, context {m.context}, batch {m.batch}, share "
                                 f"{m.share:g} (first at {seen[m.key()].where})",
                                 source=self.path, field=m.where)
            seen[m.key()] = m
        object.__setattr__(self, "_groups", _index(self.rows))

    def group_for(self, device: str, op_kind: str, batch: int, share: float,
                  model: str | None) -> _Group | None:
        """The rows measured for ``model`` (else those for any model) of one operator."""
        base = (device.lower(), op_kind, batch, round(share, 9))
        return self._groups.get((*base, model)) or self._groups.get((*base, None))

    def lookup_s(self, device: str, op_kind: str, *, tokens, context, batch: int,
                 share: float = 1.0, model: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(latency in s, nan where none; code NO_ENTRY | EXACT | INTERPOLATED | OUTSIDE) of
        one operator at the shapes ``tokens``/``context`` (arrays broadcast together)."""
        t, c = np.broadcast_arrays(np.atleast_1d(np.asarray(tokens, dtype=np.float64)),
                                   np.atleast_1d(np.asarray(context, dtype=np.float64)))
        lat, code = np.full(t.shape, np.nan), np.full(t.shape, NO_ENTRY, dtype=np.int8)
        group = self.group_for(device, op_kind, batch, share, model)
        if group is None:
            return lat, code
        interp = self.interpolate == "log-linear"
        code[:] = OUTSIDE
        for tv in np.unique(t):
            sel = t == tv
            line = group.by_tokens.get(int(tv))
            if line is not None:
                lat[sel], code[sel] = _on_line(line, c[sel], interp)
        todo = (code == OUTSIDE) & (t == c)
        if group.diagonal is not None and interp and todo.any():
            d_lat, d_code = _on_line(group.diagonal, t[todo], True)
            lat[todo], code[todo] = d_lat, d_code
        return lat, code

    def end_to_end_s(self, platform: str, model: str | None, prefill: int, decode: int,
                     batch: int) -> Measurement | None:
        """The end-to-end measurement of a workload on ``platform``, if the table has one."""
        for m in self.rows:
            if (m.op_kind == END_TO_END and m.device.lower() == platform.lower()
                    and m.model in (None, model) and m.tokens == prefill
                    and m.context == prefill + decode and m.batch == batch):
                return m
        return None


# ---- reading -----------------------------------------------------------------------------------

def _int(raw: Any, name: str, where: str, path: str, minimum: int = 1) -> int:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"expected an integer, got {raw!r}", source=path,
                         field=f"{where}.{name}") from None
    if not value.is_integer() or value < minimum:
        raise InputError(f"expected an integer ≥ {minimum}, got {raw!r}", source=path,
                         field=f"{where}.{name}")
    return int(value)


def _positive(raw: Any, name: str, where: str, path: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"expected a number, got {raw!r}", source=path,
                         field=f"{where}.{name}") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"expected a finite number > 0, got {raw!r}", source=path,
                         field=f"{where}.{name}")
    return value


def _latency_s(rec: Mapping[str, Any], where: str, path: str) -> float:
    has_us = rec.get("latency_us") not in (None, "")
    has_lat = rec.get("latency") not in (None, "")
    if has_us == has_lat:
        raise InputError("give exactly one of 'latency' (with 'unit') and 'latency_us'",
                         source=path, field=f"{where}.latency")
    if has_us:
        return _positive(rec["latency_us"], "latency_us", where, path) * 1e-6
    unit = str(rec.get("unit") or "")
    if unit not in UNIT_S:
        raise InputError(f"unknown unit {unit!r}; known: {', '.join(UNIT_S)}", source=path,
                         field=f"{where}.unit")
    return _positive(rec["latency"], "latency", where, path) * UNIT_S[unit]


def _device(name: str, op_kind: str, catalog: Any, where: str, path: str) -> str:
    """The catalog spelling of a device (a platform for end_to_end rows)."""
    if catalog is None:
        return name
    try:
        if op_kind == END_TO_END:
            return str(catalog.platform(name).name)
        return str(catalog.device(name).name)
    except UnknownNameError as exc:
        raise InputError(exc.detail, source=path, field=f"{where}.device") from None


def row_from_record(rec: Mapping[str, Any], where: str, path: str,
                    catalog: Any = None) -> Measurement:
    """Validate one row (a CSV record or a JSON object) into a :class:`Measurement`."""
    unknown = sorted(set(rec) - COLUMNS)
    if unknown:
        raise InputError(f"unknown column(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(COLUMNS))}", source=path, field=where)
    for name in REQUIRED:
        if rec.get(name) in (None, ""):
            raise InputError("missing required value", source=path, field=f"{where}.{name}")
    kind = str(rec["op_kind"])
    if not known_op_kind(kind):
        raise InputError(f"unknown op_kind {kind!r}; known: {', '.join(sorted(FIXED_KINDS))}, "
                         f"expert<e>_gate|up|act|down, shared<s>_…, {END_TO_END}",
                         source=path, field=f"{where}.op_kind")
    tokens = _int(rec["tokens"], "tokens", where, path)
    context = _int(rec["context"], "context", where, path)
    if context < tokens:
        raise InputError(f"context {context} < tokens {tokens} (the new tokens are part of "
                         "the context)", source=path, field=f"{where}.context")
    share = 1.0 if rec.get("share") in (None, "") else _positive(rec["share"], "share",
                                                                  where, path)
    if share > 1.0:
        raise InputError(f"share must be in (0, 1], got {rec['share']!r}", source=path,
                         field=f"{where}.share")
    work = _work_columns(rec, kind, where, path)
    return Measurement(device=_device(str(rec["device"]), kind, catalog, where, path),
                       op_kind=kind, tokens=tokens, context=context,
                       batch=_int(rec["batch"], "batch", where, path), share=share,
                       model=str(rec["model"]) if rec.get("model") not in (None, "") else None,
                       latency_s=_latency_s(rec, where, path), source=str(rec["source"]),
                       where=where, **work)


def _work_columns(rec: Mapping[str, Any], kind: str, where: str, path: str) -> dict[str, Any]:
    """The optional work columns of a row (collective rows need ``bytes`` and ``gpus``)."""
    def given(name: str) -> bool:
        return rec.get(name) not in (None, "")

    out: dict[str, Any] = {}
    for name in ("flops", "bytes"):
        if given(name):
            out[name] = _positive(rec[name], name, where, path)
    for name in ("kv_heads", "gpus", "nodes"):
        if given(name):
            out[name] = _int(rec[name], name, where, path)
    if given("topology"):
        out["topology"] = str(rec["topology"])
    if kind in COLLECTIVE_KINDS:
        for name in ("bytes", "gpus"):
            if name not in out:
                raise InputError(f"a {kind} row needs '{name}'", source=path,
                                 field=f"{where}.{name}")
        if out["gpus"] < 2:
            raise InputError(f"a {kind} needs gpus ≥ 2, got {out['gpus']}", source=path,
                             field=f"{where}.gpus")
    return out


def _read_csv(path: str) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """(records with their 'row N' names, header settings of leading ``# key: value`` lines;
    leading ``##`` lines are free comments)."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    settings: dict[str, str] = {}
    body_start = 0
    for i, line in enumerate(lines):
        if not line.startswith("#"):
            body_start = i
            break
        if line.startswith("##"):
            continue  # a free comment
        key, sep, value = line[1:].partition(":")
        if not sep:
            raise InputError(f"expected '# key: value' (or a '## comment'), got {line!r}",
                             source=path, field=f"row {i + 1}")
        settings[key.strip()] = value.strip()
    else:
        body_start = len(lines)
    reader = csv.DictReader(lines[body_start:])
    records = []
    for rec in reader:
        where = f"row {body_start + reader.line_num}"  # the line number in the file
        if None in rec:
            raise InputError(f"more values than columns ({len(reader.fieldnames or [])})",
                             source=path, field=where)
        if any(v not in (None, "") for v in rec.values()):
            records.append((where, rec))
    return records, settings


def read_measurements(path: str | Path, catalog: Any = None) -> MeasuredTable:
    """Read and validate a measured-latency table (``.csv`` or ``.json``; docs/measurements.md);
    device names are checked against ``catalog`` when given."""
    p = str(path)
    if not Path(p).exists():
        raise InputError("no such file", source=p)
    if p.endswith(".csv"):
        records, settings = _read_csv(p)
        unknown = sorted(set(settings) - {"interpolate", "source"})
        if unknown:
            raise InputError(f"unknown header setting(s) {', '.join(unknown)}; known: "
                             "interpolate, source", source=p, field="header")
        interpolate = settings.get("interpolate", "none")
    else:
        obj = read_json(p)
        if not isinstance(obj, dict) or not isinstance(obj.get("rows"), list):
            raise InputError("expected an object with a 'rows' list", source=p, field="rows")
        unknown = sorted(set(obj) - {"schema", "interpolate", "source", "rows"})
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(unknown)}", source=p, field="")
        if obj.get("schema", 1) != 1:
            raise InputError(f"unsupported schema {obj.get('schema')!r}; known: 1", source=p,
                             field="schema")
        records = []
        for i, rec in enumerate(obj["rows"]):
            if not isinstance(rec, dict):
                raise InputError(f"expected an object, got {rec!r}", source=p,
                                 field=f"rows[{i}]")
            records.append((f"rows[{i}]", rec))
        interpolate = str(obj.get("interpolate", "none"))
    if not records:
        raise InputError("the table has no rows", source=p, field="rows")
    rows = tuple(row_from_record(rec, where, p, catalog) for where, rec in records)
    return MeasuredTable(rows=rows, interpolate=interpolate, path=p)


def write_measurements_csv(table: MeasuredTable, path: str | Path,
                           header: str = "") -> None:
    """Write ``table`` as CSV (``latency_us`` column) with its interpolation setting."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        for line in header.splitlines():
            fh.write(f"## {line}\n")
        fh.write(f"# interpolate: {table.interpolate}\n")
        w = csv.writer(fh)
        work = any(m.flops or m.bytes or m.kv_heads or m.gpus > 1 or m.topology
                   for m in table.rows)
        w.writerow(["device", "op_kind", "model", "tokens", "context", "batch", "share",
                    "latency_us", *(WORK_COLUMNS if work else ()), "source"])
        for m in table.rows:
            extra = ([_fmt(m.flops), _fmt(m.bytes), m.kv_heads or "", m.gpus, m.nodes,
                      m.topology or ""] if work else [])
            w.writerow([m.device, m.op_kind, m.model or "", m.tokens, m.context, m.batch,
                        f"{m.share:g}", f"{m.latency_s * 1e6:.12g}", *extra, m.source])


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


# ---- the placement builder's hook ---------------------------------------------------------------

def apply_measurements(cost: np.ndarray, table: MeasuredTable, *, kinds: Sequence[str],
                       shares: Sequence[float], device_types: Sequence[str], tokens: np.ndarray,
                       context: np.ndarray, batch: int, model: str, time_unit: str
                       ) -> tuple[np.ndarray, dict[str, Any]]:
    """Replace the model's task costs ``cost`` [steps, K, D] (integer ticks, −1 illegal) by the
    table's latencies where it has an exact or interpolated entry for the task's operator kind
    ``kinds[k]``, share ``shares[k]`` and device type ``device_types[d]`` at each step's
    ``tokens``/``context``; returns the new array and the provenance for ``meta.measurements``
    (counts of legal (step, task, device) costs by origin)."""
    out = cost.copy()
    counts = dict.fromkeys(("exact", "interpolated", "model_no_entry",
                            "model_outside_range"), 0)
    outside: set[str] = set()
    memo: dict[tuple[str, str, float], tuple[np.ndarray, np.ndarray]] = {}
    for k, kind in enumerate(kinds):
        for d, dev in enumerate(device_types):
            legal = cost[:, k, d] >= 0
            if not legal.any():
                continue
            key = (dev, kind, round(float(shares[k]), 9))
            if key not in memo:
                memo[key] = table.lookup_s(dev, kind, tokens=tokens, context=context,
                                           batch=batch, share=float(shares[k]), model=model)
            lat, code = memo[key]
            use = legal & ((code == EXACT) | (code == INTERPOLATED))
            if use.any():
                out[use, k, d] = seconds_to_ticks(lat[use], time_unit)
            counts["exact"] += int(np.sum(legal & (code == EXACT)))
            counts["interpolated"] += int(np.sum(legal & (code == INTERPOLATED)))
            counts["model_no_entry"] += int(np.sum(legal & (code == NO_ENTRY)))
            n_out = int(np.sum(legal & (code == OUTSIDE)))
            counts["model_outside_range"] += n_out
            if n_out:
                outside.add(f"{dev}:{kind}")
    return out, {"file": table.path, "interpolate": table.interpolate, "rows": len(table.rows),
                 "sources": sorted({m.source for m in table.rows}),
                 "task_costs": {**counts, "model": counts["model_no_entry"]
                                + counts["model_outside_range"]},
                 "outside_range": sorted(outside)}


def provenance_line(prov: dict[str, Any]) -> str:
    """One line of ``meta.measurements``: where the task costs came from."""
    n = prov["task_costs"]
    line = (f"measurements {prov['file']}: {n['exact']:,} task costs exact, "
            f"{n['interpolated']:,} interpolated, {n['model']:,} from the model "
            f"({n['model_outside_range']:,} outside the measured range)")
    if prov.get("outside_range"):
        line += f"; outside the range: {', '.join(prov['outside_range'][:6])}"
        line += " …" if len(prov["outside_range"]) > 6 else ""
    return line
