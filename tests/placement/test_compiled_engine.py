"""The compiled scheduling engine (heuristics.placement.engine) gives the Python
engine's schedules and statistics byte for byte: the reference digests of every case of
``benchmarks/schedule_identity.py``, and random small instances (contention ``full``/``star``/
none, tight capacities that force eviction, insertion) under Bifocal with several switches,
HEFT and the list scheduler without insertion. ``auto`` picks by the task count."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from test_schedule_identity import CASES, REFERENCE, schedule_identity  # noqa: E402

from heuristics.placement import engine as E  # noqa: E402
from heuristics.placement.bifocal import EFT_ONLY, bifocal_schedule, sibling_order  # noqa: E402
from heuristics.placement.list_scheduler import (  # noqa: E402
    DeviceClasses,
    heft,
    list_schedule,
    priority_order,
    upward_rank,
)
from heuristics.placement.policy_search import policy_search  # noqa: E402
from heuristics.placement.static_policies import (  # noqa: E402
    POLICIES,
    class_members,
    static_schedule,
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
            {"token_cap": False, "eta": 0.5}, {"window": False}, {"ready_set": "rank"},
            {"copy_cost": 1.0, "evict_cost": 0.5}, {"insertion": True},
            {"ready_set": "rank", "insertion": False}]


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


# ---- the static policies and policy search (device classes as data) ---------------------------

def random_classes(inst, seed: int) -> DeviceClasses:
    """Random device classes: each task in class npu, pim or none (−1); members by device class."""
    r = np.random.default_rng(seed)
    return DeviceClasses(r.integers(-1, 2, inst.n_tasks), class_members(inst), "random")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), insertion=st.booleans(),
       load_timing=st.sampled_from(["prefetch", "at_use"]))
def test_list_schedule_with_classes_engines_agree(seed, insertion, load_timing):
    """A random class per task (tight capacities evict; a class without a legal device falls
    back to every legal one; a block larger than its class is refused the same way)."""
    from opt.placement.validator import validate_placement

    inst = random_instance(seed, load_timing)
    classes = random_classes(inst, seed)
    order = priority_order(inst, upward_rank(inst, engine="python"), engine="python")
    py = outcome(lambda: list_schedule(inst, order, insertion=insertion, classes=classes,
                                       engine="python"))
    assert outcome(lambda: list_schedule(inst, order, insertion=insertion, classes=classes,
                                         engine="compiled")) == py
    if py[0] == "ok":
        validate_placement(inst, py[1])


def _built(model: str, platform: str, workload: tuple[int, int, int], load_timing: str,
           npu_blocks: int | None = None, **options: Any) -> Any:
    """A small build; ``npu_blocks``: the NPU's capacity cut to its largest that many blocks."""
    import dataclasses

    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards
    from opt.placement.builder import BuildOptions, Workload, build_placement

    cat = bundled_catalog()
    inst = build_placement(bundled_cards()[model], cat.platform(platform), cat,
                           Workload(*workload), BuildOptions(load_timing=load_timing, **options))
    if npu_blocks is None:
        return inst
    cap = int(np.sort(inst.block_bytes)[-npu_blocks:].sum())
    return dataclasses.replace(inst, devices=tuple(
        dataclasses.replace(d, weight_capacity=cap) if d.device_class == "npu" else d
        for d in inst.devices))


#: name -> (model, platform, workload, options); each built under both load rules
STATIC_CASES: dict[str, tuple[str, str, tuple[int, int, int], dict[str, Any]]] = {
    "llama-1-layer": ("llama-2-7b", "HP32", (16, 2, 1), {"layers": 1}),
    "llama-npu-pressure": ("llama-2-7b", "HP32", (16, 2, 1),
                           {"layers": 2, "block_span": 1, "npu_blocks": 2}),
    "llama-multi-layer-blocks": ("llama-2-7b", "HP64", (32, 4, 4), {"layers": 4, "block_span": 2}),
    "mixtral-experts": ("mixtral-8x7b", "HP128", (16, 2, 4), {"layers": 1}),
}


@pytest.fixture(scope="module")
def static_instances() -> dict[tuple[str, str], Any]:
    return {(name, timing): _built(model, plat, wl, timing, **opts)
            for name, (model, plat, wl, opts) in STATIC_CASES.items()
            for timing in ("at_use", "prefetch")}


@pytest.mark.parametrize("load_timing", ["at_use", "prefetch"])
@pytest.mark.parametrize("name", sorted(STATIC_CASES))
def test_static_policies_engines_agree(static_instances, name, load_timing):
    """Every static policy: the compiled engine's schedule is the Python engine's, byte for
    byte, and valid; the capacity-cut NPU makes every policy evict (LRU)."""
    from opt.placement.validator import validate_placement

    inst = static_instances[name, load_timing]
    for policy in POLICIES:
        py = static_schedule(inst, policy, engine="python")
        assert static_schedule(inst, policy, engine="compiled") == py, policy
        met = validate_placement(inst, py)
        if name == "llama-npu-pressure":
            assert met.evictions > 0, policy


def test_policy_search_engines_agree(static_instances):
    inst = static_instances["llama-npu-pressure", "at_use"]
    runs = []
    for engine in ("python", "compiled"):
        stats: dict[str, Any] = {}
        sol = policy_search(inst, {"max_evaluations": 12}, time_limit=None, stats=stats,
                            engine=engine)
        stats.pop("time_s")
        runs.append((sol, stats))
    assert runs[0] == runs[1]
    assert runs[0][1]["evaluations"] == 12


@pytest.mark.parametrize("load_timing", ["at_use", "prefetch"])
def test_a_block_larger_than_its_class_is_refused_by_both_engines(load_timing):
    """One clear line, the same from both engines."""
    import dataclasses

    base = _built("llama-2-7b", "HP32", (16, 2, 1), load_timing, layers=1)
    cap = int(base.block_bytes.max()) - 1
    inst = dataclasses.replace(base, devices=tuple(
        dataclasses.replace(d, weight_capacity=cap) if d.device_class == "npu" else d
        for d in base.devices))
    errors = [outcome(lambda e=e: static_schedule(inst, "pd", engine=e))
              for e in ("python", "compiled")]
    assert errors[0] == errors[1]
    kind, message = errors[0]
    assert kind == "error" and "\n" not in message
    assert re.fullmatch(r"field 'policy': policy 'pd' cannot keep task '.*' in its device "
                        r"class: block '.*' \(\d+ bytes\) is larger than every such device",
                        message)


def test_static_auto_compiles_above_the_threshold(monkeypatch, static_instances):
    """``auto`` for the static policies picks as for HEFT (the same schedule either way)."""
    from solvers import solve

    inst = static_instances["llama-1-layer", "at_use"]
    ref = static_schedule(inst, "af", engine="python")
    calls: list[int] = []
    real = E.eft_schedule
    monkeypatch.setattr(E, "eft_schedule", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert static_schedule(inst, "af") == ref and not calls
    monkeypatch.setattr(E, "COMPILED_TASKS", inst.n_tasks)
    assert static_schedule(inst, "af") == ref and calls
    res = solve(inst, "af", engine="python")
    assert res.solution == ref and len(calls) == 1


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
