"""Instance fingerprints and record digests: tie a result or a cached sweep record to the exact
instance it was computed on, and detect a cached record whose numbers were edited.

``instance_fingerprint(inst)`` is ``"sha256:<hex>"`` over the instance's problem data: every
dataclass field in declaration order (arrays by dtype kind, shape and bytes; strings, numbers,
tuples and mappings canonically), except the provenance fields ``meta`` (which holds build
times) and ``source``, and the later fields of :data:`LATER_FIELDS` at their former value
(``load_timing: prefetch``). An instance written to JSON and read back has the fingerprint it had
when built. Cost: one pass over the arrays (about 0.1 s for a 900 k-task instance).

``seal(record)`` adds ``digest``, the sha256 of the record's canonical JSON (its
``instance_fingerprint`` included, ``digest`` excluded); ``seal_error(record)`` says why a
record's digest does not hold (None when it does).

Threat model: accidental edits and casual tampering of result files and cached records (a
number typed over, a file copied between folders, a record of another build). It is not
protection against an adversary who edits a record and recomputes its digest: the digest is a
plain hash (no key), recomputable by anyone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

#: Fields that describe where an instance came from, not the problem: left out of the hash.
PROVENANCE_FIELDS = frozenset({"meta", "source"})
#: Fields added after fingerprints were first recorded, hashed only when they differ from the
#: value every earlier instance had (so those fingerprints stand): field -> that value.
LATER_FIELDS = {"load_timing": "prefetch", "reshard": None}
#: The key of a record's digest.
DIGEST_KEY = "digest"
PREFIX = "sha256:"


def instance_fingerprint(inst: Any) -> str:
    """``sha256:<hex>`` of the problem data of ``inst`` (a frozen instance dataclass)."""
    h = hashlib.sha256()
    _feed(h, inst)
    return PREFIX + h.hexdigest()


def _feed(h: Any, value: Any) -> None:
    """Add ``value`` to the hash ``h`` in a canonical, type-tagged form."""
    if isinstance(value, np.ndarray):
        _feed_array(h, value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"D{type(value).__name__}(".encode())
        for f in dataclasses.fields(value):
            if f.name in LATER_FIELDS and getattr(value, f.name) == LATER_FIELDS[f.name]:
                continue
            if f.name not in PROVENANCE_FIELDS:
                h.update(f"{f.name}=".encode())
                _feed(h, getattr(value, f.name))
        h.update(b")")
    elif isinstance(value, Mapping):
        h.update(f"M{len(value)}{{".encode())
        for key in sorted(value, key=str):
            _feed(h, str(key))
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        if all(v is None or isinstance(v, str) for v in value):  # task ids, kinds: one call
            h.update(f"S{len(value)}".encode())
            h.update(orjson.dumps(list(value)))
        else:
            h.update(f"L{len(value)}[".encode())
            for v in value:
                _feed(h, v)
            h.update(b"]")
    else:
        h.update(_scalar(value))


def _scalar(value: Any) -> bytes:
    """A scalar's canonical bytes: integer-valued numbers hash alike whether int or float
    (JSON readers may return 8e10 as either)."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return f"B{value!r};".encode()
    if isinstance(value, (int, np.integer)):
        return f"N{int(value)};".encode()
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if math.isfinite(x) and x.is_integer() and abs(x) < 2 ** 63:
            return f"N{int(x)};".encode()
        return f"F{x!r};".encode()
    if isinstance(value, str):
        return b"T" + orjson.dumps(value) + b";"
    raise TypeError(f"cannot fingerprint a {type(value).__name__}")


def _feed_array(h: Any, a: np.ndarray) -> None:
    """Arrays by kind (integers as int64, floats as float64), shape and raw bytes."""
    kind = a.dtype.kind
    dtype = {"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64}.get(kind)
    if dtype is None:
        raise TypeError(f"cannot fingerprint an array of dtype {a.dtype}")
    c: np.ndarray = np.ascontiguousarray(a, dtype=dtype)
    h.update(f"A{kind if kind != 'u' else 'i'}{c.shape}".encode())
    h.update(c.data.cast("B") if c.size else b"")


# ---- record digests -----------------------------------------------------------------------

def record_digest(record: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of ``record``'s canonical JSON without its ``digest`` key."""
    body = {k: v for k, v in record.items() if k != DIGEST_KEY}
    data = orjson.dumps(body, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
                        | orjson.OPT_SERIALIZE_NUMPY)
    return PREFIX + hashlib.sha256(data).hexdigest()


def seal(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its digest (call it on the record as it will be written)."""
    body = {k: v for k, v in record.items() if k != DIGEST_KEY}
    return {**body, DIGEST_KEY: record_digest(body)}


def seal_error(record: Any) -> str | None:
    """Why ``record``'s digest does not hold (None when it does)."""
    if not isinstance(record, Mapping):
        return "not a JSON object"
    stored = record.get(DIGEST_KEY)
    if stored is None:
        return "no digest (written by an older hetopt, or the field was removed)"
    try:
        actual = record_digest(record)
    except (TypeError, orjson.JSONEncodeError):
        return "cannot be hashed"
    if stored != actual:
        return "digest mismatch: a field was edited after the record was written"
    return None


def slot_error(record: Any, slot: Mapping[str, Any]) -> str | None:
    """Why a cached ``record`` does not belong to ``slot`` (the fields that name where it is
    stored: problem, model, platform, workload, method, ...); None when every field agrees. A
    sealed record copied into another slot's file keeps a valid digest: this catches it."""
    if not isinstance(record, Mapping):
        return "not a JSON object"
    for key, want in slot.items():
        got = record.get(key)
        if got != want:
            return (f"it is the record of {key} {got!r}, this slot is {key} {want!r}: "
                    f"copied from another slot")
    return None


def fingerprint_error(reported: Any, inst: Any) -> str | None:
    """Why a result's ``instance_fingerprint`` does not match ``inst`` (None when it does or
    the result carries none)."""
    if reported is None:
        return None
    actual = inst.fingerprint  # the instance's cached instance_fingerprint
    if reported != actual:
        return (f"the result was computed on instance {str(reported)[:23]}…, not on this one "
                f"({actual[:23]}…)")
    return None
