"""Measured latency tables: reading, validation, lookup, and the placement builder's hook."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opt.common.errors import InputError
from opt.costlib.hardware import load_catalog
from opt.costlib.measured import (
    EXACT,
    INTERPOLATED,
    NO_ENTRY,
    OUTSIDE,
    known_op_kind,
    read_measurements,
)
from opt.costlib.modelcard import load_cards
from opt.costlib.operators import head_ops, layer_ops
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement

HEADER = "device,op_kind,model,tokens,context,batch,share,latency_us,source\n"


def _csv(tmp_path, body, interpolate="log-linear", name="m.csv"):
    path = tmp_path / name
    path.write_text(f"## a comment\n# interpolate: {interpolate}\n{HEADER}{body}")
    return str(path)


def test_every_builder_kind_is_a_known_op_kind():
    for card in load_cards().cards.values():
        for layer in range(card.layers):
            for op in layer_ops(card, layer, tokens=1, context=2, batch=1):
                assert known_op_kind(op.kind), (card.name, op.kind)
        embed, tail = head_ops(card, tokens=1, batch=1, prefill=False)
        assert all(known_op_kind(o.kind) for o in [embed, *tail])
    assert not known_op_kind("q_projection")


def test_lookup_exact_interpolated_outside(tmp_path):
    t = read_measurements(_csv(tmp_path, "AiM,qk,,1,100,1,,10,a\nAiM,qk,,1,400,1,,40,b\n"
                                          "AiM,qk,,64,64,1,,5,c\nAiM,qk,,256,256,1,,80,d\n"),
                          load_catalog())
    lat, code = t.lookup_s("aim", "qk", tokens=[1, 1, 1, 1, 128, 512],
                           context=[100, 200, 50, 800, 128, 512], batch=1)
    assert list(code) == [EXACT, INTERPOLATED, OUTSIDE, OUTSIDE, INTERPOLATED, OUTSIDE]
    assert lat[0] == pytest.approx(10e-6)
    assert lat[1] == pytest.approx(20e-6)  # log-linear: halfway in log context, latency ∝ ctx
    assert lat[4] == pytest.approx(20e-6)  # the prefill diagonal 64 → 256
    assert np.isnan(lat[2]) and np.isnan(lat[3])
    _, code = t.lookup_s("AiM", "qk", tokens=[1], context=[100], batch=2)
    assert list(code) == [NO_ENTRY]


def test_no_interpolation_unless_declared(tmp_path):
    t = read_measurements(_csv(tmp_path, "AiM,qk,,1,100,1,,10,a\nAiM,qk,,1,400,1,,40,b\n",
                               interpolate="none"))
    _, code = t.lookup_s("AiM", "qk", tokens=[1, 1], context=[100, 200], batch=1)
    assert list(code) == [EXACT, OUTSIDE]


def test_model_specific_rows_win(tmp_path):
    t = read_measurements(_csv(tmp_path, "AiM,qk,,1,100,1,,10,any\n"
                                          "AiM,qk,llama-2-7b,1,100,1,,30,llama\n"))
    assert t.lookup_s("AiM", "qk", tokens=1, context=100, batch=1,
                      model="llama-2-7b")[0][0] == pytest.approx(30e-6)
    assert t.lookup_s("AiM", "qk", tokens=1, context=100, batch=1,
                      model="qwen-7b")[0][0] == pytest.approx(10e-6)


@pytest.mark.parametrize("row, field, text", [
    ("AiM,qk,,1,100,1,,10,a\nAiM,qk,,1,100,1,,11,b\n", "row 5", "duplicate"),
    ("AiM,q_projection,,1,100,1,,10,a\n", "row 4.op_kind", "unknown op_kind"),
    ("Nope,qk,,1,100,1,,10,a\n", "row 4.device", "unknown device"),
    ("AiM,qk,,8,4,1,,10,a\n", "row 4.context", "context 4 < tokens 8"),
    ("AiM,qk,,1,100,1,,-3,a\n", "row 4.latency_us", "-3"),
    ("AiM,qk,,1,100,1,1.5,10,a\n", "row 4.share", "share"),
    ("AiM,qk,,1,100,1,,10,\n", "row 4.source", "missing"),
    ("AiM,qk,,1.5,100,1,,10,a\n", "row 4.tokens", "1.5"),
])
def test_bad_rows_name_file_row_field_value(tmp_path, row, field, text):
    path = _csv(tmp_path, row)
    with pytest.raises(InputError) as exc:
        read_measurements(path, load_catalog())
    msg = str(exc.value)
    assert path in msg and f"field '{field}" in msg and text in msg
    assert "\n" not in msg


def test_units_and_json(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": 1, "interpolate": "none", "rows": [
        {"device": "A100", "op_kind": "q_proj", "tokens": 1, "context": 8, "batch": 1,
         "latency": 2.5, "unit": "ms", "source": "x"},
        {"device": "A100", "op_kind": "k_proj", "tokens": 1, "context": 8, "batch": 1,
         "latency": 7, "unit": "parsec", "source": "x"}]}))
    with pytest.raises(InputError, match=r"rows\[1\]\.unit.*parsec"):
        read_measurements(path)
    obj = json.loads(path.read_text())
    obj["rows"].pop()
    path.write_text(json.dumps(obj))
    t = read_measurements(path)
    assert t.rows[0].latency_s == pytest.approx(2.5e-3)


def test_builder_uses_table_where_it_has_entries(tmp_path):
    cat, card = load_catalog(), load_cards()["llama-2-7b"]
    wl = Workload(512, 4, 1)
    base = build_placement(card, cat.platform("HP32"), cat, wl, BuildOptions(layers=1))
    # q_proj on AiM at the prefill shape (exact), qk of one KV head group (share 0.5) on the
    # NPU over the decode contexts 513..516 (interpolated between 500 and 600)
    t = read_measurements(_csv(tmp_path, "AiM,q_proj,llama-2-7b,512,512,1,,1234,trace\n"
                                          "Ascend-910B,qk,,1,500,1,0.5,10,p\n"
                                          "Ascend-910B,qk,,1,600,1,0.5,12,p\n"), cat)
    inst = build_placement(card, cat.platform("HP32"), cat, wl,
                           BuildOptions(layers=1, measurements=t))
    prov = inst.meta["measurements"]
    assert prov["task_costs"]["exact"] == 2          # PIM0, PIM1 at step 0
    assert prov["task_costs"]["interpolated"] == 2 * 4  # two cells × four decode steps
    assert prov["task_costs"]["model"] == int((base.cost >= 0).sum()) - 10
    q = inst.task_index["s0.L0.q_proj"]
    assert list(inst.cost[q, 1:]) == [1_234_000, 1_234_000]
    assert inst.cost[q, 0] == base.cost[q, 0]
    qk = inst.task_index["s2.L0.qk@g0"]
    assert 10_000 < inst.cost[qk, 0] < 12_000 and inst.cost[qk, 1] == base.cost[qk, 1]
    assert "measurements" not in base.meta and "measurements" not in base.meta["builder"]
    changed = inst.cost != base.cost
    assert changed.sum() == 10


def test_compare_infers_the_builders_shares_with_tp_and_head_groups():
    """tp = 2 on HP64 (4 PIMs, 4 KV head groups): projections are shares 1/2, attention cells
    1/4; a table at exactly those shares covers every task but the all-reduces, both in the
    builder and in compare-measured (whose shares come from the instance meta)."""
    from opt.costlib.fit import default_shapes, synthetic_rows
    from opt.costlib.measured import MeasuredTable
    from opt.placement.measured_compare import compare_measured

    cat, cards = load_catalog(), load_cards()
    card = cards["llama-2-7b"]
    shapes = default_shapes(card, (1,), (0.25,), (1.0, 0.5))
    rows = []
    for dev in ("Ascend-910B", "AiM"):
        rows += synthetic_rows(cat.device(dev), card, shapes, rel_noise=0.05, seed=1,
                               source="synthetic")
    table = MeasuredTable(tuple(rows), "log-linear")
    inst = build_placement(card, cat.platform("HP64"), cat, Workload(256, 3, 1),
                           BuildOptions(layers=1, tp=2, measurements=table))
    legal = inst.cost >= 0
    n_ar = sum(int(legal[i].sum()) for i, k in enumerate(inst.kind) if k.startswith("allreduce"))
    assert inst.meta["measurements"]["task_costs"]["model"] == n_ar
    # HEFT's schedule itself: ``solve`` would also compute the certified bound (~30 s here),
    # which compare-measured does not use
    from heuristics.placement.list_scheduler import heft

    report = compare_measured(inst, heft(inst), table, cat, cards)
    by = {c.op_class: c for c in report.classes}
    assert by["all"].unmatched == by["collective"].unmatched == 4 * 2  # 2 per layer and step
    assert by["all"].matched == inst.n_tasks - 8
    assert abs(by["all"].delta) < 1e-4
