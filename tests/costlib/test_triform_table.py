"""The bundled DOPS authors' AiM table (benchmarks/triform_pim_table.py): provenance, what it
replaces through the builder's measurements path, and regeneration from the fetched snapshot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opt.costlib.measured import read_measurements
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "opt/costlib/data/measurements/triform-aim-dops-qwen-1.8b-hp32.csv"
#: a git directory of github.com/YIAI-02/TriForm (e.g. a bare clone), for the regeneration check
GIT_DIR_ENV = "HETOPT_TRIFORM_GIT"


def test_table_provenance_and_licence():
    text = TABLE.read_text()
    assert "github.com/YIAI-02/TriForm commit 8a64b06861621fb6541b637c5439bb084e309cc9" in text
    assert "licence: MIT" in text
    assert "MIT License" in (TABLE.parent / "TRIFORM_LICENSE.txt").read_text()


def test_table_replaces_decode_pim_costs_only(catalog, cards):
    table = read_measurements(TABLE, catalog)
    card, hp32 = cards["dops-qwen-1.8b"], catalog.platform("HP32")
    w, opts = Workload(64, 2, 1), BuildOptions(layers=1)
    base = build_placement(card, hp32, catalog, w, opts)
    meas = build_placement(card, hp32, catalog, w, BuildOptions(layers=1, measurements=table))
    assert meas.meta["measurements"]["task_costs"]["interpolated"] > 0
    pim = [d for d, dev in enumerate(base.devices) if dev.device_class == "pim"]
    q = meas.task_index["s1.L0.q_proj"]
    # the authors' weight fit at V = N = 1536, H = 12, 1 GHz: 37.244 µs
    assert meas.cost[q, pim[0]] == pytest.approx(37_244, abs=2)
    assert base.cost[q, pim[0]] < meas.cost[q, pim[0]]
    prefill = base.step == 0
    assert np.array_equal(base.cost[prefill], meas.cost[prefill])  # no prefill data
    npu = [d for d, dev in enumerate(base.devices) if dev.device_class == "npu"]
    assert np.array_equal(base.cost[:, npu], meas.cost[:, npu])


@pytest.mark.slow
def test_table_regenerates_from_the_snapshot(tmp_path):
    """Needs the authors' repository (no network here): run with ``HETOPT_TRIFORM_GIT`` set to
    a git directory of it and ``pytest -m slow``."""
    mirror = os.environ.get(GIT_DIR_ENV)
    if not mirror or not Path(mirror).is_dir():
        pytest.fail(f"set {GIT_DIR_ENV} to a git directory of github.com/YIAI-02/TriForm")
    out = tmp_path / "t.csv"
    subprocess.run([sys.executable, str(ROOT / "benchmarks/triform_pim_table.py"),
                    "--git-dir", mirror, "--commit", "8a64b06861621fb6541b637c5439bb084e309cc9",
                    "--out", str(out)], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   capture_output=True)
    strip = [ln for ln in out.read_text().splitlines() if not ln.startswith("##")]
    assert strip == [ln for ln in TABLE.read_text().splitlines() if not ln.startswith("##")]
