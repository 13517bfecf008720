"""What each plot draws (opt.app.plots.*: the ``figure_*`` builders behind ``plot_*``): axis labels
and titles, the number of series, the plotted data against the input numbers (recomputed
through another path where one exists) and the rendered pixels (not blank, series colours
present)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from opt.app.plots import common, gantt, sweeps  # noqa: E402
from opt.theory.gains import GpuGroup, het_report, hom_report, min_gpus  # noqa: E402
from tests.plots.hand_made import hand_made  # noqa: E402

CONTEXTS = [8192.0, 32768.0, 131072.0]


def _labelled(ax, text: str) -> list:
    return [ln for ln in ax.get_lines() if text in (ln.get_label() or "")]


def test_hom_gain_figure(pix, catalog, cards):
    models = ["qwen3-235b-a22b", "gpt-oss-120b"]
    fig, info = common.figure_hom_gain("H100", models, CONTEXTS)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "mean context length s (tokens)"
    assert ax.get_ylabel().startswith("G_hom") and "Theorem 3.1" in ax.get_title()
    assert ax.get_xscale() == "log"
    h100 = catalog.device("H100")
    for name, m in zip(models, info["models"]):
        (curve,) = _labelled(ax, f"{name} ({m['gpus']}×H100)")
        (limit,) = _labelled(ax, f"{name} limit")
        assert list(curve.get_xdata()) == CONTEXTS
        # the plotted gains are Theorem 3.1's, computed again through hom_report
        group = GpuGroup(h100, min_gpus(h100, cards[name]))
        want = [hom_report(group, cards[name], s)["gain"] for s in CONTEXTS]
        assert np.allclose(curve.get_ydata(), want, rtol=1e-12)
        assert np.allclose(limit.get_ydata(), m["limit"]) and max(want) < m["limit"]
    rgb = pix.rgb(fig)
    assert pix.drawn(rgb) > 0.05 and pix.count(rgb, "C0") > 50 and pix.count(rgb, "C1") > 50


def test_het_gain_figure(pix, catalog, cards):
    fig, info = common.figure_het_gain("H100", "L40S", "gemma-3-27b", contexts=CONTEXTS)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "mean context length s (tokens)"
    assert ax.get_ylabel().startswith("G_het") and "H100" in ax.get_title()
    assert "L40S at 1.09 $/h" in ax.get_title()
    (curve,) = _labelled(ax, "G_het, gemma-3-27b")
    (bound,) = _labelled(ax, "bound (1+√η)/2")
    peak = _labelled(ax, "peak ")
    assert len(peak) == 1 and np.allclose(peak[0].get_ydata(), info["peak_gain"])
    g1, g2 = GpuGroup(catalog.device("H100")), GpuGroup(catalog.device("L40S"))
    want = [het_report(g1, g2, cards["gemma-3-27b"], s)["gain"] for s in CONTEXTS]
    assert np.allclose(curve.get_ydata(), want, rtol=1e-12)
    assert np.allclose(bound.get_ydata(), info["bound"])
    assert max(want) <= info["peak_gain"] + 1e-12 <= info["bound"] + 1e-12
    rgb = pix.rgb(fig)
    assert pix.drawn(rgb) > 0.05 and pix.count(rgb, "C0") > 50 and pix.count(rgb, "C3") > 20


def test_cad_regions_figure(pix):
    pairs = [("H100", "A100"), ("A100", "H100"), ("L40S", "H20")]
    models = ["llama-2-7b", "gpt-oss-120b"]
    fig, info = common.figure_cad_regions(models, pairs)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == len(common.MICROBATCHES)  # + the colour bar's axes
    assert len(fig.axes) == len(panels) + 1
    for ax, mu in zip(panels, common.MICROBATCHES):
        (image,) = ax.images
        assert image.get_array().shape == (len(pairs), len(models))
        feasible = info["feasible"][f"mu{mu}"]
        assert ax.get_title() == f"μ = {mu}: {feasible}/6 feasible"
        crosses = [t for t in ax.texts if t.get_text() == "×"]
        assert len(crosses) == 6 - feasible
        # cell colour = log2 slack; feasible exactly where it is >= 0
        assert int((np.asarray(image.get_array()) >= 0).sum()) == feasible
        assert [t.get_text() for t in ax.get_xticklabels()] == models
        assert ax.get_xlabel() == "model"
    assert [t.get_text() for t in panels[0].get_yticklabels()] == [f"{a} → {d}" for a, d in pairs]
    assert pix.drawn(pix.rgb(fig)) > 0.2




def _bars(collection) -> list[tuple[float, float]]:
    """(x start, x end) of each rectangle of a broken_barh collection."""
    out = []
    for path in collection.get_paths():
        xs = path.vertices[:, 0]
        out.append((round(float(xs.min()), 9), round(float(xs.max()), 9)))
    return sorted(out)


def test_gantt_figure_draws_the_schedule(pix):
    inst, sol = hand_made()
    fig, info = gantt.figure_gantt(inst, sol)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "time (ms)" and "makespan 0.04 ms" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == \
        ["PIM1\n(pim)", "PIM0\n(pim)", "NPU0\n(npu)"]
    # one bar collection per device with compute (no phases: category "other"), at the
    # scheduled times (µs ticks → ms)
    bars = sorted((_bars(c) for c in ax.collections), key=len)
    assert sorted(bars) == sorted([[(0.005, 0.025)], [(0.022, 0.04)],
                                   [(0.0, 0.01), (0.02, 0.03)]])
    assert info["lanes"]["compute"] == {"events": 4, "bars": 4}
    assert info["lanes"]["transfer"]["events"] == info["lanes"]["load"]["events"] == 0
    rgb = pix.rgb(fig)
    assert pix.count(rgb, gantt.COLOURS["other"]) > 100
    assert pix.count(rgb, gantt.COLOURS["prefill"]) == 0  # no prefill task in this schedule


def test_utilisation_figure_numbers(pix):
    inst, sol = hand_made()
    fig, info = gantt.figure_utilisation(inst, sol, bins=8)
    ax, bx = fig.axes
    assert ax.get_ylabel() == "busy fraction per bin" and ax.get_xlabel() == "time (ms)"
    assert len(ax.get_lines()) == 2 and len(ax.collections) == 1  # npu, pim + co fill
    npu = _labelled(ax, "npu busy")[0].get_ydata()
    pim = _labelled(ax, "pim busy")[0].get_ydata()
    assert list(npu) == [1, 1, 0, 0, 1, 1, 0, 0]  # 5 µs bins: a [0, 10), b [20, 30)
    assert list(pim) == [0, 1, 1, 1, 1, 1, 1, 1]
    widths = [p.get_width() for p in bx.patches]
    assert widths == pytest.approx([0.5, 0.5, 18 / 40, 0.5, 35 / 40, 0.375])
    assert [t.get_text() for t in bx.get_yticklabels()] == \
        ["NPU0", "PIM0", "PIM1", "all npu", "all pim", "NPU∧PIM"]
    assert info["co_utilisation"] == pytest.approx(0.375)
    rgb = pix.rgb(fig)
    assert pix.count(rgb, "#2ca02c") > 50 and pix.count(rgb, "#1f77b4") > 50


def _placement_records():
    """PD and Bifocal makespans on a 2 × 2 grid, batch 1: speed-ups 2, 1.5, 0.5, 4."""
    out = []
    for (p, d), (pd, bif) in {(8, 1): (100, 50), (16, 1): (90, 60), (8, 2): (40, 80),
                              (16, 2): (200, 50)}.items():
        for method, mk in (("pd", pd), ("bifocal", bif)):
            out.append({"model": "m", "platform": "HP32", "prefill": p, "decode": d,
                        "batch": 1, "method": method, "status": "FEASIBLE", "makespan": mk})
    return out


def test_speedup_heatmap_figure(pix):
    fig, info = sweeps.figure_speedup_heatmap(_placement_records())
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 1 and len(fig.axes) == 2  # one panel + the colour bar
    (ax,) = panels
    assert ax.get_xlabel() == "prefill L_in (tokens)" and ax.get_ylabel() == "decode L_out (steps)"
    grid = np.array([[2.0, 1.5], [0.5, 4.0]])  # rows decode 1, 2; columns prefill 8, 16
    assert np.allclose(ax.images[0].get_array(), np.log2(grid))
    assert sorted(t.get_text() for t in ax.texts) == ["0.50", "1.50", "2.00", "4.00"]
    assert "geomean 1.57×" in ax.get_title()  # (2 · 1.5 · 0.5 · 4)^(1/4) = 6^(1/4) = 1.565
    assert info["panels"][0]["speedup"] == [[2.0, 1.5], [0.5, 4.0]]
    assert pix.drawn(pix.rgb(fig)) > 0.2


def test_serving_costs_figure(pix):
    recs = []
    for slo, costs in ((60.0, {"col": 2.0, "afd": 3.0, "bnb": 1.5}),
                       (5.0, {"col": None, "afd": None, "bnb": 4.0})):
        for m, c in costs.items():
            recs.append({"model": "g", "gpus": ["H100"], "context": 8192, "slo_ms": slo,
                         "method": m, "status": "FEASIBLE" if c else "INFEASIBLE",
                         "cost_usd_per_mtok": c})
    fig, info = sweeps.figure_serving_costs(recs)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "$ per million output tokens"
    assert len(ax.containers) == 3 and info["methods"] == ["col", "afd", "bnb"]
    heights = {c.get_label(): [b.get_height() for b in c] for c in ax.containers}
    # cells sorted by (model, gpus, context, slo): 5 ms first
    assert heights["bnb"] == [4.0, 1.5] and heights["col"][1] == 2.0
    assert np.isnan(heights["col"][0]) and np.isnan(heights["afd"][0])
    assert [t.get_text() for t in ax.texts].count("infeasible") == 2 == info["marked"]
    rgb = pix.rgb(fig)
    assert all(pix.count(rgb, f"C{i}") > 30 for i in range(3))
