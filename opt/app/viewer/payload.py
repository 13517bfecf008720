"""The viewer's compact data payload: a JSON header plus one binary blob of typed columns.

The blob is the concatenation of little-endian numeric arrays (each aligned to 8 bytes) and
UTF-8 string tables (``\\n``-joined); the header names every column with its byte ``offset``,
element ``count``, ``dtype`` (a JavaScript typed-array name: Int8, Uint8, Int16, Int32,
Float64) and ``enc``:

* ``raw`` — the values as stored;
* ``delta`` — per segment (``seg``: the name of an offsets column, e.g. a lane's events) the
  differences from the previous value of the segment, the first one from 0; decoded by a
  running sum in float64 (times are integers below 2^53, so decoding is exact).

Integer columns take the narrowest dtype that holds their range; times that do not fit Int32
as deltas fall back to raw Float64. The blob is gzip-compressed (``DecompressionStream`` in the
page) and base64-encoded into the HTML. :func:`decode` reads it back (tests, tools).
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_INT_TYPES = (("Int8", np.int8), ("Uint8", np.uint8), ("Int16", np.int16),
              ("Int32", np.int32))
_NP = {"Int8": np.int8, "Uint8": np.uint8, "Int16": np.int16, "Uint16": np.uint16,
       "Int32": np.int32, "Float64": np.float64}

#: How a newline inside a string of the payload is shown (U+2424 SYMBOL FOR NEWLINE).
NEWLINE_SHOWN = "\u2424"


def _narrow(values: np.ndarray) -> str | None:
    """The narrowest typed-array name holding every value of an integer array, or None."""
    if len(values) == 0:
        return "Int8"
    lo, hi = int(values.min()), int(values.max())
    for name, dt in _INT_TYPES:
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return name
    return None


@dataclass
class Blob:
    """Builder of the binary blob and its column directory."""

    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _append(self, data: bytes) -> int:
        offset = self.size
        pad = (-len(data)) % 8
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return offset

    def ints(self, name: str, values: Any) -> None:
        """An integer column in its narrowest dtype (Float64 if it exceeds Int32)."""
        a = np.asarray(values, dtype=np.int64)
        dtype = _narrow(a) or "Float64"
        self._put(name, a.astype(_NP[dtype]), dtype, "raw")

    def floats(self, name: str, values: Any) -> None:
        self._put(name, np.asarray(values, dtype=np.float64), "Float64", "raw")

    def times(self, name: str, values: Any, seg: str, offsets: np.ndarray) -> None:
        """Integer times sorted within each segment ``offsets[k]:offsets[k+1]``: delta-encoded
        per segment when the deltas fit a narrow int, else raw Float64."""
        a = np.asarray(values, dtype=np.int64)
        d = np.diff(a, prepend=0)
        starts = np.asarray(offsets[:-1], dtype=np.int64)
        starts = starts[starts < len(a)]
        d[starts] = a[starts]
        dtype = _narrow(d)
        if dtype is None:
            self._put(name, a.astype(np.float64), "Float64", "raw")
        else:
            self._put(name, d.astype(_NP[dtype]), dtype, "delta", seg=seg)

    def strings(self, name: str, values: list[str]) -> None:
        """A "\n"-joined string table; a newline inside a value (a name from a file may hold
        one) is shown as U+2424 (␤) so that the table still has one line per value."""
        text = "\n".join(v.replace("\n", NEWLINE_SHOWN) for v in values)
        data = text.encode("utf-8")
        self.columns[name] = {"offset": self._append(data), "bytes": len(data),
                              "count": len(values), "dtype": "utf8", "enc": "lines"}

    def _put(self, name: str, arr: np.ndarray, dtype: str, enc: str, **extra: Any) -> None:
        if name in self.columns:
            raise ValueError(f"column {name} written twice")
        data = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"))).tobytes()
        self.columns[name] = {"offset": self._append(data), "count": int(len(arr)),
                              "dtype": dtype, "enc": enc, **extra}

    def raw(self) -> bytes:
        return b"".join(self.parts)


def encode(header: dict[str, Any], blob: Blob, compress: bool = True) -> tuple[str, str]:
    """(header JSON, base64 blob) for the page; ``header["blob"]`` describes the blob."""
    raw = blob.raw()
    data = gzip.compress(raw, compresslevel=6, mtime=0) if compress else raw
    head = dict(header)
    head["blob"] = {"columns": blob.columns, "bytes": len(raw),
                    "compression": "gzip" if compress else "none", "stored": len(data)}
    return json.dumps(head, separators=(",", ":"), allow_nan=False), \
        base64.b64encode(data).decode("ascii")


def decode(header_json: str, blob_b64: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, columns) from :func:`encode`'s output: numeric columns as numpy arrays (delta
    columns summed back, as float64), string tables as lists."""
    head = json.loads(header_json)
    data = base64.b64decode(blob_b64)
    if head["blob"]["compression"] == "gzip":
        data = gzip.decompress(data)
    cols: dict[str, Any] = {}
    spec = head["blob"]["columns"]
    for name, c in spec.items():
        if c["dtype"] == "utf8":
            text = data[c["offset"]:c["offset"] + c["bytes"]].decode("utf-8")
            cols[name] = text.split("\n") if c["count"] else []
            continue
        dt = np.dtype(_NP[c["dtype"]]).newbyteorder("<")
        cols[name] = np.frombuffer(data, dtype=dt, count=c["count"], offset=c["offset"])
    for name, c in spec.items():
        if c.get("enc") == "delta":
            cols[name] = _undelta(cols[name], cols[c["seg"]])
    return head, cols


def _undelta(d: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    out = np.asarray(d, dtype=np.float64).copy()
    for a, b in zip(offsets[:-1], offsets[1:]):
        out[int(a):int(b)] = np.cumsum(out[int(a):int(b)])
    return out


def segments(keys: np.ndarray, n_segments: int) -> np.ndarray:
    """Offsets [n_segments + 1] of the runs of a sorted segment-key array."""
    counts = np.bincount(np.asarray(keys, dtype=np.int64), minlength=n_segments)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
