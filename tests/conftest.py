"""Shared fixtures: the bundled catalog and cards (loaded once per session)."""

import pytest

from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards


@pytest.fixture(scope="session")
def catalog():
    return bundled_catalog()


@pytest.fixture(scope="session")
def cards():
    return bundled_cards()
