"""The certified lower bound is computed once per instance object and reused by every method
solved on it in the same process (a sweep worker solves several methods on one built
instance): the cache of :func:`opt.placement.certified_bounds.certified_lower_bound` is keyed
weakly on the instance, so its entries die with the instance."""

from __future__ import annotations

import gc

import instances
import opt.placement.certified_bounds as cb
from solvers import solve


def test_one_bound_computation_for_several_methods(monkeypatch):
    calls = []
    real = cb.chain_bound

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cb, "chain_bound", counting)
    inst = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")  # a fresh object: nothing cached
    results = [solve(inst, m, time_limit=5) for m in ("heft", "bifocal", "pd", "heft")]
    assert len(calls) == 1
    assert len({r.lower_bound for r in results}) == 1
    other = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")  # another object: its own bound
    assert solve(other, "heft").lower_bound == results[0].lower_bound
    assert len(calls) == 2


def test_cache_entries_die_with_their_instance():
    inst = instances.load("heft-topcuoglu-2002")
    solve(inst, "heft")
    assert inst in cb._CACHE
    size = len(cb._CACHE)
    del inst
    gc.collect()
    assert len(cb._CACHE) == size - 1
