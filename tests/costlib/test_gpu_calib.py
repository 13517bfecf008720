"""The calibrated GPU model (opt.costlib.gpu_calib / gpu_fit) and the bundled Vidur table."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import replace
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
from opt.costlib.measured import MeasuredTable, Measurement, read_measurements

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


def _operating_points() -> dict[str, list[tuple[str, float, float, float]]]:
    """(class, FLOPs, bytes, work units) of every kernel the serving builder costs, per GPU:
    recorded from calibrated builds of dense, GQA, MoE and hybrid cards at 2K and 32K context
    on A100 + H100 (TP 1…8: 1 to 8 KV heads per GPU, microbatches 1…512)."""
    from opt.costlib.gpu_calib import GpuCalibration
    from opt.costlib.modelcard import bundled_cards
    from opt.serving.builder import ServingWorkload, build_serving_plan

    seen: dict[str, set] = {}
    real = GpuCalibration.kernel_s

    def record(self, op_class, flops, bytes_, units=1.0):
        seen.setdefault(self.gpu, set()).add((op_class, float(flops), float(bytes_),
                                               float(units)))
        return real(self, op_class, flops, bytes_, units)

    cards = bundled_cards()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(GpuCalibration, "kernel_s", record)
        for model in ("llama-2-7b", "llama-2-70b", "mixtral-8x7b", "qwen3-next-80b-a3b"):
            for context in (2048, 32768):
                build_serving_plan(cards[model], CAT, ["A100", "H100"],
                                   ServingWorkload(context, 0.2))
    return {gpu: sorted(pts) for gpu, pts in seen.items()}


#: Message sizes (bytes) at which the collectives and links are compared: 1 KiB … 1 GiB.
LINK_BYTES = 2.0 ** np.arange(10, 31, 2)


def _max_prediction_gap(cals, reference) -> float:
    """The largest |a/b − 1| between two sets of calibrations over the builder's operating
    points (kernels) and :data:`LINK_BYTES` (all-reduce per group size, send/recv)."""
    gap = 0.0
    for gpu, pts in _operating_points().items():
        a, b = cals[gpu], reference[gpu]
        for cls, f, m, u in pts:
            gap = max(gap, abs(float(a.kernel_s(cls, f, m, u))
                               / float(b.kernel_s(cls, f, m, u)) - 1.0))
        assert a.all_reduce.keys() == b.all_reduce.keys()
        assert a.send_recv.keys() == b.send_recv.keys()
        for la, lb in [*((a.all_reduce[g], b.all_reduce[g]) for g in a.all_reduce),
                       *((a.send_recv[k], b.send_recv[k]) for k in a.send_recv)]:
            pa = la.latency_s + LINK_BYTES / la.bandwidth_bytes_per_s
            pb = lb.latency_s + LINK_BYTES / lb.bandwidth_bytes_per_s
            gap = max(gap, float(np.max(np.abs(pa / pb - 1.0))))
    return gap


@pytest.fixture(scope="module")
def refit():
    cals, report = calibrate_gpus(_table(), CAT)
    return {c.gpu: c for c in cals}, report


def test_a_refit_of_the_bundled_table_predicts_what_the_bundled_calibration_predicts(refit):
    """`hetopt calibrate --gpu --measurements vidur_gpu.csv -o gpu_calibration.json` made the
    bundled file: a refit on this machine predicts the same latencies within 1e-3 at every
    operating point the serving builder evaluates."""
    cals, report = refit
    bundled = read_calibrations(BUNDLED_CALIBRATION, CAT)
    assert set(cals) == set(bundled) == {"A100", "A40", "H100"}
    assert _max_prediction_gap(cals, bundled) < 1e-3
    # the fit beats the catalog roofline on the held-out GEMMs of both GPUs
    for gpu in ("A100", "H100"):
        gemm = next(e for e in report["gpus"][gpu]["errors"]["held_out"] if e["class"] == "gemm")
        assert gemm["median_after_pct"] < gemm["median_before_pct"]
    saved = json.loads(BUNDLED_CALIBRATION.read_text(encoding="utf-8"))
    assert saved["report"]["gpus"]["H100"]["notes"]   # H100 attention comes from the A100


def test_the_fit_does_not_depend_on_the_order_of_the_rows(refit):
    """Another floating-point path (the rows shuffled, twice) gives the same predictions."""
    rows = list(_table().rows)
    for seed in (1, 2):
        np.random.default_rng(seed).shuffle(rows)
        cals, _ = calibrate_gpus(MeasuredTable(tuple(rows), path=str(VIDUR)), CAT)
        assert _max_prediction_gap({c.gpu: c for c in cals}, refit[0]) < 1e-3


def test_the_fit_does_not_move_with_the_last_digits_of_the_latencies(refit):
    """Latencies × a factor 1 ± 1e-6 (what a different floating-point path does to the
    optimiser's iterates) move no prediction by more than 1e-3: the fit has one optimum."""
    noise = np.exp(np.random.default_rng(1).normal(0.0, 1e-6, len(_table().rows)))
    rows = tuple(replace(m, latency_s=m.latency_s * float(e))
                 for m, e in zip(_table().rows, noise))
    cals, _ = calibrate_gpus(MeasuredTable(rows, path=str(VIDUR)), CAT)
    assert _max_prediction_gap({c.gpu: c for c in cals}, refit[0]) < 1e-3


def test_the_bundled_calibration_records_what_the_data_determine():
    """Per class: the free parameters, the held ones with the reason, the condition number
    and the residual. Decode attention: no row is compute-bound and the parallelism curve
    does not lower the residual significantly (rows at u = 4…256), so eta_c = 1, u_half = 0."""
    saved = json.loads(BUNDLED_CALIBRATION.read_text(encoding="utf-8"))
    a100 = saved["report"]["gpus"]["A100"]["params"]
    for cls, rec in saved["report"]["gpus"]["H100"]["params"].items():
        if "identifiability" in rec:
            assert math.isfinite(rec["identifiability"]["condition"]), cls
    dec = a100["attention_decode"]["identifiability"]
    assert dec["free"] == ["t0_s", "eta_m"]
    assert set(dec["held"]) == {"eta_c", "u_half"}
    assert all("not determined by the data" in h["why"] for h in dec["held"].values())
    assert dec["condition"] < 100 and dec["rms_log_residual"] < 0.5
    assert a100["gemm"]["identifiability"]["free"] == ["t0_s", "eta_c", "eta_m"]
    assert a100["norm"]["identifiability"]["held"]["eta_c"]["value"] == 1.0
    cal = read_calibrations(BUNDLED_CALIBRATION, CAT)["A100"].classes["attention_decode"]
    assert (cal.eta_c, cal.u_half) == (1.0, 0.0)


def test_a_parameter_the_rows_do_not_determine_is_held_with_the_reason():
    """Decode-attention rows at one parallelism (u = 4 for every row) cannot fix the curve's
    u_half (it trades against eta_m): held at 0, with the F-test in the reason."""
    truth = ClassParams(12e-6, 1.0, 0.6, 8.0)
    rows = [replace(m, batch=1) for m in _synthetic(truth, "flash_attn",
                                                     np.random.default_rng(3))]
    noise = np.exp(np.random.default_rng(4).normal(0.0, 0.01, len(rows)))
    rows = [replace(m, latency_s=float(truth.latency_s(m.flops, m.bytes, 4.0, H100.peak_flops,
                                                       H100.mem_bw_bytes_per_s)) * e)
            for m, e in zip(rows, noise)]
    got, fits = fit_class(rows, "attention_decode", H100.peak_flops, H100.mem_bw_bytes_per_s)
    held = {f.name: f for f in fits if not f.determined}
    assert set(held) == {"eta_c", "u_half"} and got.u_half == 0.0 and got.eta_c == 1.0
    assert "F =" in held["u_half"].note
    # the held curve is absorbed by eta_m: same predictions at the rows' parallelism
    assert got.eta_m == pytest.approx(truth.eta_m * 4 / (4 + truth.u_half), rel=0.02)


def test_a_table_the_model_cannot_fit_is_refused_not_fitted_at_a_bound(scaled_table):
    """Latencies × 1000 (ms read as µs): a fit would end at its bounds with 30–95 % error."""
    path = scaled_table(VIDUR, 1000.0)
    with pytest.raises(InputError, match="bound|misses") as exc:
        calibrate_gpus(read_measurements(path, CAT), CAT)
    assert exc.value.source == str(path) and exc.value.field


def test_a_link_fit_at_a_bound_is_refused():
    sizes = 2.0 ** np.arange(11, 27)
    rows = [Measurement("H100", "send_recv", 1, 1, 1, 1.0, None, 15.0 + b / 40e9, "s", "",
                        bytes=float(b), gpus=2, nodes=2) for b in sizes]   # 15 s latency
    with pytest.raises(InputError, match="upper bound latency_s"):
        fit_link(rows)


def test_a_table_without_gpu_kernel_rows_is_refused():
    table = read_measurements(DATA / "example.csv", CAT)
    with pytest.raises(InputError, match="no GPU kernel rows") as exc:
        calibrate_gpus(table, CAT)
    assert exc.value.source == table.path


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


def test_a_gzip_calibration_reads_like_the_plain_file(tmp_path):
    gz = tmp_path / "c.json.gz"
    gz.write_bytes(gzip.compress(BUNDLED_CALIBRATION.read_bytes()))
    assert read_calibrations(gz, CAT) == read_calibrations(BUNDLED_CALIBRATION, CAT)


@pytest.mark.parametrize("name,data", [
    ("bin.json", bytes(range(256)) * 4),          # binary, not UTF-8
    ("c.json", "{\"gpus\": [é]}".encode("latin-1")),
    ("c.json.gz", b"\x1f\x8b\x08\x00 not a gzip stream"),
    ("empty.json", b'{"schema": 1, "gpus": [], "report": {}}'),
])
def test_an_unreadable_or_empty_calibration_is_one_error_naming_the_file(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as exc:
        read_calibrations(path, CAT)
    assert exc.value.source == str(path)


def _build(gpus, cals, unmeasured="transfer"):
    from opt.costlib.modelcard import bundled_cards
    from opt.serving.builder import ServingWorkload, build_serving_plan
    return build_serving_plan(bundled_cards()["llama-2-7b"], CAT, gpus,
                              ServingWorkload(8192, 0.05), calibrations=cals,
                              unmeasured_gpu=unmeasured)


def test_a_calibration_that_covers_none_of_the_gpus_is_not_called_calibrated():
    h100 = {"H100": read_calibrations(BUNDLED_CALIBRATION, CAT)["H100"]}
    with pytest.raises(InputError, match="covers no GPU type"):
        _build(["A100"], {})
    # the meta (and the build's one line) says which model each GPU type takes
    assert _build(["A100"], h100).meta["gpu_models"]["A100"]["model"] == "transferred"
    assert _build(["A100"], h100, "roofline").meta["gpu_models"]["A100"]["model"] == "roofline"


def test_build_serving_plan_reads_a_gzip_calibration_and_names_each_gpus_model(tmp_path,
                                                                               capsys):
    from opt.app.cli.parser import main
    gz = tmp_path / "c.json.gz"
    gz.write_bytes(gzip.compress(BUNDLED_CALIBRATION.read_bytes()))
    out = tmp_path / "s.json"
    argv = ["build", "serving-plan", "--model", "llama-2-7b", "--gpus", "A100,L40S",
            "--context", "8192", "--slo-ms", "50", "-o", str(out)]
    assert main([*argv, "--gpu-calibration", str(gz)]) == 0
    line = capsys.readouterr().out
    assert "GPU costs: calibrated (A100 calibrated, L40S transferred)" in line
    assert main([*argv, "--gpu-calibration", str(gz), "--unmeasured-gpu", "roofline"]) == 0
    assert "GPU costs: calibrated (A100 calibrated, L40S roofline)" in capsys.readouterr().out
    binary = tmp_path / "bin.json"
    binary.write_bytes(bytes(range(256)))
    assert main([*argv, "--gpu-calibration", str(binary)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(binary) in err[0]
