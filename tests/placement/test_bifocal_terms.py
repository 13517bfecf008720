"""Bifocal's terms and extensions (problems.md §6) on small instances built to show the phenomenon
each targets (``load_timing: prefetch``, the instances' default): switching the window or the
phase term off makes the validated makespan strictly worse, and the term's count of flipped
decisions (``stats["flipped_decisions"]``) says it changed a choice; the token cap, the copy
cost and the siblings' extension act where they are built to. The terms under each load rule:
tests/placement/test_bifocal_paper.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from heuristics.placement.bifocal import FLIP_TERMS, bifocal_schedule
from opt.placement.instance import PlacementInstance
from opt.placement.io import instance_from_dict
from opt.placement.validator import validate_placement

NPU = {"name": "NPU0", "class": "npu", "weight_capacity": None}


def _instance(devices: list[dict], tasks: list[dict], edges: list[dict], blocks: list[dict],
              decode: int) -> PlacementInstance:
    """Two devices, one link of latency 0 and 1 byte per tick (a transfer of d bytes: d ticks)."""
    return instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit", "devices": devices,
        "links": {"topology": "full", "contention": True,
                  "default": {"latency": 0, "bandwidth": 1.0}, "pairs": []},
        "tasks": tasks, "edges": edges, "blocks": blocks,
        "layout": {"formats": ["linear"], "default": "linear"},
        "meta": {"workload": {"prefill": 1, "decode": decode, "batch": 1}}})


def _task(tid: str, cost: dict[str, int], *, step: int = 1, block: str | None = None,
          kind: str = "op") -> dict[str, Any]:
    return {"id": tid, "cost": cost, "block": block, "kind": kind,
            "phase": "prefill" if step == 0 else "decode", "step": step}


def kv_away_from_home() -> PlacementInstance:
    """q (NPU 20, PIM 21) feeds qk (NPU 10, PIM 12), which also reads 200 bytes of KV from
    kv_write, pinned on the PIM (its KV home). EFT puts q on the NPU (20 < 21); qk must then
    fetch either the KV (200) or q's output (6) across: 20 + 6 + 12 = 38. Looking ahead, q on
    the PIM costs 1 more and saves the crossing: 22 + 12 = 34."""
    pim = {"name": "PIM0", "class": "pim", "weight_capacity": None}
    tasks = [_task("q", {"NPU0": 20, "PIM0": 21}, kind="q_proj"),
             _task("kvw", {"PIM0": 1}, kind="kv_write"),
             _task("qk", {"NPU0": 10, "PIM0": 12}, kind="qk")]
    edges = [{"src": "q", "dst": "qk", "bytes": 6}, {"src": "kvw", "dst": "qk", "bytes": 200}]
    return _instance([NPU, pim], tasks, edges, [], 1)


def reload_after_eviction(steps: int = 6) -> PlacementInstance:
    """The PIM holds one block. Each decode step runs w (block c, PIM only, 3) then x (block b:
    NPU 10, PIM 1); b was used by the prefill on the NPU. Moving x to the PIM wins the step on
    EFT (load 8 after w's start, then 1 < 10) but evicts c, which the next w must reload (8),
    which evicts b again: thrashing, ≈ 20 per step against 13 when x stays where b lives."""
    pim = {"name": "PIM0", "class": "pim", "weight_capacity": 100}
    blocks = [{"id": "b", "bytes": 100, "load": {"NPU0": {"linear": 5}, "PIM0": {"linear": 8}}},
              {"id": "c", "bytes": 100, "load": {"PIM0": {"linear": 8}}}]
    tasks = [_task("p", {"NPU0": 2, "PIM0": 50}, step=0, block="b")]
    edges, prev = [], "p"
    for i in range(1, steps + 1):
        tasks += [_task(f"w{i}", {"PIM0": 3}, step=i, block="c"),
                  _task(f"x{i}", {"NPU0": 10, "PIM0": 1}, step=i, block="b")]
        edges += [{"src": prev, "dst": f"w{i}", "bytes": 0},
                  {"src": f"w{i}", "dst": f"x{i}", "bytes": 0}]
        prev = f"x{i}"
    return _instance([NPU, pim], tasks, edges, blocks, steps)


def _run(inst: PlacementInstance, params: dict) -> tuple[int, dict[str, int], dict]:
    stats: dict = {}
    sol = bifocal_schedule(inst, params, stats=stats)
    return validate_placement(inst, sol).makespan, stats["flipped_decisions"], sol


@pytest.mark.parametrize("term,build,on,off", [
    ("window", kv_away_from_home, 34, 38),
    ("phase", reload_after_eviction, 86, 108),
])
def test_switching_a_term_off_makes_its_instance_worse(term, build, on, off):
    inst = build()
    span_on, flips_on, sol_on = _run(inst, {})
    span_off, flips_off, _ = _run(inst, {term: False})
    assert (span_on, span_off) == (on, off)
    assert span_on < span_off
    assert flips_on[term] >= 1 and flips_off[term] == 0
    assert set(flips_on) == set(FLIP_TERMS)
    if term == "window":
        assert sol_on["assignment"]["q"] == "PIM0"
    if term == "phase":  # the loss without the term is the thrash: evictions and reloads
        _, _, sol_off = _run(inst, {term: False})
        assert not sol_on["evictions"] and len(sol_off["evictions"]) > 4


def transient_advantage_between_equal_devices(steps: int = 30) -> PlacementInstance:
    """Block b lives on PIM0 since the prefill p; a decode chain x1..x30 (PIM0 5, PIM1 5) and
    a higher-ranked task u (PIM0 only, 20) that holds PIM0 when x1 becomes ready. PIM1 is free
    but its copy of b is a slow load (ready at 100). The move saves nothing per step (equal
    durations), only u's 20 once: amortising the exposed load over 30 steps makes it look
    cheap (40 + 65 / 30 < 60) and stalls the chain to 105; capped by the recurring saving
    (0) the token term gives no credit and x1 waits for u (60)."""
    pims = [{"name": f"PIM{i}", "class": "pim", "weight_capacity": None} for i in range(2)]
    blocks = [{"id": "b", "bytes": 100, "load": {"NPU0": {"linear": 1}, "PIM0": {"linear": 30},
                                                  "PIM1": {"linear": 100}}}]
    tasks = [_task("p", {"PIM0": 5}, step=0, block="b"), _task("u", {"PIM0": 20}),
             _task("v", {"NPU0": 170})]
    edges, prev = [{"src": "p", "dst": "u", "bytes": 0}, {"src": "u", "dst": "v", "bytes": 0}], "p"
    for i in range(1, steps + 1):
        tasks.append(_task(f"x{i}", {"PIM0": 5, "PIM1": 5}, step=i, block="b"))
        edges.append({"src": prev, "dst": f"x{i}", "bytes": 0})
        prev = f"x{i}"
    return _instance([NPU, *pims], tasks, edges, blocks, steps)


def test_token_credit_is_capped_by_the_recurring_saving():
    """Without the cap (``token_cap`` off, the default: DOPS Eq. 4 as written) the token term
    duplicates b onto PIM1 and exposes its load (250); with it the schedule is EFT's (225). In
    HEFT's order (the instance is built around u's rank; by the score, x1 precedes u: 440
    uncapped, 375 capped)."""
    inst = transient_advantage_between_equal_devices()
    span_on, flips_on, sol_on = _run(inst, {"token_cap": True, "ready_set": "rank"})
    span_off, flips_off, sol_off = _run(inst, {"ready_set": "rank"})
    assert (_run(inst, {})[0], _run(inst, {"token_cap": True})[0]) == (440, 375)
    assert (span_on, span_off) == (225, 250)
    assert flips_off["token"] == 1 and flips_on["token"] == 0
    assert [ld["device"] for ld in sol_on["loads"]] == ["PIM0"]
    assert sorted(ld["device"] for ld in sol_off["loads"]) == ["PIM0", "PIM1"]


def copy_steals_a_load_port(with_b: bool = True) -> PlacementInstance:
    """Two equal PIM devices, each with its own load port. a1 and a2 (10 each, independent)
    share block a (load 12); b1 (5) needs block b (load 40), which no device holds yet. a1
    takes PIM0 (a loaded 0–12, run 12–22). EFT copies a onto the idle PIM1 for a2 (22 instead
    of 32), and that copy occupies PIM1's port when b's first load needs it: b loads 12–52 and
    b1 ends at 57. Charged its port time while b waits for a home (22 + 12 > 32), a2 waits
    for PIM0 and b loads on PIM1 at once: 45. Without b (``with_b`` False) no first load is
    pending, the copy is free, and it is made (22)."""
    pims = [{"name": f"PIM{i}", "class": "pim", "weight_capacity": None} for i in range(2)]
    blocks = [{"id": "a", "bytes": 100, "load": {"PIM0": {"linear": 12}, "PIM1": {"linear": 12}}}]
    tasks = [_task("a1", {"PIM0": 10, "PIM1": 10}, block="a"),
             _task("a2", {"PIM0": 10, "PIM1": 10}, block="a")]
    if with_b:
        blocks.append({"id": "b", "bytes": 100,
                       "load": {"PIM0": {"linear": 40}, "PIM1": {"linear": 40}}})
        tasks.append(_task("b1", {"PIM0": 5, "PIM1": 5}, block="b"))
    return _instance(pims, tasks, [], blocks, 1)


def test_copy_cost_keeps_a_load_port_for_a_pending_first_load():
    """The copy cost (an extension, ρ = 0 by default) at ρ = 1."""
    inst = copy_steals_a_load_port()
    span_on, flips_on, sol_on = _run(inst, {"copy_cost": 1.0})
    span_off, flips_off, sol_off = _run(inst, {})
    assert (span_on, span_off) == (45, 57)
    assert flips_on["copy"] == 1 and flips_off["copy"] == 0
    assert sol_on["assignment"]["a2"] == "PIM0" and sol_off["assignment"]["a2"] == "PIM1"
    assert len(sol_on["loads"]) == 2 and len(sol_off["loads"]) == 3


def test_copy_cost_leaves_a_free_copy_alone():
    """With no block waiting for its first load the port time is free: the copy is made."""
    inst = copy_steals_a_load_port(with_b=False)
    span, flips, sol = _run(inst, {"copy_cost": 1.0})
    assert span == 22 and flips["copy"] == 0
    assert sol["assignment"]["a2"] == "PIM1"


def sibling_behind_a_pinned_successor() -> PlacementInstance:
    """n feeds three siblings a, b, c (NPU 10, PIM 25 each) that all feed the sink j; a also
    feeds kw (PIM only, 2) and kw feeds z (NPU only, 17) before j, so kw's upward rank puts it
    between a and b in HEFT's order. In that order kw takes the PIM at 11, b and c find no
    gap there before it and queue on the NPU, which z then waits for: 31 + 17, makespan 49.
    With the siblings kept together c is placed while the PIM is still free and runs there
    from 1 to 26, kw follows at 26 and z at 28 on the NPU: makespan 46."""
    pim = {"name": "PIM0", "class": "pim", "weight_capacity": None}
    sib = {"NPU0": 10, "PIM0": 25}
    tasks = [_task("n", {"NPU0": 1}), _task("a", sib), _task("b", sib), _task("c", sib),
             _task("kw", {"PIM0": 2}, kind="kv_write"), _task("z", {"NPU0": 17}),
             _task("j", {"NPU0": 1})]
    edges = [{"src": "n", "dst": x, "bytes": 0} for x in "abc"]
    edges += [{"src": x, "dst": "j", "bytes": 0} for x in ("a", "b", "c", "z")]
    edges += [{"src": "a", "dst": "kw", "bytes": 0}, {"src": "kw", "dst": "z", "bytes": 0}]
    return _instance([NPU, pim], tasks, edges, [], 1)


def test_siblings_kept_together_find_the_idle_device():
    """The siblings' extension of HEFT's order (``ready_set: rank``, where ``auto`` turns it on);
    the score order, which has no static order to move tasks in, gives 46 here too."""
    inst = sibling_behind_a_pinned_successor()
    span_on, _, sol_on = _run(inst, {"ready_set": "rank"})
    span_off, _, sol_off = _run(inst, {"ready_set": "rank", "siblings": False})
    assert _run(inst, {})[0] == 46
    assert (span_on, span_off) == (46, 49)
    assert sol_on["assignment"]["c"] == "PIM0" and sol_off["assignment"]["c"] == "NPU0"


def test_sibling_groups_are_the_tasks_that_can_spread():
    """Only tasks with the same predecessors, a choice of device, and more work together on
    their fastest device than one of them takes elsewhere are grouped."""
    from heuristics.placement.bifocal import sibling_groups

    inst = sibling_behind_a_pinned_successor()
    gid = dict(zip(inst.task_ids, sibling_groups(inst).tolist()))
    assert gid["a"] == gid["b"] == gid["c"] >= 0
    assert gid["n"] == gid["kw"] == gid["z"] == gid["j"] == -1
    pim = {"name": "PIM0", "class": "pim", "weight_capacity": None}
    sib = {"NPU0": 10, "PIM0": 25}
    tasks = [_task("n", {"NPU0": 1}), _task("a", sib), _task("b", sib), _task("c", {"NPU0": 10}),
             _task("m", {"NPU0": 1}), _task("x", sib), _task("y", sib), _task("z", sib)]
    edges = [{"src": "n", "dst": v, "bytes": 0} for v in "abc"]
    edges += [{"src": "m", "dst": v, "bytes": 0} for v in "xyz"] + [
        {"src": "n", "dst": "z", "bytes": 0}]
    gid = dict(zip("nabcmxyz", sibling_groups(_instance([NPU, pim], tasks, edges, [], 1)
                                              ).tolist()))
    assert gid["a"] == gid["b"] == -1  # 10 + 10 < 25: in sequence on the NPU they are sooner
    assert gid["c"] == -1  # no choice of device
    assert gid["x"] == gid["y"] == -1  # z reads n as well: not the same predecessors


@pytest.mark.parametrize("collide", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_same_predecessor_groups_match_a_direct_grouping(seed, collide, monkeypatch):
    """The hashed, vectorised grouping equals grouping by the sorted predecessor tuples, also
    when every set hashes alike (``collide``: the exact check must split them)."""
    import random

    import heuristics.placement.bifocal as bifocal
    from heuristics.placement.bifocal import _same_predecessors

    if collide:
        monkeypatch.setattr(bifocal, "_set_hash",
                            lambda values, offsets: np.zeros(len(offsets) - 1, np.uint64))

    rng = random.Random(seed)
    n = 60
    tasks = [_task(f"t{i}", {"NPU0": 1 + i % 3}) for i in range(n)]
    pool = list(range(6))  # few sources, so that many tasks share a predecessor set
    edges = []
    for i in range(6, n):
        for j in set(rng.choices(pool + list(range(6, i)), k=rng.randint(1, 3))):
            edges.append({"src": f"t{j}", "dst": f"t{i}", "bytes": 0})
    inst = _instance([NPU], tasks, edges, [], 1)
    gid = _same_predecessors(inst, np.ones(n, dtype=bool)).tolist()
    preds: dict[int, tuple[int, ...]] = {}
    p_off, p_idx = inst.predecessors
    for t in range(n):
        preds[t] = tuple(sorted(inst.edge_src[p_idx[p_off[t]:p_off[t + 1]]].tolist()))
    assert any(preds[a] == preds[b] for a in range(n) for b in range(a))  # groups exist
    for a in range(n):
        if not preds[a]:
            assert gid[a] == -1
        for b in range(a):
            shared = bool(preds[a]) and preds[a] == preds[b]
            assert (gid[a] >= 0 and gid[a] == gid[b]) == shared
