"""hetopt calibrate / compare-measured / synth-measurements / build placement --measurements:
the round trip on synthetic measurements of perturbed parameters, and one-line errors."""

from __future__ import annotations

import json

import pytest

from opt.app.cli.parser import main
from opt.costlib.hardware import load_catalog

SETS = ["--set", "AiM:slowdown.softmax=500", "--set", "AiM:u_max=0.45",
        "--set", "Ascend-910B:kernel_overhead_s.softmax=1e-6"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("measure")


def test_round_trip(capsys, workdir):
    synth = workdir / "synth.csv"
    code, out, _ = _run(capsys, "synth-measurements", "--device", "AiM", "--device",
                        "Ascend-910B", "--model", "llama-2-7b", *SETS, "--batch", 1,
                        "--cell-share", 0.5, "-o", synth)
    assert code == 0 and "synthetic rows" in out
    fit = workdir / "fit.json"
    code, out, _ = _run(capsys, "calibrate", "--device", "AiM", "--measurements", synth,
                        "-o", fit, "--json")
    assert code == 0
    report = json.loads(out)
    params = {p["name"]: p["value"] for p in report["params"]}
    assert params["slowdown.softmax"] == pytest.approx(500, rel=0.05)
    assert params["u_max"] == pytest.approx(0.45, rel=0.05)
    assert load_catalog(fit).device("AiM").latency_model.slowdown["softmax"] == \
        pytest.approx(params["slowdown.softmax"])
    common = ["--model", "llama-2-7b", "--platform", "HP32", "--prefill", 512, "--decode", 4,
              "--layers", 1]
    code, out, _ = _run(capsys, "build", "placement", *common, "-o", workdir / "m.json")
    code, out, _ = _run(capsys, "build", "placement", *common, "--measurements", synth,
                        "-o", workdir / "t.json")
    assert code == 0 and "interpolated" in out and "0 from the model" in out
    for name in ("m", "t"):
        assert _run(capsys, "solve", workdir / f"{name}.json", "--method", "heft", "-o",
                    workdir / f"{name}_heft.json")[0] == 0
    code, out, _ = _run(capsys, "synth-measurements", "--device", "AiM", "--device",
                        "Ascend-910B", "--model", "llama-2-7b", *SETS, "--batch", 1,
                        "--cell-share", 0.5, "--end-to-end",
                        f"{workdir / 't.json'}:{workdir / 't_heft.json'}", "-o", synth)
    assert code == 0
    code, out, _ = _run(capsys, "compare-measured", workdir / "m.json",
                        workdir / "m_heft.json", "--measurements", synth, "--json")
    assert code == 0
    rep = json.loads(out)
    by_class = {c["op_class"]: c for c in rep["classes"]}
    assert by_class["all"]["unmatched"] == 0
    assert by_class["softmax"]["delta"] < -0.2  # the model's softmax is faster than "measured"
    assert rep["end_to_end"] is not None and rep["end_to_end"]["delta"] != 0
    # the instance built from the table matches it: gaps are the tick rounding only
    code, out, _ = _run(capsys, "compare-measured", workdir / "t.json",
                        workdir / "t_heft.json", "--measurements", synth, "--json")
    rep = json.loads(out)
    assert abs(rep["classes"][-1]["delta"]) < 1e-4  # ns ticks
    assert rep["end_to_end"]["delta"] == pytest.approx(0.0, abs=1e-12)
    code, out, _ = _run(capsys, "compare-measured", workdir / "m.json",
                        workdir / "m_heft.json", "--measurements", synth)
    assert "Δ = (S_sim − S_ver)/S_ver" in out


def test_errors_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("device,op_kind,tokens,context,batch,latency_us,source\n"
                   "AiM,qk,1,100,1,ten,x\n")
    code, _, err = _run(capsys, "calibrate", "--device", "AiM", "--measurements", bad)
    assert code == 2 and f"{bad}: field 'row 2.latency_us'" in err and "'ten'" in err
    assert err.count("\n") == 1
    code, _, err = _run(capsys, "build", "placement", "--model", "llama-2-7b", "--platform",
                        "HP32", "--prefill", 8, "--decode", 1, "--measurements",
                        tmp_path / "nope.csv", "-o", tmp_path / "x.json")
    assert code == 2 and "no such file" in err


def test_plot_and_missing_matplotlib(capsys, tmp_path, monkeypatch):
    synth, inst, res, png = (tmp_path / n for n in ("s.csv", "m.json", "r.json", "gaps.png"))
    assert _run(capsys, "synth-measurements", "--device", "AiM", "--device", "Ascend-910B",
                "--model", "llama-2-7b", *SETS, "--batch", 1, "--cell-share", 0.5,
                "-o", synth)[0] == 0
    assert _run(capsys, "build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
                "--prefill", 512, "--decode", 4, "--layers", 1, "-o", inst)[0] == 0
    assert _run(capsys, "solve", inst, "--method", "heft", "-o", res)[0] == 0
    code, _, _ = _run(capsys, "compare-measured", inst, res, "--measurements", synth,
                      "--plot", png)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    code, _, err = _run(capsys, "compare-measured", "no-such-instance.json", "no-result.json",
                        "--measurements", "no-table.csv", "--plot", png)
    assert code == 2 and "matplotlib" in err  # checked before any input is read


def test_bad_perturbation_and_blank_lines(capsys, tmp_path):
    code, _, err = _run(capsys, "synth-measurements", "--device", "A100", "--model",
                        "llama-2-7b", "--set", "A100:u_min=0.3", "-o", tmp_path / "s.csv")
    assert code == 2 and "unknown parameter 'u_min' of a efficiency_roofline" in err
    bad = tmp_path / "blank.csv"
    bad.write_text("# interpolate: none\ndevice,op_kind,tokens,context,batch,latency_us,source\n"
                   "A100,qk,1,100,1,3,x\n\nA100,qk,1,200,1,0,x\n")
    code, _, err = _run(capsys, "calibrate", "--device", "A100", "--measurements", bad)
    assert code == 2 and "field 'row 5.latency_us'" in err  # the file's line number
