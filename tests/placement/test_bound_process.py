"""The certified bound computed in a child process (opt.placement.bound_process): the same value
as in process, cached for later callers, a fallback when the child fails, and no child below
the size threshold."""

from __future__ import annotations

import pytest

from instances import load
from models.options import SolveOptions
from opt.placement.bound_options import BoundOptions
from opt.placement.bound_process import PARALLEL_BOUND_TASKS, start_bound, usable_cpus
from opt.placement.certified_bounds import cached_bound, certified_lower_bound
from opt.placement.io import instance_from_dict
from solvers.api import solve, solve_with

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


@pytest.mark.skipif(usable_cpus() < 2, reason="a child is started only with two usable CPUs")
def test_a_prestarted_worker_computes_the_bound():
    """BoundWorker: the child started before the instance existed is the one that bounds it."""
    from opt.placement.bound_process import BoundWorker

    worker = BoundWorker.start()
    proc = worker.process
    assert proc is not None
    inst = fresh()
    job = start_bound(inst, min_tasks=0, worker=worker)
    assert job.process is proc and worker.process is None  # taken
    got = job.result()
    assert job.where == "child process"
    assert same_bound(got, certified_lower_bound(fresh()))
    worker.close()  # nothing left to stop
    assert proc.poll() is not None


@pytest.mark.skipif(usable_cpus() < 2, reason="a child is started only with two usable CPUs")
def test_an_unused_worker_is_stopped_and_a_dead_one_replaced():
    from opt.placement.bound_process import BoundWorker

    unused = BoundWorker.start()
    proc = unused.process
    unused.close()
    assert unused.process is None and proc.poll() is not None
    dead = BoundWorker.start()
    dead.process.kill()
    dead.process.wait()
    job = start_bound(fresh(), min_tasks=0, worker=dead)
    assert job.process is not None and job.where == "child process"  # a new child
    assert same_bound(job.result(), certified_lower_bound(fresh()))


@pytest.mark.skipif(usable_cpus() < 2, reason="a child is started only with two usable CPUs")
def test_solve_hands_the_worker_to_a_heuristic(monkeypatch):
    """solve_with(bound_worker=...) reaches start_bound (threshold lowered for a small
    instance)."""
    import solvers.api as backends  # the one owner of the bound request
    from opt.placement.bound_process import BoundWorker

    seen = []

    def start_any(inst, options=None, *, worker=None):
        seen.append(worker)
        return start_bound(inst, options, min_tasks=0, worker=worker)

    monkeypatch.setattr(backends, "start_bound", start_any)
    worker = BoundWorker.start()
    res = solve_with(fresh(), "bifocal", SolveOptions(), bound_worker=worker)
    assert seen == [worker] and worker.process is None
    assert res.stats["lower_bound_computed"] == "child process"
    assert res.lower_bound == certified_lower_bound(fresh()).value


def test_the_cli_prestarts_a_worker_only_for_a_heuristic_on_a_large_file(tmp_path, monkeypatch):
    import argparse

    import opt.app.cli.placement as cli

    small = tmp_path / "i.json"
    fresh().write(small)
    monkeypatch.setattr(cli, "PRESTART_FILE_BYTES", 1)
    for method, wanted in (("bifocal", True), ("heft", True), ("cpsat", False),
                           ("milp", False), ("no-such-method", False)):
        worker = cli._bound_worker(argparse.Namespace(method=method, instance=str(small)))
        assert (worker is not None) == wanted, method
        if worker is not None:
            assert (worker.process is not None) == (usable_cpus() >= 2)
            worker.close()
    monkeypatch.setattr(cli, "PRESTART_FILE_BYTES", small.stat().st_size + 1)
    assert cli._bound_worker(argparse.Namespace(method="bifocal", instance=str(small))) is None
    missing = argparse.Namespace(method="bifocal", instance=str(tmp_path / "none.json"))
    assert cli._bound_worker(missing) is None
