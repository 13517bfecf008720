"""The calibrated GPU model (opt.costlib.gpu_calib / gpu_fit) and the bundled Vidur table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from opt.common.errors import InputError
from opt.costlib.gpu_calib import (
    BUNDLED_CALIBRATION,
    ClassParams,
    fit_class,
    fit_link,
    read_calibrations,
    split_held_out,
)
from opt.costlib.gpu_fit import calibrate_gpus
from opt.costlib.hardware import bundled_catalog
from opt.costlib.measured import Measurement, read_measurements

DATA = Path(__file__).resolve().parents[2] / "opt" / "costlib" / "data" / "measurements"
VIDUR = DATA / "vidur_gpu.csv"
CAT = bundled_catalog()
H100 = CAT.device("H100")


def _table():
    return read_measurements(VIDUR, CAT)


def test_bundled_vidur_table_has_provenance_licence_and_consistent_work():
    head = VIDUR.read_text(encoding="utf-8").splitlines()[:2]
    assert "7d47513363ec447a741ac5e47241580b47724fbf" in head[0]
    assert "MIT License" in (DATA / "LICENSE-vidur").read_text(encoding="utf-8")
    assert VIDUR.stat().st_size < 2_000_000
    t = _table()
    kinds = {m.op_kind for m in t.rows}
    assert {"qkv_proj", "gate_up_proj", "flash_attn", "all_reduce", "send_recv"} <= kinds
    qkv = [m for m in t.rows if m.device == "H100" and m.model == "llama-2-7b"
           and m.op_kind == "qkv_proj" and m.tokens == 4096 and m.share == 1.0]
    assert len(qkv) == 1 and qkv[0].flops == pytest.approx(2 * 4096 * 4096 * 3 * 4096, rel=1e-5)
    # a 4096-token QKV GEMM runs at a sane fraction of the H100's peak
    assert 0.3 < qkv[0].flops / qkv[0].latency_s / H100.peak_flops < 1.0


def test_a_collective_row_without_bytes_is_rejected(tmp_path):
    bad = tmp_path / "c.csv"
    bad.write_text("device,op_kind,tokens,context,batch,latency_us,gpus,source\n"
                   "H100,all_reduce,1,1,1,12,4,x\n", encoding="utf-8")
    with pytest.raises(InputError, match="needs 'bytes'"):
        read_measurements(bad, CAT)


def _synthetic(params: ClassParams, cls_kind: str, rng) -> list[Measurement]:
    rows = []
    for n in 2.0 ** np.arange(0, 13):
        for width in (2048.0, 8192.0):
            f, m = 2 * n * width * width, 2 * (width * width + 2 * n * width)
            units = n * 4
            lat = float(params.latency_s(f, m, units, H100.peak_flops, H100.mem_bw_bytes_per_s))
            lat *= float(np.exp(rng.normal(0, 0.01)))
            tokens = 1 if cls_kind == "flash_attn" else int(n)
            rows.append(Measurement("H100", cls_kind, tokens, max(tokens, 64), int(n), 1.0,
                                    None, lat, "synthetic", "", flops=f, bytes=m, kv_heads=4))
    return rows


@pytest.mark.parametrize("cls,kind,truth", [
    ("gemm", "qkv_proj", ClassParams(6e-6, 0.6, 0.8)),
    ("attention_decode", "flash_attn", ClassParams(12e-6, 0.5, 0.7, 8.0)),
])
def test_fit_recovers_known_parameters(cls, kind, truth):
    rows = _synthetic(truth, kind, np.random.default_rng(0))
    got, fits = fit_class(rows, cls, H100.peak_flops, H100.mem_bw_bytes_per_s)
    assert got.t0_s == pytest.approx(truth.t0_s, rel=0.05)
    assert got.eta_c == pytest.approx(truth.eta_c, rel=0.03)
    assert got.eta_m == pytest.approx(truth.eta_m, rel=0.03)
    assert got.u_half == pytest.approx(truth.u_half, rel=0.15, abs=1e-9)
    assert all(f.determined for f in fits)


def test_fit_link_recovers_latency_and_bandwidth():
    sizes = 2.0 ** np.arange(11, 27)
    rows = [Measurement("H100", "send_recv", 1, 1, 1, 1.0, None, 15e-6 + b / 40e9, "s", "",
                        bytes=float(b), gpus=2, nodes=2) for b in sizes]
    link, _ = fit_link(rows)
    assert link.latency_s == pytest.approx(15e-6, rel=1e-3)
    assert link.bandwidth_bytes_per_s == pytest.approx(40e9, rel=1e-3)


def test_held_out_split_keeps_a_model_family_and_a_topology_out():
    cal, held = split_held_out(_table().rows)
    assert not {m.model for m in cal} & {"qwen-72b"}
    assert {m.topology for m in held if m.is_collective} == {"pairwise_nvlink"}
    assert len(cal) + len(held) == len(_table().rows)


def test_bundled_calibration_is_the_fit_of_the_bundled_table():
    """`hetopt calibrate --gpu --measurements vidur_gpu.csv -o gpu_calibration.json` made it."""
    cals, report = calibrate_gpus(_table(), CAT)
    bundled = read_calibrations(BUNDLED_CALIBRATION, CAT)
    for cal in cals:
        for c, p in cal.classes.items():
            assert vars(bundled[cal.gpu].classes[c]) == pytest.approx(vars(p), rel=1e-6)
        for k, link in cal.send_recv.items():
            assert bundled[cal.gpu].send_recv[k].latency_s == pytest.approx(link.latency_s)
    # the fit beats the catalog roofline on the held-out GEMMs of both GPUs
    for gpu in ("A100", "H100"):
        gemm = next(e for e in report["gpus"][gpu]["errors"]["held_out"] if e["class"] == "gemm")
        assert gemm["median_after_pct"] < gemm["median_before_pct"]
    saved = json.loads(BUNDLED_CALIBRATION.read_text(encoding="utf-8"))
    assert saved["report"]["gpus"]["H100"]["notes"]   # H100 attention comes from the A100


def test_a_bad_calibration_file_is_one_error(tmp_path):
    bad = tmp_path / "cal.json"
    bad.write_text('{"gpus": [{"gpu": "H100", "classes": {"gemm": {"t0_s": "x"}}}]}')
    with pytest.raises(InputError):
        read_calibrations(bad, CAT)


def test_a_calibration_of_an_unknown_gpu_names_the_field(tmp_path):
    bad = tmp_path / "cal.json"
    bad.write_text('{"gpus": [{"gpu": "Foo", "classes": {}}]}')
    with pytest.raises(InputError, match=r"gpus\[0\]\.gpu"):
        read_calibrations(bad, CAT)


def test_the_operator_calibration_points_gpu_kernel_rows_to_calibrate_gpu():
    from opt.costlib.fit import fit_points
    from opt.costlib.modelcard import bundled_cards
    with pytest.raises(InputError, match="calibrate --gpu"):
        fit_points(_table(), "H100", bundled_cards())
