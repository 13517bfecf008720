"""The params of every method of ``solvers.solve``: the method → :class:`ParamSpec` table and
the back ends' own parameter sets.

The machinery (checks, :class:`Param`, :class:`ParamSpec`, the error format) is
:mod:`opt.common.params`; a heuristic's params are declared beside it
(:data:`heuristics.placement.bifocal_params.BIFOCAL_PARAMS`,
:data:`heuristics.layout.wla_params.WLA_PARAMS`,
:data:`heuristics.placement.list_params.DEVICE_CHOICE_PARAMS` and ``STATIC_DEVICE_CHOICE_PARAMS``,
included here by name and
imported on first use), the others here. A spec with a back end's own parameter set
(:class:`~opt.common.params.Native`) takes every other name of it:

* :data:`CPSAT_NATIVE`: fields of OR-Tools' ``SatParameters``; a value is accepted when
  :func:`models.placement.cpsat_run.make_solver` can apply it (the very call the back ends make);
* :data:`HIGHS_NATIVE`: HiGHS option names; a value is accepted when
  ``highspy.Highs.setOptionValue`` takes it (the call Pyomo's appsi interface makes for each
  option).

The back ends receive ``params`` untouched; those that need typed values (Bifocal's weights,
the serving searches' switches) call :meth:`ParamSpec.parse` themselves. Range checks that
belong to a back end's own logic (e.g. ``cpsat-blocks``' time limits > 0) stay in the back end.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from opt.common.errors import InputError
from opt.common.params import (
    Derived,
    Native,
    Param,
    ParamSpec,
    boolean,
    choice,
    close_matches,
    flag,
    integer,
    positive_ints,
    real,
    strings,
)

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
    from models.placement.cpsat_run import make_solver

    fields = sat_parameters_pb2.SatParameters.DESCRIPTOR.fields_by_name
    for name, value in params.items():
        if name not in fields:
            raise spec.unknown(method, name,
                               close_matches(name, list(spec.names) + list(fields)))
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
                               close_matches(name, list(spec.names) + names))
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


CPSAT_NATIVE = Native("cpsat", "the CP-SAT parameters (fields of OR-Tools' SatParameters)",
                      _check_cpsat)
HIGHS_NATIVE = Native("highs", "the HiGHS options", _check_highs)


# ---- the declarations ---------------------------------------------------------------------------

def _spec(*parts: Param | str, native: Native | None = None) -> ParamSpec:
    return ParamSpec(tuple(parts), native)


NONE = _spec()

#: Bifocal's switches and weights (heuristics.placement.bifocal_params.BifocalParams)
BIFOCAL = _spec("heuristics.placement.bifocal_params:BIFOCAL_PARAMS")
#: The list schedulers' device choice under capacity (heuristics.placement.list_params,
#: problems.md §6 "Device choice under capacity"): part of a method's recorded settings
DEVICE_CHOICE = _spec("heuristics.placement.list_params:DEVICE_CHOICE_PARAMS")
#: The static policies' device inside the class (heuristics.placement.list_params, problems.md
#: §6 "Device inside the class"): part of a method's recorded settings
STATIC_DEVICE_CHOICE = _spec("heuristics.placement.list_params:STATIC_DEVICE_CHOICE_PARAMS")
#: policy search's budget (heuristics.placement.policy_search.PolicySearchParams)
POLICY_SEARCH = _spec(Param("max_evaluations", integer(1), "schedules evaluated",
                            default=200)) + DEVICE_CHOICE
#: local search's budget (heuristics.placement.local_search.LocalSearchParams)
LOCAL_SEARCH = _spec(Param("max_evaluations", integer(1), "replays evaluated", default=1000))
#: WLA's own knobs (heuristics.layout.wla_params.WlaParams); the WLA strategies take Bifocal's
#: too
WLA = _spec("heuristics.layout.wla_params:WLA_PARAMS")

_MODEL = (Param("symmetry_breaking", boolean, "model switch", default=True),
          Param("redundant", boolean, "model switch", default=True))
#: the identical-device group structure (models.placement.cpsat / milp)
_GROUP = (Param("group_cumulative", boolean, "model switch", default=True),
          Param("group_energy", boolean, "model switch", default=True))
CPSAT = _spec(*_MODEL, *_GROUP, native=CPSAT_NATIVE)
#: cpsat-blocks' time limits (solvers.placement.block_branching: NODE_TIME_LIMIT_S,
#: LEAF_TIME_LIMIT_S, ROOT_SHARE, CONFIG_SHARE)
CPSAT_BLOCKS = _spec(Param("node_time_limit", real, "seconds per inner node", default=0.5),
                     Param("leaf_time_limit", real, "seconds per leaf", default=8.0),
                     Param("root_time_limit", real, "seconds at the root",
                           default=Derived("max(node_time_limit, 0.1 × the time limit)")),
                     Param("config_time_limit", real, "seconds of the configuration search",
                           default=Derived("0.05 × the time limit")),
                     Param("config_search", boolean, "switch: the configuration search",
                           default=True),
                     Param("portfolio", boolean, "switch", default=True),
                     Param("parallel_nodes", integer(), "nodes solved at once",
                           default=Derived("the solve's workers")),
                     *_MODEL, native=CPSAT_NATIVE)
MILP = _spec(_GROUP[1], Param("formulation", choice("auto", "bigm", "time-indexed", "bucketed"),
                              "MILP formulation (models.placement.milp_time)", default="auto"),
             native=HIGHS_NATIVE)
_FORMATS = Param("formats", strings, "allowed formats",
                 default=Derived("the instance's layout formats"))
CPSAT_LAYOUT = _spec(_FORMATS, Param("warm", choice("heuristic", "none"), "start",
                                     default="heuristic"),
                     *_MODEL, *_GROUP, native=CPSAT_NATIVE)
CPSAT_FORMATS = _spec(_FORMATS, Param("base", choice("bifocal", "bifocal/wla", "heft"),
                                      "base schedule", default="bifocal"), native=CPSAT_NATIVE)

_SWITCHES = (Param("frontier", flag, "pruning switch", default=True),
             Param("bounds", flag, "pruning switch", default=True))
_OWNERS = Param("owners", positive_ints, "owner counts K",
                default=Derived("1 to the grid's max owners"))
_MICRO = Param("microbatches", positive_ints, "microbatch counts μ",
               default=Derived("the grid's microbatch counts"))
BNB = _spec(*_SWITCHES, Param("sub_block_layers", integer(1), "layers per sub-block",
                              default=Derived("every length dividing the block")),
            Param("max_stages", integer(1), "stages per sub-block template",
                  default=Derived("K, the template's owners")),
            Param("period", choice("exact", "formula"), "what the leaves optimise",
                  default="exact"),
            _OWNERS, _MICRO)
ENUM = _spec(_OWNERS, _MICRO)
SERVING_BASELINE = _spec(*_SWITCHES, _MICRO)
SERVING_MILP = _spec(_OWNERS, _MICRO, native=HIGHS_NATIVE)
