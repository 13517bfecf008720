"""Bifocal as DOPS §5.1.2 and Eq. 2–4 define it (problems.md §6), each term on a small instance
with an explicit load rule: the phase term's penalty (λ) and prefill gain (η), the token term
with Eq. 4's horizon R_i against the block's remaining uses, the lookahead simulation against
no window, the near-future hints' bounded map, the §6.4 "−phase" ablation on a built workload,
the defaults as the authors' released configuration, and every schedule valid under every
load rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bifocal_terms import (
    NPU,
    _instance,
    _run,
    _task,
    reload_after_eviction,
)
from test_bifocal_terms import transient_advantage_between_equal_devices as transient_advantage
from test_schedule_kernels import random_instance

from heuristics.placement import bifocal_window
from heuristics.placement.bifocal import AUTHORS_CONFIG, BifocalParams, bifocal_schedule
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement

PIM = {"name": "PIM0", "class": "pim", "weight_capacity": None}


def _under(inst: PlacementInstance, load_timing: str) -> PlacementInstance:
    return dataclasses.replace(inst, load_timing=load_timing)


def test_defaults_are_the_authors_configuration():
    """H 3, γ 0.4, λ 3 (phase and consistency), 3 hints, η 0, α 1, r_min 1, p_reuse 1; the
    extensions off; Eq. 4's horizon."""
    p = BifocalParams()
    for name, value in AUTHORS_CONFIG.items():
        assert getattr(p, name) == value
    assert (p.copy_cost, p.evict_cost, p.prior, p.token_cap) == (0.0, 0.0, False, False)
    assert p.token_horizon == "steps"


def test_phase_penalty_keeps_a_block_home_and_lambda_zero_thrashes():
    """The PIM holds one block; moving x to the PIM wins each step on EFT but evicts c, which
    the next w reloads (problems.md §6, B_phase). Under ``overlap`` λ = 3 charges the move
    3 × t_reload (max(0, 8 − 1) = 7) and x stays with b on the NPU: 88; λ = 0 thrashes:
    101 with evictions."""
    inst = _under(reload_after_eviction(), "overlap")
    span3, flips3, sol3 = _run(inst, {})
    span0, flips0, sol0 = _run(inst, {"lam": 0.0})
    assert (span3, span0) == (88, 101)
    assert sol3["assignment"] != sol0["assignment"]
    assert flips3["phase"] >= 1 and flips0["phase"] == 0
    assert not sol3["evictions"] and len(sol0["evictions"]) > 4
    assert _run(inst, {"phase": False})[2] == sol0  # η = 0: λ = 0 is the term off


def prefill_home() -> PlacementInstance:
    """The NPU holds one of two 40-byte blocks (capacity 50), the PIM all of them. The prefill
    task p (block b; NPU 5, PIM 7, loads 4) then the decode task x (block b; NPU 10, PIM 3)."""
    npu = {"name": "NPU0", "class": "npu", "weight_capacity": 50}
    blocks = [{"id": i, "bytes": 40, "load": {"NPU0": {"linear": 4}, "PIM0": {"linear": 4}}}
              for i in ("b", "c")]
    tasks = [_task("p", {"NPU0": 5, "PIM0": 7}, step=0, block="b"),
             _task("x", {"NPU0": 10, "PIM0": 3}, step=1, block="b")]
    return _instance([npu, PIM], tasks, [{"src": "p", "dst": "x", "bytes": 0}], blocks, 1)


def test_prefill_gain_moves_the_prefill_to_the_class_that_holds_every_block():
    """η: during prefill, −η·t_reload on a class whose capacity holds the full weight set (the
    PIM here). Under ``at_use``, η = 0: p on the NPU (9 < 11), then λ keeps x there (19);
    η = 1: p on the PIM (11 − 4 < 9) and x runs there from the resident block (14)."""
    inst = _under(prefill_home(), "at_use")
    span0, _, sol0 = _run(inst, {})
    span1, flips1, sol1 = _run(inst, {"eta": 1.0})
    assert (span0, span1) == (19, 14)
    assert sol0["assignment"]["p"] == "NPU0" and sol1["assignment"]["p"] == "PIM0"
    assert flips1["phase"] >= 1


def test_token_term_amortises_a_copy_over_the_remaining_steps():
    """B_token (Eq. 4): under ``overlap`` the copy of b onto PIM1 (t_reload 95) is charged
    95 / R_i against the current 95: the chain leaves u's PIM0 (275); without the term, or
    with the token cap (the extension: no recurring saving), it waits (370)."""
    inst = _under(transient_advantage(), "overlap")
    span_on, flips_on, sol_on = _run(inst, {})
    assert span_on == 275 and flips_on["token"] >= 1
    assert sorted(ld["device"] for ld in sol_on["loads"]) == ["PIM0", "PIM1"]
    assert _run(inst, {"token": False})[0] == 370
    assert _run(inst, {"token_cap": True})[0] == 370


def reuse_within_step() -> PlacementInstance:
    """One decode step with two uses of block b (on PIM0 since the prefill: 6 each; PIM1: 4
    each after a load of 10), u holding PIM0."""
    pims = [{"name": f"PIM{i}", "class": "pim", "weight_capacity": None} for i in range(2)]
    blocks = [{"id": "b", "bytes": 100, "load": {"NPU0": {"linear": 1}, "PIM0": {"linear": 30},
                                                  "PIM1": {"linear": 10}}}]
    tasks = [_task("p", {"PIM0": 5}, step=0, block="b"), _task("u", {"PIM0": 20}),
             _task("v", {"NPU0": 170})]
    edges, prev = [{"src": "p", "dst": "u", "bytes": 0}, {"src": "u", "dst": "v", "bytes": 0}], "p"
    for j in range(2):
        tasks.append(_task(f"x{j}", {"PIM0": 6, "PIM1": 4}, step=1, block="b"))
        edges.append({"src": prev, "dst": f"x{j}", "bytes": 0})
        prev = f"x{j}"
    return _instance([NPU, *pims], tasks, edges, blocks, 1)


def test_eq4_horizon_counts_steps_and_uses_is_an_option():
    """Eq. 4's R_i = L_out − i + 1 is 1 at the last step: no amortisation, the same schedule as
    without the term (232); ``token_horizon: uses`` counts b's two uses left and moves (220)."""
    inst = _under(reuse_within_step(), "overlap")
    steps, uses, off = (_run(inst, p)[0] for p in ({}, {"token_horizon": "uses"},
                                                     {"token": False}))
    assert (steps, uses, off) == (232, 220, 232)


def chain_pays_later() -> PlacementInstance:
    """q (NPU 20, PIM 21) sends 20 bytes (20 ticks) to r (NPU 30, PIM 5)."""
    tasks = [_task("q", {"NPU0": 20, "PIM0": 21}), _task("r", {"NPU0": 30, "PIM0": 5})]
    return _instance([NPU, PIM], tasks, [{"src": "q", "dst": "r", "bytes": 20}], [], 1)


@pytest.mark.parametrize("load_timing", ["prefetch", "at_use", "overlap"])
def test_lookahead_simulation_changes_a_decision(load_timing):
    """T̂_H simulates the window q → r: q on the NPU (EFT 20) leaves r 45 at best, q on the PIM
    (21) lets r end at 26: score 0.6·21 + 0.4·26 < 0.6·20 + 0.4·45, q goes to the PIM (26).
    With no window (H 0 or 1, the switch off) EFT keeps q on the NPU (45)."""
    inst = _under(chain_pays_later(), load_timing)
    span, flips, sol = _run(inst, {})
    assert span == 26 and sol["assignment"]["q"] == "PIM0" and flips["window"] == 1
    for params in ({"H": 0}, {"H": 1}, {"window": False}, {"gamma": 0.0}):
        span_off, _, sol_off = _run(inst, params)
        assert span_off == 45 and sol_off["assignment"]["q"] == "NPU0"


def test_hint_map_is_bounded_drops_the_committed_task_and_stamps_changes():
    """The authors' ``_update_plan_hints``: the committed task's hint dropped, the window's
    tentative devices saved, the oldest dropped beyond ``hint_max``."""
    n = 8
    hint = np.full(n, -1, np.int64)
    hstamp = np.zeros(n, np.int64)
    hq = np.zeros(10, np.int64)
    hq_len = np.zeros(1, np.int64)
    update = bifocal_window.update_hints.py_func
    update(0, np.array([1, 2]), 2, np.array([3, 4]), hint, hstamp, hq, hq_len, 3, 1)
    assert hint.tolist() == [-1, 3, 4, -1, -1, -1, -1, -1] and hq[:hq_len[0]].tolist() == [1, 2]
    update(1, np.array([2, 5]), 2, np.array([4, 0]), hint, hstamp, hq, hq_len, 3, 2)
    assert hint[1] == -1 and hint[2] == 4 and hint[5] == 0
    assert hq[:hq_len[0]].tolist() == [2, 5] and hstamp[1] == hstamp[5] == 2
    update(2, np.array([5, 6, 7]), 3, np.array([1, 1, 1]), hint, hstamp, hq, hq_len, 2, 3)
    assert hq[:hq_len[0]].tolist() == [6, 7] and hint[5] == -1 and hint[6] == hint[7] == 1
    update(6, np.array([7]), 1, np.array([2]), hint, hstamp, hq, hq_len, 0, 4)
    assert hint[7] == 1  # hint_max 0: no hints are kept or changed


def test_phase_ablation_differs_from_all_terms_on_a_built_workload():
    """The §6.4 "−phase" ablation acts on a built workload (dops-qwen-1.8b, HP32, 2 layers,
    128/16/4, ``overlap``): the phase term flips decisions and changes the makespan."""
    cat = bundled_catalog()
    inst = build_placement(bundled_cards()["dops-qwen-1.8b"], cat.platform("HP32"), cat,
                           Workload(128, 16, 4), BuildOptions(load_timing="overlap", layers=2))
    stats: dict = {}
    full = validate_placement(inst, bifocal_schedule(inst, {}, stats=stats)).makespan
    ablated = validate_placement(inst, bifocal_schedule(inst, {"phase": False})).makespan
    assert stats["flipped_decisions"]["phase"] >= 1
    assert (full, ablated) == (21_752_294, 21_731_806)


VARIANTS = [{}, {"lam": 0.0}, {"eta": 2.0}, {"token_horizon": "uses"}, {"H": 5, "hint_max": 1},
            {"consist": 0.0}, {"gamma": 1.0}, {"ready_set": "rank"}, {"token_cap": True}]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(range(len(VARIANTS))),
       load_timing=st.sampled_from(["prefetch", "at_use", "overlap"]))
def test_every_schedule_validates_under_every_load_rule(seed, variant, load_timing):
    inst = random_instance(seed, load_timing)
    validate_placement(inst, bifocal_schedule(inst, VARIANTS[variant]))
