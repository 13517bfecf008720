"""Validated ``params`` of every method of ``solvers.solve``: one helper, one error format.

Each method of :mod:`solvers.registry` declares the params it accepts as a :class:`ParamSpec`:
named params, each with a check that returns the typed value, and optionally a back end whose
own parameter set covers every other name (``native``):

* ``"cpsat"``: fields of OR-Tools' ``SatParameters``; a value is accepted when
  :func:`models.placement.cpsat.make_solver` can apply it (the very call the back ends make);
* ``"highs"``: HiGHS option names; a value is accepted when ``highspy.Highs.setOptionValue``
  takes it (the call Pyomo's appsi interface makes for each option).

An unknown or ill-typed param raises :class:`~opt.common.errors.InputError` with field
``params.<name>``, naming the method and the accepted names. The back ends receive ``params``
untouched; those that need typed values (Bifocal's weights, the serving searches' switches)
call :meth:`ParamSpec.parse` themselves. Range checks that belong to a back end's own logic
(e.g. ``cpsat-blocks``' time limits > 0) stay in the back end.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError

#: A param check: returns the typed value, raises ``ValueError("must be …")`` otherwise.
Check = Callable[[Any], Any]


# ---- checks -------------------------------------------------------------------------------------

def boolean(value: Any) -> bool:
    """``True`` / ``False`` (also NumPy booleans)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError("must be true or false")
    return bool(value)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def flag(value: Any) -> bool:
    """A boolean, or one of the strings true/false, yes/no, on/off, 1/0 (command lines)."""
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    return boolean(value)


def _close_matches(name: str, known: Any) -> list[str]:
    """Up to three of ``known`` close to ``name`` (for the error message; difflib is imported
    only then)."""
    import difflib

    return difflib.get_close_matches(name, known, 3)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    """An integer (not a boolean) in ``lo..hi`` (either end optional)."""
    def check(value: Any) -> int:
        if not _is_int(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
            what = ("an integer" if lo is None and hi is None else
                    f"an integer ≥ {lo}" if hi is None else
                    f"an integer ≤ {hi}" if lo is None else f"an integer in {lo}..{hi}")
            raise ValueError(f"must be {what}")
        return int(value)
    return check


def number(lo: float = 0.0, hi: float | None = None, *, lo_open: bool = False) -> Check:
    """A finite number (not a boolean) ≥ ``lo`` (> ``lo`` when ``lo_open``) and ≤ ``hi``."""
    def check(value: Any) -> float:
        ok = _is_real(value) and math.isfinite(float(value))
        if ok:
            v = float(value)
            ok = (v > lo if lo_open else v >= lo) and (hi is None or v <= hi)
        if not ok:
            low = f"{'(' if lo_open else '['}{lo:g}"
            high = "∞)" if hi is None else f"{hi:g}]"
            raise ValueError(f"must be a finite number in {low}, {high}")
        return float(value)
    return check


def real(value: Any) -> float:
    """Any real number (not a boolean); the back end checks its range."""
    if not _is_real(value):
        raise ValueError("must be a number")
    return float(value)


def positive_ints(value: Any) -> list[int]:
    """A positive integer or a list of them (returned as a list)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or not all(_is_int(v) and v >= 1 for v in values):
        raise ValueError("must be a positive integer or a list of them")
    return [int(v) for v in values]


def strings(value: Any) -> list[str]:
    """A list of strings."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings")
    return list(value)


def auto_or(check: Check) -> Check:
    """The string ``auto``, or a value ``check`` accepts."""
    def either(value: Any) -> Any:
        if value == "auto":
            return value
        try:
            return check(value)
        except ValueError as exc:
            raise ValueError(f"{exc} or be auto") from None
    return either


def choice(*allowed: str) -> Check:
    """One of the strings ``allowed``."""
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return str(value)
    return check


# ---- specs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One accepted param: its name, its check and what it is (units)."""

    name: str
    check: Check
    doc: str = ""


_NATIVE_LABEL = {"cpsat": "the CP-SAT parameters (fields of OR-Tools' SatParameters)",
                 "highs": "the HiGHS options"}


@dataclass(frozen=True)
class ParamSpec:
    """The params a method accepts: ``params`` by name, and with ``native`` ("cpsat" or
    "highs") every name of that back end's own parameter set besides."""

    params: tuple[Param, ...] = ()
    native: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def __add__(self, other: ParamSpec) -> ParamSpec:
        return ParamSpec(self.params + other.params, self.native or other.native)

    def accepted(self) -> str:
        """The accepted names, for messages."""
        named = ", ".join(self.names)
        if self.native is None:
            return named or "none (the method takes no params)"
        return f"{named + ' and ' if named else ''}{_NATIVE_LABEL[self.native]}"

    def unknown(self, method: str, name: str, close: list[str] | None = None) -> InputError:
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
                raise self.unknown(method, name, _close_matches(name, by_name))
            else:
                rest[name] = value
        if rest and native:
            {"cpsat": _check_cpsat, "highs": _check_highs}[self.native](self, method, rest)
        return {**out, **rest}


# ---- the back ends' own parameter sets ----------------------------------------------------------

def _pb_type(field: Any) -> str:
    """What a SatParameters field takes, from its protobuf descriptor."""
    from google.protobuf.descriptor import FieldDescriptor as F

    if field.type == F.TYPE_ENUM:
        values = ", ".join(v.name for v in field.enum_type.values)
        kind = (f"a {field.enum_type.name} ({values}); OR-Tools' Python parameters take enums "
                f"only as their own enum objects, so this field cannot be set through params")
    else:
        kind = {F.TYPE_BOOL: "true or false", F.TYPE_STRING: "a string",
                F.TYPE_DOUBLE: "a number", F.TYPE_FLOAT: "a number"}.get(field.type,
                                                                           "an integer")
    repeated = field.is_repeated if hasattr(field, "is_repeated") \
        else field.label == F.LABEL_REPEATED
    return f"a list, each {kind}" if repeated else kind


def _check_cpsat(spec: ParamSpec, method: str, params: Mapping[str, Any]) -> None:
    """Each name must be a SatParameters field and ``make_solver`` must be able to set it."""
    from ortools.sat import sat_parameters_pb2

    from models.options import SolveOptions
    from models.placement.cpsat import make_solver

    fields = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    for name, value in params.items():
        if name not in fields:
            raise spec.unknown(method, name,
                               _close_matches(name, list(spec.names) + list(fields)))
        try:
            make_solver({name: value}, SolveOptions(), None)
        except (TypeError, ValueError, AttributeError):
            raise InputError(f"method '{method}': CP-SAT parameter {name} must be "
                             f"{_pb_type(fields[name])}, got {value!r}",
                             field=f"params.{name}") from None


def _check_highs(spec: ParamSpec, method: str, params: Mapping[str, Any]) -> None:
    """Each name must be a HiGHS option that ``setOptionValue`` accepts with the value (on a
    scratch ``Highs``; its console output is captured, as Pyomo's appsi interface does)."""
    import highspy
    from pyomo.common.tee import capture_output

    log = io.StringIO()
    with capture_output(output=log, capture_fd=True):
        highs = highspy.Highs()
        names = [n for n in dir(highspy.HighsOptions()) if not n.startswith("_")]
        outcome = {}
        for name, value in params.items():
            known = highs.getOptionType(name)[0] == highspy.HighsStatus.kOk
            ok = known and highs.setOptionValue(name, value) == highspy.HighsStatus.kOk
            outcome[name] = (known, ok, highs.getOptionType(name)[1] if known else None)
    for name, (known, ok, kind) in outcome.items():
        if not known:
            raise spec.unknown(method, name,
                               _close_matches(name, list(spec.names) + names))
        if not ok:
            why = [ln.strip() for ln in log.getvalue().splitlines()
                   if "ERROR" in ln and name in ln]
            kinds = {highspy.HighsOptionType.kBool: "true or false",
                     highspy.HighsOptionType.kInt: "an integer",
                     highspy.HighsOptionType.kDouble: "a number",
                     highspy.HighsOptionType.kString: "a string"}
            detail = f" (HiGHS: {why[-1].removeprefix('ERROR:').strip()})" if why else ""
            raise InputError(f"method '{method}': HiGHS option {name} must be "
                             f"{kinds.get(kind, 'a valid value')}, got {params[name]!r}{detail}",
                             field=f"params.{name}")


# ---- the declarations ---------------------------------------------------------------------------

def _spec(*params: Param, native: str | None = None) -> ParamSpec:
    return ParamSpec(tuple(params), native)


NONE = _spec()

#: Bifocal's switches and weights (problems.md §6 defaults: heuristics.placement.bifocal)
BIFOCAL = _spec(*(Param(n, boolean, "switch") for n in ("window", "phase", "token")),
               Param("gamma", number(0.0, 1.0), "weight in [0, 1]"),
               Param("H", integer(0, 8), "lookahead depth"),
               Param("lam", auto_or(number()), "weight ≥ 0, or auto (0 under load_timing "
                     "at_use, 3 under prefetch)"),
               *(Param(n, number(), "weight ≥ 0") for n in ("eta", "alpha", "r_min",
                                                            "p_reuse")),
               Param("prior", boolean, "load-port prior switch"),
               Param("evict_cost", number(), "weight ≥ 0"),
               Param("token_cap", auto_or(boolean), "token credit capped by the recurring "
                     "saving, or auto (on under load_timing prefetch, off under at_use)"),
               Param("token_horizon", choice("auto", "steps", "uses"),
                     "token term's horizon: remaining steps, the block's remaining uses, or "
                     "auto (uses under load_timing at_use)"),
               Param("copy_cost", auto_or(number()), "weight ≥ 0 of a same-class copy's "
                     "port time, or auto (1 under load_timing prefetch, 0 under at_use)"),
               Param("ready_set", choice("score", "rank"), "ready-set order: score (DOPS "
                     "Algorithm 1: the ready task of least bifocal score first) or rank "
                     "(HEFT's static upward-rank order)"),
               Param("siblings", auto_or(boolean), "sibling groups kept together in the "
                     "static order, or auto (on under ready_set rank; rank only)"),
               Param("insertion", auto_or(boolean), "a task may start in an idle gap before "
                     "its device's free time (HEFT), or auto (off under ready_set score, DOPS "
                     "Eq. 1 and 3; on in a static order)"))
#: The list schedulers' engine (heuristics.placement.engine): the same schedule either way, so
#: it is no part of a method's recorded settings
ENGINE = _spec(Param("engine", choice("auto", "python", "compiled"),
                     "scheduling engine (auto: compiled from 50,000 tasks when numba is "
                     "installed)"))
#: The list schedulers' device choice under capacity (heuristics.placement.list_scheduler,
#: problems.md §6 "Device choice under capacity"): part of a method's recorded settings
DEVICE_CHOICE = _spec(Param("device_choice", choice("fit_in_class", "eft"),
                            "fit_in_class: a device that would evict only when none of its "
                            "class runs the task without evicting (default); eft: earliest "
                            "finish whatever it evicts"))
POLICY_SEARCH = _spec(Param("max_evaluations", integer(1), "schedules evaluated")) + DEVICE_CHOICE
#: WLA's own knobs (heuristics.layout.wla.WlaParams); the WLA strategies take Bifocal's too
WLA = _spec(Param("share", number(0.0, 1.0, lo_open=True), "fraction of blocks per pass"),
           Param("eps", number(), "relative makespan drop"),
           Param("budget", integer(1), "Bifocal evaluations"),
           Param("refine", integer(1), "blocks per refinement"),
           Param("dual", boolean, "allow dual"),
           Param("dual_ratio", number(0.0, 1.0, lo_open=True), "pressure balance"),
           Param("wla_rule", choice("paper", "incremental"),
                 "pass rule (paper: DOPS §5.2; incremental: the former capped rule)"))

_MODEL = (Param("symmetry_breaking", boolean, "model switch"),
          Param("redundant", boolean, "model switch"))
#: the identical-device group structure (models.placement.cpsat / milp)
_GROUP = (Param("group_cumulative", boolean, "model switch"),
          Param("group_energy", boolean, "model switch"))
CPSAT = _spec(*_MODEL, *_GROUP, native="cpsat")
CPSAT_BLOCKS = _spec(*(Param(n, real, "seconds") for n in ("node_time_limit", "leaf_time_limit",
                                                          "root_time_limit",
                                                          "config_time_limit")),
                    Param("config_search", boolean, "switch"),
                    Param("portfolio", boolean, "switch"),
                    Param("parallel_nodes", integer(), "nodes solved at once"),
                    *_MODEL, native="cpsat")
MILP = _spec(_GROUP[1], Param("formulation", choice("auto", "bigm", "time-indexed", "bucketed"),
                              "MILP formulation (models.placement.milp_time)"), native="highs")
_FORMATS = Param("formats", strings, "allowed formats")
CPSAT_LAYOUT = _spec(_FORMATS, Param("warm", choice("heuristic", "none"), "start"), *_MODEL,
                    *_GROUP,
                    native="cpsat")
CPSAT_FORMATS = _spec(_FORMATS, Param("base", choice("bifocal", "bifocal/wla", "heft"),
                                     "base schedule"), native="cpsat")

_SWITCHES = (Param("frontier", flag, "pruning switch"), Param("bounds", flag, "pruning switch"))
_OWNERS = Param("owners", positive_ints, "owner counts K")
_MICRO = Param("microbatches", positive_ints, "microbatch counts μ")
BNB = _spec(*_SWITCHES, Param("sub_block_layers", integer(1), "layers (default: every length "
                                                               "dividing the block)"),
            Param("max_stages", integer(1), "stages per sub-block template"),
            Param("period", choice("exact", "formula"), "what the leaves optimise"),
            _OWNERS, _MICRO)
ENUM = _spec(_OWNERS, _MICRO)
SERVING_BASELINE = _spec(*_SWITCHES, _MICRO)
SERVING_MILP = _spec(_OWNERS, _MICRO, native="highs")
