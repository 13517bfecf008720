"""Theorems 3.1/3.2 re-checked with the detailed cost model (opt.app.reproduction.detailed_gains)."""

from __future__ import annotations

import pytest

from opt.app.reproduction.detailed_gains import verify_detailed
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards


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
