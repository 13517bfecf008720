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
  softmax, sv``) is one task set per (TP shard, head group) cell (:func:`opt.placement.build_devices.kv_plan`). ``single``
  is the former layout (one home per TP shard, shard s on PIM s mod #PIM). ``kv_write`` is
  pinned to its cell's home; ``qk``/``sv`` depend on it with the K (V) bytes of the visible
  context of the cell's heads as payload, so attention away from home pays the KV move.
- Decode attention (T_q = 1) takes the latency class ``attention_decode`` (GEMV regime,
  problems.md §5.2) through :func:`opt.costlib.latency.regime_class`.
- MoE (problems.md §1.4, MoE; ``BuildOptions.moe_routing``): ``fixed`` (default, the DOPS
  authors' code) routes every token through the same experts, ``BuildOptions.experts`` or the
  first top-k (0..k−1): the template holds their tasks and blocks only. ``per_token`` routes
  each token to its own deterministic top-k of the E experts
  (:func:`opt.costlib.operators.routed_experts`); the template holds every expert's tasks and
  a step keeps only the experts some token of that step routes to (:func:`_absent_tasks`);
  every expert is a weight block whether or not a task uses it. ``meta.moe_routing`` records
  the rule.
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

The parts live in :mod:`opt.placement.build_options` (workload, options, precision),
:mod:`opt.placement.build_devices` (devices, links, the KV layout and its memory),
:mod:`opt.placement.step_template` (the task graph of one step) and
:mod:`opt.placement.step_costs` (durations, payloads and weight blocks over the steps).
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from opt import __version__
from opt.costlib.hardware import Catalog, PlatformSpec
from opt.costlib.measured import apply_measurements
from opt.costlib.modelcard import ModelCard
from opt.costlib.operators import expert_token_counts
from opt.placement.build_devices import kv_plan, platform_devices, reserve_kv
from opt.placement.build_options import BuildOptions, Workload, check_options, check_size
from opt.placement.instance import Layout, PlacementInstance
from opt.placement.instance_checks import BlockColumns, EdgeColumns, TaskColumns, build_instance
from opt.placement.step_costs import (
    Rounding,
    allreduce_bytes,
    step_ops,
    step_shapes,
    task_costs,
    template_edges,
    weight_blocks,
)
from opt.placement.step_template import StepTemplate, step_template


def build_placement(card: ModelCard, platform: PlatformSpec, catalog: Catalog,
                    workload: Workload, options: BuildOptions | None = None) -> PlacementInstance:
    """The P1 instance of ``workload`` for ``card`` on ``platform`` (see the module docstring)."""
    t_start = time.perf_counter()
    opt = options or BuildOptions()
    n_layers, prec, formats = check_options(card, opt)
    devs = platform_devices(platform, catalog, opt)
    kv = kv_plan(card, opt, devs)
    tpl = step_template(card, opt, n_layers, prec, kv)
    check_size(len(tpl.names), workload)
    kv_reserved = reserve_kv(card, devs, kv, workload, prec, n_layers) if opt.kv_memory \
        else None
    steps = step_shapes(workload)
    table = step_ops(card, opt, n_layers, prec, workload)
    rounding = Rounding(opt.time_unit)
    cost, out_bytes = task_costs(tpl, table, devs, kv, platform, opt, steps,
                                  allreduce_bytes(card, workload, prec, steps), rounding)
    measured = None
    if opt.measurements is not None:
        cost, measured = apply_measurements(
            cost, opt.measurements, kinds=[o[0] for o in tpl.ops], shares=tpl.frac,
            device_types=[s.name for _, s in devs.specs], tokens=steps.tok, context=steps.ctx,
            batch=workload.batch, model=card.name, time_unit=opt.time_unit)
    edge_src, edge_dst, edge_bytes = template_edges(tpl, out_bytes, card, n_layers, workload, opt, prec,
                                            steps)
    block_ids, block_bytes, block_load, t_block = weight_blocks(tpl, table, devs, platform, opt,
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
    if routing is not None and routing["rule"] == "per_token":
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
        time_unit=opt.time_unit, devices=devs.devices, links=devs.links,
        tasks=TaskColumns(ids, cols["cost"], kind=list(cols["kind"]), phase=cols["phase"],
                          step=cols["step"], layer=cols["layer"], shard=cols["shard"]),
        edges=EdgeColumns(edge_src, edge_dst, edge_bytes),
        blocks=BlockColumns(block_ids, block_bytes, load=block_load,
                            task_block=cols["task_block"],
                            layout=Layout(formats=formats, default="linear",
                                          memory_budget=opt.memory_budget)),
        meta=meta, check_acyclic=False, load_timing=opt.load_timing)
    meta["build_s"] = time.perf_counter() - t_start
    return inst


def _moe_routing(card: ModelCard, opt: BuildOptions, workload: Workload
                 ) -> dict[str, Any] | None:
    """The routing record of an MoE card (None for dense cards): rule
    (``BuildOptions.moe_routing``), E and k; under ``fixed`` the experts every token goes
    through; under ``per_token`` the tokens per expert of the prefill step (N = B·L_in) and of
    every decode step (N = B; the routing depends on the token's index in its step only, so
    every decode step routes alike)."""
    if card.moe is None:
        return None
    e, k = card.moe.num_experts, card.moe.top_k
    if opt.moe_routing == "fixed":
        chosen = list(range(k)) if opt.experts is None else [int(x) for x in opt.experts]
        return {"rule": "fixed", "num_experts": e, "top_k": k, "experts": chosen}
    return {"rule": "per_token", "num_experts": e, "top_k": k,
            "prefill_tokens_per_expert":
                expert_token_counts(workload.batch * workload.prefill, e, k).tolist(),
            "decode_tokens_per_expert": expert_token_counts(workload.batch, e, k).tolist()}


def _absent_tasks(tpl: StepTemplate, routing: dict[str, Any], n_steps: int) -> np.ndarray:
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
