"""The functions of the public API :mod:`opt.api` (``import opt.api as hetopt``): reading and
writing instances and results, the builders, DOT import, bundled instances by name,
``solve``, ``validate``, ``lower_bound``, the method list, P3 simulation and the viewer page.
Each builder takes the core's typed options (:mod:`opt.placement.request`,
:mod:`opt.serving.request`: workload, build options, budget, goal, grid, parallelism, GPU
cost, sources), makes the request ``hetopt build`` makes from its arguments and builds it with
the same function as the command.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import re
import reprlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, Union

import instances
from opt.app.viewer.page import DEFAULT_PERIODS, write_view
from opt.common.errors import InputError, UnknownNameError
from opt.common.outpath import FILE, output_error
from opt.common.result import Result, Status
from opt.common.result import read_result as _read_result
from opt.costlib.sources import Sources
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.dot import dot_to_instance, read_dot
from opt.placement.instance import PlacementInstance
from opt.placement.layout import relaxed_instance
from opt.placement.request import Budget, Goal, PlacementRequest, build_placement_request
from opt.problems import PROBLEMS, problem_name, read_problem_instance
from opt.serving.builder import ServingWorkload
from opt.serving.instance import ServingGrid, ServingInstance
from opt.serving.plan import PlanError, ServingPlan
from opt.serving.request import (
    GpuCost,
    Parallelism,
    ServingRequest,
    build_serving_request,
    gpu_names,
)
from opt.serving.simulator import ORDERS, SimReport, simulate_plan
from solvers.api import DEFAULT_NUM_WORKERS, DEFAULT_TIME_LIMIT_S
from solvers.api import solve as _solve
from solvers.certify import Validation
from solvers.certify import validate as _validate
from solvers.registry import Method
from solvers.registry import methods as _methods

Instance = PlacementInstance | ServingInstance
_INSTANCES = (PlacementInstance, ServingInstance)
F = TypeVar("F", bound=Callable[..., Any])

#: Largest magnitude of an ``int`` argument: a machine integer (int64), as every count and
#: seed ends up in NumPy or a solver.
MAX_INT = 2 ** 63 - 1
#: What an argument annotated with each type is described as in an error.
_DESCRIBED = {int: "an integer", float: "a finite number", str: "a string", bool: "True or False",
              Path: "a path", type(None): "None"}
#: Types a value may be shown as (reprlib shortens them); any other object by its type.
_SHOWN = (str, bytes, numbers.Number, list, tuple, dict, set, frozenset, os.PathLike,
          type(None))


# ---- the argument check of every public function ---------------------------------------------

def checked(fn: F) -> F:
    """``fn`` with each argument checked against its annotation at call time: a value of
    another type, a non-finite or out-of-range number, or a string holding a NUL character is
    an :class:`InputError` naming the argument (``field``) and the value, raised before ``fn``
    runs; so is an argument ``fn`` does not take or a required one left out. Annotations
    understood: classes, ``X | None``, ``Sequence[X]``, ``Mapping[K, V]``, ``Any``; ``int`` (not ``bool``, within
    ±:data:`MAX_INT`), ``float`` (any finite real, ``int`` too), ``Path`` (any ``os.PathLike``
    of a ``str``). ``*args`` / ``**kwargs`` pass unchecked."""
    sig = inspect.signature(fn)
    hints = {k: v for k, v in typing.get_type_hints(fn).items() if k != "return"}
    where = f"opt.api.{fn.__name__}"
    for hint in hints.values():
        _accepts(None, hint)  # an annotation the check does not understand fails at import

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            found = re.search(r"'(\w+)'", str(exc))
            raise InputError(str(exc), source=where,
                             field=found.group(1) if found else None) from None
        for name, value in bound.arguments.items():
            if sig.parameters[name].kind in (inspect.Parameter.VAR_POSITIONAL,
                                             inspect.Parameter.VAR_KEYWORD):
                continue
            why = _fault(value, hints.get(name, Any))
            if why is not None:
                raise InputError(why, source=where, field=name)
        return fn(*bound.args, **bound.kwargs)

    call.checks_arguments = True  # type: ignore[attr-defined]
    return typing.cast(F, call)


def _fault(value: Any, hint: Any) -> str | None:
    """Why ``value`` is not a value of ``hint`` (None when it is)."""
    if _accepts(value, hint):
        return None
    if _has_nul(value):
        return f"contains a NUL character: {_show(value)}"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
            and _accepts(0, hint) and not _accepts(0.5, hint):
        return f"{_show(value)} is beyond a 64-bit integer (±{MAX_INT})"
    why = f"expected {_describe(hint)}, got {_show(value)}"
    if isinstance(value, (str, os.PathLike)):
        if _accepts_class(hint, _INSTANCES):
            why += "; read_instance(path) reads an instance file"
        elif _accepts_class(hint, (Result,)):
            why += "; read_result(path) reads a result file"
    return why


def _accepts(value: Any, hint: Any) -> bool:
    """Whether ``value`` is a value of the annotation ``hint``."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_accepts(value, h) for h in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
                and -MAX_INT <= int(value) <= MAX_INT)
    if hint is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool)
                and _finite(value))
    if hint is str:
        return isinstance(value, str) and "\0" not in value
    if hint is Path:
        return (isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)
                and "\0" not in os.fspath(value))
    if origin is Mapping:
        key, item = typing.get_args(hint)
        return isinstance(value, Mapping) and all(_accepts(k, key) and _accepts(v, item)
                                                  for k, v in value.items())
    if origin is Sequence:
        (item,) = typing.get_args(hint)
        return (isinstance(value, Sequence) and not isinstance(value, (str, bytes))
                and all(_accepts(v, item) for v in value))
    if isinstance(hint, type):
        return isinstance(value, hint)
    raise TypeError(f"checked: annotation {hint!r} is not understood")


def _finite(value: numbers.Real) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _has_nul(value: Any) -> bool:
    """Whether ``value`` (a string, a path or a list of strings) holds a NUL character."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        return "\0" in value
    return isinstance(value, (list, tuple)) and any(_has_nul(v) for v in value)


def _accepts_class(hint: Any, classes: tuple[type, ...]) -> bool:
    """Whether ``hint`` is (or unites) one of ``classes``."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        return any(_accepts_class(h, classes) for h in typing.get_args(hint))
    return hint in classes


def _describe(hint: Any) -> str:
    """The annotation ``hint`` in words: "an integer", "a string or None", "a list of
    integers"."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        words = dict.fromkeys(_describe(h) for h in typing.get_args(hint))
        return " or ".join([w for w in words if w != "None"] + ["None"] * ("None" in words))
    if typing.get_origin(hint) is Mapping:
        return "a mapping (a dict)"
    if typing.get_origin(hint) is Sequence:
        (item,) = typing.get_args(hint)
        return f"a list of {_describe(item).split(' ', 1)[1]}s"
    if hint in _DESCRIBED:
        return _DESCRIBED[hint]
    name = getattr(hint, "__name__", str(hint))
    return f"an {name}" if name[:1] in "AEIOU" else f"a {name}"


def _show(value: Any) -> str:
    """``value`` for an error message: a short repr of a plain value, else its type."""
    if isinstance(value, _SHOWN):
        return f"{reprlib.repr(value)} ({type(value).__name__})"
    return f"a {type(value).__name__}"


# ---- the public functions --------------------------------------------------------------------

@checked
def read_instance(path: str | Path) -> Instance:
    """The instance in the file at ``path`` (``.json``, ``.json.gz`` or ``.npz``), of any
    problem (its ``problem`` field)."""
    return read_problem_instance(path)


@checked
def read_result(path: str | Path) -> Result:
    """The result file at ``path`` (``.json`` or ``.json.gz``), checked field by field."""
    return _read_result(path)


@checked
def write_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` to ``path`` (``.json``, ``.json.gz``; ``.npz`` for placement; any
    other name, or a path that cannot be written, is an InputError naming it)."""
    _check_writable(path, "write_instance")
    instance.write(path)


@checked
def write_result(result: Result, path: str | Path) -> None:
    """Write ``result`` to ``path`` (``.json`` or ``.json.gz``; any other name, or a path
    that cannot be written, is an InputError naming it)."""
    _check_writable(path, "write_result")
    result.write(path)


def _check_writable(path: str | Path, function: str) -> None:
    """InputError (``field`` "path") unless a file can be written at ``path``: its folder
    exists and is writable, and it is no folder (:func:`opt.common.outpath.output_error`)."""
    why = output_error(path, FILE)
    if why is not None:
        raise InputError(f"cannot write '{path}': {why}", source=f"opt.api.{function}",
                         field="path")


@checked
def build_placement(model: str, platform: str, workload: Workload, *,
                    options: BuildOptions | None = None, budget: Budget | None = None,
                    goal: Goal | None = None, measurements: str | Path | None = None,
                    sources: Sources | None = None) -> PlacementInstance:
    """A P1 instance (``hetopt build placement``; a P2 layout instance when ``budget`` is not
    empty): ``model`` (a model card's name) on ``platform`` (a platform of the catalog) for
    ``workload`` (:class:`~opt.placement.build_options.Workload`: prefill tokens, decode
    steps, batch). ``options``: the builder's :class:`~opt.placement.build_options.BuildOptions`
    (layers, tp, block span, precision, sparsity, time unit, load rule, formats …; None: the
    defaults); ``budget``: the P2 memory :class:`~opt.placement.request.Budget`; ``goal``: the
    objective and SLOs in ms (:class:`~opt.placement.request.Goal`); ``measurements``: a
    measured-latency table file (docs/measurements.md); ``sources``: catalog and model-card
    files (:class:`~opt.costlib.sources.Sources`). Each option checks itself on construction
    (InputError naming the field); together they make the
    :class:`~opt.placement.request.PlacementRequest` the command builds too."""
    request = PlacementRequest(
        model=model, platform=platform, workload=workload,
        options=BuildOptions() if options is None else options,
        budget=Budget() if budget is None else budget, goal=Goal() if goal is None else goal,
        measurements=None if measurements is None else os.fspath(measurements),
        sources=Sources() if sources is None else sources)
    return build_placement_request(request)


@checked
def build_layout(model: str, platform: str, workload: Workload, *, budget: Budget,
                 options: BuildOptions | None = None, goal: Goal | None = None,
                 measurements: str | Path | None = None,
                 sources: Sources | None = None) -> PlacementInstance:
    """A P2 layout instance (``hetopt build layout``): :func:`build_placement` under the
    memory ``budget`` (``Budget(gb=…)``, 10^9 bytes, or ``Budget(factor=…)``, × the blocks'
    linear bytes; an empty budget is an InputError)."""
    if budget.empty:
        raise InputError("a layout instance needs a budget: Budget(gb=...) or "
                         "Budget(factor=...)", source="opt.api.build_layout", field="budget")
    return build_placement(model, platform, workload, options=options, budget=budget,
                           goal=goal, measurements=measurements, sources=sources)


@checked
def build_serving(model: str, gpus: str | Sequence[str], workload: ServingWorkload, *,
                  grid: ServingGrid | None = None, parallelism: Parallelism | None = None,
                  memory_fraction: float = ServingRequest.memory_fraction,
                  cost: GpuCost | None = None, measurements: str | Path | None = None,
                  sources: Sources | None = None) -> ServingInstance:
    """A P3 serving instance (``hetopt build serving``): ``model`` on the GPU mix ``gpus``
    (types, e.g. ``"H100,L40S"`` or ``["H100", "L40S"]``) for ``workload``
    (:class:`~opt.serving.builder.ServingWorkload`: mean context in tokens, TPOT SLO in
    seconds). ``grid``: the search limits (:class:`~opt.serving.instance.ServingGrid`);
    ``parallelism``: TP degrees and expert parallelism (:class:`~opt.serving.request.Parallelism`);
    ``memory_fraction``: the share of each GPU's memory usable, in (0, 1]; ``cost``: the GPU
    cost model (:class:`~opt.serving.request.GpuCost`); ``measurements``: a measured kernel
    table file used where it has entries; ``sources``: catalog and model-card files. Each
    option checks itself on construction (InputError naming the field); together they make
    the :class:`~opt.serving.request.ServingRequest` the command builds too."""
    par = Parallelism() if parallelism is None else parallelism
    request = ServingRequest(
        model=model, gpus=gpu_names(gpus), workload=workload,
        grid=ServingGrid() if grid is None else grid, tp_degrees=par.tp_degrees,
        expert_parallel=par.expert_parallel, memory_fraction=memory_fraction,
        cost=GpuCost() if cost is None else cost,
        measurements=None if measurements is None else os.fspath(measurements),
        sources=Sources() if sources is None else sources)
    return build_serving_request(request)


@checked
def instance_names(problem: str | None = None) -> list[str]:
    """Names of every bundled instance (of ``problem``: a :class:`Problem` or its name), the
    STG graphs included."""
    return instances.bundled_names(None if problem is None else _problem(problem))


@checked
def load_instance(name: str | Path) -> Instance:
    """The bundled instance ``name`` (:func:`instance_names`), or an instance file's path."""
    if isinstance(name, Path) or _exists(name):
        return read_problem_instance(name)
    return instances.load(name)


def _exists(path: str) -> bool:
    """Whether something is at ``path`` (False for a name no file system holds, e.g. one too
    long)."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


@checked
def solve(instance: Instance, method: str | None = None, *,
          time_limit: float | None = DEFAULT_TIME_LIMIT_S,
          num_workers: int = DEFAULT_NUM_WORKERS, seed: int = 0,
          initial_solution: Mapping[str, Any] | Result | None = None,
          warm_start: str | None = "best", export_path: str | Path | None = None,
          deterministic: bool = False, log: bool = False, **params: Any) -> Result:
    """Solve ``instance`` with ``method`` (None: its problem's default, :func:`methods`) and
    return the certified :class:`Result` (objective recomputed, status a :class:`Status`).
    time_limit: seconds (default 60, :data:`solvers.api.DEFAULT_TIME_LIMIT_S`, as ``hetopt
    solve``; None: no limit); num_workers: solver threads (default 1,
    :data:`solvers.api.DEFAULT_NUM_WORKERS`, as ``hetopt solve``);
    initial_solution: a solution (or a Result) to start from, checked first; warm_start: the
    heuristic seeding an exact placement method ("heft", "bifocal", "best", "policy-search"
    or None); export_path: the placement MILP's model file (.mps / .lp); deterministic: the
    same CP-SAT result on every run; log: stream the solver's progress to stderr; params: the
    method's parameters (``methods()``' ``params``)."""
    res = _solve(instance, method, time_limit=time_limit,
                 num_workers=num_workers, seed=seed,
                 initial_solution=initial_solution if initial_solution is None
                 or isinstance(initial_solution, Result) else dict(initial_solution),
                 warm_start=warm_start,
                 export_path=None if export_path is None else str(export_path),
                 deterministic=deterministic, log=log, **params)
    res.status = Status(res.status)
    return res


@checked
def validate(instance: Instance, result: Result) -> Validation:
    """Check ``result`` against ``instance``: a :class:`solvers.certify.Validation` (valid,
    recomputed objective, violations)."""
    return _validate(instance, result)


@checked
def lower_bound(instance: Instance) -> float:
    """A certified lower bound on the instance's optimum: the makespan bound of
    :mod:`opt.placement.certified_bounds` in ticks (for a layout instance, of its
    format-relaxed instance). Serving instances have none here (InputError)."""
    if isinstance(instance, ServingInstance):
        raise InputError("lower_bound applies to placement and layout instances; a serving "
                         "method's result carries its own bound", field="instance")
    inst = relaxed_instance(instance) if instance.problem == "layout" else instance
    return float(certified_lower_bound(inst).value)


@checked
def methods(problem: str | None = None) -> list[Method]:
    """The registered methods (of ``problem``): name, problem, exact, default params."""
    return list(_methods(None if problem is None else _problem(problem)))


def _problem(problem: str) -> str:
    """The name of ``problem`` (a :class:`Problem` or a name; UnknownNameError otherwise)."""
    name = problem_name(str(problem))
    if name not in PROBLEMS:
        raise UnknownNameError("problem", name, PROBLEMS)
    return name


@checked
def import_dot(path: str | Path, processors: int) -> PlacementInstance:
    """The P1 instance of the DOT task graph at ``path`` on ``processors`` identical
    processors (``hetopt import dot``; :func:`opt.placement.dot.dot_to_instance`): node
    Weight = duration, edge Weight = transfer time between two processors, in ticks of the
    time unit ``unit``."""
    return dot_to_instance(read_dot(path), processors, source=str(path))


#: NIC-in accounting of the simulator (:func:`opt.serving.simulator.simulate_plan`)
_NICS = ("formula", "sender")


@checked
def simulate(instance: ServingInstance, plan: Result | ServingPlan, *, tokens: int = 48,
             warmup: int = 16, nic: str = "formula", order: str = "static") -> SimReport:
    """Run the discrete-event simulator on a serving plan (``hetopt solve --simulate``):
    ``plan`` a serving :class:`Result` or a :class:`~opt.serving.plan.ServingPlan` on
    ``instance``. tokens: tokens every microbatch stream completes; warmup: leading tokens
    of each stream left out of the measurement (0 ≤ warmup < tokens); nic: ``"formula"`` or
    ``"sender"`` NIC-in accounting; order: ``"static"`` or ``"fcfs"`` dispatch. Returns the
    :class:`~opt.serving.simulator.SimReport` (simulated vs exact period, ticks)."""
    where = "opt.api.simulate"
    for name, value, known in (("nic", nic, _NICS), ("order", order, ORDERS)):
        if value not in known:
            raise InputError(f"unknown {name} {value!r}; known: {', '.join(known)}",
                             source=where, field=name)
    if warmup < 0 or tokens <= warmup:
        raise InputError(f"need 0 ≤ warmup < tokens, got warmup = {warmup}, tokens = "
                         f"{tokens}", source=where, field="warmup")
    try:
        chosen = plan.plan(instance) if isinstance(plan, Result) else plan
        return simulate_plan(instance, chosen, tokens=tokens, warmup=warmup, nic=nic,
                             order=order)
    except (InputError, PlanError) as exc:
        why = exc.detail if isinstance(exc, InputError) else f"invalid serving plan: {exc}"
        raise InputError(why, source=where, field="plan") from None


@checked
def view(instance: Instance, result: Result, path: str | Path, *, title: str | None = None,
         periods: int = DEFAULT_PERIODS, compress: bool = True) -> int:
    """Write the viewer page of ``result`` on ``instance`` to ``path`` (``hetopt view``,
    docs/viewer.md): the result is validated first (InputError naming the rule when it does
    not hold). title: the page's title; periods: steady-state periods a plan's page draws;
    compress: gzip the embedded data. Returns the bytes written."""
    _check_writable(path, "view")
    try:
        size, _ = write_view(instance, result, path, title=title, periods=periods,
                             compress=compress)
    except InputError as exc:
        raise InputError(exc.detail, source="opt.api.view",
                         field="periods" if exc.field == "periods" else "result") from None
    return size


__all__ = ["read_instance", "write_instance", "read_result", "write_result",
           "build_placement", "build_layout", "build_serving", "import_dot", "instance_names",
           "load_instance", "solve", "validate", "lower_bound", "methods", "simulate", "view"]
