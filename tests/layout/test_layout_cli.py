"""CLI of P2: build with a memory budget, solve a layout strategy (INFEASIBLE budgets exit 0
with a message), and the resumable layout sweep."""

import json

from opt.app.cli import main
from opt.common.jsonio import read_json

BUILD = ["build", "placement", "--model", "dops-qwen-1.8b", "--platform", "HP32", "--prefill",
         "8", "--decode", "2", "--layers", "1"]


def test_build_budget_and_solve(tmp_path, capsys):
    ok, tiny = tmp_path / "ok.json", tmp_path / "tiny.json"
    assert main([*BUILD, "--budget-factor", "1.5", "-o", str(ok)]) == 0
    assert main([*BUILD, "--budget-gb", "0.001", "-o", str(tiny)]) == 0
    capsys.readouterr()
    assert read_json(ok)["layout"]["memory_budget"] > 0
    assert main(["solve", str(tiny), "--method", "bifocal/wla", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "INFEASIBLE" and "memory budget" in out["stats"]["message"]
    res = tmp_path / "res.json"
    assert main(["solve", str(ok), "--method", "bifocal/wla", "--param", "budget=6",
                 "-o", str(res)]) == 0
    assert "FEASIBLE" in capsys.readouterr().out
    assert main(["validate", str(ok), str(res)]) == 0
    assert main(["solve", str(ok), "--method", "pd/dual"]) == 0
    text = capsys.readouterr().out
    assert "INFEASIBLE" in text and "budget" in text


def test_sweep_layout_resumes(tmp_path, capsys):
    args = ["sweep", "layout", "--prefill", "8", "--decode", "2", "--batch", "1", "4",
            "--layers", "1", "--methods", "pd/linear", "bifocal/linear", "bifocal/wla",
            "--out", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert len(first["records"]) == 6 and not any(r["cached"] for r in first["records"])
    wla = [r for r in first["records"] if r["method"] == "bifocal/wla"]
    assert all(r["format_mix"] and r["evaluations"] >= 1 for r in wla)
    assert {x["method"] for x in first["speedups"]} >= {"bifocal/wla"}
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "6 results (6 reused)" in text and "format mix per regime" in text
