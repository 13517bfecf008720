"""Quantisation and sparsity in the P1 builder (problems.md §1.4, DOPS §4.1).

Precision changes bytes (blocks, load durations, op bytes, payloads); sparsity changes FLOPs
and bytes as documented in :class:`opt.costlib.operators.Sparsity`; model cards are never modified.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from opt.app.cli import main
from opt.common.errors import InputError
from opt.common.units import INT4_GROUP
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.costlib.operators import Precision, Sparsity, layer_ops
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement

CAT = bundled_catalog()
CARDS = bundled_cards()
WL = Workload(prefill=16, decode=3, batch=1)


def _build(model="llama-2-7b", platform="HP32", wl=WL, **opts):
    return build_placement(CARDS[model], CAT.platform(platform), CAT, wl,
                           BuildOptions(layers=2, **opts))


def _ops(card, phase, batch=1, **kw):
    tokens, context = (64, 64) if phase == "prefill" else (1, 65)
    return {o.kind: o for o in layer_ops(card, 0, tokens=tokens, context=context, batch=batch,
                                         phase=phase, **kw)}


def test_int8_halves_block_bytes_and_load_durations():
    fp16 = _build()
    int8 = _build(precision=Precision(weight="int8"))
    assert list(int8.block_ids) == list(fp16.block_ids)
    assert np.array_equal(int8.block_bytes * 2, fp16.block_bytes)
    for fmt, loads in fp16.block_load.items():
        ok = loads >= 0
        assert np.array_equal(int8.block_load[fmt] >= 0, ok)
        ratio = int8.block_load[fmt][ok] / loads[ok]
        # load = fabric latency + bytes / bandwidth (+ conversion overhead): half up to the
        # fixed microsecond-scale terms, which are < 0.1 % of a multi-ms block load
        assert np.all(np.abs(ratio - 0.5) < 2e-3), (fmt, ratio.min(), ratio.max())
    # activations and KV stay fp16: compute-edge payloads are identical
    assert np.array_equal(int8.edge_bytes, fp16.edge_bytes)


def test_int4_has_group_scales():
    fp16 = _build()
    int4 = _build(dtype="int4")
    per_elem = 0.5 + 2.0 / INT4_GROUP  # 4 bits + one fp16 scale per group of 128
    assert INT4_GROUP == 128
    assert np.allclose(int4.block_bytes, fp16.block_bytes / 2.0 * per_elem, atol=1)
    assert np.all(int4.block_bytes > fp16.block_bytes / 4)  # scales are not free
    same = _build(precision=Precision(weight="int4"))
    assert np.array_equal(same.block_bytes, int4.block_bytes)


def test_cards_untouched_and_default_unchanged():
    before = {name: (CARDS[name].total_params, CARDS[name].active_params, CARDS[name])
              for name in CARDS.names()}
    _build(precision=Precision("int8", "int8", "int8"), sparsity=Sparsity(weight=0.5))
    _build("mixtral-8x7b", "HP128", precision=paper_precision("mixtral-8x7b"))
    after = {name: (CARDS[name].total_params, CARDS[name].active_params, CARDS[name])
             for name in CARDS.names()}
    assert before == after
    fresh = bundled_cards()
    assert all(fresh[name] == CARDS[name] for name in CARDS.names())
    a, b = _build(), _build(precision=Precision())
    assert np.array_equal(a.cost, b.cost) and np.array_equal(a.edge_bytes, b.edge_bytes)
    assert b.meta["builder"]["precision"] == {"weight": "fp16", "activation": "fp16",
                                              "kv": "fp16"}


def test_paper_precision_int8_for_mixtral_and_llama70b():
    assert paper_precision("mixtral-8x7b").weight == "int8"
    assert paper_precision("llama-2-70b") == Precision("int8", "int8", "int8")
    assert paper_precision("llama-2-7b") == Precision()
    fp16 = _build("llama-2-70b", "HP128")
    int8 = _build("llama-2-70b", "HP128", precision=paper_precision("llama-2-70b"))
    assert np.array_equal(int8.block_bytes * 2, fp16.block_bytes)
    # int8 activations and KV halve every non-zero payload (up to rounding up)
    nz = fp16.edge_bytes > 4 * WL.batch  # not the int32 token-id chain edges
    assert np.all(np.abs(int8.edge_bytes[nz] - fp16.edge_bytes[nz] / 2) <= 1)


def test_weight_sparsity_shrinks_blocks_flops_and_bytes():
    card = CARDS["llama-2-7b"]
    dense, sp = _ops(card, "decode"), _ops(card, "decode", sparsity=Sparsity(weight=0.5))
    for kind in ("q_proj", "k_proj", "o_proj", "gate_proj", "down_proj"):
        assert sp[kind].flops == pytest.approx(dense[kind].flops * 0.5)
        assert sp[kind].weight_bytes == pytest.approx(dense[kind].weight_bytes * 0.5)
        act = dense[kind].bytes - dense[kind].weight_bytes
        assert sp[kind].bytes == pytest.approx(act + dense[kind].weight_bytes * 0.5)
    for kind in ("attn_norm", "qk", "softmax", "sv", "act", "kv_write"):
        assert sp[kind] == dense[kind]
    inst = _build(sparsity=Sparsity(weight=0.5))
    assert np.allclose(inst.block_bytes, _build().block_bytes / 2, atol=1)


def test_activation_sparsity_per_phase():
    card = CARDS["llama-2-7b"]
    s = Sparsity(activation_prefill=0.25, activation_decode=0.6)
    dec_d, dec_s = _ops(card, "decode"), _ops(card, "decode", sparsity=s)
    pre_d, pre_s = _ops(card, "prefill"), _ops(card, "prefill", sparsity=s)
    q_d, q_s = dec_d["q_proj"], dec_s["q_proj"]
    assert q_s.flops == pytest.approx(q_d.flops * 0.4)
    assert q_s.weight_bytes == q_d.weight_bytes  # stored weights unchanged
    # batch-1 decode GEMV: 1 − 0.6^1 of the weight rows are read
    assert q_s.bytes == pytest.approx(q_d.bytes - q_d.weight_bytes * 0.6)
    # prefill over 64 rows: FLOPs scale, weight traffic ≈ all rows (1 − 0.25^64)
    assert pre_s["up_proj"].flops == pytest.approx(pre_d["up_proj"].flops * 0.75)
    assert pre_s["up_proj"].bytes == pytest.approx(pre_d["up_proj"].bytes, rel=1e-12)
    # batch 4 decode: rows needed by at least one of 4 inputs, 1 − 0.6^4
    b4_d, b4_s = _ops(card, "decode", batch=4), _ops(card, "decode", batch=4, sparsity=s)
    wb = b4_d["down_proj"].weight_bytes
    assert b4_s["down_proj"].bytes == pytest.approx(b4_d["down_proj"].bytes - wb * 0.6 ** 4)
    assert dec_s["qk"] == dec_d["qk"] and dec_s["attn_norm"] == dec_d["attn_norm"]
    # in a built instance: decode GEMMs on PIM get faster, blocks keep their size
    dense = _build(wl=Workload(16, 3, 1))
    sparse = _build(wl=Workload(16, 3, 1), sparsity=Sparsity(activation_decode=0.6))
    assert np.array_equal(dense.block_bytes, sparse.block_bytes)
    kinds = np.asarray(dense.kind)
    pim = [i for i, d in enumerate(dense.devices) if d.device_class == "pim"][0]
    sel = (kinds == "down_proj") & (np.asarray(dense.phase) == 1)
    assert np.all(sparse.cost[sel, pim] < dense.cost[sel, pim])
    pre = (kinds == "down_proj") & (np.asarray(dense.phase) == 0)
    assert np.array_equal(sparse.cost[pre], dense.cost[pre])  # no prefill ratio given


def test_attention_sparsity():
    card = CARDS["llama-2-7b"]
    dense, sp = _ops(card, "decode"), _ops(card, "decode", sparsity=Sparsity(attention=0.75))
    for kind in ("qk", "sv", "softmax"):
        assert sp[kind].flops == pytest.approx(dense[kind].flops * 0.25)
    q_bytes = 1 * card.q_dim * 2.0
    assert sp["qk"].bytes == pytest.approx(q_bytes + (dense["qk"].bytes - q_bytes) * 0.25)
    assert sp["softmax"].bytes == pytest.approx(dense["softmax"].bytes * 0.25)
    assert sp["qk"].out_bytes == pytest.approx(dense["qk"].out_bytes * 0.25)
    assert sp["sv"].out_bytes == dense["sv"].out_bytes
    assert sp["kv_write"] == dense["kv_write"] and sp["q_proj"] == dense["q_proj"]


def test_bad_input_names_field():
    with pytest.raises(InputError, match="sparsity.weight"):
        _build(sparsity=Sparsity(weight=1.0))
    with pytest.raises(InputError, match="sparsity.attention"):
        _build(sparsity=Sparsity(attention=-0.1))
    with pytest.raises(InputError, match="precision.kv"):
        _build(precision=Precision(kv="int3"))
    with pytest.raises(InputError, match="dtype"):
        _build(dtype="int4", precision=Precision(weight="int8"))
    with pytest.raises(InputError, match="phase"):
        layer_ops(CARDS["llama-2-7b"], 0, tokens=1, context=2, batch=1,
                  sparsity=Sparsity(weight=0.1), phase="both")


def test_cli_flags(tmp_path, capsys):
    out = tmp_path / "i.json"
    rc = main(["build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
               "--prefill", "8", "--decode", "2", "--layers", "1", "--weight-dtype", "int8",
               "--kv-dtype", "int8", "--act-sparsity", "prefill=0.1,decode=0.5",
               "--attn-sparsity", "0.2", "--weight-sparsity", "0.25", "-o", str(out)])
    assert rc == 0
    from opt.placement.io import read_instance

    meta = read_instance(out).meta["builder"]
    assert meta["precision"] == {"weight": "int8", "activation": "fp16", "kv": "int8"}
    assert meta["sparsity"] == dataclasses.asdict(Sparsity(0.25, 0.1, 0.5, 0.2))
    rc = main(["build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
               "--prefill", "8", "--decode", "2", "--layers", "1", "--act-sparsity", "0.3,x",
               "-o", str(out)])
    assert rc == 2 and "act-sparsity" in capsys.readouterr().err
