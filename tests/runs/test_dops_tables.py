"""The DOPS side-by-side tables (opt.app.runs.dops_tables) on hand-made sweep records."""

from __future__ import annotations

from opt.app.runs.dops_tables import (
    TOLERANCE,
    fig7,
    fig10,
    geomean_table,
    static_winners,
    verdict_range,
    verdict_value,
)


def _rec(model, platform, p, d, b, method, makespan, **extra):
    return {"model": model, "platform": platform, "prefill": p, "decode": d, "batch": b,
            "method": method, "status": "FEASIBLE", "makespan": makespan, **extra}


def test_verdicts_follow_the_numbers():
    assert verdict_value("x", 2.23, 2.23 * (1 + TOLERANCE / 2)).verdict == "reproduced"
    assert verdict_value("x", 2.23, 1.34).verdict == "differs"
    assert verdict_value("x", 2.23, None).verdict == "differs"
    assert verdict_range("x", (1.1, 1.48), (1.12, 1.40)).verdict == "reproduced"
    assert verdict_range("x", (1.1, 1.48), (1.0, 1.40)).verdict == "differs"


def test_geomean_table_and_static_winners():
    recs = []
    for (p, d), (pd, bif, af) in {(128, 128): (100, 50, 120), (2048, 1024): (100, 80, 90)}.items():
        recs += [_rec("llama-2-7b", "HP64", p, d, 1, "pd", pd),
                 _rec("llama-2-7b", "HP64", p, d, 1, "bifocal", bif),
                 _rec("llama-2-7b", "HP64", p, d, 1, "heft", bif),
                 _rec("llama-2-7b", "HP64", p, d, 1, "af", af)]
    recs.append(_rec("llama-2-7b", "HP64", 512, 128, 1, "bifocal", 1, status="ERROR"))
    (row,) = geomean_table(recs)
    assert row["workloads"] == 2
    assert abs(row["bifocal"] - (2.0 * 1.25) ** 0.5) < 1e-12
    assert row["worst_bifocal"] == 1.25 and row["paper"] == 1.20
    assert row["verdict"] == "differs"  # 1.58 is not 1.20 ± 5 %
    wins = static_winners(recs)
    assert wins[("llama-2-7b", "HP64", 128, 128, 1)] == "pd"
    assert wins[("llama-2-7b", "HP64", 2048, 1024, 1)] == "af"


def test_fig7_needs_every_workload_and_fig10_reports_co_utilisation():
    recs = []
    for p in (128, 1024):
        for d in (128, 512, 1024):
            recs += [_rec("dops-qwen-1.8b", "HP32", p, d, 8, "pd", 200),
                     _rec("dops-qwen-1.8b", "HP32", p, d, 8, "bifocal", 100),
                     _rec("dops-qwen-1.8b", "HP32", p, d, 8, "pd+attn", 250)]
    out = {f["model"]: f for f in fig7(recs)}
    q = out["dops-qwen-1.8b"]
    assert q["range"] == (2.0, 2.0) and q["verdict"] == "reproduced"
    assert q["static_below_pd"] == ["pd+attn"]
    assert out["llama-2-7b"]["range"] is None and out["llama-2-7b"]["verdict"] == "differs"
    recs = [_rec("llama-2-7b", "HP64", 128, 128, 1, "pd", 100, u_co=0.1),
            _rec("llama-2-7b", "HP64", 128, 128, 1, "bifocal", 50, u_co=0.4)]
    rows = {r["method"]: r for r in fig10(recs)}
    assert rows["bifocal"]["median"] == 2.0 and rows["bifocal"]["u_co"] == 0.4


def test_insights_compare_the_largest_increment_and_name_missing_baselines():
    from opt.app.runs.dops_tables import insights
    from opt.costlib.hardware import bundled_catalog

    def rec(model, p, d, b, platform, makespan, **kw):
        return {"model": model, "prefill": p, "decode": d, "batch": b, "platform": platform,
                "method": "bifocal", "status": "FEASIBLE", "makespan": makespan, **kw}

    recs = []
    for p, times in ((128, (100, 20, 18, 17)), (2048, (100, 90, 80, 20))):
        recs += [rec("llama-2-13b", p, 1024, 16, pl, t)
                 for pl, t in zip(("HP0", "HP32", "HP64", "HP128"), times)]
    recs.append(rec("llama-2-7b", 2048, 512, 8, "HP0", None, status="ERROR",
                    error="build: field 'workload': the KV cache share of NPU0 (16.8 GB) "
                          "exceeds its memory (16 GB)"))
    rows = {r["insight"]: r for r in insights(recs, bundled_catalog())}
    assert rows["1"]["ours"] == ["HP0->HP32", "HP64->HP128"]
    assert rows["1"]["verdict"] == "reproduced"
    assert rows["4"]["ours"][0] == "HP0: no schedule (KV cache > memory)"
    assert rows["4"]["verdict"] == "differs" and rows["2"]["ours"] == [None, None]
