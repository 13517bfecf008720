"""Bifocal's defaults under ``load_timing: at_use`` (DOPS Eq. 1, problems.md §6) on a slice built
for them: Llama-2-7B, HP32, its first 4 layers (one weight block per kind spanning them),
prefill 128, decode 128, batch 1. The decode GEMMs run ~5.5× faster on a PIM, but their blocks
sit on the NPU since the prefill, and moving one costs its load in the moving task's own slot.

* ``lam: auto`` is 0 under ``at_use``: with λ = 3 the phase penalty on top of the reload that
  EFT already charges keeps decode on the NPU (1.44 × PD's makespan), with λ = 0 the token term
  moves the blocks (0.955 × PD).
* ``token_horizon: auto`` is ``uses`` under ``at_use``: a block used 4 × per step (4 layers)
  amortises its move over the remaining uses; over the remaining steps the move never pays
  (the same 1.44 × PD).
"""

from __future__ import annotations

import dataclasses

import pytest

from heuristics.placement.bifocal import AUTO_LAM, bifocal_schedule
from heuristics.placement.static_policies import static_schedule
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.validator import validate_placement


@pytest.fixture(scope="module")
def decode_slice():
    cat = bundled_catalog()
    inst = build_placement(bundled_cards()["llama-2-7b"], cat.platform("HP32"), cat,
                           Workload(128, 128, 1), BuildOptions(layers=4))
    assert inst.load_timing == "at_use"
    return inst


def _span(inst, params: dict) -> tuple[int, dict]:
    stats: dict = {}
    return validate_placement(inst, bifocal_schedule(inst, params, stats=stats)).makespan, stats


def test_lam_auto_is_zero_under_at_use_and_beats_three(decode_slice):
    pd = validate_placement(decode_slice, static_schedule(decode_slice, "pd")).makespan
    span, stats = _span(decode_slice, {})
    assert stats["params"]["lam"] == AUTO_LAM["at_use"] == 0.0
    assert span == _span(decode_slice, {"lam": 0})[0]
    span3, stats3 = _span(decode_slice, {"lam": 3})
    assert span < pd < span3  # λ = 3: slower than PD; the default: faster
    assert stats["flipped_decisions"]["token"] > 0 == stats3["flipped_decisions"]["token"]


def test_token_horizon_uses_beats_steps_under_at_use(decode_slice):
    span, stats = _span(decode_slice, {})
    assert stats["token_horizon"] == "uses"
    assert span == _span(decode_slice, {"token_horizon": "uses"})[0]
    span_steps, stats_steps = _span(decode_slice, {"token_horizon": "steps"})
    assert span < span_steps
    assert stats_steps["flipped_decisions"]["token"] == 0  # no move ever pays over the steps


def test_lam_auto_is_three_under_prefetch(decode_slice):
    inst = dataclasses.replace(decode_slice, load_timing="prefetch")
    span, stats = _span(inst, {})
    assert stats["params"]["lam"] == AUTO_LAM["prefetch"] == 3.0
    assert span == _span(inst, {"lam": 3})[0]
