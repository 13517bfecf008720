"""Tests for opt.theory.verify: numerical verification of the closed forms (problems.md §4)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opt.app.cli import main
from opt.theory import verify as V


@pytest.fixture(scope="module")
def results():
    return V.verify_closed_forms(samples=300, seed=0)


def test_every_claim_passes(results):
    res = results
    assert [r.claim for r in res] == list(V.CLAIMS)
    for r in res:
        assert r.samples > 0, r.claim
        assert r.failed == 0 and r.passed == r.samples, (r.claim, r.worst_case)
        assert r.worst_case and "margin" in r.worst_case


def test_strict_claims_have_positive_margin(results):
    res = {r.claim: r for r in results}
    for claim in ("T3.1b", "T3.1d", "T3.2f", "CAD"):
        assert res[claim].worst_margin > 0, claim
    for claim in ("T3.1a", "T3.2a", "T3.2c"):
        assert res[claim].worst_margin >= 0, claim


def test_seeded_and_deterministic():
    a = V.verify_closed_forms(samples=20, seed=3)
    b = V.verify_closed_forms(samples=20, seed=3)
    assert a == b


def test_fabricated_gain_below_one_is_caught():
    gains = np.array([1.0, 1.3, 0.97, 0.99, 1.1])
    r = V.check_at_least_one("fake", gains, lambda i: {"index": i, "gain": float(gains[i])})
    assert (r.samples, r.passed, r.failed) == (5, 3, 2)
    assert r.worst_case["index"] == 2 and r.worst_case["gain"] == pytest.approx(0.97)
    assert r.worst_margin == pytest.approx(-0.03)


def test_fabricated_equality_violation_is_caught():
    gains = np.array([1.0, 1.0 + 1e-6, 5.0])
    mask = np.array([True, True, False])  # the 5.0 sample is outside the claim's regime
    r = V.check_equals_one("fake", gains, lambda i: {"index": i}, mask=mask)
    assert (r.samples, r.passed, r.failed) == (2, 1, 1)
    assert r.worst_case["index"] == 1


def test_passing_worst_case_is_tightest():
    gains = np.array([[1.5, 1.2], [1.01, 2.0]])
    r = V.check_at_least_one("fake", gains)
    assert r.failed == 0 and r.worst_case["index"] == 2
    assert r.worst_margin == pytest.approx(0.01)


def test_cad_feasibility_table():
    rows = V.cad_feasibility()
    assert rows and all(r["time_ratio"] > 0 for r in rows)
    for r in rows:  # feasible for mu exactly when mu <= time ratio; monotone in mu
        for mu in V.MICROBATCHES:
            assert r[f"feasible_mu{mu}"] == (r["time_ratio"] >= mu)


def test_cli_json(capsys):
    code = main(["theory", "verify", "--samples", "50", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [c["claim"] for c in out["claims"]] == list(V.CLAIMS)
    assert all(c["failed"] == 0 for c in out["claims"])
    assert out["cad_feasibility"] and "feasible_mu4" in out["cad_feasibility"][0]


def test_cli_table(capsys):
    code = main(["theory", "verify", "--samples", "20"])
    out = capsys.readouterr().out
    assert code == 0 and "T3.2f" in out and "all claims hold" in out


def test_cli_exits_1_on_failure(capsys, monkeypatch):
    bad = V.ClaimResult("T3.1a", 1, 0, 1, -0.5, {"gain": 0.5})
    monkeypatch.setattr(V, "verify_closed_forms", lambda **kw: [bad])
    assert main(["theory", "verify", "--samples", "1"]) == 1
    assert "FAILED: T3.1a" in capsys.readouterr().out
