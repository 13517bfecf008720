"""The P1 MILP (models/placement/milp.py): HEFT optimum, exhaustive cross-checks on tiny random
instances (contention, star/full links, blocks, loads, capacities, interchangeable devices),
infeasibility, export and warm starts. Every schedule goes through the independent validator."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from models.options import SolveOptions
from models.placement.milp import build_placement_milp, solve_placement_milp
from opt.common.errors import InputError
from opt.placement.instance import Device, Layout, PlacementInstance
from opt.placement.instance_checks import (
    BlockColumns,
    EdgeColumns,
    TaskColumns,
    build_instance,
    make_links,
)
from opt.placement.io import read_instance
from opt.placement.validator import validate_placement
from solvers.certify import certify

HEFT = Path(__file__).resolve().parents[2] / "instances" / "data" / "heft-topcuoglu-2002.json"
#: a wall-clock limit for HiGHS (it has no deterministic one) far above what these tiny
#: models take on a loaded machine: a guard against a hang, never what decides a result
HANG_GUARD_S = 300
OPTS = SolveOptions(time_limit=HANG_GUARD_S, num_workers=1, seed=0)


@pytest.fixture(scope="module")
def heft() -> PlacementInstance:
    return read_instance(HEFT)


@pytest.fixture(scope="module")
def heft_result(heft):
    return solve_placement_milp(heft, OPTS)


# ---------------------------------------------------------------------------------------------
# tiny random instances and an exhaustive solver

def random_instance(seed: int, *, n_tasks: int = 5, n_devices: int = 3, contention: bool = False,
                    topology: str = "full", n_blocks: int = 0, capacities: bool = False,
                    identical: bool = False) -> PlacementInstance:
    """A small random P1 instance; durations, bytes and loads are small integers (some 0)."""
    rng = np.random.default_rng(seed)
    caps: list[int | None] = [None] * n_devices
    if capacities:
        caps = [int(rng.integers(3, 9)) if rng.random() < 0.7 else None for _ in range(n_devices)]
    if identical:
        caps[1] = caps[0]
    devices = [Device(f"D{d}", "npu", caps[d]) for d in range(n_devices)]
    cost = np.full((n_tasks, n_devices), -1, dtype=np.int64)
    for t in range(n_tasks):
        legal = rng.random(n_devices) < 0.7
        legal[rng.integers(n_devices)] = True
        cost[t, legal] = rng.integers(1, 10, legal.sum())
        if rng.random() < 0.1:
            cost[t, legal] = 0
    pairs: list[tuple[str, str, int, float]] = []
    if identical:
        cost[:, 1] = cost[:, 0]
        orphan = (cost < 0).all(axis=1)
        cost[orphan, :2] = rng.integers(1, 10, (int(orphan.sum()), 1))
    else:
        for a in range(n_devices):
            for b in range(n_devices):
                if a != b and rng.random() < 0.3:
                    pairs.append((f"D{a}", f"D{b}", int(rng.integers(0, 3)),
                                  float(rng.choice([1.0, 2.0, 3.0]))))
    links = make_links(devices, topology, contention, int(rng.integers(0, 2)),
                       float(rng.choice([1.0, 2.0])), pairs)
    src, dst, nbytes = [], [], []
    for i in range(n_tasks):
        for j in range(i + 1, n_tasks):
            if rng.random() < 0.4:
                src.append(i)
                dst.append(j)
                nbytes.append(int(rng.integers(0, 10)))
    block_ids = [f"B{b}" for b in range(n_blocks)]
    task_block = np.where(rng.random(n_tasks) < 0.6, rng.integers(0, max(n_blocks, 1), n_tasks),
                          -1) if n_blocks else np.full(n_tasks, -1)
    block_bytes = rng.integers(1, 6, n_blocks)
    load = rng.integers(0, 7, (n_blocks, n_devices))
    if identical and n_blocks:
        load[:, 1] = load[:, 0]
    return build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns([f"t{t}" for t in range(n_tasks)], cost),
        edges=EdgeColumns(src, dst, nbytes),
        blocks=BlockColumns(block_ids, block_bytes, load={"linear": load}, task_block=task_block,
                            layout=Layout()))


def brute_force(inst: PlacementInstance) -> int | None:
    """Optimal eviction-free makespan by enumeration (None: no eviction-free schedule), under
    the instance's ``load_timing`` (problems.md §1.2 rule 5).

    For every assignment that fits the capacities and every order of the positive-length
    events on every resource (device, channel, load port), the earliest-start schedule is the
    best one with those orders; every valid schedule induces such orders. Under ``at_use`` and
    ``overlap`` each load serves the first user of its block in its device's order (the others
    start after that user ends); those rules need positive task durations."""
    n, nd = inst.n_tasks, inst.n_devices
    cost, tblock = inst.cost.tolist(), inst.task_block.tolist()
    bbytes = inst.block_bytes.tolist()
    rule = inst.load_timing
    assert rule == "prefetch" or (inst.cost != 0).all(), "at_use/overlap: positive durations"
    legal = [[d for d in range(nd) if cost[t][d] >= 0] for t in range(n)]
    best = None
    for dev in itertools.product(*legal):
        needed = sorted({(tblock[t], dev[t]) for t in range(n) if tblock[t] >= 0})
        used = [0] * nd
        for b, d in needed:
            used[d] += bbytes[b]
        if any(c.weight_capacity is not None and used[d] > c.weight_capacity
               for d, c in enumerate(inst.devices)):
            continue
        ms = _best_for_assignment(inst, dev, needed, rule)
        if ms is not None:
            best = ms if best is None else min(best, ms)
    return best


def _best_for_assignment(inst: PlacementInstance, dev: tuple[int, ...],
                         needed: list[tuple[int, int]], rule: str) -> int | None:
    """The best makespan of one assignment over every order of every resource (brute_force)."""
    n, nd = inst.n_tasks, inst.n_devices
    cost, links = inst.cost.tolist(), inst.links
    src, dst, nb = inst.edge_src.tolist(), inst.edge_dst.tolist(), inst.edge_bytes.tolist()
    load = inst.load_duration.tolist()
    reach = [set() for _ in range(n)]
    for t in reversed(inst.topological_order.tolist()):
        for u, v in zip(src, dst):
            if u == t:
                reach[t] |= {v} | reach[v]
    # nodes: tasks, then cross transfers, then loads; lag = the node's duration; arcs carry
    # their own lag (a → b: b ≥ a + w)
    lag = [cost[t][dev[t]] for t in range(n)]
    arcs: list[tuple[int, int, int]] = []
    inputs: list[list[int]] = [[] for _ in range(n)]  # nodes whose end is an input's arrival
    chans: dict[tuple, list[int]] = {}
    xfer_edge = {}
    for e, (u, v) in enumerate(zip(src, dst)):
        if dev[u] == dev[v]:
            inputs[v].append(u)
            continue
        k = len(lag)
        lag.append(links.transfer(dev[u], dev[v], nb[e]))
        xfer_edge[k] = e
        arcs.append((u, k, lag[u]))
        inputs[v].append(k)
        if links.contention and lag[k] > 0:
            keys = ([("pair", dev[u], dev[v])] if links.topology == "full"
                    else [("up", dev[u]), ("down", dev[v])])
            for c in keys:
                chans.setdefault(c, []).append(k)
    for v in range(n):
        arcs += [(a, v, lag[a]) for a in inputs[v]]
    load_node = {}
    for b, d in needed:
        load_node[(b, d)] = len(lag)
        lag.append(load[b][d])
    resources = [[t for t in range(n) if dev[t] == d and lag[t] > 0] for d in range(nd)]
    resources += list(chans.values())
    resources += [[load_node[(b, d)] for b, dd in needed if dd == d and load[b][d] > 0]
                  for d in range(nd)]

    def forced(a: int, b: int) -> bool:  # the DAG makes a precede b (pruning only)
        if a < n and b < n:
            return b in reach[a]
        if a in xfer_edge and b in xfer_edge:
            va, ub = dst[xfer_edge[a]], src[xfer_edge[b]]
            return ub == va or ub in reach[va]
        return False

    choices = []
    for res in resources:
        perms = [p for p in itertools.permutations(res)
                 if not any(forced(p[j], p[i]) for i in range(len(p))
                            for j in range(i + 1, len(p)))]
        choices.append(perms)
    best = None
    for combo in itertools.product(*choices):
        extra = [(p[i], p[i + 1], lag[p[i]]) for p in combo for i in range(len(p) - 1)]
        extra += _load_arcs(inst, dev, combo[:nd], load_node, inputs, lag, rule)
        ms = _longest_path(n, lag, arcs + extra)
        if ms is not None:
            best = ms if best is None else min(best, ms)
    return best


def _load_arcs(inst: PlacementInstance, dev: tuple[int, ...], dev_orders,
               load_node: dict[tuple[int, int], int], inputs: list[list[int]], lag: list[int],
               rule: str) -> list[tuple[int, int, int]]:
    """The arcs of the loads under ``rule``: prefetch, every user after its load's end;
    at_use / overlap, the served user (the first in its device's order) after the load's end
    (overlap: its end after it) and the load after that user's inputs and device predecessor,
    the other users after the load's end."""
    tblock = inst.task_block.tolist()
    out = []
    served: dict[tuple[int, int], int] = {}
    before: dict[int, int] = {}
    for order in dev_orders:
        for i, t in enumerate(order):
            key = (tblock[t], dev[t])
            if i:
                before[t] = order[i - 1]
            if tblock[t] >= 0 and key not in served:
                served[key] = t
    for t in range(inst.n_tasks):
        if tblock[t] < 0:
            continue
        k = load_node[(tblock[t], dev[t])]
        if rule == "prefetch" or served.get((tblock[t], dev[t])) != t:
            out.append((k, t, lag[k]))
            continue
        out.append((k, t, lag[k] - lag[t] if rule == "overlap" else lag[k]))
        out += [(a, k, lag[a]) for a in inputs[t]]
        if t in before:
            out.append((before[t], k, lag[before[t]]))
    return out


def _longest_path(n: int, lag: list[int], arcs: list[tuple[int, int, int]]) -> int | None:
    """The makespan of the earliest-start schedule over ``arcs`` (None when they are cyclic)."""
    size = len(lag)
    succ: list[list[tuple[int, int]]] = [[] for _ in range(size)]
    indeg = [0] * size
    for a, b, w in arcs:
        succ[a].append((b, w))
        indeg[b] += 1
    time_of = [0] * size
    stack = [a for a in range(size) if indeg[a] == 0]
    seen = 0
    while stack:
        a = stack.pop()
        seen += 1
        for b, w in succ[a]:
            time_of[b] = max(time_of[b], time_of[a] + w)
            indeg[b] -= 1
            if indeg[b] == 0:
                stack.append(b)
    if seen < size:
        return None  # cyclic orders
    return max((time_of[t] + lag[t] for t in range(n)), default=0)


def _check(inst: PlacementInstance, options: SolveOptions = OPTS):
    result = solve_placement_milp(inst, options)
    certified = certify(inst, result)
    assert certified.stats["no_evictions"] is True
    return result, certified


# ---------------------------------------------------------------------------------------------
# tests

def test_heft_optimum(heft, heft_result):
    certified = certify(heft, heft_result)
    assert heft_result.status == "OPTIMAL"
    assert certified.objective == 73
    assert heft_result.lower_bound == 73
    assert heft_result.objective == 73
    assert heft_result.method == "milp"
    st = heft_result.stats
    assert st["no_evictions"] is True and st["solver"] == "highs"
    assert st["variables"] > 0 and st["constraints"] > 0 and st["binaries"] > 0
    assert isinstance(st["nodes"], int)
    assert heft_result.runtime_s > 0


def test_build_model_only(heft):
    m = build_placement_milp(heft)
    assert m.nvariables() > 0
    assert len(m.x) == sum(int((heft.cost[t] >= 0).sum()) for t in range(heft.n_tasks))
    # horizon bounds Cmax; lower bound on Cmax is the critical path / work bound
    assert m.Cmax.lb <= 73 <= m.Cmax.ub


CASES = (
    [dict(seed=s, n_tasks=5, n_devices=3) for s in range(8)]
    + [dict(seed=100 + s, n_tasks=5, n_devices=2, contention=True, topology="full")
       for s in range(6)]
    + [dict(seed=200 + s, n_tasks=5, n_devices=3, contention=True, topology="star")
       for s in range(6)]
    + [dict(seed=300 + s, n_tasks=4, n_devices=3, n_blocks=2, capacities=True)
       for s in range(6)]
    + [dict(seed=400 + s, n_tasks=4, n_devices=2, n_blocks=2, capacities=True,
            contention=True, topology="star") for s in range(6)]
    + [dict(seed=500 + s, n_tasks=5, n_devices=3, identical=True, n_blocks=1,
            contention=bool(s % 2)) for s in range(6)]
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_matches_brute_force(case):
    inst = random_instance(**case)
    expected = brute_force(inst)
    result, certified = _check(inst)
    if expected is None:
        assert result.status == "INFEASIBLE"
        assert result.solution is None
        return
    assert result.status == "OPTIMAL", result.stats
    assert certified.objective == expected
    assert result.lower_bound == expected


def check_no_schedule_when_block_exceeds_capacity() -> None:
    """A block larger than every device: the default ``milp`` proves that no schedule exists
    (shared with tests/placement/test_milp_time.py)."""
    devices = [Device("A", "npu", 10), Device("B", "pim", 5)]
    links = make_links(devices, "full", True, 1, 1.0)
    inst = build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns(["a", "b"], [[3, 4], [2, 2]]),
        edges=EdgeColumns([0], [1], [4]),
        blocks=BlockColumns(["W"], [11], load={"linear": [[2, 3]]}, task_block=[0, -1]))
    result = solve_placement_milp(inst, OPTS)
    assert result.status == "INFEASIBLE"
    assert result.solution is None and result.objective is None
    assert result.stats["infeasible_scope"] == "all_schedules"
    assert certify(inst, result).objective is None


def test_no_schedule_when_block_exceeds_every_capacity():
    check_no_schedule_when_block_exceeds_capacity()


def test_capacity_forces_split_devices():
    """Two blocks that do not fit together on the fast device: the optimum must split them."""
    devices = [Device("fast", "npu", 6), Device("slow", "pim", None)]
    links = make_links(devices, "full", False, 0, 1.0)
    inst = build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns(["a", "b"], [[2, 10], [2, 10]]),
        blocks=BlockColumns(["W0", "W1"], [4, 4], load={"linear": [[1, 1], [1, 1]]},
                            task_block=[0, 1]))
    result, certified = _check(inst)
    assert result.status == "OPTIMAL"
    assert certified.objective == brute_force(inst) == 11
    assert result.stats["capacity_may_bind"] is True
    assert result.stats["bound_scope"] == "no_evictions"


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
def test_export(heft, tmp_path, suffix):
    path = tmp_path / f"heft{suffix}"
    options = SolveOptions(time_limit=HANG_GUARD_S, num_workers=1, export_path=str(path),
                           params={"formulation": "bigm"})  # named Pyomo components
    result = solve_placement_milp(heft, options)
    text = path.read_text()
    assert "Cmax" in text and "assign" in text
    if suffix == ".mps":
        assert text.lstrip().startswith(("NAME", "*")) and "COLUMNS" in text
    assert result.status == "OPTIMAL" and result.stats["exported"] == str(path)


def test_export_bad_suffix(heft, tmp_path):
    with pytest.raises(InputError, match=r"\.lp or \.mps"):
        solve_placement_milp(heft, SolveOptions(export_path=str(tmp_path / "model.txt")))


def test_warm_start_accepted(heft, heft_result):
    options = SolveOptions(time_limit=HANG_GUARD_S, num_workers=1,
                           initial_solution=heft_result.solution,
                           params={"formulation": "bigm"})
    result = solve_placement_milp(heft, options)
    assert result.stats["mip_start"]["used"] is True
    assert result.stats["mip_start"]["source"] == "initial_solution"
    assert result.stats["mip_start"]["violated_constraints"] == 0
    assert result.stats["mip_start"]["accepted_by_highs"] is True
    assert result.status == "OPTIMAL"
    assert certify(heft, result).objective == 73
    assert result.lower_bound == 73


def test_warm_start_from_worse_schedule(heft):
    """A valid but poor schedule (everything serial on P1 in index order) warm-starts too."""
    t = 0
    compute = []
    for tid in heft.task_ids:
        c = int(heft.cost[heft.task_index[tid], 0])
        compute.append({"task": tid, "device": "P1", "start": t, "end": t + c})
        t += c
    sol = {"assignment": {tid: "P1" for tid in heft.task_ids}, "compute": compute,
           "transfers": [], "loads": [], "evictions": [], "formats": {}}
    validate_placement(heft, sol)
    result = solve_placement_milp(heft, SolveOptions(time_limit=HANG_GUARD_S, num_workers=1,
                                                     initial_solution=sol,
                                                     params={"formulation": "bigm"}))
    ws = result.stats["mip_start"]
    assert ws["used"] is True and ws["initial_objective"] == t
    # the MILP has no start of its own: the poor schedule itself is the MIP start
    assert ws["source"] == "initial_solution" and ws["objective"] == t
    assert ws["accepted_by_highs"] is True
    assert result.status == "OPTIMAL" and certify(heft, result).objective == 73


def test_warm_start_with_permuted_identical_devices():
    """A warm start that violates the symmetry breaking is relabelled, not rejected."""
    inst = random_instance(501, n_tasks=5, n_devices=3, identical=True, n_blocks=1)
    first, _ = _check(inst)
    swap = {"D0": "D1", "D1": "D0"}
    sol = first.solution
    permuted = {
        **sol,
        "assignment": {t: swap.get(d, d) for t, d in sol["assignment"].items()},
        "compute": [{**ev, "device": swap.get(ev["device"], ev["device"])}
                    for ev in sol["compute"]],
        "transfers": [{**ev, "from": swap.get(ev["from"], ev["from"]),
                       "to": swap.get(ev["to"], ev["to"])} for ev in sol["transfers"]],
        "loads": [{**ev, "device": swap.get(ev["device"], ev["device"])} for ev in sol["loads"]],
    }
    validate_placement(inst, permuted)
    result, certified = _check(inst, SolveOptions(time_limit=HANG_GUARD_S, num_workers=1,
                                                  initial_solution=permuted))
    assert result.stats["mip_start"]["used"] is True
    assert result.stats["mip_start"]["accepted_by_highs"] is True
    assert certified.objective == first.objective


def test_invalid_warm_start_is_reported_and_dropped(heft):
    bad = {"compute": [], "assignment": {}}
    result = solve_placement_milp(heft, SolveOptions(time_limit=HANG_GUARD_S, num_workers=1,
                                                     initial_solution=bad,
                                                     params={"formulation": "bigm"}))
    ws = result.stats["mip_start"]
    assert "rule 1" in ws["initial_rejected"]
    assert ws["source"] is None and ws["used"] is False  # no start of its own: a cold start
    assert result.status == "OPTIMAL"


def test_time_limit_result_is_consistent():
    inst = random_instance(7, n_tasks=12, n_devices=3, contention=True, topology="star",
                           n_blocks=2)
    result = solve_placement_milp(inst, SolveOptions(time_limit=0.2, num_workers=1))
    assert result.status in ("OPTIMAL", "FEASIBLE", "TIME_LIMIT_NO_SOLUTION")
    certified = certify(inst, result)
    if result.status != "TIME_LIMIT_NO_SOLUTION":
        assert certified.objective is not None
        assert result.lower_bound is None or result.lower_bound <= certified.objective


def test_entry_point_certifies_milp(heft, heft_result):
    """Through ``solvers.solve`` (HEFT warm start by default) the certified optimum is 73."""
    from solvers import solve

    result = solve(heft, "milp", time_limit=HANG_GUARD_S, num_workers=1)
    assert result.status == "OPTIMAL" and result.objective == 73 and result.lower_bound == 73
    assert result.stats["mip_start"]["used"] is True
    again = solve(heft, "milp", time_limit=HANG_GUARD_S, num_workers=1,
                  initial_solution=heft_result)
    assert again.status == "OPTIMAL" and again.objective == 73
    assert again.stats["mip_start"]["source"] == "initial_solution"


# ---- the load rules (problems.md §1.2 rule 5) ------------------------------------------------

@pytest.mark.parametrize("rule,optimum", [("prefetch", 25), ("at_use", 38), ("overlap", 33)])
def test_worked_example_optimum_under_each_rule(rule, optimum):
    from test_placement_exact import rule_example

    inst = rule_example(rule)
    result, certified = _check(inst)
    assert result.status == "OPTIMAL" and result.objective == result.lower_bound == optimum
    assert certified.objective == optimum


OVERLAP_CASES = [dict(seed=s, n_blocks=2) for s in (0, 1, 5)] + \
    [dict(seed=s, n_blocks=2, contention=True) for s in (3, 6)] + \
    [dict(seed=s, n_blocks=3, capacities=True, topology="star", contention=True)
     for s in (0, 2, 7)]


@pytest.mark.parametrize("case", OVERLAP_CASES,
                         ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_overlap_cpsat_equals_milp_equals_brute_force(case):
    from test_placement_exact import _cpsat_validated, positive_durations

    inst = positive_durations(random_instance(**case), "overlap")
    expected = brute_force(inst)
    result = solve_placement_milp(inst, OPTS)
    assert result.status == "OPTIMAL" and result.objective == result.lower_bound == expected
    assert validate_placement(inst, result.solution).makespan == expected
    assert _cpsat_validated(inst).objective == expected


def test_overlap_warm_start_moves_the_load_to_its_slot():
    """A valid overlap schedule whose load does not start with its task's slot (load [13, 33),
    v [30, 35)) is a MIP start once the load is moved there (Ls = 30 − (20 − 5) = 15)."""
    from test_placement_exact import rule_example

    from opt.placement.solution import make_solution

    inst = rule_example("overlap")
    start = make_solution(inst, [0, 1], [0, 30], {0: 10}, loads=[(0, 1, 13)])
    assert validate_placement(inst, start).makespan == 35
    result = solve_placement_milp(inst, SolveOptions(time_limit=HANG_GUARD_S, num_workers=1,
                                                     initial_solution=start))
    assert result.stats["mip_start"]["violated_constraints"] == 0
    assert result.status == "OPTIMAL" and result.objective == 33
