"""The vectorised residency check (opt.placement.residency_checks._all_resident) agrees with the
per-task loop: on a schedule with evictions and on mutations that break rule 5 (a load
missing, an eviction moved before a use, a use moved before its load ends)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from heuristics.placement.bifocal import bifocal_schedule
from opt.placement import compute_transfer_checks, residency_checks
from opt.placement.schedule_error import ScheduleError
from tests.placement.solution_forms import solution_form  # noqa: F401 (rows and columns)

_spec = importlib.util.spec_from_file_location(
    "schedule_identity", Path(__file__).parents[2] / "benchmarks" / "schedule_identity.py")
assert _spec and _spec.loader
schedule_identity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(schedule_identity)


@pytest.fixture(scope="module")
def tight():
    inst = schedule_identity.built(("dops-qwen-1.8b", "HP32", 64, 32, 1, 2, 0.2))
    sol = bifocal_schedule(inst)
    assert sol["evictions"]
    return inst, sol


def _loop_ok(inst, resid, task_dev, start) -> bool:
    try:
        residency_checks.check_blocks_resident(inst, resid, task_dev, start)
    except ScheduleError:
        return False
    return True


def _both(inst, sol):
    task_dev, start, _ = compute_transfer_checks.check_compute(inst, sol)
    fmt_of = residency_checks.check_formats(inst, sol)
    resid = residency_checks.residencies(inst, sol, residency_checks.check_loads(inst, sol, fmt_of))
    return residency_checks._all_resident(inst, resid, task_dev, start, start), _loop_ok(inst, resid, task_dev,
                                                                   start)


def test_valid_schedule_passes_both(tight):
    assert _both(*tight) == (True, True)


def test_mutations_agree(tight):
    inst, sol = tight
    rng = np.random.default_rng(7)
    verdicts = []
    for k in range(40):
        bad = copy.deepcopy(sol)
        what = k % 3
        if what == 0:  # drop a load (and the evictions that would outnumber it)
            i = int(rng.integers(len(bad["loads"])))
            ld = bad["loads"].pop(i)
            bad["evictions"] = [e for e in bad["evictions"]
                                if (e["block"], e["device"]) != (ld["block"], ld["device"])]
        elif what == 1:  # move an eviction earlier, still after its load ends
            e = bad["evictions"][int(rng.integers(len(bad["evictions"])))]
            ends = [ld["end"] for ld in bad["loads"]
                    if (ld["block"], ld["device"]) == (e["block"], e["device"])
                    and ld["end"] <= e["time"]]
            e["time"] = max(ends) + int(rng.integers(0, max(1, e["time"] - max(ends))))
        else:  # start a task using a block earlier (durations kept)
            users = [c for c in bad["compute"] if inst.task_block[inst.task_index[c["task"]]] >= 0]
            c = users[int(rng.integers(len(users)))]
            shift = int(rng.integers(1, max(2, c["start"] + 1)))
            c["start"] -= shift
            c["end"] -= shift
        try:
            fast, loop = _both(inst, bad)
        except ScheduleError:
            continue  # an earlier rule rejects the mutation: not this check's business
        assert fast == loop
        verdicts.append(loop)
    assert False in verdicts  # some mutations reach and break this rule
