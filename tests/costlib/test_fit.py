"""Calibration fits: synthetic measurements from perturbed parameters (2 % lognormal noise,
fixed seed) are fitted back; the parameters are recovered within the stated tolerances and the
fitted model predicts held-out points better than the catalog model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from opt.common.errors import InputError
from opt.costlib.fit import (
    default_shapes,
    fit_device,
    fit_points,
    get_param,
    predict_s,
    synthetic_rows,
    with_params,
)
from opt.costlib.hardware import Catalog, load_catalog
from opt.costlib.measured import MeasuredTable
from opt.costlib.modelcard import load_cards

#: (device, perturbation, relative tolerance per parameter) — docs/measurements.md states them.
CASES = [
    ("AiM", {"u_min": 0.26, "u_max": 0.45, "knee_flops": 2.5e8, "slope": 2.4,
             "slowdown.softmax": 500.0, "slowdown.norm": 300.0, "slowdown.attention": 8.0,
             "slowdown.elementwise": 450.0},
     {"u_min": 0.03, "u_max": 0.03, "knee_flops": 0.10, "slope": 0.08, "slowdown.softmax": 0.03,
      "slowdown.norm": 0.03, "slowdown.attention": 0.03, "slowdown.elementwise": 0.03}),
    ("Ascend-910B", {"u_max": 0.85, "kernel_overhead_s.gemm": 6e-6,
                     "kernel_overhead_s.norm": 2e-6, "kernel_overhead_s.softmax": 1e-6},
     {"u_max": 0.05, "kernel_overhead_s.gemm": 0.05, "kernel_overhead_s.norm": 0.05,
      "kernel_overhead_s.softmax": 0.05}),
    ("A100", {"eta_c": 0.6, "eta_m": 0.8, "t0_s": 12e-6},
     {"eta_c": 0.02, "eta_m": 0.02, "t0_s": 0.03}),
]


def _split(device, changes):
    cat, cards = load_catalog(), load_cards()
    spec = cat.device(device)
    true = replace(spec, latency_model=with_params(spec.latency_model, changes))
    rows = synthetic_rows(true, cards["llama-2-7b"], default_shapes(cards["llama-2-7b"]),
                          rel_noise=0.02, seed=0, source="synthetic")
    train = MeasuredTable(tuple(r for i, r in enumerate(rows) if i % 4))
    held = MeasuredTable(tuple(r for i, r in enumerate(rows) if i % 4 == 0))
    return spec, true, fit_points(train, device, cards), fit_points(held, device, cards)


@pytest.mark.parametrize("device, changes, tol", CASES, ids=[c[0] for c in CASES])
def test_round_trip_recovers_perturbed_parameters(device, changes, tol):
    spec, true, train, held = _split(device, changes)
    report = fit_device(spec, train, "synthetic")
    fitted = report.device.latency_model
    for name, rel in tol.items():
        want = get_param(true.latency_model, name)
        assert get_param(fitted, name) == pytest.approx(want, rel=rel), name
    meas = np.array([p.latency_s for p in held])
    rms_fit = np.sqrt(np.mean(np.log(predict_s(fitted, held) / meas) ** 2))
    rms_cat = np.sqrt(np.mean(np.log(predict_s(spec.latency_model, held) / meas) ** 2))
    assert rms_fit < 0.03 and rms_fit < rms_cat / 3  # the noise is σ = 0.02
    assert report.errors[-1].op_class == "all"
    assert report.errors[-1].median_after < report.errors[-1].median_before


def test_unperturbed_fit_stays_put_and_writes_a_catalog(tmp_path):
    spec, true, train, _ = _split("A100", {})
    report = fit_device(spec, train, "synthetic")
    assert get_param(report.device.latency_model, "t0_s") == pytest.approx(9.4e-6, rel=0.02)
    path = tmp_path / "fit.json"
    Catalog(devices={spec.name: report.device}).write(path)
    merged = load_catalog(path)
    assert merged.device("A100").latency_model == report.device.latency_model
    assert "fitted by hetopt calibrate" in merged.device("A100").latency_model.source


def test_held_parameters_say_why():
    spec, _, train, _ = _split("AiM", {})
    report = fit_device(spec, train[:20], "few")
    held = {p.name: p for p in report.params if not p.fitted}
    assert "slowdown.gemm" in held and "reference class" in held["slowdown.gemm"].note
    assert any("need 3" in p.note for p in held.values())


def test_rows_without_a_model_need_one():
    cat, cards = load_catalog(), load_cards()
    rows = synthetic_rows(cat.device("A100"), cards["llama-2-7b"],
                          [("qk", 1, 100, 1, 1.0)], rel_noise=0.0, seed=0, source="s")
    table = MeasuredTable((replace(rows[0], model=None),), path="t.csv")
    with pytest.raises(InputError, match="t.csv.*synthetic\\[0\\].model.*--model"):
        fit_points(table, "A100", cards)
    assert len(fit_points(table, "A100", cards, model="llama-2-7b")) == 1
    with pytest.raises(InputError, match="has no operator 'router'"):
        fit_points(MeasuredTable((replace(rows[0], op_kind="router"),)), "A100", cards)


def test_standard_errors_flag_what_the_points_do_not_determine():
    """On the NPU, operators with FLOPs below the knee are memory-bound (ridge ≈ 220 FLOP/byte,
    i.e. GEMMs of > 220 tokens ≈ 7e9 FLOPs), so u_min, the knee and the slope are hidden; the
    standard errors say so. Every parameter of the AiM round trip is determined."""
    spec, _, train, _ = _split(*CASES[1][:2])
    weak = {p.name for p in fit_device(spec, train).params if p.note.startswith("weakly")}
    assert weak == {"u_min", "knee_flops", "slope"}
    spec, true, train, _ = _split(*CASES[0][:2])
    for p in fit_device(spec, train).params:
        if p.fitted:
            assert p.rel_std_err is not None and p.rel_std_err < 0.05, p.name
            want = get_param(true.latency_model, p.name)
            assert abs(p.value / want - 1) < 4 * p.rel_std_err + 0.002, p.name


@pytest.mark.parametrize("device", ["Ascend-910B", "A100"])
def test_a_table_the_model_cannot_fit_is_refused_not_fitted_at_a_bound(device):
    """Latencies × 1000 (ms read as µs): the fit would end at its bounds with a large error;
    it is refused with the reason, naming the table and the device."""
    spec, _, train, _ = _split(device, {})
    scaled = [replace(p, latency_s=p.latency_s * 1000.0) for p in train]
    with pytest.raises(InputError, match="bound|misses") as exc:
        fit_device(spec, scaled, "x1000.csv")
    assert exc.value.source == "x1000.csv" and exc.value.field == device
    assert fit_device(spec, train, "ok.csv").n_points == len(train)   # the unscaled one fits


@pytest.mark.parametrize("flags,table", [
    (("--gpu",), "vidur_gpu.csv"), (("--device", "Ascend-910B"), "example.csv")])
def test_calibrate_refuses_a_table_x1000_in_one_line(tmp_path, capsys, scaled_table, flags,
                                                     table):
    from pathlib import Path

    from opt.app.cli.parser import main
    src = Path(__file__).resolve().parents[2] / "opt" / "costlib" / "data" / "measurements"
    bad = scaled_table(src / table, 1000.0)
    out = tmp_path / "c.json"
    code = main(["calibrate", *flags, "--measurements", str(bad), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(bad) in err[0] and "refused" in err[0]
    assert not out.exists()


def test_calibrate_gpu_refuses_a_table_without_gpu_rows(tmp_path, capsys):
    from pathlib import Path

    from opt.app.cli.parser import main
    table = Path(__file__).resolve().parents[2] / "opt" / "costlib" / "data" / "measurements" \
        / "example.csv"
    out = tmp_path / "c.json"
    code = main(["calibrate", "--gpu", "--measurements", str(table), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no GPU kernel rows" in err[0] and str(table) in err[0]
    assert not out.exists()
