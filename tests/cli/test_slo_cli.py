"""``hetopt build placement --objective / --slo-*-ms``, then ``solve`` and ``validate`` honour it
(problems.md §1.5)."""

from __future__ import annotations

import json

from tests.cli.run import run


def test_slo_from_build_to_validate(capsys, tmp_path):
    inst = str(tmp_path / "i.json")
    base = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill",
            "16", "--decode", "2", "--layers", "1", "-o", inst]
    code, _, _ = run(capsys, *base, "--slo-ttft-ms", "0.01", "--objective", "makespan")
    assert code == 0
    d = json.loads(open(inst).read())
    assert d["slo"] == {"ttft": 10_000}  # 0.01 ms in ns
    # (a hang guard: CP-SAT proves this infeasibility at once)
    code, out, _ = run(capsys, "solve", inst, "--method", "cpsat", "--time-limit", "300",
                       "--num-workers", "1")
    assert code == 0 and "INFEASIBLE" in out and "tightest found" in out
    res = str(tmp_path / "r.json")
    code, out, _ = run(capsys, "solve", inst, "--method", "heft", "-o", res)
    assert code == 0 and "SLO broken: ttft" in out
    code, out, err = run(capsys, "validate", inst, res)
    assert code == 1 and "breaks the instance's SLO" in (out + err)
    code, _, err = run(capsys, *base, "--slo-tpot-ms", "nan")
    assert code == 2 and "--slo-tpot-ms" in err
    code, _, err = run(capsys, "solve", inst, "--method", "cpsat-blocks", "--time-limit", "5")
    assert code == 2 and "does not take an objective or SLO" in err


def test_decode_time_objective_is_what_solve_reports(capsys, tmp_path):
    inst = str(tmp_path / "i.json")
    run(capsys, "build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
        "--prefill", "16", "--decode", "2", "--layers", "1", "--objective", "decode_time",
        "-o", inst)
    res = str(tmp_path / "r.json")
    code, _, _ = run(capsys, "solve", inst, "--method", "bifocal", "-o", res)
    r = json.loads(open(res).read())
    assert code == 0 and r["objective"] == r["stats"]["metrics"]["decode_time"]
    assert r["lower_bound"] is None  # the certified bound bounds the makespan only
    code, out, _ = run(capsys, "validate", inst, res)
    assert code == 0 and out.startswith("valid")
