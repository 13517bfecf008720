"""Theorems 3.1/3.2 re-checked with the detailed cost model (opt.app.reproduction.detailed_gains)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opt.app.reproduction.detailed_gains import verify_detailed
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.serving.instance import ServingGrid


@pytest.fixture(scope="module")
def detailed(tmp_path_factory):
    out = tmp_path_factory.mktemp("vd")
    return verify_detailed(catalog=bundled_catalog(), cards=bundled_cards(),
                           models=["llama-2-7b"], gpus=["H100", "A100"],
                           contexts=[4096, 65536], out=out, progress=False), out


def test_structural_claims_hold_and_rows_are_consistent(detailed):
    res, _ = detailed
    claims = {c.claim: c for c in res["claims"]}
    assert res["structural_ok"]
    assert claims["D3.1a"].samples == 4 and claims["D3.1a"].ok
    assert claims["D3.2a"].samples == 2 and claims["D3.2a"].ok
    for row in res["hom"]:
        assert row["g_hom"] == pytest.approx(row["col"] / row["best"])
        assert row["best"] <= row["col"]
    for row in res["het"]:
        assert row["pair"] <= min(row["hom1"], row["hom2"]) * (1 + 1e-12)
        assert row["bound"] == pytest.approx((1 + row["eta"] ** 0.5) / 2)


def test_rerun_resumes_from_the_cache(detailed):
    res, out = detailed
    again = verify_detailed(catalog=bundled_catalog(), cards=bundled_cards(),
                            models=["llama-2-7b"], gpus=["H100", "A100"],
                            contexts=[4096, 65536], out=out, progress=False)
    assert again["hom"] == res["hom"] and again["het"] == res["het"]


def _plan_batches(out) -> set[int]:
    """Every owner batch of the B&B and COL plans under ``out``."""
    from opt.common.jsonio import read_json
    return {int(o["batch"]) for p in Path(out).rglob("*.json")
            if isinstance(rec := read_json(p), dict) and rec.get("plan")
            for o in rec["plan"]["owners"]}


def test_the_batch_grid_is_the_instances_unless_given(tmp_path: Path) -> None:
    """By default each instance's batches come from memory (OpWeave App. B.4: Llama-2-7B at 32
    tokens on H100: the best plan is one H100 at batch 2048); a given grid bounds every plan."""
    kw = dict(catalog=bundled_catalog(), cards=bundled_cards(), models=["llama-2-7b"],
              gpus=["H100"], contexts=[32], progress=False)
    small = verify_detailed(out=tmp_path / "small", grid=ServingGrid(batches=(1, 2, 4)), **kw)
    assert _plan_batches(tmp_path / "small") <= {1, 2, 4}
    default = verify_detailed(out=tmp_path / "default", **kw)
    assert max(_plan_batches(tmp_path / "default")) > 1024
    assert default["hom"][0]["best"] < small["hom"][0]["best"]
