"""Shared fixtures: the bundled catalog and cards (loaded once per session), and CP-SAT's
deterministic runs stopped by their deterministic time alone."""

import pytest

import models.placement.cpsat_run as cpsat_model
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

#: CP-SAT's wall-clock backstop in tests, in multiples of a deterministic limit: a run asked
#: for ``deterministic`` stops at its deterministic time, never at the clock (a 0.1 s limit
#: takes 1–4 s of wall-clock time on two loaded cores, the product's 100× backstop would be
#: reached under heavier load); it stays a guard against a hang (0.1 s: ~17 min)
TEST_BACKSTOP = 1e4


@pytest.fixture(autouse=True)
def _deterministic_means_deterministic(monkeypatch):
    monkeypatch.setattr(cpsat_model, "DETERMINISTIC_BACKSTOP", TEST_BACKSTOP)


@pytest.fixture(scope="session")
def catalog():
    return bundled_catalog()


@pytest.fixture(scope="session")
def cards():
    return bundled_cards()
