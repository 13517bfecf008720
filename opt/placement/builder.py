"""Build P1 placement instances from an LLM workload (problems.md §1.4), vectorised over decode steps.

Step 0 is the prefill (T_q = T_kv = L_in); decode step i = 1..L_out has T_q = 1 and
T_kv = L_in + i. Every step has the same task structure (a *template*): ``embed``, per layer the
operators of :func:`opt.costlib.operators.layer_ops` (``tp`` shards for the sharded ones, an
``allreduce`` on the host after row-parallel shards), then ``final_norm`` and ``lm_head``; step
i+1's ``embed`` depends on step i's ``lm_head``. Task durations, edge payloads and block loads
are computed from the cost library as arrays over steps and converted to integer ticks once.

Modelling choices (documented; each is a switch or a clear default):
- KV layout (problems.md §1.4, ``kv_layout``): ``heads`` (default) splits each layer's KV heads
  into one group per PIM device (min(#PIM, H_kv) groups, as even as the head count allows; one
  group on the first NPU/GPU without PIM), independent of tp; attention (``kv_write, qk,
  softmax, sv``) is one task set per (TP shard, head group) cell (:func:`_kv_plan`). ``single``
  is the former layout (one home per TP shard, shard s on PIM s mod #PIM). ``kv_write`` is
  pinned to its cell's home; ``qk``/``sv`` depend on it with the K (V) bytes of the visible
  context of the cell's heads as payload, so attention away from home pays the KV move.
- Decode attention (T_q = 1) takes the latency class ``attention_decode`` (GEMV regime,
  problems.md §5.2) through :func:`opt.costlib.latency.regime_class`.
- MoE (problems.md §1.4, MoE): per-token deterministic top-k routing over all E experts
  (:func:`opt.costlib.operators.routed_experts`); the template holds every expert's tasks and
  a step keeps only the experts some token of that step routes to (:func:`_absent_tasks`);
  every expert is a weight block whether or not a task uses it. ``BuildOptions.experts`` is
  the former rule (every token through the listed experts).
- Weight blocks: one per weight family (wq, wk, wv, wo, w_gate, w_up, w_down, router, expert{e})
  per ``block_span`` consecutive layers (per shard when tp > 1). ``embed``/``lm_head`` weights are
  taken as resident on the NPU (they cannot run on PIM) and are not blocks.
- Load durations for every format (linear, npu_opt, pim_opt, dual) = host-link transfer +
  conversion chain (problems.md §5.4); P1 uses ``linear`` (``layout.default``).
- TP shards divide FLOPs and bytes by tp (the o_proj/down_proj partial sums keep full size); the
  all-reduce's duration includes its data movement, so its edges carry 0 bytes (latency only).
- Legality: NPU/GPU run every compute op; PIM all but router, combine, embed, lm_head; the
  all-reduce only the host (the fabric).
- Quantisation and sparsity (problems.md §1.4, DOPS §4.1): ``BuildOptions.precision`` sets weight /
  activation / KV bytes per element (int4 = 4 bits + an fp16 scale per 128-element group) and
  so block sizes, load durations, op bytes and edge payloads; ``BuildOptions.sparsity`` scales
  FLOPs and bytes as documented in :class:`opt.costlib.operators.Sparsity` (prefill uses the prefill
  activation ratio, decode steps the decode one). Model cards are never modified.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from opt import __version__
from opt.common.errors import InputError
from opt.common.units import TIME_UNITS, dtype_bytes, seconds_to_ticks
from opt.costlib.hardware import FORMATS, Catalog, DeviceSpec, PlatformSpec
from opt.costlib.latency import regime_class, ring_allreduce_s, star_allreduce_s
from opt.costlib.measured import MeasuredTable, apply_measurements
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import (
    Op,
    Precision,
    Sparsity,
    expert_token_counts,
    head_ops,
    layer_ops,
)
from opt.placement.instance import (
    Device,
    Layout,
    Links,
    PlacementInstance,
    build_instance,
    make_links,
)

KV_LAYOUTS = ("heads", "single")
PIM_ILLEGAL = frozenset({"router", "combine", "embed", "lm_head"})
ATTN_SHARDED = frozenset({"q_proj", "k_proj", "v_proj", "kv_write", "qk", "softmax", "sv",
                          "attn_gate", "o_proj"})
ROW_PARALLEL = ("o_proj", "down_proj")
FAMILY_NAMES = {"wq": "wq", "wk": "wk", "wv": "wv", "wo": "wo", "w_gate": "w_gate",
                "w_up": "w_up", "w_down": "w_down"}


#: most tokens of one sequence (prefill + decode): no bundled model card states a context
#: length, and 10 M tokens is beyond every published one
MAX_CONTEXT_TOKENS = 10_000_000
#: most tasks of one built instance (checked before building; about 1–2 GB of memory at this
#: size, over 5x the largest instances of the bundled sweeps)
MAX_TASKS = 4_000_000
#: largest share of the positive durations (tasks and loads) that may round to 0 ticks of
#: the chosen time unit (a coarser unit is refused: the optimum would ignore those costs)
MAX_ZERO_ROUNDED_SHARE = 0.01


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
    sparsity ratios (:class:`opt.costlib.operators.Sparsity`, None = dense); time_unit: integer tick of the instance; experts: None (default) = per-token top-k
    routing over all E experts of an MoE layer (DOPS §6.1, problems.md §1.4 MoE), else the
    former fixed rule: every token through the listed experts; formats: the P2 layout formats offered (default
    all of linear, npu_opt, pim_opt, dual; linear, the P1 default, must be among them);
    memory_budget: main-memory bytes for the stored blocks (P2; None = unlimited);
    kv_layout: ``heads`` (default, problems.md §1.4 revised: each layer's KV heads split into one
    group per PIM device, attention one task per (TP shard, head group) cell) or ``single``
    (the former layout: one KV home per TP shard, shard s on PIM s mod #PIM);
    measurements: a measured-latency table (:mod:`opt.costlib.measured`) whose entries replace
    the model's task costs where they exist (None = the model everywhere);
    kv_memory: the KV cache takes its share of each KV home's memory (default, problems.md §1.4
    "KV against memory"); False = the former model, where only weights use device memory;
    load_timing: the instance's load rule (problems.md §1.2 rule 5): ``at_use`` (default, DOPS
    Eq. 1) or ``prefetch``."""

    layers: int | None = None
    tp: int = 1
    block_span: int = 4
    dtype: str = "fp16"
    time_unit: str = "ns"
    experts: tuple[int, ...] | None = None
    formats: tuple[str, ...] | None = None
    memory_budget: int | None = None
    precision: Precision | None = None
    sparsity: Sparsity | None = None
    kv_layout: str = "heads"
    measurements: MeasuredTable | None = None
    kv_memory: bool = True
    load_timing: str = "at_use"

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


#: Precision DOPS runs each model in (§6.1: Mixtral-8x7B and Llama-2-70B in INT8 on HP128;
#: every other model fp16). Our reading of "INT8": weights, activations and KV cache int8.
PAPER_PRECISION: dict[str, Precision] = {
    "mixtral-8x7b": Precision(weight="int8", activation="int8", kv="int8"),
    "llama-2-70b": Precision(weight="int8", activation="int8", kv="int8"),
}


def paper_precision(model: str) -> Precision:
    """The precision DOPS uses for ``model`` (:data:`PAPER_PRECISION`, else fp16)."""
    return PAPER_PRECISION.get(model, Precision())


@dataclass
class _Template:
    """The task structure of one step."""

    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    layer: list[int] = field(default_factory=list)
    shard: list[int] = field(default_factory=list)
    family: list[str | None] = field(default_factory=list)
    ops: list[tuple[str, int, int]] = field(default_factory=list)  # (op kind, layer, shard)
    edges: list[tuple[int, int, Any]] = field(default_factory=list)  # (src, dst, payload spec)
    frac: list[float] = field(default_factory=list)  # share of the layer's op this task does
    home: list[int] = field(default_factory=list)  # KV home index of an attention cell, else -1

    def add(self, name: str, kind: str, layer: int, shard: int, family: str | None,
            op_ref: tuple[str, int, int], frac: float = 1.0, home: int = -1) -> int:
        self.frac.append(frac)
        self.home.append(home)
        self.names.append(name)
        self.kinds.append(kind)
        self.layer.append(layer)
        self.shard.append(shard)
        self.family.append(family)
        self.ops.append(op_ref)
        return len(self.names) - 1


@dataclass(frozen=True)
class _Devices:
    """The instance's devices with their catalog specs, class index sets and the KV homes."""

    specs: list[tuple[str, DeviceSpec]]
    devices: list[Device]
    compute: np.ndarray  # NPU/GPU device indices
    pim: np.ndarray      # PIM device indices
    host: int            # the fabric host (runs the all-reduces) when tp > 1, else -1
    links: Links


@dataclass(frozen=True)
class _KvPlan:
    """Where each layer's KV cache lives (problems.md §1.4, KV cache).

    homes: device index of each KV home; cells: (TP shard or −1, home index, fraction of the
    layer's KV heads) of every attention cell — one ``kv_write, qk, softmax, sv`` task set;
    heads: KV heads per home; grouped: whether task names carry the group (``@g{home}``)."""

    layout: str
    homes: list[int]
    cells: list[tuple[int, int, float]]
    heads: list[float]
    grouped: bool


def _kv_plan(card: ModelCard, opt: BuildOptions, devs: _Devices) -> _KvPlan:
    """The KV layout. ``heads``: the H_kv heads of a layer split into G = min(#PIM, H_kv)
    contiguous groups as evenly as the head count allows (group g on PIM g; one group on the
    first NPU/GPU without PIM); TP shard s holds the real head range [s·H_kv/tp, (s+1)·H_kv/tp)
    (the same division of FLOPs and bytes by tp as every sharded op), and every non-empty
    (shard, group) intersection is one attention cell whose share is its heads / H_kv. So with
    tp = 2 and 4 groups each shard has two cells; with tp = 4 and 2 groups two shards share
    each group. ``single``: one cell per TP shard, shard s on PIM s mod #PIM."""
    tp, pim = opt.tp, devs.pim
    shards = list(range(tp)) if tp > 1 else [-1]
    if opt.kv_layout == "single":
        homes = [int(pim[s % len(pim)]) if len(pim) else int(devs.compute[0]) for s in range(tp)]
        cells = [(s, max(s, 0), 1.0 / tp) for s in shards]
        return _KvPlan("single", homes, cells, [card.kv_heads / tp] * tp, False)
    h_kv = card.kv_heads
    n_groups = max(1, min(len(pim), h_kv))
    sizes = [h_kv // n_groups + (1 if g < h_kv % n_groups else 0) for g in range(n_groups)]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.float64)
    homes = [int(pim[g]) for g in range(n_groups)] if len(pim) else [int(devs.compute[0])]
    cells = []
    for s in shards:
        lo, hi = (0.0, float(h_kv)) if s < 0 else (s * h_kv / tp, (s + 1) * h_kv / tp)
        for g in range(n_groups):
            width = min(hi, bounds[g + 1]) - max(lo, bounds[g])
            if width > 1e-9:
                cells.append((s, g, float(width / h_kv)))
    return _KvPlan("heads", homes, cells, [float(x) for x in sizes], n_groups > 1)


def _reserve_kv(card: ModelCard, devs: _Devices, kv: _KvPlan, workload: Workload,
                prec: Precision, n_layers: int) -> dict[str, int]:
    """Take each KV home's share of the cache at the end of the workload (context L_in + L_out,
    B sequences, the KV precision) out of its weight capacity, in place (problems.md §1.4):
    weights and KV share the device memory, so a long context leaves less room for weights.
    Returns the bytes reserved per device name; :class:`InputError` when the KV alone does not
    fit a home."""
    total = float(card.kv_bytes(workload.prefill + workload.decode, prec.kv)) \
        * workload.batch * n_layers / card.layers
    per_dev: dict[int, float] = {}
    for h, heads in zip(kv.homes, kv.heads):
        per_dev[h] = per_dev.get(h, 0.0) + total * heads / card.kv_heads
    out = {}
    for d, nbytes in per_dev.items():
        dev, need = devs.devices[d], int(math.ceil(nbytes))
        out[dev.name] = need
        if dev.weight_capacity is None:
            continue
        if need > dev.weight_capacity:
            raise InputError(f"the KV cache share of {dev.name} ({need / 1e9:.3g} GB at context "
                             f"{workload.prefill + workload.decode}, batch {workload.batch}) "
                             f"exceeds its memory ({dev.weight_capacity / 1e9:.3g} GB)",
                             field="workload")
        devs.devices[d] = replace(dev, weight_capacity=dev.weight_capacity - need)
    return out


@dataclass(frozen=True)
class _Steps:
    """Per-step shapes of the workload: step 0 is the prefill, steps 1..L_out decode."""

    n_steps: int
    ctx: np.ndarray  # T_kv per step (float64)
    tok: np.ndarray  # T_q per step (float64)


def build_placement(card: ModelCard, platform: PlatformSpec, catalog: Catalog,
                    workload: Workload, options: BuildOptions | None = None) -> PlacementInstance:
    """The P1 instance of ``workload`` for ``card`` on ``platform`` (see the module docstring)."""
    t_start = time.perf_counter()
    opt = options or BuildOptions()
    n_layers, prec, formats = _check_options(card, opt)
    devs = _devices(platform, catalog, opt)
    kv = _kv_plan(card, opt, devs)
    tpl = _step_template(card, opt, n_layers, prec, kv)
    _check_size(len(tpl.names), workload)
    kv_reserved = _reserve_kv(card, devs, kv, workload, prec, n_layers) if opt.kv_memory \
        else None
    steps = _steps(workload)
    table = _step_ops(card, opt, n_layers, prec, workload)
    rounding = _Rounding(opt.time_unit)
    cost, out_bytes = _task_costs(tpl, table, devs, kv, platform, card, workload, opt, prec,
                                  steps, rounding)
    measured = None
    if opt.measurements is not None:
        cost, measured = apply_measurements(
            cost, opt.measurements, kinds=[o[0] for o in tpl.ops], shares=tpl.frac,
            device_types=[s.name for _, s in devs.specs], tokens=steps.tok, context=steps.ctx,
            batch=workload.batch, model=card.name, time_unit=opt.time_unit)
    edge_src, edge_dst, edge_bytes = _edges(tpl, out_bytes, card, n_layers, workload, opt, prec,
                                            steps)
    block_ids, block_bytes, block_load, t_block = _blocks(tpl, table, devs, platform, opt,
                                                          formats, rounding)
    rounding.check()

    # ---- assemble ---------------------------------------------------------------------------
    n_steps, k_tasks, nd = steps.n_steps, len(tpl.names), len(devs.devices)
    step_ids = np.arange(n_steps, dtype=np.int64)
    ids = [f"s{s}.{name}" for s in range(n_steps) for name in tpl.names]
    phase = np.where(step_ids == 0, 0, 1).astype(np.int8)
    cols = {"cost": cost.reshape(n_steps * k_tasks, nd), "task_block": np.tile(t_block, n_steps),
            "kind": np.array(tpl.kinds * n_steps, dtype=object),
            "phase": np.repeat(phase, k_tasks), "step": np.repeat(step_ids, k_tasks),
            "layer": np.tile(np.array(tpl.layer), n_steps),
            "shard": np.tile(np.array(tpl.shard), n_steps)}
    routing = _moe_routing(card, opt, workload)
    if routing is not None:
        ids, cols, (edge_src, edge_dst, edge_bytes) = _drop_tasks(
            _absent_tasks(tpl, routing, n_steps), ids, cols, (edge_src, edge_dst, edge_bytes))
    opt_meta = asdict(replace(opt, measurements=None))
    opt_meta.pop("measurements")  # a table's provenance goes to meta.measurements
    meta = {
        "model": card.name, "platform": platform.name,
        "workload": asdict(workload), "builder": {"name": "hetopt.opt.builder",
                                                  "version": __version__, **opt_meta,
                                                  "precision": asdict(prec)},
        "kv_layout": kv.layout,
        "kv_home": [devs.devices[d].name for d in kv.homes],
        "kv_heads": kv.heads,
        **({"kv_reserved_bytes": kv_reserved} if kv_reserved is not None else {}),
        **({"moe_routing": routing} if routing is not None else {}),
        "tasks_per_step": k_tasks,
        "notes": "durations from the hetopt cost library (problems.md §5), integer ticks of time_unit",
    }
    if measured is not None:
        meta["measurements"] = measured
    inst = build_instance(
        time_unit=opt.time_unit, devices=devs.devices, links=devs.links, task_ids=ids,
        cost=cols["cost"], task_block=cols["task_block"],
        edge_src=edge_src, edge_dst=edge_dst, edge_bytes=edge_bytes, block_ids=block_ids,
        block_bytes=block_bytes, block_load=block_load,
        layout=Layout(formats=formats, default="linear", memory_budget=opt.memory_budget),
        kind=list(cols["kind"]), phase=cols["phase"], step=cols["step"], layer=cols["layer"],
        shard=cols["shard"], meta=meta, check_acyclic=False, load_timing=opt.load_timing)
    meta["build_s"] = time.perf_counter() - t_start
    return inst


def _moe_routing(card: ModelCard, opt: BuildOptions, workload: Workload
                 ) -> dict[str, Any] | None:
    """The per-token routing record of an MoE card (None for dense cards and for the fixed
    rule ``BuildOptions.experts``): rule, E, k and the tokens per expert of the prefill step
    (N = B·L_in) and of every decode step (N = B; the routing depends on the token's index in
    its step only, so every decode step routes alike)."""
    if card.moe is None or opt.experts is not None:
        return None
    e, k = card.moe.num_experts, card.moe.top_k
    return {"rule": "per_token", "num_experts": e, "top_k": k,
            "prefill_tokens_per_expert":
                expert_token_counts(workload.batch * workload.prefill, e, k).tolist(),
            "decode_tokens_per_expert": expert_token_counts(workload.batch, e, k).tolist()}


def _absent_tasks(tpl: _Template, routing: dict[str, Any], n_steps: int) -> np.ndarray:
    """[n_steps, tasks per step] bool: the tasks of experts no token of the step routes to."""
    counts = np.array([routing["prefill_tokens_per_expert"]]
                      + [routing["decode_tokens_per_expert"]] * (n_steps - 1))
    absent = np.zeros((n_steps, len(tpl.kinds)), dtype=bool)
    for k, kind in enumerate(tpl.kinds):
        if kind.startswith("expert"):
            absent[:, k] = counts[:, int(kind.split("_", 1)[0][len("expert"):])] == 0
    return absent


def _drop_tasks(absent: np.ndarray, ids: list[str], cols: dict[str, np.ndarray],
                edges: tuple[np.ndarray, np.ndarray, np.ndarray]
                ) -> tuple[list[str], dict[str, np.ndarray], tuple[np.ndarray, ...]]:
    """Remove the ``absent`` tasks (flattened step-major, as ``ids``), their rows of every
    column and every edge that touches them; remaining edges are renumbered."""
    keep = ~absent.ravel()
    if keep.all():
        return ids, cols, edges
    new_index = np.cumsum(keep) - 1
    src, dst, nbytes = edges
    ok = keep[src] & keep[dst]
    ids = [t for t, k in zip(ids, keep) if k]
    cols = {name: col[keep] for name, col in cols.items()}
    return ids, cols, (new_index[src[ok]], new_index[dst[ok]], nbytes[ok])


@dataclass
class _Rounding:
    """Converts seconds to ticks of ``unit`` and counts the positive durations, and those of
    them that round to 0 ticks (local to one build)."""

    unit: str
    positive: int = 0
    zeroed: int = 0

    def ticks(self, seconds):
        out = seconds_to_ticks(seconds, self.unit)
        pos = np.asarray(seconds) > 0
        self.positive += int(pos.sum())
        self.zeroed += int((pos & (np.asarray(out) == 0)).sum())
        return out

    def check(self) -> None:
        """InputError naming ``time_unit`` when more than MAX_ZERO_ROUNDED_SHARE of the
        positive durations rounded to 0."""
        if self.zeroed > MAX_ZERO_ROUNDED_SHARE * self.positive:
            raise InputError(f"time_unit '{self.unit}' rounds {self.zeroed} of the "
                             f"{self.positive} positive task and load durations to 0 ticks "
                             f"({self.zeroed / self.positive:.0%}; at most "
                             f"{MAX_ZERO_ROUNDED_SHARE:.0%} may): use a finer time unit",
                             field="time_unit")


def _check_size(tasks_per_step: int, workload: Workload) -> None:
    """Refuse, before building, an instance of more than MAX_TASKS tasks (InputError naming
    ``decode``, the factor that makes instances large)."""
    n = tasks_per_step * (workload.decode + 1)
    if n > MAX_TASKS:
        most = MAX_TASKS // tasks_per_step - 1
        raise InputError(f"the instance would have {n:,} tasks ({tasks_per_step} per step × "
                         f"{workload.decode + 1:,} steps), above the maximum {MAX_TASKS:,}; "
                         f"use at most {most:,} decode steps or fewer layers", field="decode")


def _check_options(card: ModelCard, opt: BuildOptions
                   ) -> tuple[int, Precision, tuple[str, ...]]:
    """(layers used, resolved precision, formats offered); raises InputError on a bad option."""
    n_layers = card.layers if opt.layers is None else opt.layers
    if not 1 <= n_layers <= card.layers:
        raise InputError(f"layers must be in 1..{card.layers}, got {opt.layers}", field="layers")
    if opt.tp < 1:
        raise InputError(f"tp must be ≥ 1, got {opt.tp}", field="tp")
    if opt.block_span < 1:
        raise InputError(f"block_span must be ≥ 1, got {opt.block_span}", field="block_span")
    if opt.time_unit not in TIME_UNITS or opt.time_unit == "unit":
        raise InputError(f"time_unit must be one of ns, us, ms, s; got '{opt.time_unit}'",
                         field="time_unit")
    if any(card.layer_type(layer) == "linear" for layer in range(n_layers)):
        raise InputError(f"model '{card.name}' has linear-attention layers; the placement "
                         f"builder supports full and sliding attention", field="model")
    if opt.kv_layout not in KV_LAYOUTS:
        raise InputError(f"kv_layout must be one of {', '.join(KV_LAYOUTS)}, got "
                         f"'{opt.kv_layout}'", field="kv_layout")
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


# ---- devices and links ------------------------------------------------------------------------

def _devices(platform: PlatformSpec, catalog: Catalog, opt: BuildOptions) -> _Devices:
    """The platform's devices (plus the host when tp > 1), KV homes and the fabric links."""
    tp = opt.tp
    tick = TIME_UNITS[opt.time_unit]
    specs = [(name, catalog.device(kind)) for name, kind in platform.device_names()]
    host_spec = catalog.device(platform.host)
    if tp > 1:
        specs.append(("HOST", host_spec))
    devices = [Device(name, s.device_class,
                      None if s.memory_bytes is None or s.device_class == "cpu"
                      else int(s.memory_bytes)) for name, s in specs]
    nd = len(devices)
    cls = np.array([d.device_class for d in devices])
    compute_devs = np.flatnonzero((cls == "npu") | (cls == "gpu"))
    pim_devs = np.flatnonzero(cls == "pim")
    host_dev = nd - 1 if tp > 1 else -1
    if len(compute_devs) == 0:
        raise InputError(f"platform '{platform.name}' has no NPU or GPU", field="platform")
    lat = int(seconds_to_ticks(platform.fabric.latency_s, opt.time_unit))
    bw = platform.fabric.bandwidth_bytes_per_s * tick
    links = make_links(devices, platform.topology, True, lat, bw)
    return _Devices(specs, devices, compute_devs, pim_devs, host_dev, links)


# ---- the step template ------------------------------------------------------------------------

@dataclass
class _Layer:
    """Adds one layer's tasks to the template: task names ``L{layer}.{kind}[#shard][@g{group}]``
    and weight-block names ``L{lo}-{hi}_{family}[#shard]`` (``block_span`` layers per block)."""

    tpl: _Template
    layer: int
    probe: dict[str, Op]
    block_span: int
    n_layers: int
    shards: Sequence[int]
    tp: int

    def add(self, kind: str, shard: int = -1, family: str | None = None,
            cell: tuple[int, float, bool] | None = None) -> int:
        """A task; ``cell`` = (home index, share, grouped) for an attention-cell task."""
        name = f"L{self.layer}.{kind}" + (f"#{shard}" if shard >= 0 else "")
        frac, home = (1.0 / self.tp if shard >= 0 else 1.0), -1
        if cell is not None:
            home, frac, grouped = cell
            if grouped:
                name += f"@g{home}"
        return self.tpl.add(name, kind, self.layer, shard, family, (kind, self.layer, shard),
                            frac, home)

    def fam(self, kind: str, shard: int = -1) -> str | None:
        f = self.probe[kind].family
        if f is None:
            return None
        span = self.layer // self.block_span
        lo = span * self.block_span
        hi = min((span + 1) * self.block_span, self.n_layers) - 1
        return f"L{lo}-{hi}_{f}" + (f"#{shard}" if shard >= 0 else "")

    def edge(self, src: int, dst: int, spec: tuple | None = None) -> None:
        """Edge src → dst carrying ``spec`` (default: src's output)."""
        self.tpl.edges.append((src, dst, ("out", src) if spec is None else spec))


def _step_template(card: ModelCard, opt: BuildOptions, n_layers: int, prec: Precision,
                   kv: _KvPlan) -> _Template:
    """``embed``, every layer's operators (sharded, with all-reduces when tp > 1; attention
    per KV cell of ``kv``), ``final_norm`` and ``lm_head`` of one step, with the edges."""
    tpl = _Template()
    e_idx = tpl.add("embed", "embed", -1, -1, None, ("embed", -1, -1))
    x_src = e_idx  # the residual stream entering the next layer
    shards = range(opt.tp) if opt.tp > 1 else [-1]
    for layer in range(n_layers):
        probe = {o.kind: o for o in layer_ops(card, layer, tokens=1, context=1, batch=1,
                                              precision=prec, experts=opt.experts,
                                              routing=_routing_name(card, opt))}
        lay = _Layer(tpl, layer, probe, opt.block_span, n_layers, shards, opt.tp)
        add_attn = _attention_tasks(lay, x_src, opt.tp, kv)
        x_src = _ffn_tasks(lay, add_attn, card.moe is not None, opt.tp)
    fn = tpl.add("final_norm", "final_norm", -1, -1, None, ("final_norm", -1, -1))
    lm = tpl.add("lm_head", "lm_head", -1, -1, None, ("lm_head", -1, -1))
    tpl.edges += [(x_src, fn, ("out", x_src)), (fn, lm, ("out", fn))]
    return tpl


def _attention_tasks(lay: _Layer, x_src: int, tp: int, kv: _KvPlan) -> int:
    """attn_norm, per shard q/k/v, per KV cell of the shard kv_write, qk, softmax, sv, then
    (attn_gate) o_proj, the all-reduce (tp > 1) and add_attn; returns add_attn. Payloads into a
    cell are the cell's share of the shard's q/k/v; qk and sv read the cell's K (V) cache."""
    add, fam, edge, tpl = lay.add, lay.fam, lay.edge, lay.tpl
    norm = add("attn_norm")
    edge(x_src, norm)
    o_list = []
    shard_frac = 1.0 / tp
    for s in lay.shards:
        q = add("q_proj", s, fam("q_proj", s))
        k = add("k_proj", s, fam("k_proj", s))
        v = add("v_proj", s, fam("v_proj", s))
        for p in (q, k, v):
            edge(norm, p)
        svs = []
        for c_shard, home, frac in kv.cells:
            if c_shard != s:
                continue
            cell = (home, frac, kv.grouped)
            kvw = add("kv_write", s, None, cell)
            qk = add("qk", s, None, cell)
            sm = add("softmax", s, None, cell)
            sv = add("sv", s, None, cell)
            r = frac / shard_frac  # the cell's share of the shard's heads
            tpl.edges += [(k, kvw, ("part", k, r)), (v, kvw, ("part", v, r)),
                          (q, qk, ("part", q, r)), (kvw, qk, ("kv", lay.layer, frac)),
                          (qk, sm, ("out", qk)), (sm, sv, ("out", sm)),
                          (kvw, sv, ("kv", lay.layer, frac))]
            svs.append(sv)
        last = svs
        if "attn_gate" in lay.probe:
            g = add("attn_gate", s)
            tpl.edges += [(sv, g, ("out", sv)) for sv in svs] + [(q, g, ("out", q))]
            last = [g]
        o = add("o_proj", s, fam("o_proj", s))
        for x in last:
            edge(x, o)
        o_list.append(o)
    add_attn = add("add_attn")
    edge(x_src, add_attn)
    if tp > 1:
        ar = add("allreduce_attn")
        tpl.edges += [(o, ar, ("zero",)) for o in o_list]
        edge(ar, add_attn, ("zero",))
    else:
        edge(o_list[0], add_attn)
    return add_attn


def _mlp_tasks(lay: _Layer, fnorm: int, prefix: str, router: int | None) -> list[int]:
    """gate, up, act, down of one MLP (``prefix`` '' for the dense FFN, else an expert's) per
    shard; routed experts also depend on the router. Returns the down projections."""
    add, fam, tpl = lay.add, lay.fam, lay.tpl
    g_kind, u_kind, a_kind, d_kind = ((f"{prefix}_gate", f"{prefix}_up", f"{prefix}_act",
                                       f"{prefix}_down") if prefix else
                                      ("gate_proj", "up_proj", "act", "down_proj"))
    downs = []
    for s in lay.shards:
        gt = add(g_kind, s, fam(g_kind, s))
        up = add(u_kind, s, fam(u_kind, s))
        act = add(a_kind, s)
        dn = add(d_kind, s, fam(d_kind, s))
        tpl.edges += [(fnorm, gt, ("out", fnorm)), (fnorm, up, ("out", fnorm)),
                      (gt, act, ("out", gt)), (up, act, ("out", up)),
                      (act, dn, ("out", act))]
        if router is not None and prefix.startswith("expert"):
            tpl.edges += [(router, gt, ("zero",))]
        downs.append(dn)
    return downs


def _ffn_tasks(lay: _Layer, add_attn: int, moe: bool, tp: int) -> int:
    """ffn_norm, the dense FFN or the MoE (router, experts, shared experts, combine), the
    all-reduce (tp > 1) and add_ffn; returns add_ffn."""
    add, edge, tpl = lay.add, lay.edge, lay.tpl
    fnorm = add("ffn_norm")
    edge(add_attn, fnorm)
    router = None
    if not moe:
        ffn_out = _mlp_tasks(lay, fnorm, "", None)
    else:
        router = add("router", -1, lay.fam("router"))
        edge(fnorm, router)
        ffn_out = []
        expert_kinds = sorted({k.rsplit("_", 1)[0] for k in lay.probe
                               if k.startswith(("expert", "shared")) and k.endswith("_gate")})
        for ek in expert_kinds:
            ffn_out += _mlp_tasks(lay, fnorm, ek, router)
    add_ffn = add("add_ffn")
    edge(add_attn, add_ffn)
    if tp > 1:
        ar = add("allreduce_ffn")
        tpl.edges += [(dn, ar, ("zero",)) for dn in ffn_out]
        merged = ar
    else:
        merged = None
    if moe:
        comb = add("combine")
        edge(router, comb)
        if merged is not None:
            edge(merged, comb, ("zero",))
        else:
            tpl.edges += [(dn, comb, ("out", dn)) for dn in ffn_out]
        edge(comb, add_ffn)
    elif merged is not None:
        edge(merged, add_ffn, ("zero",))
    else:
        edge(ffn_out[0], add_ffn)
    return add_ffn


# ---- op costs per step (prefill scalar, decode vectorised) ----------------------------------

def _steps(workload: Workload) -> _Steps:
    l_in, l_out = workload.prefill, workload.decode
    ctx = np.concatenate([[l_in], l_in + np.arange(1, l_out + 1)]).astype(np.float64)
    tok = np.concatenate([[l_in], np.ones(l_out)]).astype(np.float64)
    return _Steps(l_out + 1, ctx, tok)


def _routing_name(card: ModelCard, opt: BuildOptions) -> str:
    """``per_token`` for an MoE card without ``BuildOptions.experts``, else ``deterministic``
    (the fixed rule; dense cards ignore it)."""
    return "per_token" if card.moe is not None and opt.experts is None else "deterministic"


def _empty_decode(ops: list[Op]) -> list[Op]:
    """The decode ops of a workload without decode steps: zero-length arrays."""
    return [Op(o.kind, o.op_class, o.module, o.family, np.zeros(0), np.zeros(0),
               o.weight_bytes, np.zeros(0)) for o in ops]


def _step_ops(card: ModelCard, opt: BuildOptions, n_layers: int, prec: Precision,
              workload: Workload) -> dict[tuple[str, int], dict[str, Any]]:
    """{(kind, layer): {"op": the prefill Op, "flops"/"bytes"/"out_bytes": arrays over steps}}
    from one prefill and one (vectorised) decode evaluation; layer −1 for the head ops."""
    l_in, l_out, batch = workload.prefill, workload.decode, workload.batch
    ctx = _steps(workload).ctx
    sparsity = opt.sparsity
    table: dict[tuple[str, int], dict[str, Any]] = {}

    def put(key, ops_pre, ops_dec):
        for op_p, op_d in zip(ops_pre, ops_dec):
            table[(op_p.kind, key)] = {
                "op": op_p,
                **{f: np.concatenate([np.atleast_1d(getattr(op_p, f)),
                                      np.broadcast_to(getattr(op_d, f), (l_out,))])
                   for f in ("flops", "bytes", "out_bytes")}}

    for layer in range(n_layers):
        routing = _routing_name(card, opt)
        pre = layer_ops(card, layer, tokens=l_in, context=l_in, batch=batch, precision=prec,
                        experts=opt.experts, sparsity=sparsity, phase="prefill",
                        routing=routing)
        dec = layer_ops(card, layer, tokens=1, context=ctx[1:] if l_out else np.array([l_in + 1.0]),
                        batch=batch, precision=prec, experts=opt.experts, sparsity=sparsity,
                        phase="decode", routing=routing)
        if not l_out:
            dec = _empty_decode(dec)
        put(layer, pre, dec)
    e_p, t_p = head_ops(card, tokens=l_in, batch=batch, prefill=True, precision=prec)
    e_d, t_d = head_ops(card, tokens=np.ones(max(l_out, 1)), batch=batch, prefill=False,
                        precision=prec)
    if not l_out:
        e_d, *t_d = _empty_decode([e_d, *t_d])
    put(-1, [e_p, *t_p], [e_d, *t_d])
    return table


def _task_costs(tpl: _Template, table: dict, devs: _Devices, kv: _KvPlan,
                platform: PlatformSpec, card: ModelCard, workload: Workload, opt: BuildOptions,
                prec: Precision, steps: _Steps, rounding: _Rounding
                ) -> tuple[np.ndarray, np.ndarray]:
    """(cost [steps, K, D] ticks, −1 illegal; output bytes [K, steps]) of the template's tasks.
    A task does its share ``tpl.frac`` of the layer's op (1/tp for a TP shard, the cell's heads
    for attention; row-parallel outputs keep full size). Legality: kv_write on its cell's KV
    home; NPU/GPU everything else, PIM all but PIM_ILLEGAL; the all-reduces only on the host
    (duration from the fabric's collective model). Op classes take their regime
    (:func:`opt.costlib.latency.regime_class`: decode attention is the GEMV regime)."""
    tp, nd, k_tasks = opt.tp, len(devs.devices), len(tpl.names)
    cost = np.full((steps.n_steps, k_tasks, nd), -1, dtype=np.int64)
    out_bytes = np.zeros((k_tasks, steps.n_steps))
    ar_bytes = (workload.batch * steps.tok * card.hidden * prec.a)
    decode = steps.tok == 1
    decode[0] = False  # step 0 is the prefill, even with L_in = 1
    for k in range(k_tasks):
        kind, layer, shard = tpl.ops[k]
        if kind.startswith("allreduce"):
            link = platform.fabric
            f_ar = ring_allreduce_s if platform.topology == "full" else star_allreduce_s
            cost[:, k, devs.host] = rounding.ticks(f_ar(ar_bytes, tp, link))
            continue
        entry = table[(kind, layer)]
        op: Op = entry["op"]
        frac = tpl.frac[k]
        flops, nbytes = entry["flops"] * frac, entry["bytes"] * frac
        out = entry["out_bytes"] * (frac if kind not in ROW_PARALLEL else 1.0)
        out_bytes[k] = out
        if kind == "kv_write":
            legal = [kv.homes[tpl.home[k]]]
        else:
            legal = list(devs.compute)
            if kind not in PIM_ILLEGAL:
                legal += list(devs.pim)
        regimes = [(regime_class(op.op_class, False), ~decode),
                   (regime_class(op.op_class, True), decode)]
        if regimes[0][0] == regimes[1][0]:
            regimes = [(regimes[0][0], np.ones(steps.n_steps, dtype=bool))]
        for d in legal:
            spec = devs.specs[d][1]
            for c, sel in regimes:
                if sel.any():
                    cost[sel, k, d] = rounding.ticks(spec.latency_s(c, flops[sel],
                                                                    nbytes[sel]))
    return cost, out_bytes


# ---- edges (template → all steps) -----------------------------------------------------------

def _edges(tpl: _Template, out_bytes: np.ndarray, card: ModelCard, n_layers: int,
           workload: Workload, opt: BuildOptions, prec: Precision, steps: _Steps
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, bytes) of every step's template edges (payload: the source's output, a
    share of it, the visible K/V of the cell's heads, or 0), then the lm_head → next embed token chain."""
    batch, n_steps, k_tasks = workload.batch, steps.n_steps, len(tpl.names)
    kv_tok = {}
    for layer in range(n_layers):
        window = card.sliding_window if card.layer_type(layer) == "sliding" else None
        visible = np.minimum(steps.ctx, window) if window else steps.ctx
        kv_tok[layer] = batch * visible * card.kv_dim * prec.k  # all KV heads of the layer
    e_src = np.array([a for a, _, _ in tpl.edges], dtype=np.int64)
    e_dst = np.array([b for _, b, _ in tpl.edges], dtype=np.int64)
    e_bytes = np.zeros((len(tpl.edges), n_steps))
    for i, (_, _, spec) in enumerate(tpl.edges):
        if spec[0] == "out":
            e_bytes[i] = out_bytes[spec[1]]
        elif spec[0] == "part":
            e_bytes[i] = out_bytes[spec[1]] * spec[2]
        elif spec[0] == "kv":
            e_bytes[i] = kv_tok[spec[1]] * spec[2]
    step_ids = np.arange(n_steps, dtype=np.int64)
    src_all = (step_ids[:, None] * k_tasks + e_src[None, :]).ravel()
    dst_all = (step_ids[:, None] * k_tasks + e_dst[None, :]).ravel()
    bytes_all = np.ceil(e_bytes.T).astype(np.int64).ravel()
    lm, e_idx = tpl.names.index("lm_head"), tpl.names.index("embed")
    chain_src = step_ids[:-1] * k_tasks + lm
    chain_dst = step_ids[1:] * k_tasks + e_idx
    chain_bytes = np.full(n_steps - 1, batch * 4, dtype=np.int64)  # sampled token ids (int32)
    return (np.concatenate([src_all, chain_src]), np.concatenate([dst_all, chain_dst]),
            np.concatenate([bytes_all, chain_bytes]))


# ---- weight blocks ----------------------------------------------------------------------------

def _blocks(tpl: _Template, table: dict, devs: _Devices, platform: PlatformSpec,
            opt: BuildOptions, formats: tuple[str, ...], rounding: _Rounding
            ) -> tuple[list[str], np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(block ids, bytes, load ticks per format [B, D] (−1 = not loadable), block of each
    template task (−1 = none)). Blocks are ordered by first layer, then name."""
    nd = len(devs.devices)
    block_ids = sorted({f for f in tpl.family if f is not None},
                       key=lambda b: (int(b.split("-")[0][1:]), b))  # by first layer, then name
    bindex = {b: i for i, b in enumerate(block_ids)}
    block_bytes = np.zeros(len(block_ids), dtype=np.float64)
    for k, f in enumerate(tpl.family):
        if f is not None:
            kind, layer, _ = tpl.ops[k]
            wb = table[(kind, layer)]["op"].weight_bytes * tpl.frac[k]
            block_bytes[bindex[f]] += wb
    # gate/up/down of one expert share the expert's block: weight counted once per op above is
    # right (each op reads its own matrix); the same block name appears for all three.
    block_bytes = np.ceil(block_bytes).astype(np.int64)
    block_load = {fmt: np.full((len(block_ids), nd), -1, dtype=np.int64) for fmt in formats}
    for d, (_, spec) in enumerate(devs.specs):
        if spec.device_class == "cpu":
            continue
        for fmt in formats:
            try:
                spec.conversion_chain(fmt, 1.0)
            except InputError:
                continue
            block_load[fmt][:, d] = [rounding.ticks(spec.load_s(float(b), fmt,
                                                                platform.host_link))
                                     for b in block_bytes]
    t_block = np.array([bindex[f] if f is not None else -1 for f in tpl.family], dtype=np.int64)
    return block_ids, block_bytes, block_load, t_block
