"""``local-search`` (heuristics.placement.local_search): never worse than its best constructive
start, always a validated schedule, strictly shorter than every start on a small LLM slice,
never below a proven optimum, the same result on every run for a given budget, stopped by the
time limit after its first start; and the placement default beyond the exact cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import instances
import solvers.registry as reg
from heuristics.placement.local_search import LocalSearchParams, local_search
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.validator import validate_placement
from solvers import solve
from solvers.certify import validate

#: the bundled placement instances with a proven optimum (instances/index.json)
OPTIMA = {e["name"]: e["optimum"]
          for e in json.loads((Path(instances.__file__).parent / "index.json").read_text())
          if e["problem"] == "placement" and e.get("optimum") is not None}


def _slice(catalog, cards, prefill: int, decode: int, layers: int):
    return build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                           Workload(prefill, decode, 1), BuildOptions(layers=layers))


def test_strictly_shorter_than_every_start_and_never_worse(catalog, cards):
    """Llama-2-7B, 2 layers, prefill 8, 48 decode steps, batch 1 on HP64 (2,891 tasks)."""
    inst = _slice(catalog, cards, 8, 48, 2)
    stats: dict = {}
    sol = local_search(inst, LocalSearchParams(max_evaluations=120), stats=stats)
    span = validate_placement(inst, sol).makespan
    starts = [v for v in stats["starts"].values() if isinstance(v, int)]
    assert len(starts) == len(stats["starts"])  # every start built (no time limit)
    assert stats["trajectory"][0] == min(starts) and stats["evaluations"] == 120
    assert stats["accepted"] and len(stats["accepted"]) == len(stats["trajectory"]) - 1
    assert span == stats["trajectory"][-1] < min(starts)
    assert stats["trajectory"] == sorted(stats["trajectory"], reverse=True)
    assert span >= certified_lower_bound(inst).value


@pytest.mark.parametrize("name", sorted(OPTIMA))
def test_never_below_a_proven_optimum(name):
    inst = instances.load(name)
    stats: dict = {}
    sol = local_search(inst, LocalSearchParams(max_evaluations=40), stats=stats)
    span = validate_placement(inst, sol).makespan
    assert OPTIMA[name] <= span <= stats["trajectory"][0]


def test_deterministic(catalog, cards):
    inst = _slice(catalog, cards, 16, 16, 1)
    runs = []
    for _ in range(2):
        stats: dict = {}
        sol = local_search(inst, LocalSearchParams(max_evaluations=60), stats=stats)
        del stats["time_s"]
        runs.append((sol, stats))
    assert runs[0] == runs[1] and runs[0][1]["evaluations"] == 60


def test_the_time_limit_stops_after_the_first_start(catalog, cards):
    inst = _slice(catalog, cards, 16, 4, 1)
    stats: dict = {}
    sol = local_search(inst, time_limit=1e-9, stats=stats)
    assert stats["start"] == "heft" and stats["evaluations"] == 0
    assert stats["stopped"] == "time limit"
    assert all(v == "skipped (time limit)" for k, v in stats["starts"].items() if k != "heft")
    assert validate_placement(inst, sol).makespan == stats["starts"]["heft"]


def test_the_default_beyond_the_exact_cap_is_local_search(monkeypatch):
    """Caps as if the exact methods built 1 task per second (a 10-task instance within 5 s
    cannot be modelled; tests/solvers/test_size_guards.py)."""
    monkeypatch.setattr(reg, "BUILD_TASKS_PER_S", {name: 1.0 for name in reg.BUILD_TASKS_PER_S})
    monkeypatch.setattr(reg, "ALWAYS_BUILT_TASKS", 0)
    inst = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")
    res = solve(inst, time_limit=5, max_evaluations=30)
    assert res.method == "local-search" and res.status == "FEASIBLE"
    choice = res.stats["method_choice"]
    assert choice["method"] == "local-search"
    assert "the default 'portfolio' cannot start" in choice["reason"]
    assert res.lower_bound is not None and validate(inst, res).valid
    assert res.objective >= OPTIMA["p1-llama-2-7b-hp32-p64-d2-l2"]
    assert res.stats["start"] and res.stats["evaluations"] <= 30


def test_the_replay_reads_a_list_schedule_s_columns(catalog, cards):
    """The replay reads start times and devices from a list schedule's columns without
    building its rows, and gives what it gives from the rows."""
    from heuristics.placement.improve import assignment, replay
    from heuristics.placement.list_scheduler import heft

    inst = _slice(catalog, cards, 16, 8, 1)
    sol, rows = heft(inst), heft(inst)
    dev = assignment(inst, sol)
    fast = replay(inst, sol, dev)
    assert not sol.rows_built
    rows["compute"].rows()  # the rows built: read as rows
    assert rows.rows_built and (assignment(inst, rows) == dev).all()
    slow = replay(inst, rows, dev)
    assert fast.rows() == slow.rows()


@pytest.mark.parametrize("name", ["llm-llama-2-7b-hp64-p32-d2-b1-l1-overlap",
                                  "llm-mixtral-8x7b-hp32-p32-d1-b4-l1-at_use",
                                  "llm-dops-qwen-1.8b-hp128-p16-d0-b8-l1-prefetch"])
def test_never_worse_than_its_start_on_library_slices(name):
    from instances import llm

    inst = llm.load(name)
    stats: dict = {}
    sol = local_search(inst, LocalSearchParams(max_evaluations=20), stats=stats)
    span = validate_placement(inst, sol).makespan
    assert span == stats["trajectory"][-1] <= stats["trajectory"][0] == min(
        v for v in stats["starts"].values() if isinstance(v, int))
    assert span >= certified_lower_bound(inst).value


def test_a_bound_computed_in_process_comes_out_of_the_heuristic_s_limit(monkeypatch):
    """Below the child-process size the certified bound runs in this process: first, and the
    heuristic gets the limit less the bound's time (so local search, which uses its whole
    limit, ends within the caller's)."""
    import time
    from dataclasses import replace

    import solvers.api as api
    from opt.placement import bound_process

    real = bound_process.certified_lower_bound
    seen: dict = {}

    def slow_bound(inst, options=None):
        time.sleep(0.5)
        seen.setdefault("bound_at", time.perf_counter())
        return real(inst, options)

    def backend(inst, options):
        seen["limit"], seen["run_at"] = options.time_limit, time.perf_counter()
        return real_backend(inst, options)

    spec = reg.get_method("local-search", "placement")
    real_backend = spec.backend
    monkeypatch.setattr(bound_process, "certified_lower_bound", slow_bound)
    monkeypatch.setattr(api, "get_method", lambda name, problems: replace(
        spec, backend=backend) if name == "local-search" else reg.get_method(name, problems))
    res = solve(instances.load("heft-topcuoglu-2002"), "local-search", time_limit=30)
    assert seen["bound_at"] < seen["run_at"] and seen["limit"] <= 30 - 0.5
    assert res.lower_bound is not None and res.stats["lower_bound_computed"] == "in process"
