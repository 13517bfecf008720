"""The P1 builder: DAG shape, KV pinning, legality, blocks, sharding, precision, size."""

import numpy as np
import pytest

from opt.app.reproduction.reference import DOPS_BLOCKS
from opt.common.errors import InputError
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement


def build(catalog, cards, model="llama-2-7b", platform="HP32", prefill=64, decode=2, batch=1,
          **opts):
    return build_placement(cards[model], catalog.platform(platform), catalog,
                           Workload(prefill, decode, batch), BuildOptions(**opts))


def kinds_of(inst, step=0):
    return [k for k, s in zip(inst.kind, inst.step) if s == step]


@pytest.mark.parametrize("model,blocks", sorted(DOPS_BLOCKS.items()))
def test_block_counts(catalog, cards, model, blocks):
    inst = build(catalog, cards, model=model, decode=1)
    assert len(inst.block_ids) == blocks


def test_task_counts_and_chain(catalog, cards):
    inst = build(catalog, cards, layers=3, decode=4)
    # embed, final_norm, lm_head + 16 ops per dense layer, attention (4 ops) once per head group
    # (2 PIM devices on HP32: one more set of kv_write, qk, softmax, sv)
    per_step = 3 + 3 * (16 + 4)
    assert inst.n_tasks == 5 * per_step
    assert inst.meta["tasks_per_step"] == per_step
    assert kinds_of(inst)[:3] == ["embed", "attn_norm", "q_proj"]
    single = build(catalog, cards, layers=3, decode=4, kv_layout="single")
    assert single.n_tasks == 5 * (3 + 3 * 16) and single.meta["kv_layout"] == "single"
    # step i+1's embed depends on step i's lm_head
    for s in range(4):
        lm = inst.task_index[f"s{s}.lm_head"]
        emb = inst.task_index[f"s{s + 1}.embed"]
        assert np.any((inst.edge_src == lm) & (inst.edge_dst == emb))
    assert list(np.unique(inst.phase)) == [0, 1]
    assert np.all(inst.phase[inst.step == 0] == 0) and np.all(inst.phase[inst.step > 0] == 1)


def test_legality_and_kv_pinning(catalog, cards):
    """problems.md §1.4 (revised): group g of the KV heads on PIM g, kv_write pinned there, qk/sv
    read the group's K (V) of T_kv tokens."""
    inst = build(catalog, cards, layers=1, decode=1)
    names = [d.name for d in inst.devices]
    assert names == ["NPU0", "PIM0", "PIM1"]
    assert inst.meta["kv_layout"] == "heads" and inst.meta["kv_home"] == ["PIM0", "PIM1"]
    assert inst.meta["kv_heads"] == [16, 16]
    legal = {inst.task_ids[t]: {names[d] for d in np.flatnonzero(inst.cost[t] >= 0)}
             for t in range(inst.n_tasks)}
    assert legal["s0.embed"] == {"NPU0"} and legal["s0.lm_head"] == {"NPU0"}
    assert legal["s0.L0.kv_write@g0"] == {"PIM0"} and legal["s0.L0.kv_write@g1"] == {"PIM1"}
    assert legal["s0.L0.q_proj"] == {"NPU0", "PIM0", "PIM1"}
    assert legal["s0.L0.qk@g1"] == {"NPU0", "PIM0", "PIM1"}
    card = cards["llama-2-7b"]
    for g in (0, 1):
        kvw = inst.task_index[f"s1.L0.kv_write@g{g}"]
        for kind in ("qk", "sv"):
            dst = inst.task_index[f"s1.L0.{kind}@g{g}"]
            e = np.flatnonzero((inst.edge_src == kvw) & (inst.edge_dst == dst))[0]
            assert inst.edge_bytes[e] == 65 * card.kv_dim * 2 // 2  # half the heads, 65 tokens
    # the groups split the work: two half-size qk tasks cost what one full one would
    single = build(catalog, cards, layers=1, decode=1, kv_layout="single")
    legal_s = {single.task_ids[t]: {names[d] for d in np.flatnonzero(single.cost[t] >= 0)}
               for t in range(single.n_tasks)}
    assert legal_s["s0.L0.kv_write"] == {"PIM0"} and single.meta["kv_home"] == ["PIM0"]
    q_full = single.cost[single.task_index["s0.L0.qk"], 0]
    q_half = inst.cost[inst.task_index["s0.L0.qk@g0"], 0]
    assert q_half < q_full


@pytest.mark.parametrize("platform,homes", [("HP0", ["NPU0"]), ("HP32", ["PIM0", "PIM1"]),
                                            ("HP64", ["PIM0", "PIM1", "PIM2", "PIM3"]),
                                            ("HP128", [f"PIM{i}" for i in range(8)])])
def test_every_pim_device_holds_kv(catalog, cards, platform, homes):
    """KV bandwidth grows with the PIM devices (DOPS §6.1), at tp = 1."""
    inst = build(catalog, cards, platform=platform, layers=1, decode=1)
    assert inst.meta["kv_home"] == homes
    kvw = [inst.task_ids[t] for t in range(inst.n_tasks)
           if inst.kind[t] == "kv_write" and inst.step[t] == 1]
    assert len(kvw) == len(homes)
    assert sum(inst.meta["kv_heads"]) == cards["llama-2-7b"].kv_heads


def test_fewer_kv_heads_than_pim_devices(catalog, cards):
    """dops-qwen-1.8b has 2 KV heads: on HP128 they go to PIM0 and PIM1 (a head is not split)."""
    inst = build(catalog, cards, model="dops-qwen-1.8b", platform="HP128", layers=1, decode=1)
    assert inst.meta["kv_home"] == ["PIM0", "PIM1"] and inst.meta["kv_heads"] == [1, 1]
    uneven = build(catalog, cards, model="llama-2-13b", platform="HP128", layers=1, decode=1)
    assert uneven.meta["kv_heads"] == [5] * 8
    gqa = build(catalog, cards, model="mixtral-8x7b", platform="HP64", layers=1, decode=1)
    assert gqa.meta["kv_heads"] == [2, 2, 2, 2]


def test_head_groups_times_tp_shards(catalog, cards):
    """tp = 2 on HP64: each shard's 16 heads span two groups of 8, so 4 cells; tp = 4 on HP32:
    two shards per group, again 4 cells. Every cell's work is its share of the heads."""
    a = build(catalog, cards, platform="HP64", layers=1, decode=1, tp=2)
    cells = sorted(a.task_ids[t] for t in range(a.n_tasks)
                   if a.kind[t] == "qk" and a.step[t] == 0)
    assert cells == ["s0.L0.qk#0@g0", "s0.L0.qk#0@g1", "s0.L0.qk#1@g2", "s0.L0.qk#1@g3"]
    b = build(catalog, cards, platform="HP32", layers=1, decode=1, tp=4)
    cells = sorted(b.task_ids[t] for t in range(b.n_tasks)
                   if b.kind[t] == "kv_write" and b.step[t] == 0)
    assert cells == ["s0.L0.kv_write#0@g0", "s0.L0.kv_write#1@g0", "s0.L0.kv_write#2@g1",
                     "s0.L0.kv_write#3@g1"]
    names = [d.name for d in b.devices]
    for t in range(b.n_tasks):
        if b.kind[t] == "kv_write":
            g = int(b.task_ids[t][-1])
            assert np.flatnonzero(b.cost[t] >= 0).tolist() == [names.index(f"PIM{g}")]
    # the KV payloads of all cells of a step add up to the layer's whole K cache
    card = cards["llama-2-7b"]
    total = 0
    for t in range(b.n_tasks):
        if b.kind[t] == "qk" and b.step[t] == 1:
            e = np.flatnonzero((b.edge_dst == t) & (np.isin(b.edge_src, np.flatnonzero(
                np.array(b.kind) == "kv_write"))))[0]
            total += int(b.edge_bytes[e])
    assert total == 65 * card.kv_dim * 2


def test_hp0_keeps_kv_on_npu(catalog, cards):
    inst = build(catalog, cards, platform="HP0", layers=1, decode=1)
    assert [d.name for d in inst.devices] == ["NPU0"]
    assert inst.meta["kv_home"] == ["NPU0"]


def test_moe_tasks_and_pim_illegal_ops(catalog, cards):
    inst = build(catalog, cards, model="mixtral-8x7b", layers=1, decode=1,
                 moe_routing="per_token")
    k = kinds_of(inst)
    assert "router" in k and "combine" in k
    # per-token top-2 routing: the 64 prefill tokens reach all 8 experts, the one decode token
    # experts 0 and 1 only
    assert sum(x.startswith("expert") for x in k) == 8 * 4
    assert sorted({x.split("_")[0] for x in kinds_of(inst, 1) if x.startswith("expert")}) == \
        ["expert0", "expert1"]
    pims = [i for i, d in enumerate(inst.devices) if d.device_class == "pim"]
    for t in range(inst.n_tasks):
        if inst.kind[t] in ("router", "combine", "embed", "lm_head"):
            assert np.all(inst.cost[t, pims] < 0)
    assert any(b.endswith("_expert0") for b in inst.block_ids)


def test_per_token_routing_rule():
    from opt.costlib.operators import expert_token_counts, routed_experts
    r = routed_experts(1000, 8, 2)
    assert r[0].tolist() == [0, 1]
    assert np.all(r[:, 0] != r[:, 1]) and np.all((r >= 0) & (r < 8))
    assert expert_token_counts(1000, 8, 2).sum() == 2000
    in_play = [int((expert_token_counts(n, 8, 2) > 0).sum()) for n in (1, 2, 4, 8, 16, 64)]
    assert in_play == sorted(in_play) and in_play[0] == 2 and in_play[-1] == 8


def test_moe_experts_in_play_grow_with_batch(catalog, cards):
    def decode_experts(batch):
        inst = build(catalog, cards, model="mixtral-8x7b", layers=1, decode=1, batch=batch,
                     prefill=1, moe_routing="per_token")
        return {x.split("_")[0] for x in kinds_of(inst, 1) if x.startswith("expert")}, inst
    one, inst1 = decode_experts(1)
    many, inst16 = decode_experts(16)
    assert len(one) == 2 and len(many) == 8
    # every expert is a block whether a task uses it or not; the edges stay consistent
    assert sum(b.endswith(tuple(f"_expert{e}" for e in range(8))) for b in inst1.block_ids) == 8
    assert inst1.meta["moe_routing"]["decode_tokens_per_expert"][:2] == [1, 1]
    comb = inst16.task_index["s1.L0.combine"]
    assert sum(inst16.edge_dst == comb) == 8 + 1  # eight down projections and the router
    # the fixed rule (the default): every token through experts 0 and 1 whatever the batch
    fixed = build(catalog, cards, model="mixtral-8x7b", layers=1, decode=1, batch=16,
                  prefill=1)
    assert {x.split("_")[0] for x in kinds_of(fixed, 1) if x.startswith("expert")} == \
        {"expert0", "expert1"}
    assert fixed.meta["moe_routing"] == {"rule": "fixed", "num_experts": 8, "top_k": 2,
                                         "experts": [0, 1]}


def test_mixtral_hp128_holds_all_eight_experts(catalog, cards):
    from opt.placement.build_options import paper_precision
    inst = build(catalog, cards, model="mixtral-8x7b", platform="HP128", prefill=128, decode=1,
                 precision=paper_precision("mixtral-8x7b"), moe_routing="per_token")
    experts = [b for b in inst.block_ids if "_expert" in b]
    assert len(experts) == 8 * 32 // 4  # 8 experts × 8 spans of 4 layers
    assert {b.split("_")[1] for b in experts if b.startswith("L0-3")} == \
        {f"expert{e}" for e in range(8)}
    # INT8: the blocks hold the model's 46.7 B parameters less the NPU-resident embed/lm_head
    card = cards["mixtral-8x7b"]
    resident = 2 * card.vocab * card.hidden
    assert inst.block_bytes.sum() == pytest.approx(46.7e9 - resident, rel=0.01)


def test_tensor_parallel_allreduce_on_host(catalog, cards):
    inst = build(catalog, cards, layers=1, decode=1, tp=2)
    names = [d.name for d in inst.devices]
    assert names[-1] == "HOST" and inst.devices[-1].device_class == "cpu"
    ar = [t for t in range(inst.n_tasks) if inst.kind[t].startswith("allreduce")]
    assert len(ar) == 2 * 2  # attention + FFN, two steps
    for t in ar:
        assert np.flatnonzero(inst.cost[t] >= 0).tolist() == [len(names) - 1]
    shard_q = [t for t in range(inst.n_tasks) if inst.kind[t] == "q_proj" and inst.step[t] == 0]
    assert sorted(inst.shard[shard_q].tolist()) == [0, 1]
    # KV homes are the head groups over the PIM devices; the single layout homes shard s on
    # PIM s mod #PIM
    assert inst.meta["kv_home"] == ["PIM0", "PIM1"]
    single = build(catalog, cards, layers=1, decode=1, tp=2, kv_layout="single")
    assert single.meta["kv_home"] == ["PIM0", "PIM1"]
    with pytest.raises(InputError, match="kv_layout"):
        build(catalog, cards, layers=1, decode=1, kv_layout="rows")
    assert len(inst.block_ids) == 2 * 7


def test_int8_halves_block_bytes_and_loads(catalog, cards):
    a = build(catalog, cards, layers=1, decode=1)
    b = build(catalog, cards, layers=1, decode=1, dtype="int8")
    assert np.array_equal(b.block_bytes * 2, a.block_bytes)
    la, lb = a.load_duration.astype(float), b.load_duration.astype(float)
    np.testing.assert_allclose(lb / la, 0.5, rtol=1e-3)


def test_durations_grow_with_context(catalog, cards):
    inst = build(catalog, cards, layers=1, decode=8, prefill=512, batch=8)
    qk = [t for t in range(inst.n_tasks) if inst.kind[t] == "qk" and inst.step[t] > 0]
    pim = 1
    d = inst.cost[qk, pim]
    assert np.all(np.diff(d) >= 0) and d[-1] > d[0]


def test_bad_options(catalog, cards):
    with pytest.raises(InputError, match="layers"):
        build(catalog, cards, layers=40)
    with pytest.raises(InputError, match="tp"):
        build(catalog, cards, tp=0)
    with pytest.raises(InputError, match="prefill"):
        build(catalog, cards, prefill=0)
    with pytest.raises(InputError, match="linear-attention"):
        build(catalog, cards, model="qwen3-next-80b-a3b", layers=1)


def test_full_size_builds_fast(catalog, cards):
    """The DOPS full-size workload (Llama-2-7B, HP64, 1024/1024, batch 16) builds in one go."""
    inst = build(catalog, cards, platform="HP64", prefill=1024, decode=1024, batch=16)
    assert inst.n_tasks == 1025 * (3 + 32 * (16 + 3 * 4))  # 4 head groups
    assert inst.n_edges > inst.n_tasks
    assert len(inst.block_ids) == 56


# ---- input limits of the builder --------------------------------------------------------------

@pytest.mark.parametrize("unit", ["ms", "s", "us"])
def test_a_time_unit_that_rounds_durations_to_zero_is_refused(catalog, cards, unit):
    """qwen-1.8b, 1 layer: at ms all but a few of the 267 durations are 0 ticks (item 9)."""
    with pytest.raises(InputError, match="rounds .* to 0 ticks") as err:
        build(catalog, cards, model="qwen-1.8b", prefill=8, layers=1, time_unit=unit)
    assert err.value.field == "time_unit" and unit in str(err.value)
    inst = build(catalog, cards, model="qwen-1.8b", prefill=8, layers=1, time_unit="ns")
    assert (inst.cost[inst.cost >= 0] > 0).all()


def test_too_many_tasks_are_refused_before_building(catalog, cards):
    """Item 10: 100 M decode steps used to run 34 s into a MemoryError (refused from the
    estimated task count, before anything is built)."""
    from opt.placement.build_options import MAX_CONTEXT_TOKENS, MAX_TASKS

    with pytest.raises(InputError, match="above the maximum") as err:
        Workload(8, 100_000_000)
    assert err.value.field == "decode"
    with pytest.raises(InputError) as err:
        Workload(MAX_CONTEXT_TOKENS, 1)
    assert err.value.field == "prefill"
    with pytest.raises(InputError, match=f"{MAX_TASKS:,}") as err:
        build(catalog, cards, model="qwen-1.8b", prefill=8, decode=MAX_CONTEXT_TOKENS - 8)
    assert err.value.field == "decode"


@pytest.mark.parametrize("field,value", [("prefill", 0), ("decode", -1), ("batch", 1.5),
                                         ("decode", True)])
def test_workload_fields_are_checked(field, value):
    args = {"prefill": 8, "decode": 2, "batch": 1, field: value}
    with pytest.raises(InputError) as err:
        Workload(**args)
    assert err.value.field == field
