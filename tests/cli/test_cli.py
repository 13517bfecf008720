"""The ``hetopt`` command line: output shapes, published figures, errors, bench resume."""

import json
import re
import subprocess
import sys

import pytest

from opt.app.cli import main


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
    from opt.costlib.hardware import catalog_from_dict

    code, out, _ = run(capsys, "hardware", "--json")
    assert code == 0
    assert catalog_from_dict(json.loads(out)) == catalog
    code, out, _ = run(capsys, "hardware")
    assert "HP128" in out and "Ascend-910B" in out


@pytest.mark.parametrize("gpu2,eta,bound", [("L40S", 1.42, 1.10), ("A100", 1.93, 1.19)])
def test_bounds_het_published_values(capsys, gpu2, eta, bound):
    code, out, _ = run(capsys, "theory", "het", "--gpu1", "H100", "--gpu2", gpu2, "--json")
    assert code == 0
    r = json.loads(out)
    assert round(r["eta"], 2) == eta and round(r["bound"], 2) == bound


def test_bounds_het_with_model(capsys):
    code, out, _ = run(capsys, "theory", "het", "--gpu1", "H100", "--gpu2", "A100",
                       "--model", "gemma-3-27b", "--context", "32768", "--json")
    assert code == 0
    r = json.loads(out)
    assert 1.0 <= r["gain"] <= r["peak_gain"] <= r["bound"]
    assert r["peak_context_tokens"] > 0


def test_bounds_hom(capsys):
    code, out, _ = run(capsys, "theory", "hom", "--gpu", "H100", "--model", "llama-2-70b",
                       "--context", "8192", "--json")
    assert code == 0
    r = json.loads(out)
    assert r["gpus"] == 4  # 138 GB of weights in at most half of the group's memory
    assert 1.0 <= r["gain"] < r["gain_limit"]


def test_unknown_names_one_line_error(capsys):
    code, _, err = run(capsys, "theory", "hom", "--gpu", "V100", "--model", "llama-2-7b",
                       "--context", "1000")
    assert code == 2
    assert err.count("\n") == 1 and "V100" in err and "H100" in err
    code, _, err = run(capsys, "theory", "hom", "--gpu", "H100", "--model", "llama-9",
                       "--context", "1000")
    assert code == 2 and err.count("\n") == 1 and "llama-2-7b" in err


def test_missing_price_is_a_clear_error(capsys):
    code, _, err = run(capsys, "theory", "het", "--gpu1", "H100", "--gpu2", "H20",
                       "--model", "qwen3-235b-a22b", "--context", "8192")
    assert code == 2 and "H20" in err and "price" in err
    code, out, _ = run(capsys, "theory", "het", "--gpu1", "H100", "--gpu2", "H20",
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
    assert code == 0 and "[reproduced] eta(H100, L40S)" in out and "0 failed" in out
    path = out_dir / "core" / "opweave-eta.json"
    saved = json.loads(path.read_text())
    saved["notes"] = "marker from the first run"
    path.write_text(json.dumps(saved))  # an edit without a new seal: recomputed
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta")
    assert "cached" not in out and "marker from the first run" not in out
    from opt.common.fingerprint import seal

    path.write_text(json.dumps(seal(saved)))  # a sealed file: trusted
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta")
    assert "cached" in out and "marker from the first run" in out
    code, out, _ = run(capsys, "bench", "--out", str(out_dir), "--case", "opweave-eta", "--fresh")
    assert "marker from the first run" not in out
    # the run's reports: JSON lines, a CSV of reproduced figures, a Markdown report
    lines = (out_dir / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["case"] for x in lines] == ["opweave-eta"]
    rows = (out_dir / "checks.csv").read_text().splitlines()
    assert rows[0] == ("suite,case,kind,name,ours,expected,paper,tolerance,verdict,source,"
                       "reason") and len(rows) > 1
    assert all(",paper," in r and ",reproduced," in r for r in rows[1:])
    report = (out_dir / "report.md").read_text()
    assert report.startswith("# hetopt bench report") and "## core/opweave-eta" in report


def test_python_dash_m_opt():
    proc = subprocess.run([sys.executable, "-m", "opt", "theory", "het", "--gpu1", "H100",
                           "--gpu2", "L40S", "--json"], capture_output=True, text=True, check=True)
    assert round(json.loads(proc.stdout)["eta"], 2) == 1.42


# ---- placement commands ------------------------------------------------------------------------

def test_build_solve_validate_round_trip(capsys, tmp_path):
    inst = tmp_path / "inst.json.gz"
    res = tmp_path / "res.json"
    code, out, _ = run(capsys, "build", "placement", "--model", "dops-qwen-1.8b", "--platform",
                       "HP32", "--prefill", "8", "--decode", "1", "--layers", "1", "-o", str(inst),
                       "--json")
    assert code == 0 and json.loads(out)["tasks"] == 2 * (3 + 16 + 4)  # 2 KV head groups
    code, out, _ = run(capsys, "solve", str(inst), "--method", "heft", "-o", str(res), "--json")
    assert code == 0 and json.loads(out)["status"] == "FEASIBLE"
    code, out, _ = run(capsys, "validate", str(inst), str(res))
    assert code == 0 and out.startswith("valid: makespan")
    # a tampered result is rejected with exit 1 and the rule
    data = json.loads(res.read_text())
    data["solution"]["compute"][1]["start"] -= 1
    data["solution"]["compute"][1]["end"] -= 1
    res.write_text(json.dumps(data))
    code, _, err = run(capsys, "validate", str(inst), str(res))
    assert code == 1 and "rule" in err


def _lp_reads_back(path) -> bool:
    """Whether HiGHS reads the exported model back with columns and rows."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    ok = h.readModel(str(path)) == highspy.HighsStatus.kOk
    return ok and h.getNumCol() > 0 and h.getNumRow() > 0


def test_solve_bundled_instance_by_name_and_export(capsys, tmp_path):
    res = tmp_path / "r.json"
    lp = tmp_path / "model.lp"
    code, out, _ = run(capsys, "solve", "heft-topcuoglu-2002", "--method", "milp",
                       "--time-limit", "30", "--export", str(lp), "-o", str(res), "--json")
    assert code == 0
    r = json.loads(out)
    assert r["status"] == "OPTIMAL" and r["objective"] == 73
    text = lp.read_text()  # Pyomo's or HiGHS' LP writer, by the formulation milp chose
    assert re.search(r"^min\s*$", text, re.M) and "obj:" in text
    assert ("s.t." in text or "\nst\n" in text) and _lp_reads_back(lp)
    code, out, _ = run(capsys, "validate", "heft-topcuoglu-2002", str(res), "--json")
    assert code == 0 and json.loads(out)["makespan"] == 73


def test_solve_passes_params_and_reports_bad_ones(capsys):
    code, out, _ = run(capsys, "solve", "sinnen-Nodes_7_OutTree-p2", "--method", "cpsat",
                       "--param", "symmetry_breaking=false", "--param", "max_time_in_seconds=20",
                       "--json")
    assert code == 0 and json.loads(out)["objective"] == 28
    # the default (portfolio) names the params it takes
    code, _, err = run(capsys, "solve", "sinnen-Nodes_7_OutTree-p2", "--param",
                       "symmetry_breaking=false")
    assert code == 2 and "portfolio" in err and "first_slice" in err
    code, _, err = run(capsys, "solve", "sinnen-Nodes_7_OutTree-p2", "--param", "oops")
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run(capsys, "solve", "no-such-instance")
    assert code == 2 and "heft-topcuoglu-2002" in err


def test_import_dot(capsys, tmp_path):
    from pathlib import Path

    dot = Path(__file__).resolve().parents[2] / "instances" / "data" / "sinnen-dot" / \
        "Nodes_7_OutTree.dot"
    out_file = tmp_path / "g.json"
    code, out, _ = run(capsys, "import", "dot", str(dot), "--processors", "4", "-o", str(out_file))
    assert code == 0 and "7 tasks" in out
    code, out, _ = run(capsys, "solve", str(out_file), "--json")
    assert json.loads(out)["objective"] == 22


def test_bad_instance_file_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": 1, "problem": "placement", "devices": [
        {"name": "A", "class": "cpu"}], "tasks": [{"id": "t", "cost": {"A": -3}}]}))
    code, _, err = run(capsys, "solve", str(bad))
    assert code == 2 and err.count("\n") == 1 and str(bad) in err and "negative" in err


def test_bench_suites_are_named(capsys):
    code, _, err = run(capsys, "bench", "--suite", "nope")
    assert code == 2 and "unknown bench suite 'nope'" in err and "opweave" in err


def test_bench_references_case_skips_entries_without_p1_optimum(capsys, tmp_path,
                                                              monkeypatch):
    """The references case must skip bundled entries without a P1 optimum (P2 entries,
    best-known values) instead of crashing the main job."""
    import opt.app.bench.placement

    keep = ["heft-topcuoglu-2002", "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5"]
    monkeypatch.setattr(opt.app.bench.placement.instances, "names", lambda problem=None: keep)
    code, out, _ = run(capsys, "bench", "--out", str(tmp_path), "--case", "references")
    assert code == 0 and "0 failed" in out
    assert "heft-topcuoglu-2002" in out and "p2-dops" not in out


@pytest.mark.slow
def test_bench_references_case_runs_on_every_bundled_entry(capsys, tmp_path):
    """Every bundled P1 optimum is reproduced, the medium one by cpsat-blocks (1–2 min)."""
    code, out, _ = run(capsys, "bench", "--out", str(tmp_path), "--case", "references")
    assert code == 0 and "0 failed" in out
    assert "heft-topcuoglu-2002" in out and "p1-llama-2-7b" in out
