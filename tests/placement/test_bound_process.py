"""The certified bound computed in a child process (opt.placement.bound_process): the same value
as in process, cached for later callers, a fallback when the child fails, and no child below
the size threshold."""

from __future__ import annotations

import pytest

from instances import load
from opt.placement.bound_options import BoundOptions
from opt.placement.bound_process import PARALLEL_BOUND_TASKS, start_bound, usable_cpus
from opt.placement.certified_bounds import cached_bound, certified_lower_bound
from opt.placement.io import instance_from_dict
from solvers.api import solve

NAME = "p1-llama-2-7b-hp32-p64-d2-l2"


def fresh(name: str = NAME):
    """A new instance object (the bound cache is per object)."""
    return instance_from_dict(load(name).to_dict())


def same_bound(a, b) -> bool:
    return (a.value, a.best, [(c.name, c.value) for c in a.components]) == \
        (b.value, b.best, [(c.name, c.value) for c in b.components])


def test_child_gives_the_in_process_bound_and_caches_it():
    inst = fresh()
    job = start_bound(inst, min_tasks=0)
    assert job.where == ("child process" if usable_cpus() >= 2 else "in process")
    got = job.result()
    assert job.process is None  # joined
    assert cached_bound(inst, BoundOptions()) is got  # later callers reuse it
    assert certified_lower_bound(inst) is got
    assert same_bound(got, certified_lower_bound(fresh()))


@pytest.mark.skipif(usable_cpus() < 2, reason="a child is started only with two usable CPUs")
def test_a_failed_child_falls_back_to_the_in_process_bound():
    inst = fresh()
    job = start_bound(inst, min_tasks=0)
    job.process.kill()
    got = job.result()
    assert job.where.startswith("in process (the child failed")
    assert same_bound(got, certified_lower_bound(fresh()))


@pytest.mark.skipif(usable_cpus() < 2, reason="a child is started only with two usable CPUs")
def test_cancel_stops_the_child():
    job = start_bound(fresh(), min_tasks=0)
    proc = job.process
    job.cancel()
    assert job.process is None and proc.poll() is not None


def test_no_child_below_the_threshold_or_when_cached():
    inst = fresh()
    assert inst.n_tasks < PARALLEL_BOUND_TASKS
    assert start_bound(inst).process is None
    certified_lower_bound(inst)
    assert start_bound(inst, min_tasks=0).process is None  # cached already


def test_a_heuristic_solve_says_where_its_bound_was_computed():
    res = solve(fresh(), "heft")
    assert res.stats["lower_bound_computed"] == "in process"
    assert res.lower_bound == certified_lower_bound(fresh()).value


def test_the_childs_payload_gives_the_same_bound():
    """The compact payload (no task ids, kind codes, no per-task metadata) bounds alike."""
    from opt.placement.bound_process import bound_payload

    inst = fresh()
    assert len(inst.topological_order) == inst.n_tasks  # cached: travels with the payload
    light = bound_payload(inst)
    assert light.n_tasks == inst.n_tasks and "topological_order" in light.__dict__
    assert same_bound(certified_lower_bound(light), certified_lower_bound(fresh()))
