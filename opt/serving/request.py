"""A serving build request (problems.md §3, OpWeave §6): the typed, checked options of one P3
instance — model, GPU mix, the :class:`~opt.serving.builder.ServingWorkload` (context and
TPOT SLO), the search :class:`~opt.serving.instance.ServingGrid`, the TP degrees and expert
parallelism (:class:`Parallelism`), the usable memory share, the GPU cost model
(:class:`GpuCost`), a measured kernel table and the catalog and model-card files — and
:func:`build_serving_request`, which builds it. ``opt.api.build_serving`` takes these typed
options, ``hetopt build serving`` reads its arguments into them; both build a
:class:`ServingRequest`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Integral

from opt.common.errors import InputError
from opt.costlib.gpu_calib import read_calibrations
from opt.costlib.measured import read_measurements
from opt.costlib.sources import Sources, check_path
from opt.serving.builder import DEFAULT_TP, ServingWorkload, build_serving_plan
from opt.serving.instance import ServingGrid, ServingInstance
from opt.serving.kernel_cost import (
    DEFAULT_GPU_COST,
    DEFAULT_UNMEASURED_GPU,
    check_gpu_cost,
    check_unmeasured_gpu,
)


def gpu_names(gpus: str | Sequence[str]) -> tuple[str, ...]:
    """The GPU types of a mix given as ``"H100,L40S"`` or a sequence of names (each may hold
    several, comma-separated); blanks dropped."""
    text = gpus if isinstance(gpus, str) else ",".join(str(g) for g in gpus)
    return tuple(g.strip() for g in text.split(",") if g.strip())


@dataclass(frozen=True)
class GpuCost:
    """How GPU kernels are costed (docs/serving.md "Measured GPU costs"): ``kind``
    ``calibrated`` (fitted to measured profiles; ``calibration`` a fit file of ``hetopt
    calibrate --gpu`` replacing the bundled one) or ``roofline`` (the catalog roofline);
    ``unmeasured``: under ``calibrated``, a GPU type without measurements takes the nearest
    measured GPU's fitted classes on its own peaks (``transfer``) or the ``roofline``.
    Checked on construction (InputError naming ``gpu_cost`` / ``unmeasured_gpu``)."""

    kind: str = DEFAULT_GPU_COST
    unmeasured: str = DEFAULT_UNMEASURED_GPU
    calibration: str | None = None

    def __post_init__(self) -> None:
        check_gpu_cost(self.kind)
        check_unmeasured_gpu(self.unmeasured)
        check_path(self.calibration, "gpu_calibration")


def _check_tp_degrees(degrees: object) -> None:
    """InputError naming ``tp`` unless ``degrees`` is one or more integers ≥ 1 (a tuple or
    a list)."""
    if not isinstance(degrees, (tuple, list)) or not degrees or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in degrees):
        raise InputError(f"must be one or more integers ≥ 1, got {degrees!r}", field="tp")


@dataclass(frozen=True)
class Parallelism:
    """The parallel configurations a serving instance offers: ``tp_degrees``, the
    tensor-parallel degrees (integers ≥ 1; a list is stored as a tuple), and, for an MoE
    model, expert-parallel configurations too when ``expert_parallel``. Checked on
    construction (InputError naming ``tp`` / ``expert_parallel``)."""

    tp_degrees: tuple[int, ...] = DEFAULT_TP
    expert_parallel: bool = True

    def __post_init__(self) -> None:
        degrees = self.tp_degrees
        if isinstance(degrees, (list, tuple)) and all(
                isinstance(t, Integral) and not isinstance(t, bool) for t in degrees):
            degrees = tuple(int(t) for t in degrees)
            object.__setattr__(self, "tp_degrees", degrees)
        _check_tp_degrees(degrees)
        if not isinstance(self.expert_parallel, bool):
            raise InputError(f"must be True or False, got {self.expert_parallel!r}",
                             field="expert_parallel")


@dataclass(frozen=True)
class ServingRequest:
    """One serving instance to build: ``model`` (a card name) on the GPU mix ``gpus`` (GPU
    types of the catalog) for ``workload``, the configurations within ``grid`` at the TP
    degrees ``tp_degrees`` (expert-parallel ones too for an MoE model when
    ``expert_parallel``), ``memory_fraction`` of each GPU's memory usable, kernels costed by
    ``cost``; ``measurements``: a measured kernel table file used where it has the kernel
    (None: none); ``sources``: the catalog and model-card files. Checked on construction
    (InputError naming the field)."""

    model: str
    gpus: tuple[str, ...]
    workload: ServingWorkload
    grid: ServingGrid = field(default_factory=ServingGrid)
    tp_degrees: tuple[int, ...] = DEFAULT_TP
    expert_parallel: bool = True
    memory_fraction: float = 1.0
    cost: GpuCost = field(default_factory=GpuCost)
    measurements: str | None = None
    sources: Sources = field(default_factory=Sources)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str):
            raise InputError(f"must be a name (a string), got {self.model!r}", field="model")
        if isinstance(self.gpus, str) or not all(isinstance(g, str) for g in self.gpus):
            raise InputError(f"must be a tuple of GPU type names, got {self.gpus!r}",
                             field="gpus")
        if not self.gpus:
            raise InputError("at least one GPU type is needed", field="gpus")
        for name, kind in (("workload", ServingWorkload), ("grid", ServingGrid),
                           ("cost", GpuCost), ("sources", Sources)):
            if not isinstance(getattr(self, name), kind):
                raise InputError(f"must be a {kind.__name__}, got {getattr(self, name)!r}",
                                 field=name)
        _check_tp_degrees(self.tp_degrees)
        fraction = self.memory_fraction
        if isinstance(fraction, bool) or not (isinstance(fraction, (int, float))
                                              and 0 < fraction <= 1):
            raise InputError(f"memory_fraction must be in (0, 1], got {fraction!r}",
                             field="memory_fraction")
        check_path(self.measurements, "measurements")


def build_serving_request(request: ServingRequest) -> ServingInstance:
    """The instance of ``request``: its catalog and cards loaded, its calibration and
    measurements read, the P3 instance built (:func:`opt.serving.builder.build_serving_plan`)."""
    cat, cards = request.sources.load()
    card = cards[request.model]
    cost = request.cost
    calibrations = None if cost.calibration is None else read_calibrations(cost.calibration,
                                                                           cat)
    measurements = None if request.measurements is None else \
        read_measurements(request.measurements, cat)
    return build_serving_plan(card, cat, list(request.gpus), request.workload,
                              grid=request.grid, tp_degrees=request.tp_degrees,
                              expert_parallel=request.expert_parallel,
                              memory_fraction=request.memory_fraction, gpu_cost=cost.kind,
                              unmeasured_gpu=cost.unmeasured, calibrations=calibrations,
                              measurements=measurements)
