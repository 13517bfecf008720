"""Plots of the closed-form gains (opt/app/plots/common.py) and the ``theory plot`` CLI command: the
written PNGs are real, non-blank images; what each figure draws is tested in
test_plot_figures.py."""

import pytest

pytest.importorskip("matplotlib")

from opt.app.cli import main  # noqa: E402
from opt.app.plots import common as plots  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _is_png(path) -> bool:
    """A PNG file whose image is not blank (over 5 % of the pixels drawn)."""
    import matplotlib.image as mimg

    data = path.read_bytes()
    if not data.startswith(PNG_SIGNATURE):
        return False
    rgb = mimg.imread(str(path))[..., :3]
    return bool((rgb < 0.97).any(axis=2).mean() > 0.05)


def test_plot_hom_gain(tmp_path):
    info = plots.plot_hom_gain(tmp_path / "hom.png")
    assert _is_png(tmp_path / "hom.png")
    for m in info["models"]:
        assert 1.0 <= m["gain_at_max_context"] < m["limit"]


def test_plot_het_gain_default_price_is_tight(tmp_path):
    info = plots.plot_het_gain(tmp_path / "het.png")
    assert _is_png(tmp_path / "het.png")
    assert info["price2_assumed_tight"]
    assert info["peak_gain"] == pytest.approx(info["bound"], rel=1e-9)
    assert info["max_gain_plotted"] <= info["bound"] * (1 + 1e-12)


def test_plot_het_gain_user_price(tmp_path):
    info = plots.plot_het_gain(tmp_path / "het.png", price2=1.2)
    assert _is_png(tmp_path / "het.png")
    assert not info["price2_assumed_tight"]
    assert info["price2_usd_per_hour"] == 1.2
    assert 1.0 <= info["peak_gain"] < info["bound"]


def test_plot_cad_regions(tmp_path):
    info = plots.plot_cad_regions(tmp_path / "cad.png", models=["llama-2-7b", "gpt-oss-120b"],
                                  pairs=[("H100", "A100"), ("A100", "H100"), ("L40S", "H20")])
    assert _is_png(tmp_path / "cad.png")
    assert info["cells_per_panel"] == 6
    f = info["feasible"]
    assert f["mu1"] >= f["mu2"] >= f["mu4"]


def test_cli_plot_bounds(tmp_path, capsys):
    out = tmp_path / "img"
    assert main(["theory", "plot", "--out", str(out), "--gpu2", "H20", "--price2", "1.5"]) == 0
    files = sorted(out.iterdir())
    assert [p.name for p in files] == ["cad_regions.png", "het_gain.png", "hom_gain.png"]
    assert all(_is_png(p) for p in files)
    printed = capsys.readouterr().out.split()
    assert sorted(printed) == sorted(str(p) for p in files)
