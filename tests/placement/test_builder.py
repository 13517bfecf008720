"""The P1 builder: DAG shape, KV pinning, legality, blocks, sharding, precision, size."""

import numpy as np
import pytest

from opt.common.errors import InputError
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.runs.reference import DOPS_BLOCKS


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
    per_step = 3 + 3 * 16  # embed, final_norm, lm_head + 16 ops per dense layer
    assert inst.n_tasks == 5 * per_step
    assert inst.meta["tasks_per_step"] == per_step
    assert kinds_of(inst)[:3] == ["embed", "attn_norm", "q_proj"]
    # step i+1's embed depends on step i's lm_head
    for s in range(4):
        lm = inst.task_index[f"s{s}.lm_head"]
        emb = inst.task_index[f"s{s + 1}.embed"]
        assert np.any((inst.edge_src == lm) & (inst.edge_dst == emb))
    assert list(np.unique(inst.phase)) == [0, 1]
    assert np.all(inst.phase[inst.step == 0] == 0) and np.all(inst.phase[inst.step > 0] == 1)


def test_legality_and_kv_pinning(catalog, cards):
    inst = build(catalog, cards, layers=1, decode=1)
    names = [d.name for d in inst.devices]
    assert names == ["NPU0", "PIM0", "PIM1"]
    legal = {inst.task_ids[t]: {names[d] for d in np.flatnonzero(inst.cost[t] >= 0)}
             for t in range(inst.n_tasks)}
    assert legal["s0.embed"] == {"NPU0"} and legal["s0.lm_head"] == {"NPU0"}
    assert legal["s0.L0.kv_write"] == {"PIM0"}
    assert legal["s0.L0.q_proj"] == {"NPU0", "PIM0", "PIM1"}
    # qk/sv read the KV of T_kv tokens from the home device
    kvw = inst.task_index["s1.L0.kv_write"]
    qk = inst.task_index["s1.L0.qk"]
    e = np.flatnonzero((inst.edge_src == kvw) & (inst.edge_dst == qk))[0]
    card = cards["llama-2-7b"]
    assert inst.edge_bytes[e] == 65 * card.kv_dim * 2  # K of 64 + 1 tokens, fp16


def test_hp0_keeps_kv_on_npu(catalog, cards):
    inst = build(catalog, cards, platform="HP0", layers=1, decode=1)
    assert [d.name for d in inst.devices] == ["NPU0"]
    assert inst.meta["kv_home"] == ["NPU0"]


def test_moe_tasks_and_pim_illegal_ops(catalog, cards):
    inst = build(catalog, cards, model="mixtral-8x7b", layers=1, decode=1)
    k = kinds_of(inst)
    assert "router" in k and "combine" in k
    assert sum(x.startswith("expert") for x in k) == 2 * 4
    pims = [i for i, d in enumerate(inst.devices) if d.device_class == "pim"]
    for t in range(inst.n_tasks):
        if inst.kind[t] in ("router", "combine", "embed", "lm_head"):
            assert np.all(inst.cost[t, pims] < 0)
    assert any(b.endswith("_expert0") for b in inst.block_ids)


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
    # KV homes are spread over the PIM devices by head shard
    assert inst.meta["kv_home"] == ["PIM0", "PIM1"]
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
    assert inst.n_tasks == 1025 * (3 + 32 * 16)
    assert inst.n_edges > inst.n_tasks
    assert len(inst.block_ids) == 56
