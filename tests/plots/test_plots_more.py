"""Gantt, utilisation, speedup-heatmap and serving-cost plots from tiny real results, and
co-utilisation (DOPS Eq. 5) on a hand-made schedule with a known answer."""

import json

import numpy as np
import pytest

from opt.app.cli import main
from opt.app.plots.gantt import merge_close, parse_window
from opt.common.errors import InputError
from opt.placement.schedule_error import ScheduleError
from opt.placement.utilisation import busy_profile, intersection, union, utilisation
from tests.plots.hand_made import hand_made

PNG = b"\x89PNG\r\n\x1a\n"


def _drawn(path) -> float:
    """Share of a written PNG's pixels that are not the white background (0 if not a PNG)."""
    import matplotlib.image as mimg

    if path.read_bytes()[:8] != PNG:
        return 0.0
    return float((mimg.imread(str(path))[..., :3] < 0.97).any(axis=2).mean())




def test_co_utilisation_known_answer():
    inst, sol = hand_made()
    u = utilisation(inst, sol)
    assert u.makespan == 40
    assert u.device == pytest.approx({"NPU0": 0.5, "PIM0": 0.5, "PIM1": 18 / 40})
    assert u.class_busy == pytest.approx({"npu": 0.5, "pim": 35 / 40})
    assert u.co_utilisation == pytest.approx(0.375)
    assert (u.npu_only, u.pim_only, u.idle) == pytest.approx((5 / 40, 20 / 40, 0.0))
    assert u.co_utilisation + u.npu_only + u.pim_only + u.idle == pytest.approx(1.0)
    prof = busy_profile(inst, sol, bins=8)  # 5-unit bins
    assert prof["co"] == pytest.approx([0, 1, 0, 0, 1, 1, 0, 0])
    assert prof["pim"] == pytest.approx([0, 1, 1, 1, 1, 1, 1, 1])


def test_interval_helpers():
    s, e = union(np.array([5, 0, 3, 20, 9]), np.array([8, 4, 5, 20, 12]))
    assert s.tolist() == [0, 9] and e.tolist() == [8, 12]  # touching merged, empty dropped
    a = union(np.array([0, 10]), np.array([4, 14]))
    b = union(np.array([2]), np.array([12]))
    s, e = intersection(a, b)
    assert s.tolist() == [2, 10] and e.tolist() == [4, 12]
    s, e = merge_close(np.array([0, 5, 30]), np.array([4, 9, 31]), gap=1)
    assert s.tolist() == [0, 30] and e.tolist() == [9, 31]


def test_utilisation_rejects_invalid_schedule():
    inst, sol = hand_made()
    sol["compute"][1]["start"] = 5  # b overlaps a on NPU0 (and lasts 5)
    with pytest.raises(ScheduleError):
        utilisation(inst, sol)


def test_parse_window():
    assert parse_window(None) is None
    assert parse_window("100:2000") == (100, 2000)
    assert parse_window(":50") == (0, 50) and parse_window("10:") == (10, -1)
    for bad in ("5", "9:3", "a:b", "-1:4"):
        with pytest.raises(InputError):
            parse_window(bad)


@pytest.fixture(scope="module")
def placement_result(tmp_path_factory):
    d = tmp_path_factory.mktemp("gantt")
    inst, res = d / "inst.json", d / "res.json"
    assert main(["build", "placement", "--model", "llama-2-7b", "--platform", "HP32",
                 "--prefill", "16", "--decode", "3", "--layers", "2", "-o", str(inst)]) == 0
    assert main(["solve", str(inst), "--method", "bifocal", "-o", str(res)]) == 0
    return inst, res


def test_plot_gantt_and_utilisation_png(placement_result, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    inst, res = placement_result
    capsys.readouterr()
    out = tmp_path / "gantt.png"
    assert main(["plot", "gantt", str(inst), str(res), "-o", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert _drawn(out) > 0.05
    import matplotlib.image as mimg
    from matplotlib.colors import to_rgb

    from opt.app.plots.gantt import COLOURS

    rgb = mimg.imread(str(out))[..., :3]
    for cat in ("prefill", "decode", "transfer", "load"):  # every lane's colour is drawn
        assert (abs(rgb - to_rgb(COLOURS[cat])) <= 0.03).all(axis=2).sum() > 0, cat
    assert info["lanes"]["compute"]["events"] == 4 * (1 + 2 * 20 + 2)  # every task, 4 steps
    # (20 ops per layer: attention once per KV head group, 2 groups on HP32)
    assert info["lanes"]["load"]["events"] > 0 and info["lanes"]["transfer"]["events"] > 0
    assert 0 < info["lanes"]["compute"]["bars"] <= info["lanes"]["compute"]["events"]
    # a window: events are clipped to it
    mk = info["makespan"]
    assert main(["plot", "gantt", str(inst), str(res), "-o", str(out), "--json",
                 "--window", f"{mk // 2}:"]) == 0
    win = json.loads(capsys.readouterr().out)
    assert win["window"] == [mk // 2, mk]
    assert win["lanes"]["compute"]["events"] < info["lanes"]["compute"]["events"]
    out = tmp_path / "util.png"
    assert main(["plot", "utilisation", str(inst), str(res), "-o", str(out), "--json"]) == 0
    u = json.loads(capsys.readouterr().out)
    assert _drawn(out) > 0.05
    assert 0 <= u["co_utilisation"] <= min(u["class_busy"]["npu"], u["class_busy"]["pim"])
    # validate --json reports the same numbers
    assert main(["validate", str(inst), str(res), "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["co_utilisation"] == pytest.approx(u["co_utilisation"])
    assert v["utilisation"] == pytest.approx(u["device"])


def test_plot_sweep_heatmap_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep"
    assert main(["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32",
                 "--prefill", "8", "16", "--decode", "1", "2", "--methods", "pd", "bifocal",
                 "--layers", "1", "--out", str(out), "--executor", "serial"]) == 0
    capsys.readouterr()
    png = tmp_path / "heat.png"
    assert main(["plot", "sweep", str(out), "--method", "bifocal", "-o", str(png),
                 "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert _drawn(png) > 0.05
    (panel,) = info["panels"]
    assert panel["prefill"] == [8, 16] and panel["decode"] == [1, 2]
    assert all(v is not None and v > 0 for row in panel["speedup"] for v in row)
    # an invalid record never enters the heatmap
    rec_path = out / "llama-2-7b" / "HP32" / "p8-d1-b1" / "bifocal.json"
    rec = json.loads(rec_path.read_text())
    rec_path.write_text(json.dumps({**rec, "status": "ERROR", "invalid": True}))
    assert main(["plot", "sweep", str(out), "-o", str(png), "--json"]) == 0
    (panel,) = json.loads(capsys.readouterr().out)["panels"]
    assert panel["speedup"][0][0] is None and panel["speedup"][1][1] is not None
    assert main(["plot", "sweep", str(out), "--method", "af", "-o", str(png)]) == 2
    assert "method 'af' is not in the sweep" in capsys.readouterr().err


def test_plot_serving_costs_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "serving"
    assert main(["sweep", "serving", "--models", "gemma-3-27b", "--gpus", "H100", "--contexts",
                 "8192", "--slo-ms", "60", "5", "--out", str(out), "--executor", "serial",
                 "--param", "sub_block_layers=1"]) == 0
    out = out / "bnb-sub_block_layers=1"
    capsys.readouterr()
    png = tmp_path / "costs.png"
    assert main(["plot", "serving", str(out), "-o", str(png), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert _drawn(png) > 0.05
    assert info["methods"] == ["col", "afd", "cad", "bnb"] and info["cells"] == 2
    costs = {(c["cell"][3], c["method"]): c["cost_usd_per_mtok"] for c in info["costs"]}
    assert costs[(60.0, "bnb")] is not None and costs[(60.0, "bnb")] <= costs[(60.0, "col")]
    assert costs[(5.0, "col")] is None and info["marked"] >= 1  # 5 ms: infeasible, marked
    assert main(["plot", "serving", str(tmp_path / "nothing"), "-o", str(png)]) == 2
