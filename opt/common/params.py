"""Declared method parameters: one declaration per parameter (name, check, default, help), one
error format.

A :class:`Param` names a parameter, its :class:`Check` (the accepted type and range, which also
returns the typed value), its default and what it is (units). A :class:`ParamSpec` is the set a
method accepts; :meth:`ParamSpec.parse` types a ``params`` dict against it and raises
:class:`~opt.common.errors.InputError` with field ``params.<name>``, naming the method and the
accepted names. A heuristic declares its parameters as the fields of its parameter dataclass
(:func:`param` gives each field its check and help; :func:`spec_of` reads them back), so the
dataclass, the registry, the command line and the docs read one declaration.

A spec may include specs declared elsewhere by ``"module:attribute"`` (imported on first use,
so that listing the methods imports no heuristic), and a back end's own parameter set
(:class:`Native`: every other name goes to the back end's check).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from opt.common.errors import InputError

# ---- checks -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """A param check: ``convert`` returns the typed value or raises ValueError (or TypeError);
    the error then reads "must be ``what``". ``shown``: the accepted values as a table shows
    them (default ``what``)."""

    what: str
    convert: Callable[[Any], Any]
    shown: str = ""

    def __call__(self, value: Any) -> Any:
        try:
            return self.convert(value)
        except (ValueError, TypeError):
            raise ValueError(f"must be {self.what}") from None

    @property
    def label(self) -> str:
        """The accepted values, for tables."""
        return self.shown or self.what


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not _is_bool(value)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not _is_bool(value)


def _require(ok: bool) -> None:
    if not ok:
        raise ValueError


def _to_bool(value: Any) -> bool:
    _require(_is_bool(value))
    return bool(value)


#: ``True`` / ``False`` (also NumPy booleans).
boolean = Check("true or false", _to_bool)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _to_flag(value: Any) -> bool:
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    return _to_bool(value)


#: A boolean, or one of the strings true/false, yes/no, on/off, 1/0 (command lines).
flag = Check("true or false", _to_flag, "true or false (also yes/no, on/off, 1/0)")


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    """An integer (not a boolean) in ``lo..hi`` (either end optional)."""
    def convert(value: Any) -> int:
        _require(_is_int(value) and (lo is None or value >= lo) and (hi is None or value <= hi))
        return int(value)
    what = ("an integer" if lo is None and hi is None else
            f"an integer ≥ {lo}" if hi is None else
            f"an integer ≤ {hi}" if lo is None else f"an integer in {lo}..{hi}")
    return Check(what, convert)


def number(lo: float = 0.0, hi: float | None = None, *, lo_open: bool = False) -> Check:
    """A finite number (not a boolean) ≥ ``lo`` (> ``lo`` when ``lo_open``) and ≤ ``hi``."""
    def convert(value: Any) -> float:
        _require(_is_real(value) and math.isfinite(float(value)))
        v = float(value)
        _require((v > lo if lo_open else v >= lo) and (hi is None or v <= hi))
        return v
    low = f"{'(' if lo_open else '['}{lo:g}"
    high = "∞)" if hi is None else f"{hi:g}]"
    return Check(f"a finite number in {low}, {high}", convert)


def _to_real(value: Any) -> float:
    _require(_is_real(value))
    return float(value)


#: Any real number (not a boolean); the back end checks its range.
real = Check("a number", _to_real)


def _to_positive_ints(value: Any) -> list[int]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    _require(bool(values) and all(_is_int(v) and v >= 1 for v in values))
    return [int(v) for v in values]


#: A positive integer or a list of them (returned as a list).
positive_ints = Check("a positive integer or a list of them", _to_positive_ints)


def _to_strings(value: Any) -> list[str]:
    _require(isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
    return list(value)


#: A list of strings.
strings = Check("a list of strings", _to_strings)


def auto_or(check: Check) -> Check:
    """The string ``auto``, or a value ``check`` accepts."""
    def convert(value: Any) -> Any:
        return value if value == "auto" else check.convert(value)
    return Check(f"{check.what} or be auto", convert, f"auto, or {check.label}")


def choice(*allowed: str) -> Check:
    """One of the strings ``allowed``."""
    def convert(value: Any) -> str:
        _require(value in allowed)
        return str(value)
    return Check(f"one of {', '.join(allowed)}", convert)


# ---- declarations -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Derived:
    """A default the back end derives from the instance or the run (``text`` says how)."""

    text: str


#: The default of a param declared without one.
UNDECLARED = Derived("")


@dataclass(frozen=True)
class Param:
    """One accepted param: its name, its check (type and range), what it is (units) and its
    default (a value the check accepts, or :class:`Derived`)."""

    name: str
    check: Check
    help: str = ""
    default: Any = UNDECLARED

    @property
    def shown_default(self) -> str:
        """The default as a table shows it (true/false, bare strings, Derived's text)."""
        d = self.default
        if isinstance(d, Derived):
            return d.text
        if isinstance(d, bool):
            return str(d).lower()
        return str(d)


#: The ``metadata`` key under which :func:`param` keeps a dataclass field's check and help.
PARAM_KEY = "param"


def param(default: Any, check: Check, help: str) -> Any:
    """A parameter dataclass's field: its ``default``, and its check and help in the field's
    metadata (read by :func:`spec_of`)."""
    return dataclasses.field(default=default, metadata={PARAM_KEY: (check, help)})


def spec_of(cls: type) -> ParamSpec:
    """The params declared by the fields of dataclass ``cls`` (:func:`param`), in field order,
    with the fields' defaults."""
    out = []
    for f in dataclasses.fields(cls):
        check, text = f.metadata[PARAM_KEY]
        out.append(Param(f.name, check, text, f.default))
    return ParamSpec(tuple(out))


@dataclass(frozen=True)
class Native:
    """A back end's own parameter set: ``label`` for messages, and ``check(spec, method,
    params)``, which raises InputError for a name or value the back end does not take."""

    name: str
    label: str
    check: Callable[[ParamSpec, str, Mapping[str, Any]], None]


@cache
def _imported(ref: str) -> ParamSpec:
    """The ParamSpec ``module:attribute``."""
    module, _, attr = ref.partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, ParamSpec):
        raise TypeError(f"{ref} is not a ParamSpec")
    return spec


def close_matches(name: str, known: Iterable[str]) -> list[str]:
    """Up to three of ``known`` close to ``name`` (for error messages)."""
    return difflib.get_close_matches(name, list(known), 3)


@dataclass(frozen=True)
class ParamSpec:
    """The params a method accepts: ``parts``, each a :class:`Param` or the ``"module:attr"``
    of a ParamSpec declared beside its heuristic (imported on first use), and with ``native``
    every name of that back end's own parameter set besides."""

    parts: tuple[Param | str, ...] = ()
    native: Native | None = None

    @property
    def params(self) -> tuple[Param, ...]:
        """The declared params, in order (included specs resolved)."""
        out: list[Param] = []
        for part in self.parts:
            out.extend(_imported(part).params if isinstance(part, str) else (part,))
        return tuple(out)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def defaults(self) -> dict[str, Any]:
        """The declared default values by name (none for a Derived default)."""
        return {p.name: p.default for p in self.params if not isinstance(p.default, Derived)}

    def __add__(self, other: ParamSpec) -> ParamSpec:
        return ParamSpec(self.parts + other.parts, self.native or other.native)

    def accepted(self) -> str:
        """The accepted names, for messages."""
        named = ", ".join(self.names)
        if self.native is None:
            return named or "none (the method takes no params)"
        return f"{named + ' and ' if named else ''}{self.native.label}"

    def unknown(self, method: str, name: str, close: list[str] | None = None) -> InputError:
        """The error for param ``name``, which method ``method`` does not take."""
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return InputError(f"method '{method}' takes no param {name}{hint}; accepted: "
                          f"{self.accepted()}", field=f"params.{name}")

    def parse(self, method: str, params: Mapping[str, Any], *, native: bool = True
              ) -> dict[str, Any]:
        """The typed values of the declared params in ``params``; the back end's own names
        follow untouched (checked against its parameter set unless ``native`` is False).
        InputError for an unknown or ill-typed param."""
        by_name = {p.name: p for p in self.params}
        out: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for name, value in params.items():
            p = by_name.get(name)
            if p is not None:
                try:
                    out[name] = p.check(value)
                except ValueError as exc:
                    raise InputError(f"method '{method}': param {name} {exc}, got {value!r}",
                                     field=f"params.{name}") from None
            elif self.native is None:
                raise self.unknown(method, name, close_matches(name, by_name))
            else:
                rest[name] = value
        if rest and native and self.native is not None:
            self.native.check(self, method, rest)
        return {**out, **rest}
