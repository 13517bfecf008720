"""The serving searches honour their time limit at every size: the owner-sequence space is
enumerated against the clock and capped (``MAX_SEQUENCES``), the branch-and-bound looks at the
clock at every node, and a search stopped before any plan is ``TIME_LIMIT_NO_SOLUTION``, never
``INFEASIBLE``. A fake clock (one second per reading) makes the limits deterministic."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import heuristics.serving.search as ss
import instances
import solvers.serving.outcomes as so
from solvers import solve
from solvers.certify import validate

LLAMA = "p3-llama-2-7b-h100-l40s-8k-50ms"  # one-layer block: bnb proves its optimum


def _fake_clock(monkeypatch, *modules):
    """Every perf_counter reading in ``modules`` is one second after the previous one."""
    ticks = itertools.count()
    clock = SimpleNamespace(perf_counter=lambda: float(next(ticks)))
    for module in modules:
        monkeypatch.setattr(module, "time", clock, raising=False)


def test_a_space_larger_than_the_cap_is_searched_in_part(monkeypatch):
    inst = instances.load(LLAMA)
    assert solve(inst, "bnb", time_limit=30).status == "OPTIMAL"
    monkeypatch.setattr(ss, "MAX_SEQUENCES", 3)
    space = ss.structured_space(inst, max_sequences=ss.MAX_SEQUENCES)
    assert not space.complete and "more than 3 owner sequences" in space.cut
    assert sum(map(len, space.sequences.values())) == 3
    res = solve(inst, "bnb", time_limit=30)
    assert res.status == "FEASIBLE" and "more than 3" in res.stats["space_cut"]
    assert "optimal_in_space" not in res.stats and validate(inst, res).valid


def test_the_enumeration_stops_at_the_deadline(monkeypatch):
    inst = instances.load("p3-tiny-gemma-a100-l40s")
    monkeypatch.setattr(ss, "_CLOCK_EVERY", 1)
    _fake_clock(monkeypatch, ss)
    space = ss.structured_space(inst, deadline=5.0)
    assert "time limit" in space.cut
    assert sum(map(len, space.sequences.values())) <= 6
    assert ss.structured_space(inst).complete


def test_the_branch_and_bound_looks_at_the_clock_at_every_node(monkeypatch):
    inst = instances.load(LLAMA)
    seqs = ss.structured_sequences(inst)
    whole = ss.search(inst, seqs)
    assert whole.stats.nodes > 100 and not whole.stats.timed_out
    _fake_clock(monkeypatch, ss)
    cut = ss.search(inst, seqs, time_limit=20.0, bounds=False)
    assert cut.stats.timed_out and cut.stats.nodes < 20


def test_a_search_stopped_before_any_plan_is_not_infeasible(monkeypatch):
    inst = instances.load(LLAMA)
    _fake_clock(monkeypatch, ss, so)
    res = solve(inst, "bnb", time_limit=4.0)
    assert res.status == "TIME_LIMIT_NO_SOLUTION" and res.solution is None
    assert "time limit" in res.stats["message"]
