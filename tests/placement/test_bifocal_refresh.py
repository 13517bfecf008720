"""Bifocal's ``plan_refresh_stride`` r (heuristics/placement/bifocal.py, ``replay_map``;
docs/dops_reproduction.md §3): r = 1 (default, DOPS Algorithm 1) scores every decode step and
leaves the schedules as recorded; r > 1 and r = 0 (the authors' ``decode_plan_refresh_stride``)
replay the last scored step's device map and order on the other decode steps, through the same
list scheduler, and their schedules validate. The pinned digests are those of the schedules
before the option existed; they also hold the window's kernels to the same schedules under
speed work (docs/speed.md, "The window's walk")."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import orjson
import pytest

from heuristics.placement.bifocal import bifocal_schedule, refreshed_steps, replay_map
from heuristics.placement.bifocal_grid import bifocal_grid
from opt.common.errors import InputError
from opt.common.jsonio import json_default
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance
from opt.placement.io import instance_from_dict
from opt.placement.validator import validate_placement

#: name -> (model, platform, (prefill, decode, batch), layers, capacity scale, load timing)
CASES: dict[str, tuple[Any, ...]] = {
    "qwen-tight": ("dops-qwen-1.8b", "HP32", (64, 16, 1), 2, 0.2, "prefetch"),
    "llama13-tight": ("llama-2-13b", "HP64", (128, 16, 4), 2, 0.05, "prefetch"),
    "llama7": ("llama-2-7b", "HP64", (128, 32, 4), 2, None, "at_use"),
    "mixtral": ("mixtral-8x7b", "HP32", (64, 8, 2), 1, None, "overlap"),
}
#: the solution digests (score order, rank order) of the default parameters, recorded with the
#: code before ``plan_refresh_stride`` existed
PINNED = {
    "qwen-tight": ("76b844f2c8c55a86", "de0c7c5594426a16"),
    "llama13-tight": ("c12ff5af6b0c6623", "dff966d334a731a3"),
    "llama7": ("f8b315bf662fb85e", "00acc943e66e14c9"),
    "mixtral": ("4435536ff3f7dee8", "a1c09373bdf84f12"),
}


def digest(obj: Any) -> str:
    """benchmarks/schedule_identity.py's digest: SHA-256 of sorted-key JSON, 16 hex digits."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS
                                       | orjson.OPT_SERIALIZE_NUMPY,
                                       default=json_default)).hexdigest()[:16]


def build(model: str, platform: str, wl: tuple[int, int, int], layers: int,
          scale: float | None, load_timing: str) -> PlacementInstance:
    """A built instance; ``scale``: every device's weight capacity set to scale × the total
    block bytes / devices (at least the largest block), as benchmarks/schedule_identity.py."""
    cat = bundled_catalog()
    inst = build_placement(bundled_cards()[model], cat.platform(platform), cat, Workload(*wl),
                           BuildOptions(layers=layers, load_timing=load_timing))
    if scale is None:
        return inst
    d = inst.to_dict()
    cap = max(int(inst.block_bytes.max()), int(scale * int(inst.block_bytes.sum())
                                               / inst.n_devices))
    for dv in d["devices"]:
        dv["weight_capacity"] = cap
    return instance_from_dict(d)


@pytest.fixture(scope="module")
def built() -> dict[str, PlacementInstance]:
    return {name: build(*spec) for name, spec in CASES.items()}


def _steps(inst: PlacementInstance) -> dict[int, np.ndarray]:
    """decode step -> its tasks in index order."""
    assert inst.step is not None and inst.phase is not None
    dec = np.flatnonzero(inst.phase == 1)
    return {int(s): dec[inst.step[dec] == s] for s in np.unique(inst.step[dec])}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stride_one_is_the_recorded_schedule(built, name):
    inst = built[name]
    stats: dict[str, Any] = {}
    sol = bifocal_schedule(inst, {"plan_refresh_stride": 1}, stats=stats)
    assert (digest(sol), digest(bifocal_schedule(inst, {"ready_set": "rank"}))) == PINNED[name]
    assert digest(bifocal_schedule(inst)) == PINNED[name][0]
    assert stats["params"]["plan_refresh_stride"] == 1 and stats["replayed"] == 0


#: digests of deeper windows and the patterns of devices, recorded as :data:`PINNED`
PINNED_WINDOWS = {
    ("qwen-tight", "devices"): "c1d18d807b3396e0",
    ("qwen-tight", "H5"): "77bba3dfe2890f87",
    ("qwen-tight", "H4-devices"): "6599fdaccbc240c5",
    ("llama7", "devices"): "cf2931833649d3ca",
    ("llama7", "H5"): "1df7fe0f2bc4916b",
    ("llama7", "H4-devices"): "d5b757bcba78fe42",
}
WINDOW_PARAMS: dict[str, dict[str, Any]] = {
    "devices": {"window_patterns": "devices"}, "H5": {"H": 5},
    "H4-devices": {"H": 4, "window_patterns": "devices", "hint_max": 8}}


@pytest.mark.parametrize("key", sorted(PINNED_WINDOWS))
def test_window_variants_are_the_recorded_schedules(built, key):
    name, variant = key
    assert digest(bifocal_schedule(built[name], WINDOW_PARAMS[variant])) == PINNED_WINDOWS[key]


def test_refreshed_steps_are_the_authors():
    steps = np.arange(1, 19)  # decode tokens t = 0 … 17
    assert np.flatnonzero(refreshed_steps(steps, 8)).tolist() == [0, 1, 8, 16]
    assert np.flatnonzero(refreshed_steps(steps, 2)).tolist() == [0, 1, 2, 4, 6, 8, 10, 12,
                                                                   14, 16]
    assert np.flatnonzero(refreshed_steps(steps, 0)).tolist() == [0, 1]
    assert refreshed_steps(steps, 1).all()


def _placed(inst: PlacementInstance, sol: Any) -> tuple[np.ndarray, np.ndarray]:
    """(device index, start) per task of ``sol``."""
    tid = {t: i for i, t in enumerate(inst.task_ids)}
    dev = {dv.name: i for i, dv in enumerate(inst.devices)}
    place = np.full(inst.n_tasks, -1, dtype=np.int64)
    start = np.zeros(inst.n_tasks, dtype=np.int64)
    for c in sol["compute"]:
        place[tid[c["task"]]] = dev[c["device"]]
        start[tid[c["task"]]] = c["start"]
    return place, start


@pytest.mark.parametrize("r", [8, 2, 0])
@pytest.mark.parametrize("ready_set", ["score", "rank"])
def test_replayed_steps_repeat_the_refreshed_device_map(built, r, ready_set):
    inst = built["qwen-tight"]
    stats: dict[str, Any] = {}
    sol = bifocal_schedule(inst, {"plan_refresh_stride": r, "ready_set": ready_set},
                           stats=stats)
    placed, _ = _placed(inst, sol)
    steps = _steps(inst)
    scored = refreshed_steps(np.array(sorted(steps)), r)
    ref = None
    replayed = 0
    for s, on in zip(sorted(steps), scored):
        if on:
            ref = steps[s]
            continue
        assert ref is not None
        assert placed[steps[s]].tolist() == placed[ref].tolist(), s
        replayed += len(steps[s])
    assert replayed > 0 and stats["replayed"] == replayed
    assert stats["params"]["plan_refresh_stride"] == r
    validate_placement(inst, sol)


def test_scored_steps_differ_so_the_map_property_is_not_vacuous(built):
    """At r = 1 some decode step's device map differs from step 2's."""
    inst = built["qwen-tight"]
    placed, _ = _placed(inst, bifocal_schedule(inst))
    steps = _steps(inst)
    assert any(placed[steps[s]].tolist() != placed[steps[2]].tolist() for s in steps if s > 2)


def test_replay_commits_in_the_refreshed_steps_order(built):
    """By the score (no insertion: a device runs its tasks in commit order), each device runs
    a replayed step's tasks in the order it ran their counterparts."""
    inst = built["qwen-tight"]
    placed, start = _placed(inst, bifocal_schedule(inst, {"plan_refresh_stride": 8}))
    cp = replay_map(inst, 8)
    steps = _steps(inst)
    for s, tasks in steps.items():
        if cp[tasks[0]] < 0:
            continue
        for d in np.unique(placed[tasks]).tolist():
            mine = tasks[placed[tasks] == d]
            mine = mine[np.argsort(start[mine], kind="stable")]
            theirs = cp[tasks][placed[tasks] == d]
            theirs = theirs[np.argsort(start[theirs], kind="stable")]
            assert cp[mine].tolist() == theirs.tolist(), (s, d)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("r", [2, 8, 0])
def test_replayed_schedules_validate(built, name, r):
    inst = built[name]
    stats: dict[str, Any] = {}
    sol = bifocal_schedule(inst, {"plan_refresh_stride": r}, stats=stats)
    assert validate_placement(inst, sol).makespan > 0
    assert stats["replayed"] + stats["replays_refused"] == int((replay_map(inst, r) >= 0).sum())


def test_the_stride_changes_a_makespan(built):
    inst = built["qwen-tight"]
    ms = {r: validate_placement(inst, bifocal_schedule(inst, {"plan_refresh_stride": r})).makespan
          for r in (1, 8)}
    assert ms[1] != ms[8]


def test_grid_passes_the_stride_to_every_member(built):
    inst = built["qwen-tight"]
    stats: dict[str, Any] = {}
    bifocal_grid(inst, {"gamma": [0.4], "lam": [4.0], "eta": [0.1], "plan_refresh_stride": 8},
                 stats=stats)
    assert stats["bifocal"]["params"]["plan_refresh_stride"] == 8
    assert stats["bifocal"]["replayed"] > 0


def test_bad_stride_and_mismatched_steps_are_refused(built):
    inst = built["qwen-tight"]
    with pytest.raises(InputError, match="plan_refresh_stride"):
        bifocal_schedule(inst, {"plan_refresh_stride": -1})
    d = inst.to_dict()
    last = max(t["step"] for t in d["tasks"] if t.get("phase") == "decode")
    victim = next(t for t in d["tasks"] if t.get("phase") == "decode" and t["step"] == last
                  and t["block"] is not None)
    victim["block"] = None  # the last step no longer matches the step it replays
    with pytest.raises(InputError, match="does not match"):
        bifocal_schedule(instance_from_dict(d), {"plan_refresh_stride": 8})
