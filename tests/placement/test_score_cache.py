"""Bifocal's kept scores under the ready set by score (DOPS Algorithm 1): the loop keeps each
ready task's per-device rows between iterations and recomputes only those the last commit can
change (:func:`heuristics.placement.bifocal_kernels._stale_columns`; problems.md §6
"Ready-set order"). ``bifocal_schedule(..., rescore_all=True)`` re-scores every ready task on
every device at each iteration — Algorithm 1 literally — and is the oracle: on random instances
(every load rule) under every variant that uses the score order, and on the bundled placement
instances and the small built cases of tests/placement/test_schedule_identity.py, both give
byte-identical solutions and identical statistics (but the timings). The oracle does not rely
on the invalidation: with an invalidation that forgets every device, the kept rows give other
schedules and the oracle still gives the right ones."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_schedule_identity import CASES
from test_schedule_kernels import outcome, random_instance

import instances
from heuristics.placement import bifocal_kernels
from heuristics.placement.bifocal import bifocal_schedule
from opt.common.jsonio import json_default
from opt.placement.instance import PlacementInstance

#: The variants whose tasks come by the score: the defaults, each far-focus term off, the
#: eviction and copy costs, the token extensions, a longer window with one hint kept.
SCORE_VARIANTS: list[dict[str, Any]] = [
    {}, {"window": False}, {"token": False}, {"phase": False},
    {"evict_cost": 1.0}, {"copy_cost": 1.0}, {"copy_cost": 1.0, "evict_cost": 0.5, "lam": 1.0},
    {"token_horizon": "uses"}, {"token_cap": True, "eta": 0.5},
    {"H": 4, "hint_max": 1, "consist": 10.0}]
LOAD_TIMINGS = ("prefetch", "at_use", "overlap")
#: The built cases of the identity test small enough for every variant (tasks).
MAX_TASKS = 2000


def canonical(obj: Any) -> bytes:
    """``obj`` as sorted-key JSON bytes (numpy values as their JSON)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                        default=json_default)


def run(inst: PlacementInstance, params: dict[str, Any], rescore_all: bool
        ) -> tuple[str, Any, dict[str, Any]]:
    """(kind, solution bytes or error message, statistics without the timings) of Bifocal."""
    stats: dict[str, Any] = {}
    kind, got = outcome(lambda: bifocal_schedule(inst, params, stats=stats,
                                                 rescore_all=rescore_all))
    stats.pop("time_s", None)
    return kind, canonical(got) if kind == "ok" else got, stats


def check_same(inst: PlacementInstance, params: dict[str, Any]) -> None:
    """The kept scores and the full re-scoring give the same bytes, error and statistics."""
    kept, full = run(inst, params, False), run(inst, params, True)
    assert kept[:2] == full[:2]
    assert canonical(kept[2]) == canonical(full[2])


#: (seed, variant, load rule) of random instances on which a stale row changes the schedule
#: when one invalidation is skipped: the holders of a block whose last use passed, the
#: changed count of blocks waiting for a copy, the tasks of an evicted block, of the used block.
STALE_CASES = [(11, 4, "prefetch"), (27, 0, "prefetch"), (1, 1, "prefetch"), (0, 7, "prefetch")]


def with_stale_cases(test: Callable[..., None]) -> Callable[..., None]:
    """``test`` with the examples of :data:`STALE_CASES` run first."""
    for seed, variant, load_timing in STALE_CASES:
        test = example(seed=seed, variant=variant, load_timing=load_timing)(test)
    return test


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@with_stale_cases
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(range(len(SCORE_VARIANTS))),
       load_timing=st.sampled_from(LOAD_TIMINGS))
def test_kept_scores_match_full_rescoring_on_random_instances(seed, variant, load_timing):
    check_same(random_instance(seed, load_timing), SCORE_VARIANTS[variant])


#: the built identity cases left out: Llama-2-7B HP64 128/64/16 slices, 3,835 tasks each
LARGE_BUILDS = "llama-2-7b-HP64-128-64-16"


def small_cases() -> dict[str, Callable[[], Any]]:
    """The bundled placement instances and the built identity cases but :data:`LARGE_BUILDS`
    (each under :data:`MAX_TASKS` tasks, which the test asserts)."""
    out: dict[str, Callable[[], Any]] = {
        name: (lambda name=name: instances.load(name)) for name in instances.names(("placement",))}
    for name, make in CASES.items():
        if not name.startswith(LARGE_BUILDS):
            out.setdefault(name, make)
    return out


SMALL = small_cases()


@pytest.mark.parametrize("load_timing", LOAD_TIMINGS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_kept_scores_match_full_rescoring_on_bundled_instances(name, load_timing):
    inst = SMALL[name]()
    assert inst.n_tasks < MAX_TASKS
    inst = dataclasses.replace(inst, load_timing=load_timing)
    for params in SCORE_VARIANTS:
        check_same(inst, params)


def python_loop_run(monkeypatch: pytest.MonkeyPatch, inst: PlacementInstance,
                    rescore_all: bool, forgetful: bool) -> tuple[bytes, int]:
    """(solution bytes, device evaluations) of Bifocal's loop run as Python
    (``bifocal_loop.py_func`` and its slot scoring ``_score_slot.py_func``); ``forgetful``: an
    invalidation that marks no device stale and no window changed."""
    calls = [0]
    evaluate = bifocal_kernels.evaluate

    def counted(*args: Any) -> Any:
        calls[0] += 1
        return evaluate(*args)

    def none_stale(d, k, b, graph, state, cf, bias, terms, ctarget, homeless0):
        return 0, False

    with monkeypatch.context() as m:
        m.setattr(bifocal_kernels, "bifocal_loop", bifocal_kernels.bifocal_loop.py_func)
        m.setattr(bifocal_kernels, "_score_slot", bifocal_kernels._score_slot.py_func)
        m.setattr(bifocal_kernels, "evaluate", counted)
        if forgetful:
            m.setattr(bifocal_kernels, "_stale_columns", none_stale)
            m.setattr(bifocal_kernels, "_window_stale", lambda *args: False)
        sol = bifocal_schedule(inst, rescore_all=rescore_all)
    return canonical(sol), calls[0]


def test_the_oracle_does_not_rely_on_the_invalidation(monkeypatch):
    """With no device made stale by a commit, the kept rows give another schedule while the
    full re-scoring still gives the right one; the full re-scoring evaluates more devices."""
    inst = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")
    right, n_kept = python_loop_run(monkeypatch, inst, False, False)
    full, n_full = python_loop_run(monkeypatch, inst, True, False)
    assert full == right == canonical(bifocal_schedule(inst))
    assert n_kept < n_full
    assert python_loop_run(monkeypatch, inst, False, True)[0] != right
    assert python_loop_run(monkeypatch, inst, True, True)[0] == right
