"""Model cards: published parameter counts, KV bytes, the HF config reader, bad input."""

import json

import numpy as np
import pytest

from opt.app.reproduction.reference import DOPS_BLOCKS, KV_KIB_PER_TOKEN, QWEN3_NEXT_STATE_ELEMENTS
from opt.common.errors import InputError, UnknownNameError
from opt.costlib.modelcard import card_from_dict, card_from_hf_config, load_cards
from opt.costlib.operators import head_ops, layer_ops


def test_every_reference_card_is_bundled(cards):
    expected = {"llama-2-7b", "llama-2-13b", "llama-2-70b", "qwen-1.8b", "qwen-7b", "qwen-14b",
                "mixtral-8x7b", "gemma-3-27b", "qwen3-next-80b-a3b", "qwen3-235b-a22b",
                "gpt-oss-120b", "dops-qwen-1.8b", "dops-qwen-7b", "dops-qwen-14b"}
    assert expected <= set(cards.names())


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-2-13b", "llama-2-70b", "qwen-1.8b",
                                  "qwen-7b", "qwen-14b", "mixtral-8x7b", "gemma-3-27b",
                                  "qwen3-next-80b-a3b", "qwen3-235b-a22b", "gpt-oss-120b"])
def test_published_parameter_counts_within_one_percent(cards, name):
    card = cards[name]
    assert card.published_total_params
    assert card.total_params == pytest.approx(card.published_total_params, rel=0.01)
    if card.published_active_params:
        assert card.active_params == pytest.approx(card.published_active_params, rel=0.01)
    else:
        assert card.active_params == card.total_params


def test_exact_counts_of_known_checkpoints(cards):
    # Exact figures of the public checkpoints (HF safetensors metadata).
    assert cards["llama-2-7b"].total_params == 6_738_415_616
    assert cards["llama-2-13b"].total_params == 13_015_864_320
    assert cards["llama-2-70b"].total_params == 68_976_648_192
    assert cards["mixtral-8x7b"].total_params == 46_702_792_704


@pytest.mark.parametrize("name,kib", sorted(KV_KIB_PER_TOKEN.items()))
def test_kv_bytes_per_token(cards, name, kib):
    assert cards[name].kv_bytes_per_token() == kib * 1024


def test_kv_bytes_with_windows_and_linear_state(cards):
    gemma = cards["gemma-3-27b"]
    assert gemma.count_layers("full") == 10 and gemma.count_layers("sliding") == 52
    per_layer = 2 * 16 * 128 * 2
    s = np.array([1, 1024, 4096])
    expect = 10 * s * per_layer + 52 * np.minimum(s, 1024) * per_layer
    np.testing.assert_array_equal(gemma.kv_bytes(s), expect)
    oss = cards["gpt-oss-120b"]
    assert oss.kv_bytes(10_000) == 18 * 10_000 * 2 * 8 * 64 * 2 + 18 * 128 * 2 * 8 * 64 * 2
    nxt = cards["qwen3-next-80b-a3b"]
    assert nxt.count_layers("linear") == 36 and nxt.count_layers("full") == 12
    assert nxt.kv_bytes(0) == QWEN3_NEXT_STATE_ELEMENTS * 2
    assert nxt.kv_bytes(1000) - nxt.kv_bytes(0) == 1000 * 24 * 1024


def test_block_periods(cards):
    assert cards["gemma-3-27b"].block_period == 6
    assert cards["qwen3-next-80b-a3b"].block_period == 4
    assert cards["gpt-oss-120b"].block_period == 2
    assert cards["llama-2-7b"].block_period == 1


@pytest.mark.parametrize("name,blocks", sorted(DOPS_BLOCKS.items()))
def test_dops_block_counts(cards, name, blocks):
    card = cards[name]
    families = {op.family for op in layer_ops(card, 0, tokens=1, context=1, batch=1)} - {None}
    assert len(families) * -(-card.layers // 4) == blocks


@pytest.mark.parametrize("name", ["llama-2-7b", "mixtral-8x7b", "gemma-3-27b",
                                  "qwen3-next-80b-a3b", "gpt-oss-120b", "qwen-1.8b"])
def test_op_weight_bytes_match_parameter_count(cards, name):
    """The ops of one step read exactly the active parameters (one truth for bytes and counts)."""
    card = cards[name]
    total = 0.0
    for layer in range(card.layers):
        total += sum(op.weight_bytes for op in layer_ops(card, layer, tokens=1, context=8, batch=1,
                                                         experts=None))
    embed, tail = head_ops(card, tokens=1, batch=1, prefill=False)
    total += sum(op.weight_bytes for op in tail) + embed.weight_bytes
    wb = 2.0
    # the embedding op gathers one row per token; the LM head reads the whole (tied or not) table
    expected = (card.active_params - card.lm_head_params() + card.hidden) * wb
    if card.expert_dtype:
        from opt.common.units import dtype_bytes
        expected += card.layers * card.moe.top_k * 3 * card.hidden * card.moe.expert_ffn * (
            dtype_bytes(card.expert_dtype) - wb)
    # biases, qk-norm weights and linear-attention gate vectors are not read as separate ops
    assert total == pytest.approx(expected, rel=2e-3)


HF_LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
            "vocab_size": 32000, "tie_word_embeddings": False, "hidden_act": "silu"}
HF_QWEN1 = {"model_type": "qwen", "hidden_size": 2048, "intermediate_size": 11008,
            "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 151936,
            "kv_channels": 128}
HF_GEMMA3 = {"model_type": "gemma3", "text_config": {
    "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
    "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
    "num_hidden_layers": 62, "vocab_size": 262208, "sliding_window": 1024,
    "sliding_window_pattern": 6, "hidden_activation": "gelu_pytorch_tanh"}}
HF_QWEN3_NEXT = {"model_type": "qwen3_next", "hidden_size": 2048, "intermediate_size": 5120,
                 "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                 "num_hidden_layers": 48, "vocab_size": 151936, "full_attention_interval": 4,
                 "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                 "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                 "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10,
                 "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
                 "tie_word_embeddings": False}
HF_GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
              "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
              "num_hidden_layers": 36, "vocab_size": 201088, "sliding_window": 128,
              "layer_types": ["sliding_attention", "full_attention"] * 18,
              "num_local_experts": 128, "experts_per_token": 4, "attention_bias": True,
              "tie_word_embeddings": False}


@pytest.mark.parametrize("config,bundled", [(HF_LLAMA, "llama-2-7b"), (HF_QWEN1, "qwen-1.8b"),
                                            (HF_GEMMA3, "gemma-3-27b"),
                                            (HF_QWEN3_NEXT, "qwen3-next-80b-a3b"),
                                            (HF_GPT_OSS, "gpt-oss-120b")])
def test_hf_config_reader_matches_bundled_cards(cards, config, bundled):
    card = card_from_hf_config(config, name="x")
    ref = cards[bundled]
    assert card.layer_pattern == ref.layer_pattern
    assert card.total_params == pytest.approx(ref.total_params, rel=1e-3)
    assert card.active_params == pytest.approx(ref.active_params, rel=1e-3)
    assert card.kv_bytes(5000) == pytest.approx(float(ref.kv_bytes(5000)))


def test_load_cards_from_hf_config_file(tmp_path):
    d = tmp_path / "my-llama"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(HF_LLAMA))
    cards = load_cards(d / "config.json")
    assert cards["my-llama"].total_params == 6_738_415_616
    assert "llama-2-70b" in cards.names()


def test_hf_config_missing_field_names_file_and_field(tmp_path):
    path = tmp_path / "config.json"
    bad = dict(HF_LLAMA)
    del bad["num_attention_heads"]
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError) as err:
        card_from_hf_config(path)
    assert str(path) in str(err.value) and "num_attention_heads" in str(err.value)


def test_malformed_card_file_names_file_and_field(tmp_path):
    path = tmp_path / "cards.json"
    path.write_text(json.dumps({"cards": [{"name": "m", "layers": "many", "hidden": 8,
                                           "heads": 2, "kv_heads": 2, "head_dim": 4, "ffn": 8,
                                           "vocab": 10}]}))
    with pytest.raises(InputError) as err:
        load_cards(path)
    msg = str(err.value)
    assert str(path) in msg and "cards[0].layers" in msg and "'many'" in msg


def test_card_rejects_inconsistent_heads_and_unknown_keys():
    base = {"name": "m", "layers": 2, "hidden": 8, "heads": 3, "kv_heads": 2, "head_dim": 4,
            "ffn": 8, "vocab": 10}
    with pytest.raises(InputError, match="kv_heads"):
        card_from_dict(base, "f.json")
    with pytest.raises(InputError, match="hiden"):
        card_from_dict({**base, "heads": 2, "hiden": 3}, "f.json")


def test_unknown_model_lists_known_names(cards):
    with pytest.raises(UnknownNameError) as err:
        cards["llama-3-8b"]
    msg = str(err.value)
    assert "llama-3-8b" in msg and "llama-2-7b" in msg and "\n" not in msg


def test_card_round_trip(cards):
    for card in cards:
        assert card_from_dict(card.to_dict()) == card


# ---- HF configs name the file and field, and are checked ---------------------------------------

@pytest.mark.parametrize("edit, field, message", [
    (lambda c: c.pop("hidden_size"), "hidden_size", "missing required field"),
    (lambda c: c.update(hidden_size=2047), "hidden_size",
     "2047 is not a multiple of num_attention_heads (32)"),
    (lambda c: c.update(model_type="mamba"), "model_type",
     "unsupported model type 'mamba'; supported: gemma3"),
    (lambda c: c.pop("model_type"), "model_type", "unsupported model type None"),
    (lambda c: c.update(num_local_experts="8"), "num_local_experts", "expected an integer"),
    (lambda c: c.update(tie_word_embeddings="no"), "tie_word_embeddings", "true or false"),
    (lambda c: c.update(layer_types=[["full_attention"]] * 32), "layer_types",
     "unknown layer type"),
])
def test_hf_config_errors_name_file_and_field(tmp_path, edit, field, message):
    d = tmp_path / "my-llama"
    d.mkdir()
    config = {**HF_LLAMA, "architectures": ["LlamaForCausalLM"]}
    edit(config)
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError) as err:
        load_cards(d / "config.json")
    text = str(err.value)
    assert text.startswith(f"{d / 'config.json'}: field '{field}'") and message in text, text


def test_hf_config_with_explicit_head_dim_need_not_divide():
    card = card_from_hf_config({**HF_LLAMA, "hidden_size": 2047, "head_dim": 64}, name="x")
    assert card.head_dim == 64 and card.hidden == 2047
