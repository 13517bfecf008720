"""Regression tests of what the fuzz suite found in the readers:
each input once crashed (TypeError, OverflowError) or hung; now it is one InputError."""

import json

import pytest

import instances
from opt.common.errors import InputError
from opt.costlib.modelcard import card_from_dict, card_from_hf_config
from opt.placement.dot import dot_to_instance, parse_dot
from opt.serving.instance import serving_instance_from_dict

SERVING = json.loads(json.dumps(instances.load("p3-tiny-gemma-a100-l40s").to_dict()))


def _serving(edit):
    doc = json.loads(json.dumps(SERVING))
    edit(doc)
    return doc


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["grid"].update(batches=[{"x": 1}]), "grid.batches[0]"),
    (lambda d: d["grid"].update(batches=[1.5]), "grid.batches[0]"),
    (lambda d: d["latency"].update(microbatch_sizes=["2"]), "latency.microbatch_sizes[0]"),
    (lambda d: d["latency"]["token_transfer_busy"].__setitem__(0, 1e300),
     "latency.token_transfer_busy"),
    (lambda d: d["model"].update(layers=2 ** 63), "model.layers"),
    (lambda d: d.update(meta=[1]), "meta"),
])
def test_serving_instance_reader(edit, field):
    with pytest.raises(InputError) as err:
        serving_instance_from_dict(_serving(edit), "s.json")
    assert str(err.value).startswith(f"s.json: field '{field}'"), err.value


@pytest.mark.parametrize("key, value", [("layers", 2 ** 31), ("hidden", 2 ** 40),
                                        ("dtype", {"x": 1}), ("sliding_window", 10 ** 30)])
def test_card_numbers_are_bounded_and_typed(cards, key, value):
    card = {**cards["llama-2-7b"].to_dict(), key: value}
    with pytest.raises(InputError, match=f"field '{key}'"):
        card_from_dict(card, "c.json")


def test_hf_pattern_lengths_are_bounded():
    config = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 4, "intermediate_size": 8, "vocab_size": 10,
              "sliding_window": 8, "sliding_window_pattern": 10 ** 30}
    with pytest.raises(InputError, match="sliding_window_pattern"):
        card_from_hf_config(config, name="x", source="config.json")


def test_dot_weights_and_processors_are_bounded():
    with pytest.raises(InputError, match="line 1: .* Weight 99999999999999999999 above 2"):
        parse_dot("digraph g { a [Weight=99999999999999999999]; }", "g.dot")
    graph = parse_dot("digraph g { a [Weight=3]; }", "g.dot")
    with pytest.raises(InputError, match="at most 1024"):
        dot_to_instance(graph, 10 ** 9)
