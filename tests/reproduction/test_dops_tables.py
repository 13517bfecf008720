"""The DOPS side-by-side tables (opt.app.reproduction.dops_tables) on hand-made sweep records."""

from __future__ import annotations

from opt.app.reproduction.dops_tables import (
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


def _grid(model, platform, speed, skip=()):
    """Every grid workload of ``model`` with every method (makespan 1000 / speed[method])."""
    from opt.app.reproduction.dops_tables import GRID_METHODS, grid_keys

    return [_rec(*k, m, 1000 / speed.get(m, 1.0)) for k in grid_keys(model, platform)
            if k[2:] not in skip for m in GRID_METHODS]


def test_geomean_verdict_only_from_a_full_grid():
    full = _grid("llama-2-7b", "HP64", {"bifocal": 1.2, "heft": 1.1, "af": 1.3})
    row = {r["model"]: r for r in geomean_table(full)}["llama-2-7b"]
    assert row["workloads"] == 64 and abs(row["bifocal"] - 1.2) < 1e-12
    assert row["verdict"] == "reproduced" and abs(row["best_static"] - 1.3) < 1e-12
    assert row["slower_2pct"] == 0 and row["source"].startswith("DOPS §6.2")
    # one static policy missing on one workload: the Bifocal/PD verdict stands, the HEFT and
    # best-static geomeans (all seven methods) wait
    short = [r for r in full if not (r["prefill"] == 512 and r["decode"] == 256
                                     and r["batch"] == 4 and r["method"] == "pd+ffn")]
    row = {r["model"]: r for r in geomean_table(short)}["llama-2-7b"]
    assert row["verdict"] == "reproduced" and row["all_methods"] == 63
    assert row["heft"] is None and row["best_static"] is None
    # Bifocal missing on one workload: pending, no geomean, but the partial figures
    short = [r for r in full if not (r["prefill"] == 512 and r["decode"] == 256
                                     and r["batch"] == 4 and r["method"] == "bifocal")]
    row = {r["model"]: r for r in geomean_table(short)}["llama-2-7b"]
    assert row["verdict"] == "pending (63/64)" and row["bifocal"] is None
    assert abs(row["partial_bifocal"] - 1.2) < 1e-12
    # an ERROR PD record leaves the workload unfinished; other models are all pending
    broken = [dict(r, status="ERROR") if (r["method"], r["batch"], r["prefill"], r["decode"])
              == ("pd", 1, 128, 128) else r for r in full]
    rows = {r["model"]: r for r in geomean_table(broken)}
    assert rows["llama-2-7b"]["verdict"] == "pending (63/64)"
    assert rows["mixtral-8x7b"]["verdict"] == "pending (0/64)"


def test_geomean_differs_with_cause_and_counts_slower_workloads():
    recs = _grid("dops-qwen-1.8b", "HP32", {"bifocal": 1.5})
    for r in recs:  # Bifocal 3 % slower than PD at batch 1, prefill 128
        if r["method"] == "bifocal" and r["batch"] == 1 and r["prefill"] == 128:
            r["makespan"] = 1030.0
    row = {r["model"]: r for r in geomean_table(recs)}["dops-qwen-1.8b"]
    assert row["verdict"] == "differs" and row["cause"] and ".md" in row["evidence"]
    assert row["slower_2pct"] == 4 and abs(row["min_bifocal"] - 1000 / 1030) < 1e-12
    assert row["max_bifocal"] == 1.5


def test_a_differing_verdict_quotes_its_measured_cause():
    """The cause of a differing geomean is the measured largest mover (a row of
    dops_causes.cause_rows) with its change, else stated as not yet measured."""
    from opt.app.reproduction.dops_tables import UNMEASURED

    recs = _grid("dops-qwen-1.8b", "HP32", {"bifocal": 1.5})
    row = {r["model"]: r for r in geomean_table(recs)}["dops-qwen-1.8b"]
    assert (row["cause"], row["evidence"]) == UNMEASURED
    measured = {"dops-qwen-1.8b": {"workloads": 8, "base": 1.5, "cause": "PIM compute x2",
                                   "delta": 0.25, "under": {}}}
    row = {r["model"]: r for r in geomean_table(recs, measured)}["dops-qwen-1.8b"]
    assert row["cause"] == ("largest mover on the cause sample (8 workloads): PIM compute x2, "
                            "geomean 1.500 -> 1.750 (+0.250)")
    assert "dops_causes.py" in row["evidence"]


def test_static_winners():
    recs = []
    for (p, d), (pd, af) in {(128, 128): (100, 120), (2048, 1024): (100, 90)}.items():
        recs += [_rec("llama-2-7b", "HP64", p, d, 1, "pd", pd),
                 _rec("llama-2-7b", "HP64", p, d, 1, "af", af)]
    wins = static_winners(recs)
    assert wins[("llama-2-7b", "HP64", 128, 128, 1)] == "pd"
    assert wins[("llama-2-7b", "HP64", 2048, 1024, 1)] == "af"


def test_grid_csv_round_trip_gives_the_same_tables():
    from opt.app.reproduction.dops_tables import grid_csv, read_grid_csv

    recs = _grid("dops-qwen-7b", "HP32", {"bifocal": 1.25, "heft": 1.6}, skip={(128, 128, 1)})
    recs = [dict(r, time_unit="ns", u_co=0.01) for r in recs]
    text = grid_csv(recs, {"rules": "at_use\n LRU", "commit": "abc"})
    assert text.startswith("# rules: at_use LRU\n# commit: abc\n")
    assert len([x for x in text.splitlines() if not x.startswith("#")]) == 1 + 63 * 7
    partial = grid_csv([r for r in recs if r["method"] != "af" or r["batch"] != 16], {})
    assert len(partial.splitlines()) == 1 + 63 * 7 - 16  # every recorded row, none invented
    back = read_grid_csv(text)
    assert geomean_table(back) == geomean_table(recs)
    assert {r["u_co"] for r in back} == {0.01}


def test_fig7_needs_every_workload_and_fig10_reports_co_utilisation():
    recs = []
    for p in (128, 1024):
        for d in (128, 512, 1024):
            recs += [_rec("dops-qwen-1.8b", "HP32", p, d, 8, "pd", 200),
                     _rec("dops-qwen-1.8b", "HP32", p, d, 8, "bifocal", 100),
                     _rec("dops-qwen-1.8b", "HP32", p, d, 8, "pd+attn", 250)]
    for r in list(recs):
        recs += [dict(r, method=m, makespan=300) for m in ("heft", "af", "pd+linear", "pd+ffn")
                 if r["method"] == "pd"]
    out = {f["model"]: f for f in fig7(recs)}
    q = out["dops-qwen-1.8b"]
    assert q["range"] == (2.0, 2.0) and q["verdict"] == "reproduced"
    assert q["static_below_pd"] == ["af", "pd+attn", "pd+ffn", "pd+linear"]
    assert out["llama-2-7b"]["range"] is None
    assert out["llama-2-7b"]["verdict"] == "pending (0/6)"
    recs = [dict(r, u_co=0.4 if r["method"] == "bifocal" else 0.1,
                 u_npu=0.9 if r["method"] == "pd+attn" else 0.5,
                 u_pim=0.8 if r["method"] == "pd" else 0.3)
            for r in _grid("llama-2-7b", "HP64", {"bifocal": 2.0, "heft": 1.5})]
    found = fig10(recs)
    rows = {r["method"]: r for r in found}
    assert rows["bifocal"]["median"] == 2.0 and rows["bifocal"]["u_co"] == 0.4
    assert rows["bifocal"]["workloads"] == 64
    from opt.app.reproduction.dops_tables import fig10_claims

    assert all(fig10_claims(found).values())
    found = fig10([dict(r, u_co=0.0) if r["method"] == "bifocal" else r for r in recs])
    assert fig10_claims(found) == {"median": True, "p90": True, "u_co": False}
    from opt.app.reproduction.dops_tables import co_utilisation_wins

    assert co_utilisation_wins(recs) == (64, 64)


def test_insights_compare_the_largest_increment_and_name_missing_baselines():
    from opt.app.reproduction.dops_tables import insights
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
    assert rows["4"]["verdict"] == "pending (1/3)" and rows["2"]["ours"] == [None, None]
    assert rows["2"]["verdict"] == "pending (0/2)"
    assert rows["1"]["largest_gain"] == [4.0, 1.875]  # (5 - 1) per 32 GB; (5 - 1.25) per 64 GB


def test_wla_table_needs_the_whole_sweep_and_states_the_paper():
    import itertools

    from opt.app.reproduction.dops_tables import WLA_AXES, wla_table

    recs = []
    for p, d, b in itertools.product(*WLA_AXES):
        for m, t in (("pd/linear", 212), ("bifocal/linear", 132), ("bifocal/wla", 100)):
            recs.append(_rec("dops-qwen-1.8b", "HP32", p, d, b, m, t,
                             **({"evaluations": 2, "stop_reason": "x"} if m.endswith("wla")
                                else {})))
    rows = {(r["model"], r["over"]): r for r in wla_table(recs)}
    lin = rows[("dops-qwen-1.8b", "bifocal/linear")]
    assert lin["workloads"] == 75 and abs(lin["ours"] - 1.32) < 1e-12
    assert lin["verdict"] == "reproduced" and lin["evaluations"] == [2]
    assert rows[("dops-qwen-1.8b", "pd/linear")]["verdict"] == "reproduced"  # 2.12
    assert rows[("llama-2-7b", "bifocal/linear")]["verdict"] == "pending (0/75)"
    short = wla_table(recs[3:])  # one workload without its three records
    assert short[0]["verdict"] == "pending (74/75)" and short[0]["ours"] is None


def test_a_differing_wla_row_names_its_own_models_breakdown():
    import itertools

    from opt.app.reproduction.dops_tables import WLA_AXES, wla_table

    recs = []
    for p, d, b in itertools.product(*WLA_AXES):
        wla = 100 if b == 1 else 50  # WLA twice as fast at batch 4 and 8, same at batch 1
        for m, t in (("pd/linear", 100), ("bifocal/linear", 100), ("bifocal/wla", wla)):
            recs.append(_rec("dops-qwen-7b", "HP32", p, d, b, m, t,
                             **({"evaluations": 2 if d == 8 else 5, "stop_reason": "x"}
                                if m.endswith("wla") else {})))
    (row,) = [r for r in wla_table(recs) if r["model"] == "dops-qwen-7b"]
    assert row["verdict"] == "differs"  # geomean 2^(2/3) = 1.59 against 1.28-1.33
    assert row["cause"].startswith("above the paper (dops-qwen-7b by decode 8 / 32 / 64 / 128 / "
                                   "1024: 1.59 / 1.59 / 1.59 / 1.59 / 1.59; by batch 1 / 4 / 8: "
                                   "1.00 / 2.00 / 2.00; 15 of 75 WLA runs stop after two")
