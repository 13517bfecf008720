"""Operator FLOPs/bytes: causal pair counts, vectorisation, MoE routing, precision, GDN."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opt.common.errors import InputError
from opt.common.units import seconds_to_ticks
from opt.costlib.operators import Precision, causal_pairs, head_ops, layer_ops


@settings(max_examples=200, deadline=None)
@given(tq=st.integers(1, 60), extra=st.integers(0, 60), window=st.one_of(st.none(), st.integers(1, 80)))
def test_causal_pairs_brute_force(tq, extra, window):
    tkv = tq + extra
    brute = 0
    for i in range(tq):
        keys = tkv - tq + i + 1
        brute += min(keys, window) if window else keys
    assert causal_pairs(tq, tkv, window) == brute


def test_causal_pairs_rejects_short_context():
    with pytest.raises(InputError, match="context"):
        causal_pairs(8, 4)


def test_prefill_attention_flops_about_half_the_rectangle(cards):
    card = cards["llama-2-7b"]
    qk = {o.kind: o for o in layer_ops(card, 0, tokens=2048, context=2048, batch=1)}["qk"]
    rect = 2 * card.heads * card.head_dim * 2048 * 2048
    assert qk.flops / rect == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize("name,layer", [("llama-2-7b", 0), ("gemma-3-27b", 0), ("gemma-3-27b", 5),
                                        ("qwen3-next-80b-a3b", 0), ("qwen3-next-80b-a3b", 3),
                                        ("mixtral-8x7b", 1)])
def test_vectorised_equals_per_step(cards, name, layer):
    card = cards[name]
    ctx = np.array([100, 1500, 3000])
    vec = layer_ops(card, layer, tokens=1, context=ctx, batch=4)
    for j, c in enumerate(ctx):
        one = layer_ops(card, layer, tokens=1, context=int(c), batch=4)
        assert [o.kind for o in one] == [o.kind for o in vec]
        for a, b in zip(vec, one):
            assert np.shape(a.flops) == ctx.shape
            assert a.flops[j] == pytest.approx(b.flops) and a.bytes[j] == pytest.approx(b.bytes)


def test_sliding_window_caps_decode_attention(cards):
    card = cards["gemma-3-27b"]
    local = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=[1024, 50_000], batch=1)}
    glob = {o.kind: o for o in layer_ops(card, 5, tokens=1, context=[1024, 50_000], batch=1)}
    assert local["qk"].flops[0] == local["qk"].flops[1] == 2 * 32 * 128 * 1024
    assert glob["qk"].flops[1] == 2 * 32 * 128 * 50_000


def test_decode_kv_read_bytes(cards):
    card = cards["llama-2-7b"]
    qk = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=1000, batch=2)}["qk"]
    kv = 2 * 1000 * 4096 * 2  # K of 1000 tokens, 2 sequences, fp16
    q = 2 * 4096 * 2
    scores = 2 * 32 * 1000 * 2
    assert qk.bytes == kv + q + scores


def test_moe_routing_modes(cards):
    card = cards["mixtral-8x7b"]
    det = layer_ops(card, 0, tokens=1, context=10, batch=4)
    kinds = [o.kind for o in det]
    assert "router" in kinds and "combine" in kinds
    assert {o.family for o in det if o.family and o.family.startswith("expert")} == {"expert0", "expert1"}
    chosen = layer_ops(card, 0, tokens=1, context=10, batch=4, experts=[3, 6])
    assert {o.family for o in chosen if o.family and o.family.startswith("expert")} == {"expert3", "expert6"}
    exp = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=10, batch=4, routing="expected")}
    touched = 8 * (1 - (1 - 2 / 8) ** 4)
    assert exp["moe_experts"].weight_bytes == pytest.approx(touched * 3 * 4096 * 14336 * 2)
    det_flops = sum(o.flops for o in det if o.kind.startswith("expert") and "act" not in o.kind)
    assert exp["moe_experts"].flops == pytest.approx(det_flops)
    with pytest.raises(InputError, match="routing"):
        layer_ops(card, 0, tokens=1, context=10, batch=1, routing="random")


def test_int8_halves_weight_bytes(cards):
    card = cards["llama-2-7b"]
    fp16 = layer_ops(card, 0, tokens=1, context=10, batch=1)
    int8 = layer_ops(card, 0, tokens=1, context=10, batch=1, precision=Precision(weight="int8"))
    assert sum(o.weight_bytes for o in int8) == pytest.approx(sum(o.weight_bytes for o in fp16) / 2)
    assert sum(o.flops for o in int8) == sum(o.flops for o in fp16)


def test_gated_deltanet_state_traffic(cards):
    card = cards["qwen3-next-80b-a3b"]
    la = card.linear_attention
    dec = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=1, batch=3)}["gdn_recurrence"]
    state = 3 * la.num_v_heads * la.head_k_dim * la.head_v_dim * 2
    assert dec.bytes == pytest.approx(2 * state + 3 * (la.conv_dim + la.value_dim) * 2)
    pre = {o.kind: o for o in layer_ops(card, 0, tokens=640, context=640, batch=3)}["gdn_recurrence"]
    assert pre.bytes - 3 * 640 * (la.conv_dim + la.value_dim) * 2 == pytest.approx(10 * 2 * state)


def test_head_ops_prefill_only_last_token(cards):
    card = cards["llama-2-7b"]
    embed, (norm, lm) = head_ops(card, tokens=512, batch=2, prefill=True)
    assert embed.kind == "embed" and lm.kind == "lm_head"
    assert lm.flops == 2 * 2 * 4096 * 32000
    _, (_, lm_dec) = head_ops(card, tokens=1, batch=2, prefill=False)
    assert lm_dec.flops == lm.flops


def test_bad_layer_and_batch(cards):
    with pytest.raises(InputError, match="layer"):
        layer_ops(cards["llama-2-7b"], 32, tokens=1, context=1, batch=1)
    with pytest.raises(InputError, match="batch"):
        layer_ops(cards["llama-2-7b"], 0, tokens=1, context=1, batch=0)


def test_seconds_to_ticks_rounds_half_up():
    assert seconds_to_ticks(1.5e-9, "ns") == 2
    assert seconds_to_ticks(2.5e-9, "ns") == 3
    assert seconds_to_ticks(2.4999e-9, "ns") == 2
    assert list(seconds_to_ticks(np.array([0.0, 1e-6, 2.5e-6]), "us")) == [0, 1, 3]
    with pytest.raises(InputError, match="time_unit"):
        seconds_to_ticks(1.0, "fortnight")
    with pytest.raises(InputError, match="negative"):
        seconds_to_ticks(-1.0, "s")
