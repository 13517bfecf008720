"""A placement build request (problems.md §1.4): the typed, checked options of one P1 (or,
with a memory budget, P2) instance — model and platform by name, the :class:`Workload`, the
builder's :class:`BuildOptions`, the memory :class:`Budget`, the :class:`Goal` (objective and
SLOs), a measured-latency table and the catalog and model-card files — and
:func:`build_placement_request`, which builds it. ``opt.api.build_placement`` takes these
typed options, ``hetopt build placement`` reads its arguments into them; both build a
:class:`PlacementRequest`. The command line's precision and sparsity options become typed here
too (:func:`chosen_precision`, :func:`chosen_sparsity`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from numbers import Integral, Real

from opt.common.errors import InputError
from opt.common.units import TIME_UNITS, ms_to_ticks
from opt.costlib.measured import read_measurements
from opt.costlib.operators import Precision, Sparsity
from opt.costlib.sources import Sources, check_path
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance
from opt.placement.layout import budget_from, check_budget, with_budget
from opt.placement.slo import Slo, check_objective, with_goal

#: the largest SLO in ms (the command line's bound on real options): larger limits overflow a
#: schedule's ticks
MAX_SLO_MS = 1e15
#: the phases of an activation-sparsity option
_PHASES = ("prefill", "decode")


def _finite(value: Real) -> bool:
    """Whether the real ``value`` is finite (False for an integer beyond a float's range)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@dataclass(frozen=True)
class Budget:
    """The P2 memory budget for the stored weight blocks: ``gb`` (10⁹ bytes) or ``factor``
    (× the blocks' linear bytes; 2 admits all-dual), at most one; neither: no budget, a P1
    instance. Checked on construction (:func:`opt.placement.layout.check_budget`)."""

    gb: float | None = None
    factor: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("budget_gb", self.gb), ("budget_factor", self.factor)):
            if isinstance(value, Integral) and not isinstance(value, bool) \
                    and not _finite(value):
                raise InputError(f"must be a finite number, got {value!r}", field=name)
        check_budget(self.gb, self.factor)

    @property
    def empty(self) -> bool:
        return self.gb is None and self.factor is None

    def apply(self, inst: PlacementInstance) -> PlacementInstance:
        """``inst`` with this budget (``inst`` itself when the budget is empty)."""
        if self.empty:
            return inst
        return with_budget(inst, budget_from(inst, gb=self.gb, factor=self.factor))


@dataclass(frozen=True)
class Goal:
    """What the instance minimises (``objective``, :data:`opt.placement.slo.OBJECTIVES`) and
    its service-level limits in ms (None: no limit): time to first token, mean time per output
    token, end-to-end latency (problems.md §1.5). Checked on construction: each limit a
    number in (0, :data:`MAX_SLO_MS`] (InputError naming the field)."""

    objective: str = "makespan"
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None

    def __post_init__(self) -> None:
        check_objective(self.objective)
        for name in ("slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, Real) and not isinstance(v, bool)
                                      and _finite(v) and 0 < float(v) <= MAX_SLO_MS):
                raise InputError(f"must be a positive number of ms up to {MAX_SLO_MS:g}, "
                                 f"got {v}", field=name)

    def apply(self, inst: PlacementInstance) -> PlacementInstance:
        """``inst`` with this objective and these limits in ticks of its time unit (TTFT and
        e2e rounded down, so a schedule within the limit in ticks is within it in ms)."""
        tick_ms = TIME_UNITS[inst.time_unit] * 1e3

        def ticks(ms: float | None) -> int | None:
            return None if ms is None else max(1, math.floor(round(ms / tick_ms, 6)))

        tpot = None if self.slo_tpot_ms is None else ms_to_ticks(self.slo_tpot_ms,
                                                                  inst.time_unit)
        slo = Slo(ttft=ticks(self.slo_ttft_ms), mean_tpot=tpot, e2e=ticks(self.slo_e2e_ms))
        return with_goal(inst, self.objective, slo)


@dataclass(frozen=True)
class PlacementRequest:
    """One placement instance to build: ``model`` (a card name) on ``platform`` (a platform
    of the catalog) for ``workload`` with ``options``, under ``budget`` and ``goal``;
    ``measurements``: a measured-latency table file (docs/measurements.md) whose entries
    replace the model's task costs (None: the cost model everywhere); ``sources``: the catalog
    and model-card files. Checked on construction (InputError naming the field)."""

    model: str
    platform: str
    workload: Workload
    options: BuildOptions = field(default_factory=BuildOptions)
    budget: Budget = field(default_factory=Budget)
    goal: Goal = field(default_factory=Goal)
    measurements: str | None = None
    sources: Sources = field(default_factory=Sources)

    def __post_init__(self) -> None:
        for name in ("model", "platform"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"must be a name (a string), got {getattr(self, name)!r}",
                                 field=name)
        for name, kind in (("workload", Workload), ("options", BuildOptions),
                           ("budget", Budget), ("goal", Goal), ("sources", Sources)):
            if not isinstance(getattr(self, name), kind):
                raise InputError(f"must be a {kind.__name__}, got {getattr(self, name)!r}",
                                 field=name)
        check_path(self.measurements, "measurements")
        if self.measurements is not None and self.options.measurements is not None:
            raise InputError("give a measurements file or options.measurements, not both",
                             field="measurements")


def build_placement_request(request: PlacementRequest) -> PlacementInstance:
    """The instance of ``request``: its catalog and cards loaded, its measurements read, the
    P1 instance built (:func:`opt.placement.builder.build_placement`), then its budget (a P2
    instance) and its goal applied."""
    cat, cards = request.sources.load()
    card, platform = cards[request.model], cat.platform(request.platform)
    options = request.options
    if request.measurements is not None:
        options = replace(options, measurements=read_measurements(request.measurements, cat))
    inst = build_placement(card, platform, cat, request.workload, options)
    return request.goal.apply(request.budget.apply(inst))


def chosen_precision(model: str, dtype: str = "fp16", *, weight: str | None = None,
                     activation: str | None = None, kv: str | None = None,
                     paper: bool = False) -> Precision | None:
    """The :class:`Precision` of the precision options: the per-tensor dtypes ``weight``,
    ``activation``, ``kv`` over a base, DOPS' precision for ``model`` when ``paper``
    (:func:`opt.placement.build_options.paper_precision`) else ``dtype`` weights and fp16
    for the rest; None when no per-tensor dtype is given and ``paper`` is False (the builder
    then uses ``dtype`` for weights, fp16 for the rest)."""
    given = {k: v for k, v in (("weight", weight), ("activation", activation), ("kv", kv))
             if v is not None}
    if not given and not paper:
        return None
    base = paper_precision(model) if paper else Precision(weight=dtype)
    return Precision(**{**base.__dict__, **given}).check()


def act_sparsity_ratios(value: str | float, field: str = "act_sparsity",
                        source: str | None = None) -> dict[str, float]:
    """The activation-sparsity ratio per phase of ``value``: ``"prefill=R,decode=R"`` (either
    may be left out: 0) or one ratio R, as text or a number, for both phases; InputError
    naming ``field`` (and ``source``) when the text is neither."""
    if isinstance(value, Real) and not isinstance(value, bool):
        return dict.fromkeys(_PHASES, float(value))
    act = dict.fromkeys(_PHASES, 0.0)
    text = str(value).strip()
    bad = f"expected prefill=R,decode=R or one ratio R, got {text!r}"
    try:
        if "=" not in text:
            return dict.fromkeys(act, float(text))
        for part in text.split(","):
            key, _, ratio = part.partition("=")
            if key.strip() not in act:
                raise InputError(bad, source=source, field=field)
            act[key.strip()] = float(ratio)
    except ValueError:
        raise InputError(bad, source=source, field=field) from None
    return act


def chosen_sparsity(weight: float | None = None,
                    activation: str | float | Mapping[str, float] | None = None,
                    attention: float | None = None) -> Sparsity | None:
    """The :class:`Sparsity` of the sparsity options: the fraction of zero weights of the
    linear projections, of zero GEMM input activations per phase (a mapping ``prefill`` /
    ``decode`` → ratio, or a value of :func:`act_sparsity_ratios`) and of skipped (query,
    key) pairs; None when all three are None (dense)."""
    if weight is None and activation is None and attention is None:
        return None
    if isinstance(activation, Mapping) and not set(activation) <= set(_PHASES):
        raise InputError(f"activation sparsity phases are {', '.join(_PHASES)}, got "
                         f"{', '.join(map(str, activation))}", field="act_sparsity")
    act = dict.fromkeys(_PHASES, 0.0) if activation is None else \
        {**dict.fromkeys(_PHASES, 0.0), **activation} if isinstance(activation, Mapping) \
        else act_sparsity_ratios(activation)
    return Sparsity(weight=weight or 0.0, activation_prefill=act["prefill"],
                    activation_decode=act["decode"], attention=attention or 0.0).check()
