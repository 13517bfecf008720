"""The ``hetopt`` command line: output shapes, published figures, errors, bench resume."""

import json
import subprocess
import sys

import pytest

from opt.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_json(capsys, cards):
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == set(cards.names())
    r = rows["mixtral-8x7b"]
    assert r["layers"] == 32 and r["kv_bytes_per_token"] == 131072
    assert r["total_params"] == 46_702_792_704 and r["active_params"] < r["total_params"]


def test_models_table(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "gemma-3-27b" in out and "total params" in out


def test_hardware_json_round_trips(capsys, catalog):
    from opt.hardware import catalog_from_dict

    code, out, _ = run(capsys, "hardware", "--json")
    assert code == 0
    assert catalog_from_dict(json.loads(out)) == catalog
    code, out, _ = run(capsys, "hardware")
    assert "HP128" in out and "Ascend-910B" in out


@pytest.mark.parametrize("gpu2,eta,bound", [("L40S", 1.42, 1.10), ("A100", 1.93, 1.19)])
def test_bounds_het_published_values(capsys, gpu2, eta, bound):
    code, out, _ = run(capsys, "bounds", "het", "--gpu1", "H100", "--gpu2", gpu2, "--json")
    assert code == 0
    r = json.loads(out)
    assert round(r["eta"], 2) == eta and round(r["bound"], 2) == bound


def test_bounds_het_with_model(capsys):
    code, out, _ = run(capsys, "bounds", "het", "--gpu1", "H100", "--gpu2", "A100",
                       "--model", "gemma-3-27b", "--context", "32768", "--json")
    assert code == 0
    r = json.loads(out)
    assert 1.0 <= r["gain"] <= r["peak_gain"] <= r["bound"]
    assert r["peak_context_tokens"] > 0


def test_bounds_hom(capsys):
    code, out, _ = run(capsys, "bounds", "hom", "--gpu", "H100", "--model", "llama-2-70b",
                       "--context", "8192", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["gpus"] == 4  # 138 GB of weights in at most half of the group's memory
    assert 1.0 <= r["gain"] < r["gain_limit"]


def test_unknown_names_one_line_error(capsys):
    code, _, err = run(capsys, "bounds", "hom", "--gpu", "V100", "--model", "llama-2-7b",
                       "--context", "1000")
    assert code == 2
    assert err.count("\n") == 1 and "V100" in err and "H100" in err
    code, _, err = run(capsys, "bounds", "hom", "--gpu", "H100", "--model", "llama-9",
                       "--context", "1000")
    assert code == 2 and err.count("\n") == 1 and "llama-2-7b" in err


def test_missing_price_is_a_clear_error(capsys):
    code, _, err = run(capsys, "bounds", "het", "--gpu1", "H100", "--gpu2", "H20",
                       "--model", "qwen3-235b-a22b", "--context", "8192")
    assert code == 2 and "H20" in err and "price" in err
    code, out, _ = run(capsys, "bounds", "het", "--gpu1", "H100", "--gpu2", "H20",
                       "--price2", "1.5", "--model", "qwen3-235b-a22b", "--context", "8192",
                       "--json")
    assert code == 0 and json.loads(out)["gain"] >= 1.0


def test_bad_catalog_file_error(capsys, tmp_path):
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"devices": [{"name": "X", "class": "gpu"}]}))
    code, _, err = run(capsys, "hardware", "--catalog", str(path))
    assert code == 2 and str(path) in err and "devices[0].peak_flops" in err


def test_bench_writes_and_resumes(capsys, tmp_path):
    out_dir = tmp_path / "bench"
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta")
    assert code == 0 and "eta/bound(H100, L40S)" in out and "0 failed" in out
    path = out_dir / "core" / "opweave-eta.json"
    saved = json.loads(path.read_text())
    saved["notes"] = "marker from the first run"
    path.write_text(json.dumps(saved))
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta")
    assert "cached" in out and "marker from the first run" in out
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta", "--fresh")
    assert "marker from the first run" not in out


def test_python_dash_m_opt():
    proc = subprocess.run([sys.executable, "-m", "opt", "bounds", "het", "--gpu1", "H100",
                           "--gpu2", "L40S", "--json"], capture_output=True, text=True, check=True)
    assert round(json.loads(proc.stdout)["eta"], 2) == 1.42
