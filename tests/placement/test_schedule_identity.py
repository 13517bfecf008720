"""Speed work on the schedulers keeps every schedule byte-identical (issue 20): the digests of
the HEFT and Bifocal schedules (default parameters) on small instances — bundled ones and
2-layer builds with loose and tight capacity, all ``load_timing: prefetch`` — equal those
recorded with the code before the speed changes (``benchmarks/schedule_identity.py``;
data/schedule_digests.json). HEFT's entries on the five capacity-bound builds were re-recorded
when HEFT took the platform's LRU eviction (issue 35 item 2: they were rejections, or a
schedule that skipped the full device), and again when the list scheduler's device choice
became ``fit_in_class`` (problems.md §6 "Device choice under capacity": fewer evictions, makespan
equal or lower on all five). Bifocal's were re-recorded at its revision 6, when the ready set
by score (DOPS Algorithm 1) became its default; ``bifocal-rank`` (HEFT's order, the default
before) has the solutions recorded before, byte for byte, on every case (its statistics carry
the new ``ready_set`` and resolved ``siblings``). At revision 7 (``insertion: auto``, off in
the score order, DOPS Eq. 1 and 3) Bifocal's solutions changed on 4 of the 23 cases, its
makespan on one (llama-2-13b HP64 128/16/4, 2 layers: 62,720,317 → 62,724,041), and
``bifocal-rank``'s solutions stayed byte for byte (its statistics carry ``insertion``)."""

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
    platform's rule (issue 35 item 2) — by HEFT, which no longer rejects them."""
    tight = [v for k, v in REFERENCE.items() if k.endswith(("0.05", "0.2", "0.5", "0.35"))]
    assert tight and all(v["bifocal"]["evictions"] > 0 for v in tight)
    assert all(v["heft"]["evictions"] > 0 for v in tight)
