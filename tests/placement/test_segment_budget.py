"""The segment evaluation's assignment budget shrinks with the segment's size
(opt.placement.segment_bound.MAX_CELLS): the bound stays valid and only weakens."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import opt.placement.segment_bound as sb
from heuristics.placement.list_scheduler import heft
from opt.placement.bound_options import BoundOptions
from opt.placement.chain_bound import chain_bound
from opt.placement.validator import validate_placement

_spec = importlib.util.spec_from_file_location(
    "bound_memory", Path(__file__).parents[2] / "benchmarks" / "bound_memory.py")
assert _spec and _spec.loader
bound_memory = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bound_memory)


def test_a_smaller_budget_gives_a_weaker_valid_bound(monkeypatch):
    inst = bound_memory.random_dag(120, seed=3)
    span = validate_placement(inst, heft(inst)).makespan
    full, detail, _ = chain_bound(inst, BoundOptions())
    assert detail["max_segment_tasks"] > 100  # a generic DAG has few cuts: one long segment
    monkeypatch.setattr(sb, "MAX_CELLS", 500)  # one assignment: no column enumerated
    small, _, _ = chain_bound(inst, BoundOptions())
    assert small <= full <= span


def test_budget_bounds_the_tables_of_a_long_segment(monkeypatch):
    inst = bound_memory.random_dag(300, seed=1)
    seen = []
    real = sb._assigned_times

    def spy(legal, cost, rel, enum, groups, nd):
        out = real(legal, cost, rel, enum, groups, nd)
        seen.append(out[0].size)
        return out

    monkeypatch.setattr(sb, "_assigned_times", spy)
    monkeypatch.setattr(sb, "MAX_CELLS", 20_000)
    chain_bound(inst, BoundOptions())
    assert seen and max(seen) <= 20_000
