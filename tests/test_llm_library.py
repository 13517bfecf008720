"""The library of LLM placement slices (instances.llm): its coverage of DOPS' models,
platforms, shapes and load rules; every bundled file is the slice its workload builds today;
every recorded result is consistent (no method's makespan below another's bound); the
certified bound and the heuristics respect every proven optimum."""

from __future__ import annotations

import functools
import math

import pytest

import instances
from instances import llm
from opt.placement.certified_bounds import certified_lower_bound
from solvers.api import solve

ENTRIES = {r["name"]: r for r in llm.records()}
#: one instance object per slice, so its certified bound is computed once (cached per instance)
_load = functools.lru_cache(maxsize=None)(llm.load)
PROVEN = sorted(n for n, r in ENTRIES.items() if r["optimum"] is not None)


def test_the_library_covers_the_dops_models_platforms_shapes_and_load_rules() -> None:
    cases = llm.library().values()
    assert len(cases) >= 40
    assert {c.model for c in cases} == set(llm.MODELS) and len(llm.MODELS) == 7
    assert {c.platform for c in cases} == {"HP0", "HP32", "HP64", "HP128"}
    assert {c.load_timing for c in cases} == {"overlap", "at_use", "prefetch"}
    assert {c.decode for c in cases} == {0, 1, 2} and 1 in {c.batch for c in cases}
    assert any(c.model == "mixtral-8x7b" and c.batch == 1 for c in cases)


@pytest.mark.parametrize("name", llm.names())
def test_each_bundled_slice_is_what_its_workload_builds(name: str) -> None:
    """A change of the cost library or the builder that moves a slice fails here: rebuild and
    solve the library again (benchmarks/llm_library.py) so its optima stay the slices'."""
    fresh = llm.library()[name].build()
    assert llm.load(name).fingerprint == fresh.fingerprint
    if name in ENTRIES:  # a solved slice loads by name like every bundled instance
        assert instances.load(name).fingerprint == fresh.fingerprint


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_recorded_results_are_consistent(name: str) -> None:
    entry = ENTRIES[name]
    methods = entry["methods"].values()
    objs = [m["objective"] for m in methods if m["objective"] is not None]
    bounds = [m["lower_bound"] for m in methods if m["lower_bound"] is not None]
    assert objs and bounds
    assert max(bounds) <= min(objs)  # no bound above any method's schedule
    assert entry["upper_bound"] == min(objs)
    assert entry["lower_bound"] == math.ceil(max(bounds) - 1e-9)  # an integer makespan
    if entry["optimum"] is not None:
        assert entry["optimum"] == entry["upper_bound"]
        assert any(m["status"] == "OPTIMAL" for m in methods) or \
            entry["lower_bound"] == entry["upper_bound"]
    assert entry["provenance"]["instance_fingerprint"] == _load(name).fingerprint


@pytest.mark.parametrize("name", PROVEN)
def test_the_certified_bound_never_exceeds_a_proven_optimum(name: str) -> None:
    bound = certified_lower_bound(_load(name))
    assert bound.value <= ENTRIES[name]["optimum"], bound.best


@pytest.mark.parametrize("name", PROVEN)
@pytest.mark.parametrize("method", ["heft", "bifocal", "pd"])
def test_heuristics_never_beat_a_proven_optimum(name: str, method: str) -> None:
    res = solve(_load(name), method, seed=0)
    assert res.objective is not None and res.objective >= ENTRIES[name]["optimum"]
