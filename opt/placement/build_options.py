"""The workload and the options of the P1 builder (:mod:`opt.placement.builder`, problems.md
§1.4): prefill, decode and batch; layers, tensor parallelism, weight-block span, precision
(and the precision DOPS runs each model in, §6.1), sparsity, time unit, MoE routing, layout
formats and memory budget, KV layout and memory, measurements and the load rule; and the
checks of both before a build (InputError naming the field)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opt.common.errors import InputError
from opt.common.units import TIME_UNITS, dtype_bytes
from opt.costlib.hardware import FORMATS
from opt.costlib.measured import MeasuredTable
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import Precision, Sparsity

KV_LAYOUTS = ("heads", "single")
#: MoE routing of the builder (problems.md §1.4 MoE): ``fixed`` (default, the DOPS authors'
#: code) every token through the same experts, ``per_token`` each token its own top-k
MOE_ROUTINGS = ("fixed", "per_token")

#: most tokens of one sequence (prefill + decode): no bundled model card states a context
#: length, and 10 M tokens is beyond every published one
MAX_CONTEXT_TOKENS = 10_000_000
#: most tasks of one built instance (checked before building; about 1–2 GB of memory at this
#: size, over 5x the largest instances of the bundled sweeps)
MAX_TASKS = 4_000_000


@dataclass(frozen=True)
class Workload:
    """prefill: L_in tokens (≥ 1); decode: L_out steps (≥ 0); batch: sequences B (≥ 1);
    prefill + decode ≤ MAX_CONTEXT_TOKENS. Checked on construction (InputError naming the
    field)."""

    prefill: int
    decode: int
    batch: int = 1

    def __post_init__(self):
        for name, low in (("prefill", 1), ("decode", 0), ("batch", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InputError(f"{name} must be an integer, got {value!r}", field=name)
            if value < low:
                raise InputError(f"{name} must be ≥ {low}, got {value}", field=name)
        if self.prefill + self.decode > MAX_CONTEXT_TOKENS:
            raise InputError(f"prefill + decode is {self.prefill + self.decode:,} tokens, above "
                             f"the maximum {MAX_CONTEXT_TOKENS:,}",
                             field="prefill" if self.prefill > self.decode else "decode")


@dataclass(frozen=True)
class BuildOptions:
    """layers: use only the first k layers (small instances); tp: tensor-parallel shards;
    block_span: layers per weight block; dtype: weight precision (activations and KV fp16)
    when ``precision`` is None; precision: weight / activation / KV precision
    (:class:`opt.costlib.operators.Precision`; overrides ``dtype``, which must then be left at fp16 or
    agree with ``precision.weight``); sparsity: weight / per-phase activation / attention
    sparsity ratios (:class:`opt.costlib.operators.Sparsity`, None = dense); time_unit: integer tick of the instance; moe_routing: the routing of an MoE layer
    (:data:`MOE_ROUTINGS`, problems.md §1.4 MoE): ``fixed`` (default, the DOPS authors' code)
    every token through the experts ``experts`` (None = the first top-k, 0..k−1),
    ``per_token`` each token to its own top-k of the E experts (``experts`` must be None);
    dense cards ignore both; formats: the P2 layout formats offered (default
    all of linear, npu_opt, pim_opt, dual; linear, the P1 default, must be among them);
    memory_budget: main-memory bytes for the stored blocks (P2; None = unlimited);
    kv_layout: ``heads`` (default, problems.md §1.4 revised: each layer's KV heads split into one
    group per PIM device, attention one task per (TP shard, head group) cell) or ``single``
    (the former layout: one KV home per TP shard, shard s on PIM s mod #PIM);
    measurements: a measured-latency table (:mod:`opt.costlib.measured`) whose entries replace
    the model's task costs where they exist (None = the model everywhere);
    kv_memory: the KV cache takes its share of each KV home's memory (default, problems.md §1.4
    "KV against memory"); False = the former model, where only weights use device memory;
    load_timing: the instance's load rule (problems.md §1.2 rule 5): ``overlap`` (default, DOPS
    §6.1 "maximal overlap between computation and weight loading": the load runs while its task
    computes), ``at_use`` (DOPS Eq. 1 read as load then compute) or ``prefetch``."""

    layers: int | None = None
    tp: int = 1
    block_span: int = 4
    dtype: str = "fp16"
    time_unit: str = "ns"
    moe_routing: str = "fixed"
    experts: tuple[int, ...] | None = None
    formats: tuple[str, ...] | None = None
    memory_budget: int | None = None
    precision: Precision | None = None
    sparsity: Sparsity | None = None
    kv_layout: str = "heads"
    measurements: MeasuredTable | None = None
    kv_memory: bool = True
    load_timing: str = "overlap"

    def __post_init__(self) -> None:
        """Each field of its annotated type (InputError naming it, e.g. ``tp`` or
        ``precision.kv``); ``formats`` and ``experts`` given as lists are stored as tuples.
        The checks that need the model card (layers and tp within the model's, the names of
        formats, dtypes and layouts) run at build time (:func:`check_options`)."""
        for name in ("tp", "block_span"):
            _check_int(name, getattr(self, name))
        for name in ("layers", "memory_budget"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name))
        for name in ("dtype", "time_unit", "kv_layout", "load_timing", "moe_routing"):
            if not isinstance(getattr(self, name), str):
                raise InputError(f"{name} must be a string, got {getattr(self, name)!r}",
                                 field=name)
        if not isinstance(self.kv_memory, (bool, np.bool_)):
            raise InputError(f"kv_memory must be True or False, got {self.kv_memory!r}",
                             field="kv_memory")
        if self.measurements is not None and not isinstance(self.measurements, MeasuredTable):
            raise InputError(f"measurements must be a MeasuredTable, got "
                             f"{self.measurements!r}", field="measurements")
        self._store_tuple("formats", str, "format names")
        self._store_tuple("experts", (int, np.integer), "expert indices")
        self._check_routing()
        _check_precision(self.precision)
        _check_sparsity(self.sparsity)

    def _check_routing(self) -> None:
        """``moe_routing`` one of :data:`MOE_ROUTINGS`; ``experts`` only with ``fixed``, each
        listed once (InputError naming the field; the range is checked against the card at
        build time)."""
        if self.moe_routing not in MOE_ROUTINGS:
            raise InputError(f"moe_routing must be one of {', '.join(MOE_ROUTINGS)}, got "
                             f"'{self.moe_routing}'", field="moe_routing")
        if self.experts is None:
            return
        if self.moe_routing != "fixed":
            raise InputError(f"experts lists the experts of moe_routing 'fixed', not of "
                             f"'{self.moe_routing}'", field="experts")
        if not self.experts or len(set(self.experts)) != len(self.experts):
            raise InputError(f"experts must list distinct expert indices, got "
                             f"{list(self.experts)}", field="experts")

    def _store_tuple(self, name: str, kind: type | tuple[type, ...], what: str) -> None:
        """Field ``name`` (None or a list or tuple of ``kind``) stored as a tuple."""
        value = getattr(self, name)
        if value is None:
            return
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
                isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise InputError(f"{name} must be a list of {what} or None, got {value!r}",
                             field=name)
        object.__setattr__(self, name, tuple(value))

    def resolved_precision(self) -> Precision:
        """The precision the builder uses (``precision``, else ``dtype`` weights, fp16 rest)."""
        if self.precision is None:
            dtype_bytes(self.dtype)
            return Precision(weight=self.dtype)
        if not isinstance(self.precision, Precision):
            raise InputError(f"precision must be a Precision, got {self.precision!r}",
                             field="precision")
        if self.dtype not in ("fp16", self.precision.weight):
            raise InputError(f"dtype '{self.dtype}' disagrees with precision.weight "
                             f"'{self.precision.weight}'", field="dtype")
        return self.precision.check()


def _check_int(name: str, value: object) -> None:
    """InputError naming ``name`` unless ``value`` is an integer (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be an integer, got {value!r}", field=name)


def _check_precision(precision: object) -> None:
    """InputError naming the field unless ``precision`` is None or a :class:`Precision` of
    known dtype names (``precision.weight`` …)."""
    if precision is None:
        return
    if not isinstance(precision, Precision):
        raise InputError(f"precision must be a Precision or None, got {precision!r}",
                         field="precision")
    for name in ("weight", "activation", "kv"):
        if not isinstance(getattr(precision, name), str):
            raise InputError(f"must be a dtype name, got {getattr(precision, name)!r}",
                             field=f"precision.{name}")
    precision.check()


def _check_sparsity(sparsity: object) -> None:
    """InputError naming the field unless ``sparsity`` is None or a :class:`Sparsity` whose
    ratios are numbers in [0, 1) (``sparsity.weight`` …)."""
    if sparsity is None:
        return
    if not isinstance(sparsity, Sparsity):
        raise InputError(f"sparsity must be a Sparsity or None, got {sparsity!r}",
                         field="sparsity")
    for name in ("weight", "activation_prefill", "activation_decode", "attention"):
        value = getattr(sparsity, name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                or not 0 <= value < 1:
            raise InputError(f"sparsity ratio must be in [0, 1), got {value!r}",
                             field=f"sparsity.{name}")
    sparsity.check()


#: Precision DOPS runs each model in (§6.1: Mixtral-8x7B and Llama-2-70B in INT8 on HP128;
#: every other model fp16). Our reading of "INT8": weights, activations and KV cache int8.
PAPER_PRECISION: dict[str, Precision] = {
    "mixtral-8x7b": Precision(weight="int8", activation="int8", kv="int8"),
    "llama-2-70b": Precision(weight="int8", activation="int8", kv="int8"),
}


def paper_precision(model: str) -> Precision:
    """The precision DOPS uses for ``model`` (:data:`PAPER_PRECISION`, else fp16)."""
    return PAPER_PRECISION.get(model, Precision())


def check_size(tasks_per_step: int, workload: Workload) -> None:
    """Refuse, before building, an instance of more than MAX_TASKS tasks (InputError naming
    ``decode``, the factor that makes instances large)."""
    n = tasks_per_step * (workload.decode + 1)
    if n > MAX_TASKS:
        most = MAX_TASKS // tasks_per_step - 1
        raise InputError(f"the instance would have {n:,} tasks ({tasks_per_step} per step × "
                         f"{workload.decode + 1:,} steps), above the maximum {MAX_TASKS:,}; "
                         f"use at most {most:,} decode steps or fewer layers", field="decode")


def check_tp(card: ModelCard, tp: int) -> None:
    """``tp`` an integer in 1..the card's attention heads (a shard holds at least one head);
    InputError naming ``tp``. Checked before anything is built."""
    if isinstance(tp, bool) or not isinstance(tp, (int, np.integer)) or tp < 1:
        raise InputError(f"tp must be an integer ≥ 1, got {tp!r}", field="tp")
    if tp > card.heads:
        raise InputError(f"tp must be at most the {card.heads} attention heads of model "
                         f"'{card.name}' (a shard holds at least one head), got {tp}",
                         field="tp")


def check_options(card: ModelCard, opt: BuildOptions
                   ) -> tuple[int, Precision, tuple[str, ...]]:
    """(layers used, resolved precision, formats offered); raises InputError on a bad option."""
    n_layers = card.layers if opt.layers is None else opt.layers
    if not 1 <= n_layers <= card.layers:
        raise InputError(f"layers must be in 1..{card.layers}, got {opt.layers}", field="layers")
    check_tp(card, opt.tp)
    if isinstance(opt.block_span, bool) or not isinstance(opt.block_span, (int, np.integer)) \
            or opt.block_span < 1:
        raise InputError(f"block_span must be an integer ≥ 1, got {opt.block_span!r}",
                         field="block_span")
    if opt.time_unit not in TIME_UNITS or opt.time_unit == "unit":
        raise InputError(f"time_unit must be one of ns, us, ms, s; got '{opt.time_unit}'",
                         field="time_unit")
    if any(card.layer_type(layer) == "linear" for layer in range(n_layers)):
        raise InputError(f"model '{card.name}' has linear-attention layers; the placement "
                         f"builder supports full and sliding attention", field="model")
    if opt.kv_layout not in KV_LAYOUTS:
        raise InputError(f"kv_layout must be one of {', '.join(KV_LAYOUTS)}, got "
                         f"'{opt.kv_layout}'", field="kv_layout")
    if card.moe is not None and opt.experts is not None and \
            not all(0 <= e < card.moe.num_experts for e in opt.experts):
        raise InputError(f"experts must be in 0..{card.moe.num_experts - 1} for model "
                         f"'{card.name}', got {list(opt.experts)}", field="experts")
    prec = opt.resolved_precision()
    sparsity = opt.sparsity
    if sparsity is not None:
        if not isinstance(sparsity, Sparsity):
            raise InputError(f"sparsity must be a Sparsity, got {sparsity!r}", field="sparsity")
        sparsity.check()
    formats = FORMATS if opt.formats is None else tuple(dict.fromkeys(opt.formats))
    if "linear" not in formats or not set(formats) <= set(FORMATS):
        raise InputError(f"formats must be among {', '.join(FORMATS)} and include linear, got "
                         f"{', '.join(formats)}", field="formats")
    if opt.memory_budget is not None and opt.memory_budget < 0:
        raise InputError(f"memory_budget must be ≥ 0 bytes, got {opt.memory_budget}",
                         field="memory_budget")
    return n_layers, prec, formats
