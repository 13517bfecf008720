"""The compiled scheduling engine (heuristics.placement.engine, issue 20 item 1) gives the Python
engine's schedules and statistics byte for byte: the reference digests of every case of
``benchmarks/schedule_identity.py``, and random small instances (contention ``full``/``star``/
none, tight capacities that force eviction, insertion) under Bifocal with several switches,
HEFT and the list scheduler without insertion. ``auto`` picks by the task count."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from test_schedule_identity import CASES, REFERENCE, schedule_identity  # noqa: E402

from heuristics.placement import engine as E  # noqa: E402
from heuristics.placement.bifocal import EFT_ONLY, bifocal_schedule, sibling_order  # noqa: E402
from heuristics.placement.list_scheduler import (  # noqa: E402
    heft,
    list_schedule,
    priority_order,
    upward_rank,
)
from opt.common.errors import InputError  # noqa: E402
from opt.placement.io import instance_from_dict  # noqa: E402

_ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_compiled_schedules_match_the_reference(name):
    """Digests of HEFT and Bifocal (solution and statistics) or HEFT's error message."""
    assert schedule_identity.schedule_digests(CASES[name](), "compiled") == REFERENCE[name]


# ---- random small instances ------------------------------------------------------------------

def random_instance(seed: int, load_timing: str = "prefetch") -> Any:
    """A random DAG of 3–30 tasks on 2–4 devices of two classes, weight blocks with loads,
    prefill and decode steps; links ``full`` or ``star``, with or without contention;
    capacities unlimited or tight (between the largest block and all blocks); the given load
    rule (problems.md §1.2 rule 5)."""
    r = random.Random(seed)
    nd = r.randint(2, 4)
    nb = r.randint(0, 4)
    decode = r.randint(1, 4)
    blocks = [{"id": f"b{i}", "bytes": r.randint(10, 100)} for i in range(nb)]
    largest = max((b["bytes"] for b in blocks), default=0)
    total = sum(b["bytes"] for b in blocks)
    tight = r.random() < 0.6
    devices = [{"name": f"D{d}", "class": "npu" if d == 0 or r.random() < 0.3 else "pim",
                "weight_capacity": r.randint(largest, max(largest, total // 2))
                if tight and nb else None} for d in range(nd)]
    names = [d["name"] for d in devices]
    for b in blocks:
        b["load"] = {nm: {"linear": r.randint(1, 15)} for nm in names}
    tasks, edges = [], []
    n = r.randint(3, 30)
    for j in range(n):
        legal = [nm for nm in names if r.random() < 0.7] or [r.choice(names)]
        step = r.randint(0, decode)
        tasks.append({"id": f"t{j}", "cost": {nm: r.randint(1, 20) for nm in legal},
                      "block": r.choice(blocks)["id"] if nb and r.random() < 0.7 else None,
                      "kind": "op", "phase": "prefill" if step == 0 else "decode",
                      "step": step})
        for i in r.sample(range(j), min(j, r.randint(0, 3))):
            edges.append({"src": f"t{i}", "dst": f"t{j}", "bytes": r.randint(0, 60)})
    pairs = [{"src": a, "dst": b, "latency": r.randint(0, 4), "bandwidth": r.choice([0.5, 2.0])}
             for a in names for b in names if a != b and r.random() < 0.3]
    return instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit", "devices": devices,
        "links": {"topology": r.choice(["full", "star"]), "contention": r.random() < 0.7,
                  "default": {"latency": r.randint(0, 3), "bandwidth": r.choice([1.0, 3.0])},
                  "pairs": pairs},
        "tasks": tasks, "edges": edges, "blocks": blocks,
        "layout": {"formats": ["linear"], "default": "linear"},
        "meta": {"workload": {"prefill": 4, "decode": decode, "batch": 1}},
        "load_timing": load_timing})


def outcome(run) -> tuple[str, Any]:
    """("ok", result) or ("error", message) of ``run()``."""
    try:
        return "ok", run()
    except InputError as exc:
        return "error", str(exc)


def bifocal_outcome(inst, params: dict[str, Any], engine: str) -> tuple[str, Any]:
    """Bifocal's solution and statistics (but the timings and the engine), or its error."""
    def run():
        stats: dict[str, Any] = {}
        sol = bifocal_schedule(inst, params, stats=stats, engine=engine)
        assert stats.pop("engine") == engine
        stats.pop("time_s")
        return sol, stats

    return outcome(run)


VARIANTS = [{}, EFT_ONLY, {"copy_cost": 0.0}, {"evict_cost": 1.0}, {"prior": True}, {"H": 1},
            {"token_cap": False, "eta": 0.5}, {"window": False}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(range(len(VARIANTS))))
def test_bifocal_engines_agree(seed, variant):
    inst = random_instance(seed)
    params = VARIANTS[variant]
    py = bifocal_outcome(inst, params, "python")
    assert bifocal_outcome(inst, params, "compiled") == py


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(range(len(VARIANTS))),
       insertion=st.booleans())
def test_engines_agree_and_validate_under_at_use(seed, variant, insertion):
    """problems.md §1.2 rule 5 at_use: both engines give the same Bifocal and list schedules,
    and they pass the validator (loads in their task's slot, from its dispatch on)."""
    from opt.placement.validator import validate_placement

    inst = random_instance(seed, "at_use")
    py = bifocal_outcome(inst, VARIANTS[variant], "python")
    assert bifocal_outcome(inst, VARIANTS[variant], "compiled") == py
    if py[0] == "ok":
        validate_placement(inst, py[1][0])
    order = priority_order(inst, upward_rank(inst, engine="python"), engine="python")
    ls = outcome(lambda: list_schedule(inst, order, insertion=insertion, engine="python"))
    assert outcome(lambda: list_schedule(inst, order, insertion=insertion,
                                         engine="compiled")) == ls
    if ls[0] == "ok":
        validate_placement(inst, ls[1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), insertion=st.booleans())
def test_heft_and_list_schedule_engines_agree(seed, insertion):
    inst = random_instance(seed)
    assert outcome(lambda: heft(inst, engine="compiled")) == \
        outcome(lambda: heft(inst, engine="python"))
    order = priority_order(inst, upward_rank(inst, engine="python"), engine="python")
    assert outcome(lambda: list_schedule(inst, order, insertion=insertion, engine="compiled")) \
        == outcome(lambda: list_schedule(inst, order, insertion=insertion, engine="python"))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_order_loops_agree(seed):
    inst = random_instance(seed)
    rank_py = upward_rank(inst, engine="python")
    assert upward_rank(inst, engine="compiled").tolist() == rank_py.tolist()
    order = priority_order(inst, rank_py, engine="python")
    assert priority_order(inst, rank_py, engine="compiled") == order
    assert sibling_order(inst, order, engine="compiled") == \
        sibling_order(inst, order, engine="python")


def test_bad_orders_raise_the_same_errors():
    inst = CASES["heft-topcuoglu-2002"]()
    order = priority_order(inst, upward_rank(inst))
    for bad in (order[::-1], order + order[:1]):
        for run in (lambda e: list_schedule(inst, bad, engine=e),
                    lambda e: bifocal_schedule(inst, order=bad, engine=e)):
            assert outcome(lambda: run("compiled")) == outcome(lambda: run("python"))
            assert outcome(lambda: run("compiled"))[0] == "error"
    with pytest.raises(InputError, match="outside"):
        list_schedule(inst, [0, inst.n_tasks], engine="compiled")
    assert list_schedule(inst, iter(order), engine="compiled") == \
        list_schedule(inst, order, engine="python")


# ---- choosing the engine ---------------------------------------------------------------------

def test_auto_stays_in_python_below_the_threshold_without_importing_numba():
    code = ("import sys; from instances import load; "
            "from heuristics.placement.bifocal import bifocal_schedule; "
            "from heuristics.placement.list_scheduler import heft; "
            "inst = load('heft-topcuoglu-2002'); st = {}; bifocal_schedule(inst, stats=st); "
            "heft(inst); print(st['engine'], 'numba' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.split() == ["python", "False"]


def test_auto_compiles_above_the_threshold(monkeypatch):
    inst = CASES["heft-topcuoglu-2002"]()
    stats: dict[str, Any] = {}
    bifocal_schedule(inst, stats=stats)
    assert stats["engine"] == "python"
    monkeypatch.setattr(E, "COMPILED_TASKS", inst.n_tasks)
    bifocal_schedule(inst, stats=stats)
    assert stats["engine"] == "compiled"
    assert E.resolve_engine("auto", inst.n_tasks) == "compiled"
    assert E.resolve_engine("auto", inst.n_tasks - 1) == "python"


def test_bad_engine_and_missing_numba(monkeypatch):
    inst = CASES["heft-topcuoglu-2002"]()
    for run in (lambda: heft(inst, engine="fast"), lambda: bifocal_schedule(inst, engine="jit"),
                lambda: upward_rank(inst, engine="")):
        with pytest.raises(InputError, match="unknown engine"):
            run()
    with pytest.raises(InputError, match="candidates"):
        list_schedule(inst, range(inst.n_tasks), candidates=lambda t, legal: legal,
                      engine="compiled")
    monkeypatch.setattr(E, "numba_available", lambda: False)
    monkeypatch.setattr(E, "COMPILED_TASKS", 0)
    with pytest.raises(InputError, match="needs numba"):
        heft(inst, engine="compiled")
    stats: dict[str, Any] = {}
    bifocal_schedule(inst, stats=stats)
    assert stats["engine"] == "python"


def test_engine_is_a_param_but_no_recorded_setting():
    """``--param engine=…`` reaches both schedulers; Bifocal's recorded settings (which key
    sweep records) are the same whichever engine, since the schedules are."""
    from solvers.registry import method_settings, parsed_params

    assert parsed_params("heft", "placement", {"engine": "python"}) == {"engine": "python"}
    base = method_settings("bifocal", "placement", {"H": 2})
    for engine in ("python", "compiled", "auto"):
        assert method_settings("bifocal", "placement", {"H": 2, "engine": engine}) == base
    with pytest.raises(InputError):
        parsed_params("bifocal", "placement", {"engine": "numba"})
