"""The assignment-move post-pass (heuristics.placement.improve): the replay of an unchanged
assignment reproduces the schedule, and moving decode q_proj onto the PIMs shortens Bifocal's
schedule in HEFT's order on head-sharded decode attention (validated) — to what Bifocal's
sibling order (``ready_set: rank``, where ``siblings`` is on) reaches by itself."""

from __future__ import annotations

from heuristics.placement.bifocal import bifocal_schedule
from heuristics.placement.improve import assignment, attention_moves, improve, replay
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.validator import validate_placement


def test_replay_and_moves_shorten_bifocal(catalog, cards):
    """On a prefetch build (the rule the moves were measured under)."""
    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                           Workload(128, 16, 16), BuildOptions(layers=2, load_timing="prefetch"))
    sol = bifocal_schedule(inst, {"ready_set": "rank", "siblings": False})
    span = validate_placement(inst, sol).makespan
    assert validate_placement(inst, replay(inst, sol, assignment(inst, sol))).makespan == span
    best, log = improve(inst, sol, attention_moves(inst))
    new = validate_placement(inst, best).makespan
    assert log[0]["makespan"] == span and any(e.get("kept") for e in log[1:])
    assert certified_lower_bound(inst).value <= new < span
    # the siblings kept together put q_proj on a PIM while it is idle: the same makespan
    assert validate_placement(inst, bifocal_schedule(inst, {"ready_set": "rank"})).makespan == new
