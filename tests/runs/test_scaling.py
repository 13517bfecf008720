"""Hardware scaling HP0 → HP128 (opt.app.runs.scaling, hetopt scaling)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opt.app.cli import main
from opt.app.runs.replay_schedules import validated_heuristic
from opt.app.runs.scaling import (
    ScalingOptions,
    insight_table,
    pim_gb,
    run_scaling,
    scaled_capacity,
    summarise,
)
from opt.app.runs.sweep import Progress
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement

CAT, CARDS = bundled_catalog(), bundled_cards()
PLATS = ["HP0", "HP32", "HP64", "HP128"]


def _rec(platform, makespan, model="m", p=128, d=128, b=1):
    return {"model": model, "platform": platform, "prefill": p, "decode": d, "batch": b,
            "makespan": makespan}


def test_pim_gb_and_capacity_scaling():
    assert [pim_gb(CAT, p) for p in PLATS] == [0.0, 32.0, 64.0, 128.0]
    inst = build_placement(CARDS["llama-2-7b"], CAT.platform("HP32"), CAT, Workload(8, 1, 1),
                           BuildOptions(layers=1))
    half = scaled_capacity(inst, 0.25)
    kv = inst.meta["kv_reserved_bytes"]  # the KV share of the instance's layers stays whole
    memory = {d.name: d.weight_capacity + kv.get(d.name, 0) for d in inst.devices}
    assert set(kv) == {"PIM0", "PIM1"} and all(v > 0 for v in kv.values())
    assert [d.weight_capacity for d in half.devices] == \
        [int(memory[d.name] * 0.25) - kv.get(d.name, 0) for d in inst.devices]
    assert np.array_equal(half.cost, inst.cost) and half.meta["capacity_scale"] == 0.25


def test_summary_speedups_marginals_and_payoff():
    recs = [_rec("HP0", 1000), _rec("HP32", 500), _rec("HP64", 400), _rec("HP128", 200)]
    [row] = summarise(recs, PLATS, CAT)
    assert row["speedup"] == pytest.approx({"HP0": 1.0, "HP32": 2.0, "HP64": 2.5,
                                            "HP128": 5.0})
    # per 32 GB: +1.0, +0.5, and (5 − 2.5) / 2 for the +64 GB step
    assert row["marginal"] == pytest.approx({"HP0->HP32": 1.0, "HP32->HP64": 0.5,
                                             "HP64->HP128": 1.25})
    assert row["best_increment"] == "HP64->HP128" and row["payoff_platform"] == "HP128"
    assert row["saturation_platform"] == "HP128"
    recs2 = [_rec("HP0", 1000, b=4), _rec("HP32", 400, b=4), _rec("HP64", 390, b=4),
             _rec("HP128", 395, b=4)]
    [r2] = summarise(recs2, PLATS, CAT)
    assert r2["payoff_platform"] == "HP32" and r2["saturation_platform"] == "HP32"
    ins = insight_table(summarise(recs + recs2, PLATS, CAT), PLATS)
    batch_rows = {x["level"]: x for x in ins if x["factor"] == "batch"}
    assert batch_rows[1]["mean_payoff_index"] == 3 and batch_rows[4]["mean_payoff_index"] == 1
    [none] = summarise([_rec("HP0", 1000, b=8), _rec("HP32", 1100, b=8), _rec("HP64", 1100, b=8),
                        _rec("HP128", 1200, b=8)], PLATS, CAT)
    assert none["best_increment"] is None and none["payoff_platform"] == "HP0"
    assert none["saturation_platform"] == "HP0"
    missing = summarise([_rec("HP0", 1000), _rec("HP32", None)], PLATS[:2], CAT)[0]
    assert missing["speedup"]["HP32"] is None and missing["best_increment"] is None


def test_run_scaling_resumes(tmp_path):
    import io

    kw = dict(catalog=CAT, cards=CARDS, options=ScalingOptions(layers=1))
    solve = lambda inst, m: validated_heuristic(inst, m)  # noqa: E731
    prog = Progress(4, stream=io.StringIO(), tty=False)
    done = run_scaling(["llama-2-13b"], PLATS, [16], [2], [1], tmp_path, solve,
                       catalog=CAT, cards=CARDS,
                       options=ScalingOptions(layers=1, progress=prog))
    assert [c for _, c in done] == [False] * 4
    recs = [r for r, _ in done]
    assert all(r["status"] == "FEASIBLE" and r["capacity_scaled"] for r in recs)
    [row] = summarise(recs, PLATS, CAT)
    assert all(row["speedup"][p] > 0 for p in PLATS)
    again = run_scaling(["llama-2-13b"], PLATS, [16], [2], [1], tmp_path, solve, **kw)
    assert [c for _, c in again] == [True] * 4
    unscaled = run_scaling(["llama-2-13b"], PLATS[:2], [16], [2], [1], tmp_path, solve,
                           catalog=CAT, cards=CARDS,
                           options=ScalingOptions(layers=1, scale_capacity=False))
    assert [c for _, c in unscaled] == [False] * 2  # another build: recomputed
    full = run_scaling(["llama-2-7b"], PLATS[:2], [8], [1], [1], tmp_path, solve,
                       catalog=CAT, cards=CARDS, options=ScalingOptions(scale_capacity=True))
    assert not any(r["capacity_scaled"] for r, _ in full)  # full size: nothing to scale
    again = run_scaling(["llama-2-7b"], PLATS[:2], [8], [1], [1], tmp_path, solve,
                        catalog=CAT, cards=CARDS, options=ScalingOptions(scale_capacity=True))
    assert [c for _, c in again] == [True] * 2
    with pytest.raises(InputError, match="platforms"):
        run_scaling(["llama-2-7b"], ["HP0"], [16], [2], [1], tmp_path, solve, **kw)


def test_capacity_scaling_keeps_memory_pressure():
    """Llama-2-13B (26 GB fp16) does not fit HP0's 16 GB NPU: with 2 of 40 layers and scaled
    capacity HP0 must still evict and reload weights; without scaling it need not."""
    card = CARDS["llama-2-13b"]
    inst = build_placement(card, CAT.platform("HP0"), CAT, Workload(16, 3, 1),
                           BuildOptions(layers=2))
    scaled = scaled_capacity(inst, 2 / card.layers)
    full = validated_heuristic(inst, "bifocal")
    pressed = validated_heuristic(scaled, "bifocal")
    assert full.stats["metrics"]["evictions"] == 0
    assert pressed.stats["metrics"]["evictions"] > 0
    assert pressed.objective > full.objective


def test_cli_scaling(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    argv = ["scaling", "--models", "llama-2-7b", "--prefill", "16", "--decode", "2",
            "--batch", "1", "2", "--layers", "1", "--out", str(tmp_path / "s"),
            "--plot", str(tmp_path / "plots"), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["summary"]) == 2 and len(out["records"]) == 8
    assert all((tmp_path / "plots" / f).exists() for f in
               ("scaling-llama-2-7b.png", "marginal-llama-2-7b.png"))
    assert {x["factor"] for x in out["insights"]} == {"prefill", "decode", "batch", "model"}
    assert main(["scaling", "--models", "nope", "--out", str(tmp_path / "x")]) == 2


# ---- optional dependencies are checked before any work ---------------------------------------

@pytest.mark.parametrize("argv", [
    ["scaling", "--models", "llama-2-7b", "--layers", "1", "--plot", "plots"],
    ["plot", "gantt", "heft-topcuoglu-2002", "no-such-result.json", "-o", "g.png"],
    ["plot", "sweep", "no-such-folder", "-o", "s.png"],
    ["theory", "plot", "--out", "plots"],
])
def test_missing_matplotlib_fails_before_any_work(argv, monkeypatch, capsys, tmp_path):
    import sys

    import opt.app.runs.scaling
    from opt.app.cli import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the dependency check")

    monkeypatch.setattr(opt.app.runs.scaling, "run_scaling", no_work)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs matplotlib (not installed)" in err
    assert "hetopt[plot]" in err


def test_a_kv_cache_that_does_not_fit_is_an_error_record_not_an_abort(tmp_path):
    """HP0 keeps the KV cache on its NPU: at a long enough context it does not fit, which is an
    ERROR record for that platform (the others are solved; the summary leaves its cell empty)."""
    solve = lambda inst, m: validated_heuristic(inst, m)  # noqa: E731
    done = run_scaling(["llama-2-13b"], PLATS[:2], [60000], [1], [16], tmp_path, solve,
                       catalog=CAT, cards=CARDS,
                       options=ScalingOptions(layers=1, scale_capacity=False))
    hp0, hp32 = (r for r, _ in done)
    assert hp0["status"] == "ERROR" and "exceeds its memory" in hp0["error"]
    assert hp32["status"] == "FEASIBLE"
    [row] = summarise([hp0, hp32], PLATS[:2], CAT)
    assert row["speedup"]["HP32"] is None
    again = run_scaling(["llama-2-13b"], PLATS[:2], [60000], [1], [16], tmp_path, solve,
                        catalog=CAT, cards=CARDS,
                        options=ScalingOptions(layers=1, scale_capacity=False))
    assert [c for _, c in again] == [False, True]  # the ERROR is retried, the schedule reused
