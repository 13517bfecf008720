"""The closest measured card of every GPU type (opt.costlib.gpu_match), the transfer errors the
bundled calibration reports, and the Vidur converter's reading of attention configurations."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from opt.common.errors import InputError
from opt.costlib.gpu_calib import BUNDLED_CALIBRATION, read_calibrations, table_of
from opt.costlib.gpu_fit import transfer_errors
from opt.costlib.gpu_match import closest_measured, closest_measured_cards, log_peak_distance
from opt.costlib.hardware import bundled_catalog, catalog_from_dict
from opt.costlib.measured import read_measurements
from opt.costlib.vidur import attention_model, model_configs

VIDUR = (Path(__file__).resolve().parents[2] / "opt" / "costlib" / "data" / "measurements"
         / "vidur_gpu.csv")
CAT = bundled_catalog()
CALS = read_calibrations(BUNDLED_CALIBRATION, CAT)
SAVED = json.loads(BUNDLED_CALIBRATION.read_text(encoding="utf-8"))


def test_every_bundled_gpu_type_takes_the_card_the_rule_names():
    """L40S (GDDR, PCIe) → A40; H20 (HBM, NVLink) → A100; B200 → H100; the calibration
    file's report states the same card and reason for each type."""
    got = closest_measured_cards(CAT, CALS)
    assert {g: m.card for g, m in got.items()} == {"L40S": "A40", "H20": "A100", "B200": "H100"}
    assert all(m.tier == 0 for m in got.values())
    assert SAVED["report"]["closest_measured"] == {g: m.to_dict() for g, m in got.items()}


def test_memory_technology_and_interconnect_outrank_the_peaks():
    """In log peaks alone the L40S is nearer the A100 than the A40; the rule still picks the
    A40 (same GDDR memory and PCIe interconnect), and picks the A100 once the L40S states
    neither."""
    l40s, a100, a40 = CAT.device("L40S"), CAT.device("A100"), CAT.device("A40")
    assert log_peak_distance(l40s, a100) < log_peak_distance(l40s, a40)
    assert closest_measured(l40s, [a100, a40]).card == "A40"
    bare = replace(l40s, memory_technology=None, interconnect=None)
    match = closest_measured(bare, [a100, a40])
    assert (match.card, match.tier) == ("A100", 3)
    assert closest_measured(a40, [a100, a40]).why == "measured"
    with pytest.raises(InputError, match="no measured GPU"):
        closest_measured(l40s, [])


def test_the_reported_transfer_errors_are_a_recomputation_of_the_bundled_fit():
    """Each card's own classes (not the borrowed ones) on another card's peaks against all of
    that card's rows: the report's medians and maxima are what the bundled calibration and
    table give now (A40 ↔ A100 and H100 ↔ A100 included)."""
    own = {g: {c: p for c, p in cal.classes.items() if c not in cal.borrowed}
           for g, cal in CALS.items()}
    again = transfer_errors(own, CAT, table_of(read_measurements(VIDUR, CAT)))
    saved = SAVED["report"]["transfer"]
    assert [(e["from"], e["to"], e["class"], e["n"]) for e in again] == \
        [(e["from"], e["to"], e["class"], e["n"]) for e in saved]
    for a, b in zip(again, saved):
        for k in ("median_pct", "max_pct", "own_median_pct", "own_max_pct"):
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9)
    pairs = {(e["from"], e["to"]) for e in saved if e["class"] == "gemm"}
    assert {("A40", "A100"), ("A100", "A40"), ("H100", "A100"), ("A100", "H100")} <= pairs


def test_borrowed_classes_are_recorded_and_marked_outside_the_measured_regime():
    """The A40 and the H100 have no attention rows: their attention classes are the A100's,
    recorded in the file; a serving build says so in its provenance, and not for the A100."""
    from opt.costlib.modelcard import bundled_cards
    from opt.serving.builder import ServingWorkload, build_serving_plan
    from opt.serving.instance import ServingGrid

    assert CALS["A40"].borrowed == {"attention": "A100", "attention_decode": "A100"}
    assert CALS["H100"].borrowed == CALS["A40"].borrowed and not CALS["A100"].borrowed
    card = replace(bundled_cards()["llama-2-7b"], layers=2)
    grid = ServingGrid(max_gpus=2, max_owners=1, max_replicas=1, max_microbatches=1,
                       batches=(8,))
    inst = build_serving_plan(card, CAT, ["A100", "H100", "L40S"], ServingWorkload(4096, 0.05),
                              grid=grid, tp_degrees=(1,))
    models = inst.meta["gpu_models"]
    assert "outside_measured_regime" not in models["A100"]
    assert "attention_decode from A100" in models["H100"]["outside_measured_regime"]
    assert models["L40S"]["donor"] == "A40"
    assert "gemm" in models["L40S"]["outside_measured_regime"]


def test_a_bad_memory_technology_names_the_field():
    obj = {"devices": [{"name": "X", "class": "gpu", "peak_flops": 1e12,
                        "mem_bw_bytes_per_s": 1e11, "memory_technology": "SRAM"}]}
    with pytest.raises(InputError, match="memory technology 'SRAM'") as exc:
        catalog_from_dict(obj, "x.json")
    assert "memory_technology" in str(exc.value)


#: A model-configuration file in the shape of Vidur's (written for this test).
CONFIGS = '''
class Base:
    num_q_heads: int
    max_position_embeddings: int = 16384

class Big(Base):
    num_q_heads: int = 64
    num_kv_heads: int = 8
    embedding_dim: int = 8192

    @staticmethod
    def get_name():
        return "org/big-a"

class BigShort(Big):
    max_position_embeddings: int = 4096

    @staticmethod
    def get_name():
        return "org/big-b"
'''


def test_an_attention_tables_model_is_read_from_its_rows_and_the_configurations():
    """Dimensions and maximum length from the row pick one configuration (inherited
    defaults included); a missing n_kv_head is taken from it; two matches are an error."""
    configs = model_configs(CONFIGS)
    assert [(c.name, c.max_position_embeddings) for c in configs] == [
        ("org/big-a", 16384), ("org/big-b", 4096)]
    row = {"n_embd": "8192", "n_q_head": "64", "n_kv_head": "8",
           "num_tensor_parallel_workers": "2", "max_model_len": "4096"}
    cfg, tp = attention_model(row, configs, "t")
    assert (cfg.name, tp) == ("org/big-b", 2)
    cfg, _ = attention_model({**row, "n_kv_head": "", "max_model_len": "16384"}, configs, "t")
    assert (cfg.name, cfg.num_kv_heads) == ("org/big-a", 8)
    with pytest.raises(InputError, match="2 model configurations"):
        attention_model({**row, "max_model_len": ""}, configs, "t")


def test_the_bundled_table_has_every_profiled_gpu_and_attention_read_from_the_rows():
    rows = read_measurements(VIDUR, CAT).rows
    assert {m.device for m in rows} == {"A100", "A40", "H100"}
    a40 = {m.op_kind for m in rows if m.device == "A40"}
    assert {"qkv_proj", "gate_up_proj", "send_recv"} <= a40 and "flash_attn" not in a40
    attn = [m for m in rows if m.op_kind == "flash_attn"]
    assert {(m.device, m.model, m.kv_heads, m.share) for m in attn} == {
        ("A100", "llama-2-70b", 4, 0.5)}
