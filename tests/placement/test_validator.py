"""The independent P1 validator (opt/placement/validator.py, problems.md §1.2–1.3), property based.

Random small valid instances (random DAGs, cpu/npu/pim devices, random legality, full/star
links with and without contention, per-pair link overrides, weight blocks with loads and
capacities) are scheduled by HEFT and CP-SAT; every schedule must pass the validator, and every
single-rule mutation of a valid schedule must be rejected with a ScheduleError naming the rule.
"""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import instances
from heuristics.placement.list_scheduler import heft
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import Device, PlacementInstance
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.schedule_error import ScheduleError
from opt.placement.validator import validate_placement
from solvers.api import solve
from solvers.certify import certify
from tests.placement.solution_forms import solution_form  # noqa: F401 (rows and columns)

CLASSES = ("cpu", "npu", "pim")
BANDWIDTHS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)

FAST = settings(max_examples=50, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SLOW = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ---------------------------------------------------------------------------------------------
# random small valid instances

@st.composite
def placement_instances(draw, *, contention: bool | None = None, min_devices: int = 1,
                        min_blocks: int = 0) -> PlacementInstance:
    """2–8 tasks on a random DAG (edges lower → higher index), 1–3 devices, random legality,
    durations 0–20, edge bytes 0–30, full/star links, 0–3 blocks with loads wherever a user task
    may run, capacities None, generous or random (the latter may defeat HEFT)."""
    n = draw(st.integers(2, 8))
    nd = draw(st.integers(min_devices, 3))
    classes = draw(st.lists(st.sampled_from(CLASSES), min_size=nd, max_size=nd))
    names = [f"{c.upper()}{i}" for i, c in enumerate(classes)]

    cost = np.full((n, nd), -1, dtype=np.int64)
    for t in range(n):
        mask = draw(st.lists(st.booleans(), min_size=nd, max_size=nd))
        mask[draw(st.integers(0, nd - 1))] = True
        for d in range(nd):
            if mask[d]:
                cost[t, d] = draw(st.integers(0, 20))

    flags = draw(st.lists(st.booleans(), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    pairs_ij = [(i, j) for i in range(n) for j in range(i + 1, n)]
    src, dst, nbytes = [], [], []
    for (i, j), on in zip(pairs_ij, flags):
        if on:
            src.append(i)
            dst.append(j)
            nbytes.append(draw(st.integers(0, 30)))

    nb = draw(st.integers(min_blocks, 3))
    block_ids = [f"B{b}" for b in range(nb)]
    block_bytes = [draw(st.integers(1, 10)) for _ in range(nb)]
    task_block = np.array([draw(st.integers(-1, nb - 1)) for _ in range(n)], dtype=np.int64)
    load = np.full((nb, nd), -1, dtype=np.int64)
    for b in range(nb):
        users = task_block == b
        for d in range(nd):
            needed = bool((cost[users, d] >= 0).any())
            if needed or draw(st.booleans()):
                load[b, d] = draw(st.integers(0, 10))

    total = int(sum(block_bytes))
    caps: list[int | None] = []
    for _ in range(nd):
        kind = draw(st.sampled_from(("none", "none", "big", "big", "random")))
        caps.append(None if kind == "none" else total if kind == "big"
                    else draw(st.integers(0, total)))
    devices = [Device(names[d], classes[d], caps[d]) for d in range(nd)]

    topology = draw(st.sampled_from(("full", "star")))
    cont = draw(st.booleans()) if contention is None else contention
    latency = draw(st.integers(0, 3))
    bandwidth = draw(st.sampled_from(BANDWIDTHS))
    overrides = []
    if nd > 1:
        for _ in range(draw(st.integers(0, 2))):
            a, b = draw(st.sampled_from([(a, b) for a in range(nd) for b in range(nd) if a != b]))
            overrides.append((names[a], names[b], draw(st.integers(0, 3)),
                              draw(st.sampled_from(BANDWIDTHS))))
    links = make_links(devices, topology, cont, latency, bandwidth, overrides)
    return build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns([f"t{t}" for t in range(n)], cost),
        edges=EdgeColumns(src, dst, nbytes),
        blocks=BlockColumns(block_ids, block_bytes, load={"linear": load}, task_block=task_block),
        meta={"generator": "hypothesis"})


def heft_or_skip(inst: PlacementInstance) -> dict:
    """HEFT's schedule, or discard the example when capacities leave a task no device or when
    HEFT evicts (LRU residency): the mutations below assume one load per block and
    device (evicting schedules: test_validator_residency.py, test_schedule_kernels.py)."""
    try:
        sol = heft(inst)
    except InputError:
        assume(False)
        raise AssertionError("unreachable") from None
    assume(not sol["evictions"])
    return sol


@st.composite
def scheduled(draw, **kw) -> tuple[PlacementInstance, dict]:
    inst = draw(placement_instances(**kw))
    return inst, heft_or_skip(inst)


def rule(n: int) -> str:
    return rf"rule {n}\b"


def compute_of(sol: dict) -> dict[str, dict]:
    return {ev["task"]: ev for ev in sol["compute"]}


# ---------------------------------------------------------------------------------------------
# 2. acceptance

@FAST
@given(scheduled())
def test_heft_schedules_are_valid(case):
    inst, sol = case
    m = validate_placement(inst, sol)
    ends = [ev["end"] for ev in sol["compute"]]
    assert m.makespan == max(ends)
    assert m.evictions == 0
    assert all(0.0 <= u <= 1.0 for u in m.utilisation.values())
    assert set(m.utilisation) == {d.name for d in inst.devices}
    # every task appears exactly once, on a legal device
    assert sorted(ev["task"] for ev in sol["compute"]) == sorted(inst.task_ids)


@SLOW
@given(placement_instances())
def test_cpsat_schedules_are_valid(inst):
    try:
        ref = heft(inst)
    except InputError:
        ref = None
    res = solve(inst, "cpsat", time_limit=5, deterministic=True, num_workers=1, seed=0)
    if not res.has_solution:
        assert res.objective is None
        return
    m = validate_placement(inst, res.solution)
    assert m.makespan == max(ev["end"] for ev in res.solution["compute"])
    assert res.objective == m.makespan
    if res.lower_bound is not None:
        assert res.lower_bound <= res.objective
    if ref is not None and res.status == "OPTIMAL":
        # an eviction-free HEFT schedule cannot beat CP-SAT's proven (eviction-free) optimum;
        # one that evicts under a capacity may
        heft_metrics = validate_placement(inst, ref)
        if heft_metrics.evictions == 0:
            assert res.objective <= heft_metrics.makespan


@FAST
@given(scheduled(), st.integers(1, 7))
def test_shifting_a_valid_schedule_stays_valid(case, k):
    """Delaying every event (evictions too) by k keeps every rule and adds k to the
    makespan."""
    inst, sol = case
    base = validate_placement(inst, sol).makespan
    moved = copy.deepcopy(sol)
    for key in ("compute", "transfers", "loads"):
        for ev in moved[key]:
            ev["start"] += k
            ev["end"] += k
    for ev in moved["evictions"]:  # HEFT evicts (LRU residency)
        ev["time"] += k
    assert validate_placement(inst, moved).makespan == base + k


@FAST
@given(scheduled(min_blocks=1))
def test_eviction_after_last_use_is_accepted(case):
    inst, sol = case
    assume(sol["loads"])
    ld = sol["loads"][0]
    b = inst.block_index[ld["block"]]
    users = [ev for ev in sol["compute"]
             if inst.task_block[inst.task_index[ev["task"]]] == b and ev["device"] == ld["device"]]
    # the block must stay resident past each user's start (eviction strictly after it)
    last = max([max(ev["end"], ev["start"] + 1) for ev in users] + [ld["end"]])
    mut = copy.deepcopy(sol)
    mut["evictions"].append({"block": ld["block"], "device": ld["device"], "time": last})
    assert validate_placement(inst, mut).evictions == 1


# ---------------------------------------------------------------------------------------------
# 3. rejection of single mutations

@FAST
@given(scheduled(), st.data())
def test_overlap_on_a_device_is_rejected(case, data):
    inst, sol = case
    comp = sol["compute"]
    pairs = [(i, j) for i in range(len(comp)) for j in range(len(comp)) if i != j
             and comp[i]["device"] == comp[j]["device"]
             and comp[i]["end"] > comp[i]["start"] and comp[j]["end"] > comp[j]["start"]]
    assume(pairs)
    i, j = data.draw(st.sampled_from(pairs))
    mut = copy.deepcopy(sol)
    a, b = mut["compute"][i], mut["compute"][j]
    dur = b["end"] - b["start"]
    b["start"] = data.draw(st.integers(a["start"], a["end"] - 1))
    b["end"] = b["start"] + dur
    with pytest.raises(ScheduleError, match=r"rule [23]\b"):
        validate_placement(inst, mut)


@FAST
@given(scheduled(), st.data())
def test_successor_before_same_device_predecessor_is_rejected(case, data):
    inst, sol = case
    comp = compute_of(sol)
    cands = [e for e in range(inst.n_edges)
             if comp[inst.task_ids[inst.edge_src[e]]]["device"]
             == comp[inst.task_ids[inst.edge_dst[e]]]["device"]
             and comp[inst.task_ids[inst.edge_src[e]]]["end"] >= 1]
    assume(cands)
    e = data.draw(st.sampled_from(cands))
    mut = copy.deepcopy(sol)
    c = compute_of(mut)
    u, v = c[inst.task_ids[inst.edge_src[e]]], c[inst.task_ids[inst.edge_dst[e]]]
    dur = v["end"] - v["start"]
    v["start"] = data.draw(st.integers(0, u["end"] - 1))
    v["end"] = v["start"] + dur
    with pytest.raises(ScheduleError, match=r"rule [23]\b"):
        validate_placement(inst, mut)


@FAST
@given(scheduled(min_devices=2), st.data())
def test_missing_transfer_is_rejected(case, data):
    inst, sol = case
    assume(sol["transfers"])
    k = data.draw(st.integers(0, len(sol["transfers"]) - 1))
    mut = copy.deepcopy(sol)
    gone = mut["transfers"].pop(k)
    with pytest.raises(ScheduleError, match=rule(3)) as err:
        validate_placement(inst, mut)
    assert f"{gone['src']}->{gone['dst']}" in str(err.value)


@FAST
@given(scheduled(min_devices=2), st.data())
def test_short_transfer_is_rejected(case, data):
    inst, sol = case
    ks = [k for k, tr in enumerate(sol["transfers"]) if tr["end"] > tr["start"]]
    assume(ks)
    k = data.draw(st.sampled_from(ks))
    mut = copy.deepcopy(sol)
    mut["transfers"][k]["end"] -= 1
    with pytest.raises(ScheduleError, match=rule(3)):
        validate_placement(inst, mut)


@FAST
@given(scheduled(min_devices=3), st.data())
def test_transfer_on_the_wrong_channel_is_rejected(case, data):
    inst, sol = case
    assume(sol["transfers"] and inst.n_devices >= 3)
    k = data.draw(st.integers(0, len(sol["transfers"]) - 1))
    mut = copy.deepcopy(sol)
    tr = mut["transfers"][k]
    others = [d.name for d in inst.devices if d.name not in (tr["from"], tr["to"])]
    tr[data.draw(st.sampled_from(("from", "to")))] = data.draw(st.sampled_from(others))
    with pytest.raises(ScheduleError, match=rule(3)):
        validate_placement(inst, mut)


def _channel_overlap(inst: PlacementInstance, transfers: list[dict]) -> bool:
    """Independent check of rule 4: two transfers of positive length share a channel."""
    chans: dict[tuple, list[tuple[int, int]]] = {}
    for tr in transfers:
        if tr["end"] <= tr["start"]:
            continue
        keys = ([("pair", tr["from"], tr["to"])] if inst.links.topology == "full"
                else [("up", tr["from"]), ("down", tr["to"])])
        for key in keys:
            chans.setdefault(key, []).append((tr["start"], tr["end"]))
    for spans in chans.values():
        for a in range(len(spans)):
            for b in range(a + 1, len(spans)):
                if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]:
                    return True
    return False


@FAST
@given(placement_instances(contention=True, min_devices=2))
def test_overlapping_transfers_on_a_channel_are_rejected_with_contention(inst):
    """A schedule built for links without contention is valid with contention iff no two of
    its transfers share a channel at the same time."""
    free = dataclasses.replace(inst, links=make_links(
        inst.devices, inst.links.topology, False, inst.links.default_latency,
        inst.links.default_bandwidth, inst.links.pairs))
    sol = heft_or_skip(free)
    validate_placement(free, sol)
    if _channel_overlap(inst, sol["transfers"]):
        event("transfers overlap on a channel")
        with pytest.raises(ScheduleError, match=rule(4)):
            validate_placement(inst, sol)
    else:
        validate_placement(inst, sol)


@FAST
@given(scheduled(contention=True, min_devices=2), st.data())
def test_transfer_moved_onto_a_busy_channel_is_rejected(case, data):
    """Two transfers of one channel made to overlap (the later one moved earlier, still after
    its source ends and before its destination starts) break rule 4."""
    inst, sol = case
    comp = compute_of(sol)
    trs = sol["transfers"]
    options = []
    for a, ta in enumerate(trs):
        for b, tb in enumerate(trs):
            if a == b or ta["end"] <= ta["start"] or tb["end"] <= tb["start"]:
                continue
            share = ((ta["from"], ta["to"]) == (tb["from"], tb["to"])
                     if inst.links.topology == "full"
                     else ta["from"] == tb["from"] or ta["to"] == tb["to"])
            if not share:
                continue
            dur = tb["end"] - tb["start"]
            lo = max(comp[tb["src"]]["end"], ta["start"] - dur + 1)
            hi = min(comp[tb["dst"]]["start"] - dur, ta["end"] - 1)
            if lo <= hi:
                options.append((b, lo, hi))
    assume(options)
    b, lo, hi = data.draw(st.sampled_from(options))
    mut = copy.deepcopy(sol)
    tb = mut["transfers"][b]
    dur = tb["end"] - tb["start"]
    tb["start"] = data.draw(st.integers(lo, hi))
    tb["end"] = tb["start"] + dur
    with pytest.raises(ScheduleError, match=rule(4)):
        validate_placement(inst, mut)


@FAST
@given(scheduled(min_blocks=1), st.data())
def test_missing_load_is_rejected(case, data):
    inst, sol = case
    comp = compute_of(sol)
    needed = {(inst.block_ids[inst.task_block[t]], comp[tid]["device"])
              for t, tid in enumerate(inst.task_ids) if inst.task_block[t] >= 0}
    ks = [k for k, ld in enumerate(sol["loads"]) if (ld["block"], ld["device"]) in needed]
    assume(ks)
    k = data.draw(st.sampled_from(ks))
    mut = copy.deepcopy(sol)
    gone = mut["loads"].pop(k)
    with pytest.raises(ScheduleError, match=rule(5)) as err:
        validate_placement(inst, mut)
    assert gone["block"] in str(err.value)


@FAST
@given(scheduled(min_blocks=1), st.data())
def test_eviction_before_use_is_rejected(case, data):
    inst, sol = case
    loads = {(ld["block"], ld["device"]): ld for ld in sol["loads"]}
    cands = []
    for ev in sol["compute"]:
        b = int(inst.task_block[inst.task_index[ev["task"]]])
        if b < 0:
            continue
        ld = loads[(inst.block_ids[b], ev["device"])]
        if ev["start"] > ld["end"]:
            cands.append((ld["block"], ld["device"], ld["end"], ev["start"]))
    assume(cands)
    bid, dname, lo, s = data.draw(st.sampled_from(cands))
    mut = copy.deepcopy(sol)
    mut["evictions"].append({"block": bid, "device": dname,
                             "time": data.draw(st.integers(lo, s - 1))})
    with pytest.raises(ScheduleError, match=rule(5)) as err:
        validate_placement(inst, mut)
    assert bid in str(err.value)


@FAST
@given(scheduled(min_blocks=2), st.data())
def test_overlapping_loads_on_one_port_are_rejected(case, data):
    """Rule 5: one load port per device. Move a load into another load's interval there."""
    inst, sol = case
    lds = sol["loads"]
    pairs = [(a, b) for a in range(len(lds)) for b in range(len(lds)) if a != b
             and lds[a]["device"] == lds[b]["device"]
             and lds[a]["end"] > lds[a]["start"] and lds[b]["end"] > lds[b]["start"]]
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    mut = copy.deepcopy(sol)
    la, lb = mut["loads"][a], mut["loads"][b]
    dur = lb["end"] - lb["start"]
    lb["start"] = data.draw(st.integers(max(0, la["start"] - dur + 1), la["end"] - 1))
    lb["end"] = lb["start"] + dur
    with pytest.raises(ScheduleError, match=rule(5)):
        validate_placement(inst, mut)


@FAST
@given(scheduled(min_blocks=1), st.data())
def test_evict_and_reload_after_last_use_is_accepted(case, data):
    """Several residencies of one block on one device: evict after the last use, reload on the
    free load port, evict again — valid, with the evictions counted."""
    inst, sol = case
    assume(sol["loads"])
    ld = data.draw(st.sampled_from(sol["loads"]))
    b = inst.block_index[ld["block"]]
    users = [max(ev["end"], ev["start"] + 1) for ev in sol["compute"]
             if inst.task_block[inst.task_index[ev["task"]]] == b and ev["device"] == ld["device"]]
    port = [x["end"] for x in sol["loads"] if x["device"] == ld["device"]]
    t_evict = max(users + [ld["end"]])
    again = max([t_evict] + port) + data.draw(st.integers(0, 3))
    dur = ld["end"] - ld["start"]
    mut = copy.deepcopy(sol)
    mut["evictions"] += [{"block": ld["block"], "device": ld["device"], "time": t_evict},
                         {"block": ld["block"], "device": ld["device"], "time": again + dur}]
    mut["loads"].append({**ld, "start": again, "end": again + dur})
    assert validate_placement(inst, mut).evictions == 2
    # without the first eviction the reload starts while the block is still resident (when the
    # load takes time; a zero-length reload at the remaining eviction's time is a fresh copy)
    if dur > 0:
        del mut["evictions"][0]
        with pytest.raises(ScheduleError, match="still resident"):
            validate_placement(inst, mut)


@FAST
@given(scheduled(min_blocks=1))
def test_capacity_one_byte_short_is_rejected(case):
    inst, sol = case
    held: dict[str, int] = {}
    for ld in sol["loads"]:  # HEFT never evicts: everything loaded stays resident
        held[ld["device"]] = held.get(ld["device"], 0) + int(
            inst.block_bytes[inst.block_index[ld["block"]]])
    assume(any(v >= 1 for v in held.values()))
    name = max(held, key=held.get)
    tight = [dataclasses.replace(d, weight_capacity=held[name]) if d.name == name else d
             for d in inst.devices]
    validate_placement(dataclasses.replace(inst, devices=tuple(tight)), sol)
    short = [dataclasses.replace(d, weight_capacity=held[name] - 1) if d.name == name else d
             for d in inst.devices]
    with pytest.raises(ScheduleError, match=rule(6)) as err:
        validate_placement(dataclasses.replace(inst, devices=tuple(short)), sol)
    assert name in str(err.value)


@FAST
@given(scheduled(), st.data(), st.sampled_from((-1, 1)))
def test_wrong_compute_duration_is_rejected(case, data, delta):
    inst, sol = case
    k = data.draw(st.integers(0, len(sol["compute"]) - 1))
    mut = copy.deepcopy(sol)
    ev = mut["compute"][k]
    assume(ev["end"] + delta >= ev["start"])
    ev["end"] += delta
    with pytest.raises(ScheduleError, match=rule(1)) as err:
        validate_placement(inst, mut)
    assert ev["task"] in str(err.value)


@FAST
@given(scheduled(min_devices=2), st.data())
def test_illegal_device_is_rejected(case, data):
    inst, sol = case
    cands = [(k, d.name) for k, ev in enumerate(sol["compute"])
             for di, d in enumerate(inst.devices)
             if inst.cost[inst.task_index[ev["task"]], di] < 0]
    assume(cands)
    k, name = data.draw(st.sampled_from(cands))
    mut = copy.deepcopy(sol)
    ev = mut["compute"][k]
    ev["device"] = name
    mut["assignment"][ev["task"]] = name
    with pytest.raises(ScheduleError, match=rule(1)) as err:
        validate_placement(inst, mut)
    assert "not legal" in str(err.value) and ev["task"] in str(err.value)


@FAST
@given(scheduled(), st.data())
def test_task_missing_from_compute_is_rejected(case, data):
    inst, sol = case
    k = data.draw(st.integers(0, len(sol["compute"]) - 1))
    mut = copy.deepcopy(sol)
    gone = mut["compute"].pop(k)
    with pytest.raises(ScheduleError, match=rule(1)) as err:
        validate_placement(inst, mut)
    assert gone["task"] in str(err.value)


@FAST
@given(scheduled(), st.data())
def test_duplicate_compute_event_is_rejected(case, data):
    inst, sol = case
    k = data.draw(st.integers(0, len(sol["compute"]) - 1))
    mut = copy.deepcopy(sol)
    mut["compute"].append(dict(mut["compute"][k]))
    with pytest.raises(ScheduleError, match=rule(1)):
        validate_placement(inst, mut)


@FAST
@given(scheduled(min_blocks=1), st.data(), st.sampled_from((-1, 1)))
def test_wrong_load_duration_is_rejected(case, data, delta):
    inst, sol = case
    assume(sol["loads"])
    k = data.draw(st.integers(0, len(sol["loads"]) - 1))
    mut = copy.deepcopy(sol)
    ld = mut["loads"][k]
    assume(ld["end"] + delta >= ld["start"])
    ld["end"] += delta
    with pytest.raises(ScheduleError, match=rule(5)) as err:
        validate_placement(inst, mut)
    assert ld["block"] in str(err.value)


@FAST
@given(scheduled(), st.data())
def test_transfer_for_a_same_device_edge_is_rejected(case, data):
    inst, sol = case
    comp = compute_of(sol)
    same = [e for e in range(inst.n_edges)
            if comp[inst.task_ids[inst.edge_src[e]]]["device"]
            == comp[inst.task_ids[inst.edge_dst[e]]]["device"]]
    assume(same)
    e = data.draw(st.sampled_from(same))
    u, v = inst.task_ids[inst.edge_src[e]], inst.task_ids[inst.edge_dst[e]]
    d = comp[u]["device"]
    mut = copy.deepcopy(sol)
    mut["transfers"].append({"src": u, "dst": v, "from": d, "to": d,
                             "start": comp[u]["end"], "end": comp[u]["end"]})
    with pytest.raises(ScheduleError, match=rule(3)):
        validate_placement(inst, mut)


# ---------------------------------------------------------------------------------------------
# 4. metrics

@pytest.fixture(scope="module")
def heft_example() -> PlacementInstance:
    return instances.load("heft-topcuoglu-2002")


@pytest.fixture(scope="module")
def llm(catalog, cards) -> PlacementInstance:
    return build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(prefill=16, decode=2, batch=1), BuildOptions(layers=1))


def test_heft_example_makespan_is_80(heft_example):
    sol = heft(heft_example)
    m = validate_placement(heft_example, sol)
    assert m.makespan == 80
    assert m.ttft is None and m.decode_time is None and m.decode_steps == 0
    assert m.mean_tpot is None
    res = solve(heft_example, "heft")
    assert res.objective == 80 and res.status == "FEASIBLE"
    assert res.lower_bound is None or res.lower_bound <= 73


def test_llm_metrics(llm):
    sol = heft(llm)
    m = validate_placement(llm, sol)
    ends = {ev["task"]: ev["end"] for ev in sol["compute"]}
    pre = [ends[t] for i, t in enumerate(llm.task_ids) if llm.is_prefill()[i]]
    assert m.makespan == max(ends.values())
    assert m.ttft == max(pre)
    assert m.ttft < m.makespan
    assert m.decode_steps == 2
    assert m.decode_time == m.makespan - m.ttft
    assert m.mean_tpot == pytest.approx(m.decode_time / 2)
    assert set(m.utilisation) == {d.name for d in llm.devices}
    assert all(0.0 <= u <= 1.0 for u in m.utilisation.values())
    busy: dict[str, int] = {}
    for ev in sol["compute"]:
        busy[ev["device"]] = busy.get(ev["device"], 0) + ev["end"] - ev["start"]
    for name, u in m.utilisation.items():
        assert u == pytest.approx(busy.get(name, 0) / m.makespan)


# ---------------------------------------------------------------------------------------------
# 5. certify (solvers.certify: the one gate of every solver result; never raises)

def test_certify_recomputes_objective_and_gap(heft_example):
    sol = heft(heft_example)
    res = Result(problem="placement", method="test", status="FEASIBLE", objective=12345,
                 lower_bound=73, solution=sol)
    out = certify(heft_example, res)
    assert out.objective == 80
    assert out.gap == pytest.approx((80 - 73) / 80)
    assert out.stats["metrics"]["makespan"] == 80


def test_certify_rejects_lower_bound_above_makespan(heft_example):
    sol = heft(heft_example)
    res = Result(problem="placement", method="test", status="FEASIBLE", objective=80,
                 lower_bound=81, solution=sol)
    out = certify(heft_example, res)
    assert out.status == "ERROR" and out.objective is None and out.stats["invalid"]
    assert "lower bound" in out.stats["message"]
    # a bound equal to the makespan is fine (gap 0)
    ok = certify(heft_example, dataclasses.replace(res, lower_bound=80))
    assert ok.gap == 0.0


def test_certify_rejects_invalid_schedule(heft_example):
    sol = copy.deepcopy(heft(heft_example))
    sol["compute"][0]["end"] += 1
    res = Result(problem="placement", method="test", status="FEASIBLE", objective=80,
                 solution=sol)
    out = certify(heft_example, res)
    assert out.status == "ERROR" and out.objective is None
    assert re.search(rule(1), out.stats["message"]) and out.stats["message"].startswith(
        "invalid schedule: ")


def test_certify_without_solution_clears_objective(heft_example):
    res = Result(problem="placement", method="test", status="TIME_LIMIT_NO_SOLUTION",
                 objective=99, lower_bound=50, gap=0.5)
    out = certify(heft_example, res)
    assert out.objective is None and out.gap is None
