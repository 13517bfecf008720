"""Per-replica batch limits from memory (OpWeave App. B.4; problems.md §3 "Batch limits"): the
default grid's largest batch is the largest power of two a KV-holding stage set of one
configuration can hold, the plan checker's memory rule agrees with it at the boundary, given
batches and the hard cap still bind, and the searches stay exact on the larger grid."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.serving import builder
from opt.serving.builder import MAX_MEMORY_BATCH, ServingWorkload, build_serving_plan
from opt.serving.checker import evaluate_plan
from opt.serving.instance import FILE_BATCHES, ServingGrid, ServingInstance
from solvers.api import solve

CAT = bundled_catalog()
CARDS = bundled_cards()
#: the Fig. 9 cell whose colocated optimum needs a batch above 256 (docs/serving.md)
QWEN_8K = ("qwen3-next-80b-a3b", 8192, 0.080)
SMALL_GRID = dict(max_gpus=8, max_owners=2, max_replicas=4, max_microbatches=2)


def _qwen(grid: ServingGrid | None = None) -> ServingInstance:
    model, context, slo = QWEN_8K
    return build_serving_plan(CARDS[model], CAT, ["H100"], ServingWorkload(context, slo),
                              grid=grid)


def _one_layer(gpu: str = "L40S", context: int = 131072,
               batches: tuple[int, ...] | None = None, max_replicas: int = 4
               ) -> ServingInstance:
    """A one-layer full-attention Gemma-3-27B cut: one KV op (``L0.attn``), KV 1 GiB per
    request at 128K, so an L40S holds well under 256 requests."""
    card = replace(CARDS["gemma-3-27b"], layers=1, layer_pattern=("full",))
    return build_serving_plan(card, CAT, [gpu], ServingWorkload(context, 0.02),
                              grid=ServingGrid(**{**SMALL_GRID, "max_replicas": max_replicas},
                                               batches=batches),
                              tp_degrees=(1, 2), gpu_cost="roofline")


def _floor_pow2(n: int) -> int:
    return 2 ** (n.bit_length() - 1)


def _powers_of_two(largest: int) -> tuple[int, ...]:
    return tuple(2 ** k for k in range(largest.bit_length()))


def _memory_batch(inst: ServingInstance) -> int:
    """B.4 recomputed from the instance's own accessors (those the checker uses): the largest
    b with cnt·w_i + b·cnt·kv_i ≤ replica memory, over configurations and KV ops."""
    best = 0
    for i, op in enumerate(inst.ops):
        if op.kv_bytes_per_request == 0:
            continue
        cnt = int(inst.op_count[i])
        for cfg in inst.configs:
            room = inst.replica_memory_bytes(cfg) - cnt * op.weight_bytes
            best = max(best, math.floor(room / (cnt * op.kv_bytes_per_request)))
    return best


def test_default_grid_reaches_what_memory_allows_beyond_256():
    """Gemma-3-27B 8K on H100: a sliding-window attention op alone holds 7629 requests on
    H100×8; the grid runs to 4096 × 4 replicas."""
    inst = build_serving_plan(CARDS["gemma-3-27b"], CAT, ["H100"], ServingWorkload(8192, 0.06))
    meta = inst.meta["batch_grid"]
    assert meta["memory_batch"] == _memory_batch(inst) > 256
    assert meta["bound"] == "memory" and meta["cap"] == MAX_MEMORY_BATCH
    kv_largest = _floor_pow2(meta["memory_batch"])
    assert inst.batches == _powers_of_two(kv_largest * 4) and meta["largest"] == kv_largest * 4


def test_a_grid_stops_where_memory_stops():
    """One full-attention layer at 128K on L40S: under 256 requests fit; the grid stops at
    the largest power of two that fits, times the replicas an owner may have."""
    inst = _one_layer()
    meta = inst.meta["batch_grid"]
    assert (meta["memory_config"], meta["memory_op"]) == ("L40Sx2", "L0.attn")
    assert meta["memory_batch"] == _memory_batch(inst) < 256
    kv_largest = _floor_pow2(meta["memory_batch"])
    assert inst.batches == _powers_of_two(kv_largest * SMALL_GRID["max_replicas"])
    one = _one_layer(max_replicas=1)
    assert one.batches == _powers_of_two(kv_largest) and kv_largest < 256


def test_no_plan_needs_a_batch_beyond_the_grid():
    """Brute force on the one-layer cut: over every configuration, owner count and template of
    the block, the checker admits no plan with a power-of-two batch above the grid's largest
    (the KV owner's memory and the replica cap bind), and one at the grid's largest."""
    inst = _one_layer(batches=_powers_of_two(4 * _one_layer().batches[-1]))
    top = _one_layer().batches[-1]
    feasible = set()
    cfgs = [c.id for c in inst.configs]
    templates = [[q0, q1, q0 + 5] for q0 in range(5) for q1 in range(q0 + 1, q0 + 5)]
    for t in templates:
        for a in cfgs:
            for b in cfgs:
                for ba in inst.batches:
                    for bb in inst.batches:
                        plan = {"template": t, "microbatches": 1,
                                "owners": [{"config": a, "batch": ba},
                                           {"config": b, "batch": bb}]}
                        met = evaluate_plan(inst, plan)
                        if not [v for v in met.violations
                                if v.startswith(("memory", "replicas"))]:
                            feasible |= {ba, bb}
    assert max(feasible) == top


def test_the_memory_batch_is_the_checkers_boundary():
    """The stage set {L0.attn} alone on the limiting configuration: at the memory batch L the
    checker's memory rule holds, at L + 1 it names that owner."""
    limit = _one_layer().meta["batch_grid"]
    big = limit["memory_batch"]
    inst = _one_layer(batches=(big, big + 1))
    assert inst.meta["batch_grid"]["bound"] == "given"
    cfg = limit["memory_config"]
    for batch, fits in ((big, True), (big + 1, False)):
        plan = {"template": [1, 2, 6], "microbatches": 1,
                "owners": [{"config": cfg, "batch": batch}, {"config": cfg, "batch": batch}]}
        memory = [v for v in evaluate_plan(inst, plan).violations if v.startswith("memory")]
        assert memory == ([] if fits else [memory[0]]), memory
        assert fits or memory[0].startswith(f"memory: owner 1 ({cfg}, batch {batch})")


def test_given_batches_are_kept():
    inst = _qwen(ServingGrid(batches=(1, 2, 4, 8)))
    assert inst.batches == (1, 2, 4, 8)
    meta = inst.meta["batch_grid"]
    assert (meta["bound"], meta["largest"], meta["memory_batch"]) == ("given", 8,
                                                                      _memory_batch(inst))


def test_the_hard_cap_binds_above_it(monkeypatch):
    """Qwen3-Next's linear-attention state (no context term) lets H100×8 hold 48 585 requests:
    × 4 replicas is beyond the cap, which binds."""
    meta = _qwen().meta["batch_grid"]
    assert meta["memory_batch"] * 4 > MAX_MEMORY_BATCH == meta["largest"]
    assert meta["bound"] == "cap"
    monkeypatch.setattr(builder, "MAX_MEMORY_BATCH", 64)
    inst = _qwen()
    assert inst.batches == _powers_of_two(64)
    assert inst.meta["batch_grid"]["bound"] == "cap" and inst.meta["batch_grid"]["cap"] == 64


def test_command_line_batches_are_given_and_default_is_memory():
    from opt.app.cli.parser import build_parser
    from opt.app.cli.serving import grid_from_args

    argv = ["build", "serving", "--model", "m", "--gpus", "H100", "--context", "1",
            "--slo-ms", "1", "-o", "x.json"]
    parser = build_parser()
    assert grid_from_args(parser.parse_args(argv)).batches is None
    assert grid_from_args(parser.parse_args([*argv, "--batches", "1,4,16"])).batches == \
        (1, 4, 16)


def test_an_instance_grid_holds_its_batches():
    with pytest.raises(InputError) as exc:
        replace(_one_layer(), grid=ServingGrid())
    assert exc.value.field == "grid.batches"


def test_larger_grid_lowers_the_colocated_optimum_and_plans_fit_memory():
    """Qwen3-Next 8K / 80 ms on H100: COL's optimum needs a batch above 256, so the memory grid
    beats the grid capped at 256; every plan the searches return passes the checker, memory
    included."""
    capped, full = _qwen(ServingGrid(batches=FILE_BATCHES)), _qwen()
    col_capped, col = solve(capped, "col"), solve(full, "col")
    assert col.objective < col_capped.objective * (1 - 1e-6)
    assert max(o["batch"] for o in col.solution["owners"]) > 256
    for method in ("col", "afd", "cad", "bnb"):
        res = col if method == "col" else solve(full, method, time_limit=600)
        metrics = evaluate_plan(full, res.solution)
        assert metrics.violations == [], (method, metrics.violations)
        assert all(m <= c for m, c in zip(metrics.memory_bytes,
                                            metrics.memory_capacity_bytes))
        assert res.objective <= col.objective * (1 + 1e-12) or method != "bnb"


def test_bnb_equals_enumeration_on_the_memory_grid():
    """A two-layer Gemma cut on A100 + L40S, 8K / 20 ms: the memory grid runs to 16384, the
    exhaustive optimum uses batches above 256, and B&B finds its cost."""
    card = replace(CARDS["gemma-3-27b"], layers=2, layer_pattern=("sliding", "full"))
    inst = build_serving_plan(card, CAT, ["A100", "L40S"], ServingWorkload(8192, 0.02),
                              grid=ServingGrid(**SMALL_GRID), tp_degrees=(1, 2),
                              gpu_cost="roofline")
    assert inst.batches[-1] > 256 and inst.meta["batch_grid"]["bound"] == "memory"
    enum, bnb = solve(inst, "enum", time_limit=600), solve(inst, "bnb", time_limit=600)
    assert enum.status == "OPTIMAL"
    assert max(o["batch"] for o in enum.solution["owners"]) > 256
    assert bnb.objective == pytest.approx(enum.objective, rel=1e-12)
    assert evaluate_plan(inst, bnb.solution).violations == []
