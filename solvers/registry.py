"""Every method of ``solvers.solve`` in one registry, built once at import (no back end is
imported until a method runs).

Problems: ``placement`` (P1, problems.md §1), ``layout`` (P2 strategies, problems.md §2: they
also decide the weight formats of a placement instance) and ``serving`` (P3 serving plans,
problems.md §3). Every back end has the signature ``(instance, SolveOptions) -> Result``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from opt.common.errors import InputError, UnknownNameError
from opt.common.problem import PROBLEMS
from solvers import params as P


@dataclass(frozen=True)
class BackendRef:
    """A back end ``module:function`` imported on its first call, with fixed keyword
    arguments (e.g. the static policy's name)."""

    target: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    def resolve(self) -> Callable[..., Any]:
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def __call__(self, instance: Any, options: Any) -> Any:
        return self.resolve()(instance, options, **dict(self.kwargs))


def _ref(target: str, **kwargs: Any) -> BackendRef:
    return BackendRef(target, tuple(kwargs.items()))


@dataclass(frozen=True)
class Method:
    """One method: its name, problem, whether it can prove optimality over the problem's
    whole space (``exact``), its back end ``(instance, SolveOptions) -> Result``, a one-line
    description and the params it accepts. ``warm_start``: ``solve`` seeds it with a
    heuristic schedule when no ``initial_solution`` is given; ``export``: it can write its
    model (``export_path``); ``goals``: an exact method that honours a placement instance's
    objective and SLO (problems.md §1.5; heuristics only report them); ``settings``: a
    ``module:function`` giving, from the params of a run, its effective settings with every
    default filled in (:func:`method_settings`: a sweep record is reused only under the same
    settings, so a changed default is recomputed, not trusted)."""

    name: str
    problem: str
    exact: bool
    backend: Callable[[Any, Any], Any]
    description: str
    params: P.ParamSpec = P.NONE
    warm_start: bool = False
    export: bool = False
    goals: bool = False
    settings: str | None = None


_PL = "solvers.placement.backends"
_LA = "solvers.layout.strategies"
_SE = "solvers.serving.methods"
_GRID = "solvers.placement.grid_backend"
_STATIC = {"pd": "prefill → NPU, decode → PIM",
           "af": "attention module → PIM in both phases, rest → NPU",
           "pd+linear": "prefill → NPU; decode linear projections → PIM",
           "pd+attn": "prefill → NPU; decode qk/softmax/sv/kv_write → PIM",
           "pd+ffn": "prefill → NPU; decode FFN / expert ops → PIM"}

_METHODS: tuple[Method, ...] = (
    # P1 placement (registration order is the order of listings)
    Method("cpsat", "placement", True, _ref(f"{_PL}:cpsat"),
           "CP-SAT model of the whole instance, no evictions (models.placement.cpsat)",
           P.CPSAT, warm_start=True, goals=True),
    Method("cpsat-blocks", "placement", True, _ref(f"{_PL}:cpsat_blocks"),
           "branching on the devices holding each weight block, a CP-SAT model per node",
           P.CPSAT_BLOCKS, warm_start=True),
    Method("milp", "placement", True, _ref(f"{_PL}:milp"),
           "MILP with HiGHS, no evictions: big-M (Pyomo) or time-indexed / bucketed "
           "(models.placement.milp_time), chosen per instance or by formulation=",
           P.MILP, warm_start=True, export=True, goals=True),
    Method("portfolio", "placement", True, _ref("solvers.placement.portfolio:solve_portfolio"),
           "CP-SAT and the MILP in geometric time slices on one worker, sharing the "
           "validated incumbent and the best bound (solvers.placement.portfolio)",
           P.ParamSpec(("solvers.placement.portfolio:PORTFOLIO_PARAMS",)), warm_start=True,
           goals=True),
    Method("heft", "placement", False, _ref(f"{_PL}:heft"),
           "HEFT list scheduling (Topcuoglu et al. 2002)", P.DEVICE_CHOICE,
           settings=f"{_PL}:list_settings"),
    Method("bifocal", "placement", False, _ref(f"{_PL}:bifocal"),
           "Bifocal list scheduling with weight-load lookahead (problems.md §6)",
           P.BIFOCAL, settings=f"{_PL}:bifocal_settings"),
    Method("bifocal-grid", "placement", False, _ref(f"{_GRID}:bifocal_grid"),
           "Bifocal at every member of a hyperparameter grid (default DOPS §6.2's), the "
           "best validated schedule",
           P.ParamSpec(("heuristics.placement.grid_params:BIFOCAL_GRID_PARAMS",)),
           settings=f"{_GRID}:bifocal_grid_settings"),
    *(Method(name, "placement", False, _ref(f"{_PL}:static", policy=name),
             f"static policy {name.upper()} (DOPS Table 1): {text}",
             P.STATIC_DEVICE_CHOICE, settings=f"{_PL}:static_settings")
      for name, text in _STATIC.items()),
    Method("policy-search", "placement", False, _ref(f"{_PL}:policy_search"),
           "search over static device-class policies, list-scheduled",
           P.POLICY_SEARCH, settings=f"{_PL}:policy_search_settings"),
    Method("local-search", "placement", False,
           _ref("solvers.placement.local_search_backend:local_search"),
           "the best of Bifocal, HEFT and the static policies, improved by replayed "
           "assignment moves within the time limit (problems.md §6)", P.LOCAL_SEARCH,
           settings="solvers.placement.local_search_backend:local_search_settings"),
    # P2 layout strategies on placement instances
    Method("pd/linear", "layout", False, _ref(f"{_LA}:fixed_format", method="pd/linear",
                                              scheduler="pd", fmt="linear"),
           "PD static policy, every block stored linear", settings=f"{_LA}:pd_layout_settings"),
    Method("pd/dual", "layout", False, _ref(f"{_LA}:fixed_format", method="pd/dual",
                                            scheduler="pd", fmt="dual"),
           "PD static policy, every block stored dual (storage ×2)",
           settings=f"{_LA}:pd_layout_settings"),
    Method("bifocal/linear", "layout", False,
           _ref(f"{_LA}:fixed_format", method="bifocal/linear", scheduler="bifocal",
                fmt="linear"), "Bifocal, every block stored linear", P.BIFOCAL,
           settings=f"{_LA}:bifocal_layout_settings"),
    Method("bifocal/dual", "layout", False,
           _ref(f"{_LA}:fixed_format", method="bifocal/dual", scheduler="bifocal", fmt="dual"),
           "Bifocal, every block stored dual", P.BIFOCAL,
           settings=f"{_LA}:bifocal_layout_settings"),
    Method("bifocal/wla", "layout", False, _ref(f"{_LA}:wla", method="bifocal/wla", dual=False),
           "Bifocal + WLA over linear / npu_opt / pim_opt (DOPS' arbiter)", P.WLA + P.BIFOCAL,
           settings=f"{_LA}:wla_settings"),
    Method("bifocal/wla+dual", "layout", False,
           _ref(f"{_LA}:wla", method="bifocal/wla+dual", dual=True),
           "Bifocal + WLA with dual as a memory-budgeted option", P.WLA + P.BIFOCAL,
           settings=f"{_LA}:wla_settings"),
    Method("cpsat-layout", "layout", True, _ref("solvers.layout.exact:cpsat_layout"),
           "exact joint placement + format model (CP-SAT, no evictions)", P.CPSAT_LAYOUT),
    Method("cpsat-formats", "layout", False, _ref("solvers.layout.exact:cpsat_formats"),
           "exact formats for a fixed placement and orders (CP-SAT; not exact for P2)",
           P.CPSAT_FORMATS),
    # P3 serving plans
    Method("bnb", "serving", False, _ref(f"{_SE}:search", method="bnb"),
           "regularity-aware branch-and-bound over a tiled sub-block template (exact when "
           "the sub-block is the whole block)", P.BNB),
    Method("enum", "serving", True, _ref(f"{_SE}:search", method="enum"),
           "exhaustive enumeration of the full template space (tiny instances)", P.ENUM),
    Method("milp", "serving", True, _ref("solvers.serving.milp:milp"),
           "exact MILP over the full template space (models.serving.milp, HiGHS)",
           P.SERVING_MILP),
    Method("col", "serving", False, _ref(f"{_SE}:search", method="col"),
           "colocated baseline: one stage per block, one owner", P.SERVING_BASELINE),
    Method("afd", "serving", False, _ref(f"{_SE}:search", method="afd"),
           "attention | FFN/MoE disaggregation baseline, two owners", P.SERVING_BASELINE),
    Method("cad", "serving", False, _ref(f"{_SE}:search", method="cad"),
           "core attention | the rest disaggregation baseline, two owners",
           P.SERVING_BASELINE),
)

#: the method ``solve`` uses when none is given, per problem
DEFAULTS = MappingProxyType({"placement": "portfolio", "layout": "cpsat-layout", "serving": "bnb"})
#: the method ``solve`` uses when none is given and the instance is beyond the default's
#: size cap (:func:`size_error`): for placement the best constructive heuristic's schedule
#: improved within the time limit (``local-search``), with its certified bound
FALLBACKS = MappingProxyType({"placement": "local-search", "layout": "bifocal/wla"})

#: Tasks per second at which the methods that build one model of the whole placement instance
#: build it. Measured on a loaded 2-core machine (llama-2-7b on HP64, 1,035 to 8,091 tasks):
#: CP-SAT 213–275 tasks/s (cpsat-layout and cpsat-formats alike; cpsat-blocks builds one per
#: node), the MILP under 450 tasks/s; stated at twice that (a faster machine), so only an
#: instance that cannot be built within its time limit anywhere is refused.
BUILD_TASKS_PER_S = MappingProxyType({"cpsat": 500.0, "cpsat-blocks": 500.0, "milp": 800.0,
                                      "portfolio": 500.0,
                                      "cpsat-layout": 500.0, "cpsat-formats": 500.0})
#: The most tasks those methods build a model for at all, whatever the time limit (memory:
#: CP-SAT held 438 MB at 4,059 tasks, about 100 KB per task; 50,000 tasks are about 5 GB).
MODEL_MAX_TASKS = 50_000
#: Instances up to this many tasks always start, whatever the limit: their build takes seconds
#: and a method stopped by the limit during it returns its warm start.
ALWAYS_BUILT_TASKS = 2_000


#: Tasks per second at which a placement or layout heuristic builds one schedule (its certified
#: bound computed beside it): measured on a loaded 2-core machine (load 4–6) — pd, heft, af and
#: bifocal on the 921,475-task flagship in 3.5–4.9 s, bifocal on a 3,611,075-task instance in
#: 35 s; stated at the slowest, so a heuristic is refused only where one schedule cannot fit
#: the limit. Every heuristic builds at least one schedule before it can stop.
SCHEDULE_TASKS_PER_S = 100_000.0


def size_error(name: str, n_tasks: int, time_limit: float | None) -> str | None:
    """Why method ``name`` cannot start on a placement instance of ``n_tasks`` tasks within
    ``time_limit`` seconds (None: no limit), or None when it can: for a method that builds one
    model of the whole instance (:data:`BUILD_TASKS_PER_S`), more than :data:`MODEL_MAX_TASKS`
    tasks, or more than :data:`ALWAYS_BUILT_TASKS` and a model build longer than the limit;
    for a heuristic, one schedule (at :data:`SCHEDULE_TASKS_PER_S`) longer than the limit and
    than a second."""
    rate = BUILD_TASKS_PER_S.get(name)
    if rate is None:
        need = n_tasks / SCHEDULE_TASKS_PER_S
        if time_limit is None or need <= max(time_limit, 1.0):
            return None
        return (f"method '{name}' schedules about {SCHEDULE_TASKS_PER_S:,.0f} tasks/s: "
                f"{n_tasks:,} tasks need about {need:,.0f} s, more than the time limit of "
                f"{time_limit:g} s (give --time-limit {int(need) + 1} or more)")
    if n_tasks > MODEL_MAX_TASKS:
        return (f"method '{name}' builds one model of the whole instance: {n_tasks:,} tasks "
                f"is above its cap of {MODEL_MAX_TASKS:,} tasks (memory)")
    need = n_tasks / rate
    if time_limit is not None and need > time_limit and n_tasks > ALWAYS_BUILT_TASKS:
        return (f"method '{name}' builds its model at about {rate:,.0f} tasks/s: {n_tasks:,} "
                f"tasks need about {need:,.0f} s, more than the time limit of "
                f"{time_limit:g} s (at most {max(int(rate * time_limit), ALWAYS_BUILT_TASKS):,} "
                f"tasks)")
    return None


def _problems(problem: str | tuple[str, ...] | None) -> tuple[str, ...]:
    wanted = PROBLEMS if problem is None else (problem,) if isinstance(problem, str) \
        else tuple(problem)
    for p in wanted:
        if p not in PROBLEMS:
            raise UnknownNameError("problem", p, PROBLEMS)
    return wanted


def methods(problem: str | tuple[str, ...] | None = None) -> tuple[Method, ...]:
    """The registered methods (of ``problem``: a name or a tuple of names), in registration
    order."""
    wanted = _problems(problem)
    return tuple(m for m in _METHODS if m.problem in wanted)


def names(problem: str | tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The names of :func:`methods` (``milp`` is both a placement and a serving method)."""
    return tuple(dict.fromkeys(m.name for m in methods(problem)))


def get_method(name: str, problem: str | tuple[str, ...]) -> Method:
    """The method ``name`` of ``problem`` (a name or a tuple of names);
    :class:`UnknownNameError` listing that problem's methods."""
    wanted = _problems(problem)
    for m in _METHODS:
        if m.name == name and m.problem in wanted:
            return m
    raise UnknownNameError(f"{' or '.join(wanted)} method", name, names(wanted))


def default_method(problem: str) -> Method:
    """The method ``solve`` uses for ``problem`` when none is given (on an instance within its
    size cap: :func:`choose_default`)."""
    if problem not in DEFAULTS:
        raise UnknownNameError("problem", problem, DEFAULTS)
    return get_method(DEFAULTS[problem], problem)


def choose_default(problem: str, n_tasks: int | None, time_limit: float | None
                   ) -> tuple[Method, str]:
    """The method ``solve`` uses for ``problem`` when none is given, and why:
    :func:`default_method` when the instance (``n_tasks``; None for a serving instance)
    is within its :func:`size_error` cap, else the problem's :data:`FALLBACKS` heuristic."""
    spec = default_method(problem)
    too_big = None if n_tasks is None else size_error(spec.name, n_tasks, time_limit)
    if too_big is None or problem not in FALLBACKS:
        return spec, f"the default for {problem} instances"
    fallback = get_method(FALLBACKS[problem], problem)
    assert n_tasks is not None
    neither = size_error(fallback.name, n_tasks, time_limit)
    if neither is not None:
        raise InputError(f"no method can start within the time limit: {too_big}; and "
                         f"{neither}", field="time_limit")
    return fallback, f"the default '{spec.name}' cannot start: {too_big}"


def parsed_params(name: str, problem: str, params: dict[str, Any]) -> dict[str, Any]:
    """The typed values of method ``name``'s declared params (back-end names untouched and
    unchecked: ``solve`` checked them): for back ends that need typed knobs."""
    return get_method(name, problem).params.parse(name, params, native=False)


def method_settings(name: str, problem: str | tuple[str, ...], params: dict[str, Any]
                    ) -> dict[str, Any] | None:
    """The effective settings of method ``name`` run with ``params``: from its ``settings``
    function (every default filled in) when it declares one; else, for a method that takes
    params, the given ones, typed (an exact solver's defaults are its back end's own); None for
    a method without params. A sweep
    record is reused only under equal settings, so a record without them only for a method
    without params."""
    m = get_method(name, problem)
    given = m.params.parse(name, params, native=False)
    if m.settings is not None:
        module, _, attr = m.settings.partition(":")
        return getattr(importlib.import_module(module), attr)(given)
    if m.params.native is None and not m.params.names:
        return None
    return given


def params_by_spec(problem: str | tuple[str, ...] | None = None
                   ) -> list[tuple[tuple[Method, ...], P.ParamSpec]]:
    """The declared params of the methods (of ``problem``), one entry per distinct
    :class:`~opt.common.params.ParamSpec` with the methods that take it, in registration
    order: what ``hetopt methods --params`` prints and docs/cli.md lists."""
    groups: dict[P.ParamSpec, list[Method]] = {}
    for m in methods(problem):
        groups.setdefault(m.params, []).append(m)
    return [(tuple(ms), spec) for spec, ms in groups.items()]


def _check_unique() -> None:
    seen = set()
    for m in _METHODS:
        if (m.problem, m.name) in seen or m.problem not in PROBLEMS:
            raise InputError(f"registry: duplicate or misfiled method {m.problem}/{m.name}")
        seen.add((m.problem, m.name))


_check_unique()
