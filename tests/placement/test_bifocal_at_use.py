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
* ``token_cap: auto`` is off under ``at_use`` (DOPS Eq. 4 as written), on a second slice,
  dops-qwen-1.8b HP32, 4 layers, 128/128/4: capped, the credit of a block's first decode use
  (a task that gains little on a PIM at batch 4) × its remaining uses never repays the load,
  and the FFN stays on the NPU (1.04 × PD); uncapped, 0.99 × PD.
* ``copy_cost: auto`` is 0 under ``at_use`` (an extension; the copy's load is already in the
  copying task's EFT), on a third slice, Llama-2-7B HP64, 4 layers, 128/128/1, in DOPS'
  precision: with ρ = 1 the decode q_proj stay on the PIM that took ``wq`` in the prefill, busy
  with k/v, instead of copying it onto an idle PIM (1.023 × PD); with ρ = 0, 1.006 × PD.
"""

from __future__ import annotations

import dataclasses

import pytest

from heuristics.placement.bifocal import AUTO_COPY_COST, AUTO_LAM, AUTO_TOKEN_CAP, bifocal_schedule
from heuristics.placement.static_policies import static_schedule
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import paper_precision
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.validator import validate_placement


def _slice(model: str, batch: int, platform: str = "HP32", options: BuildOptions | None = None):
    cat = bundled_catalog()
    inst = build_placement(bundled_cards()[model], cat.platform(platform), cat,
                           Workload(128, 128, batch), options or BuildOptions(layers=4))
    assert inst.load_timing == "at_use"
    return inst


@pytest.fixture(scope="module")
def decode_slice():
    return _slice("llama-2-7b", 1)


def _pd(inst) -> int:
    return validate_placement(inst, static_schedule(inst, "pd")).makespan


def _span(inst, params: dict) -> tuple[int, dict]:
    stats: dict = {}
    return validate_placement(inst, bifocal_schedule(inst, params, stats=stats)).makespan, stats


def test_lam_auto_is_zero_under_at_use_and_beats_three(decode_slice):
    pd = _pd(decode_slice)
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


def test_token_cap_auto_is_off_under_at_use_and_beats_the_cap():
    inst = _slice("dops-qwen-1.8b", 4)
    span, stats = _span(inst, {})
    assert stats["params"]["token_cap"] is AUTO_TOKEN_CAP["at_use"] is False
    assert span == _span(inst, {"token_cap": False})[0]
    span_cap, stats_cap = _span(inst, {"token_cap": True})
    assert span < _pd(inst) < span_cap
    assert stats["flipped_decisions"]["token"] > stats_cap["flipped_decisions"]["token"]


def test_token_cap_auto_is_on_under_prefetch(decode_slice):
    inst = dataclasses.replace(decode_slice, load_timing="prefetch")
    span, stats = _span(inst, {})
    assert stats["params"]["token_cap"] is True
    assert span == _span(inst, {"token_cap": True})[0]


def test_copy_cost_auto_is_zero_under_at_use_and_beats_one():
    inst = _slice("llama-2-7b", 1, "HP64",
                  BuildOptions(layers=4, precision=paper_precision("llama-2-7b")))
    span, stats = _span(inst, {})
    assert stats["params"]["copy_cost"] == AUTO_COPY_COST["at_use"] == 0.0
    assert span == _span(inst, {"copy_cost": 0})[0]
    pd = _pd(inst)
    span1, _ = _span(inst, {"copy_cost": 1})
    assert span <= span1
    # measured in HEFT's order (the order auto was set under; by the score both give one span)
    rank, _ = _span(inst, {"ready_set": "rank"})
    rank1, _ = _span(inst, {"copy_cost": 1, "ready_set": "rank"})
    assert rank < rank1 and rank1 > 1.02 * pd and rank <= 1.01 * pd


def test_copy_cost_auto_is_one_under_prefetch(decode_slice):
    inst = dataclasses.replace(decode_slice, load_timing="prefetch")
    span, stats = _span(inst, {})
    assert stats["params"]["copy_cost"] == AUTO_COPY_COST["prefetch"] == 1.0
    assert span == _span(inst, {"copy_cost": 1})[0]
