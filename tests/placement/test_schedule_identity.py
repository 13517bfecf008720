"""Every schedule stays byte-identical under speed work on the schedulers: the digests of the
HEFT and Bifocal schedules (default parameters; Bifocal also in HEFT's order, ``bifocal-rank``)
on small instances — bundled ones and 2-layer builds with loose and tight capacity, all
``load_timing: prefetch`` — equal the recorded ones (``benchmarks/schedule_identity.py``;
data/schedule_digests.json). HEFT evicts by LRU on the capacity-bound builds, with the list
scheduler's ``device_choice: fit_in_class`` (problems.md §6 "Device choice under capacity");
Bifocal's digests are those of its defaults (the ready set by score, DOPS Algorithm 1; start
times by Eq. 1 and 3). A change that alters a digest on purpose records the new digests and
raises :data:`heuristics.placement.bifocal.BIFOCAL_VERSION`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location(
    "schedule_identity", _ROOT / "benchmarks" / "schedule_identity.py")
assert _spec and _spec.loader
schedule_identity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(schedule_identity)

REFERENCE = json.loads((Path(__file__).parent / "data" / "schedule_digests.json").read_text())
CASES = dict(schedule_identity.cases(full=False))


def test_every_case_has_a_reference():
    assert set(CASES) == set(REFERENCE)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_schedules_match_the_reference(name):
    assert schedule_identity.schedule_digests(CASES[name]()) == REFERENCE[name]


def test_tight_cases_evict():
    """The capacity-starved cases exercise eviction, by Bifocal and — LRU residency being the
    platform's rule (problems.md §6 "Residency") — by HEFT."""
    tight = [v for k, v in REFERENCE.items() if k.endswith(("0.05", "0.2", "0.5", "0.35"))]
    assert tight and all(v["bifocal"]["evictions"] > 0 for v in tight)
    assert all(v["heft"]["evictions"] > 0 for v in tight)
