"""JSON reading/writing (plain or gzip) and typed field access with errors naming file and field."""

from __future__ import annotations

import gzip
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import orjson

from opt.common.errors import InputError

_MISSING = object()


def read_json(path: str | Path) -> Any:
    """Parse a ``.json`` or ``.json.gz`` file; malformed content gives an :class:`InputError`."""
    path = Path(path)
    unreadable: tuple[type[Exception], ...] = (OSError, EOFError, *gzip_errors())
    try:
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gunzip(data)
        return orjson.loads(data)
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except orjson.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                         source=str(path)) from None
    except unreadable as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from None


def json_default(value: Any) -> Any:
    """Numbers orjson does not know (Fraction, Decimal, …) as floats and objects with a
    ``json_value()`` method (a columnar solution and its lazy parts,
    :mod:`opt.placement.solution_tables`) as what it returns; anything else fails. The
    ``default`` of every orjson encoding here."""
    if isinstance(value, numbers.Real):
        return float(value)
    to_json = getattr(type(value), "json_value", None)
    if to_json is not None:
        return to_json(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_bytes(obj: Any, *, indent: bool = True) -> bytes:
    """``obj`` as JSON text (UTF-8, a final newline), the one encoder of files and ``--json``
    output: NumPy arrays and scalars are numbers, non-string keys become strings and NaN or
    ±Infinity become null, so the output is always standard JSON (RFC 8259 has no NaN)."""
    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS
    if indent:
        opts |= orjson.OPT_INDENT_2
    return orjson.dumps(obj, option=opts, default=json_default)


def write_json(obj: Any, path: str | Path, *, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON (:func:`json_bytes`; gzip-compressed when the name ends in
    ``.gz``); ``indent`` None writes compact JSON, anything else two-space indentation."""
    path = Path(path)
    data = json_bytes(obj, indent=bool(indent))
    if path.name.endswith(".gz"):
        data = gzip_bytes(data)
    path.write_bytes(data)


#: payloads above this many bytes are compressed at level 1 (full-size schedules, instances)
FAST_GZIP_BYTES = 8 << 20


def gzip_level(size: int) -> int:
    """The zlib level for ``size`` bytes of JSON: 3 for small files, 1 above
    :data:`FAST_GZIP_BYTES` (≈ 0.6× the compression time for ≈ 8 % more bytes on a
    full-size schedule)."""
    return 1 if size > FAST_GZIP_BYTES else 3


def _isal() -> Any:
    """ISA-L's gzip module (``isal.igzip``, the ``fast`` extra), or None without it."""
    try:
        from isal import igzip
    except ImportError:
        return None
    return igzip


def gzip_bytes(data: bytes) -> bytes:
    """``data`` as one standard gzip stream. Above :data:`FAST_GZIP_BYTES` with ISA-L at its
    level 1 when ``isal`` is installed (a full-size schedule, 73 MB of JSON: 0.18 s and
    15.8 MB against zlib level 1's 0.61 s and 17.2 MB, docs/speed.md), else zlib at
    :func:`gzip_level`; small files always with zlib, so their bytes do not depend on it."""
    igzip = _isal() if len(data) > FAST_GZIP_BYTES else None
    if igzip is not None:
        return igzip.compress(data, compresslevel=1)
    return gzip.compress(data, compresslevel=gzip_level(len(data)))


def gunzip(data: bytes) -> bytes:
    """The bytes of a gzip stream (ISA-L's inflate when ``isal`` is installed, ≈ 0.75× zlib's
    time); a corrupt or cut stream raises one of :func:`gzip_errors`."""
    igzip = _isal()
    return (igzip or gzip).decompress(data)


def gzip_errors() -> tuple[type[Exception], ...]:
    """What :func:`gunzip` raises on a corrupt stream besides OSError and EOFError (zlib's and
    ISA-L's errors are neither)."""
    import zlib

    errors: list[type[Exception]] = [zlib.error]
    try:
        from isal.isal_zlib import error as isal_error
    except ImportError:
        pass
    else:
        errors.append(cast("type[Exception]", isal_error))  # its stub calls it an instance
    return tuple(errors)


def write_json_atomic(obj: Any, path: str | Path) -> None:
    """:func:`write_json` to a temporary file in the same folder (created if needed), flushed
    to disk, then renamed over ``path``: a killed writer leaves the old file or none, never half
    a file."""
    import os

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    write_json(obj, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    tmp.replace(path)


class Fields:
    """Typed access to one JSON object: ``Fields(obj, source, "devices[3]").num("memory_bytes")``.

    Every failure raises :class:`InputError` naming the file (``source``) and the dotted field.
    """

    def __init__(self, obj: Any, source: str | None, path: str):
        if not isinstance(obj, Mapping):
            raise InputError(f"expected an object, got {type(obj).__name__}", source=source,
                             field=path or None)
        self.obj = obj
        self.source = source
        self.path = path

    def _field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> InputError:
        return InputError(message, source=self.source, field=self._field(key))

    def get(self, key: str, default: Any = _MISSING) -> Any:
        if key in self.obj:
            return self.obj[key]
        if default is _MISSING:
            raise self.error(key, "missing required field")
        return default

    def str(self, key: str, default: Any = _MISSING) -> str:
        value = self.get(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        return value

    def num(self, key: str, default: Any = _MISSING, *, minimum: float | None = 0.0,
            strict: bool = False, allow_none: bool = False) -> float | None:
        value = self.get(key, default)
        if value is None and (allow_none or default is None):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"expected a finite number, got {value!r}")
        if minimum is not None and (value < minimum or (strict and value == minimum)):
            op = ">" if strict else "≥"
            raise self.error(key, f"must be {op} {minimum:g}, got {value!r}")
        return float(value)

    def int(self, key: str, default: Any = _MISSING, *, minimum: int | None = 0,
            maximum: int | None = None) -> int | None:
        """An integer (an integral float is accepted) in ``minimum..maximum`` (either open)."""
        value = self.get(key, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be ≥ {minimum}, got {value!r}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be ≤ {maximum}, got {value!r}")
        return value

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def list(self, key: str, default: Any = _MISSING) -> list:
        value = self.get(key, default)
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {type(value).__name__}")
        return value

    def sub(self, key: str, default: Any = _MISSING) -> Fields | None:
        value = self.get(key, default)
        if value is None and default is None:
            return None
        return Fields(value, self.source, self._field(key))

    def items(self, key: str) -> list[Fields]:
        return [Fields(v, self.source, f"{self._field(key)}[{i}]")
                for i, v in enumerate(self.list(key))]

    def check_keys(self, allowed: set[str]) -> None:
        """Reject unknown keys (typos) so a misspelt field never silently takes a default."""
        for key in self.obj:
            if key not in allowed:
                raise self.error(key, f"unknown field; allowed: {', '.join(sorted(allowed))}")
