"""The compiled set-up of the schedulers (docs/speed.md, "Schedulers (Bifocal, HEFT)") gives the
numpy references' values exactly: the uniquing (``np.unique``,
:func:`opt.common.rows.unique_rows`), the sibling groups,
HEFT's ranks and the task orders, on random inputs — and its fallbacks (hash collisions, many
devices) take the references' path."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")


from heuristics.placement import bifocal as B  # noqa: E402
from heuristics.placement import schedule_arrays as E  # noqa: E402
from heuristics.placement import setup_kernels  # noqa: E402
from heuristics.placement.list_scheduler import priority_order, upward_rank  # noqa: E402
from opt.common.rows import row_weights, unique_rows  # noqa: E402
from opt.placement.io import instance_from_dict  # noqa: E402

_ROOT = Path(__file__).parents[2]
_SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- uniquing ----------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-5, 5), st.integers(-2**63, 2**63 - 1)),
                       max_size=3000))
def test_unique_inverse_is_numpys_unique(values):
    keys = np.array(values, dtype=np.int64)
    u, first, inv = setup_kernels.unique_inverse(keys)
    ref = np.unique(keys, return_index=True, return_inverse=True)
    for got, want in zip((u, first, inv), ref):
        assert np.array_equal(got, want.reshape(-1))
    assert E.unique_values(keys)[1].tolist() == ref[2].reshape(-1).tolist()


@settings(max_examples=60, deadline=None)
@given(shape=st.tuples(st.integers(1, 400), st.integers(0, 7)) | st.just((0, 3)),
       high=st.integers(1, 10**12),
       seed=st.integers(0, 2**32 - 1))
def test_unique_rows_is_the_references(shape, high, seed):
    r = np.random.default_rng(seed)
    a = r.integers(-1, min(high, 3) if seed % 2 else high, size=shape, dtype=np.int64)
    a.setflags(write=False)  # read-only as an instance's cost: the kernel compiled for it
    rows, inv = E.unique_rows(a)
    ref_rows, ref_inv = unique_rows(a)
    assert np.array_equal(rows, ref_rows) and np.array_equal(inv, ref_inv)


def test_unique_rows_falls_back_on_a_hash_collision():
    w = row_weights(2)
    a = np.array([[w[1], 0], [0, w[0]], [w[1], 0]], dtype=np.int64)  # equal row hashes
    a.setflags(write=False)
    _, _, exact = setup_kernels.unique_rows(a, w)
    assert not exact
    rows, inv = E.unique_rows(a)
    ref_rows, ref_inv = unique_rows(a)
    assert len(rows) == 2 and np.array_equal(rows, ref_rows) and np.array_equal(inv, ref_inv)


# ---- sibling groups and the task orders -------------------------------------------------------------

def layered_instance(seed: int, width: int = 5, depth: int = 6, n_dev: int = 3) -> Any:
    """A layered DAG where tasks often share all their predecessors (sibling candidates), some
    tasks legal on one device (pinned), devices of two classes."""
    r = random.Random(seed)
    names = [f"D{d}" for d in range(n_dev)]
    devices = [{"name": nm, "class": "npu" if d == 0 else "pim", "weight_capacity": None}
               for d, nm in enumerate(names)]
    tasks: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    layers: list[list[str]] = []
    for lv in range(depth):
        layer = []
        shared = r.sample(layers[-1], min(len(layers[-1]), r.randint(1, 2))) if layers else []
        for i in range(r.randint(1, width)):
            tid = f"t{lv}_{i}"
            legal = [names[r.randrange(n_dev)]] if r.random() < 0.2 else \
                [nm for nm in names if r.random() < 0.8] or names[:2]
            tasks.append({"id": tid, "cost": {nm: r.randint(1, 40) for nm in legal},
                          "block": None, "kind": "op", "phase": "prefill", "step": 0})
            preds = shared if r.random() < 0.6 else \
                r.sample(layers[-1], min(len(layers[-1]), r.randint(1, 3))) if layers else []
            for p in preds:
                edges.append({"src": p, "dst": tid, "bytes": r.randint(0, 500)})
            layer.append(tid)
        layers.append(layer)
    return instance_from_dict({
        "schema": 1, "problem": "placement", "time_unit": "unit", "devices": devices,
        "links": {"topology": "full", "contention": True,
                  "default": {"latency": r.randint(0, 3), "bandwidth": r.choice([1.0, 7.0])},
                  "pairs": []},
        "tasks": tasks, "edges": edges, "blocks": [],
        "layout": {"formats": ["linear"], "default": "linear"}})


def _partition(gid: np.ndarray) -> set[frozenset[int]]:
    """The groups of ``gid`` as sets of tasks (−1: none)."""
    groups: dict[int, set[int]] = {}
    for t, g in enumerate(gid.tolist()):
        if g >= 0:
            groups.setdefault(g, set()).add(t)
    return {frozenset(s) for s in groups.values()}


@_SLOW
@given(seed=st.integers(0, 2**32 - 1), n_dev=st.integers(2, 9))
def test_sibling_groups_and_orders_are_the_references(seed, n_dev):
    inst = layered_instance(seed, n_dev=n_dev)
    p_off, p_idx = inst.predecessors
    gid, pinned, exact = setup_kernels.sibling_groups(
        E.as_int64(inst.cost), E.as_int64(p_off), E.as_int64(p_idx), E.as_int64(inst.edge_src))
    ref_gid, ref_pinned = B._sibling_data(inst)
    assert exact and np.array_equal(pinned, ref_pinned)
    assert _partition(gid) == _partition(ref_gid)
    rank = upward_rank(inst)
    assert E.upward_ranks(inst).tolist() == rank.tolist()
    order = priority_order(inst, rank)
    assert E.heft_order(inst).tolist() == order
    siblings = B.sibling_order(inst, order)
    assert B._static_order(inst, B.BifocalParams(ready_set="rank")).tolist() == siblings
    assert B._static_order(inst, B.BifocalParams(siblings=False)).tolist() == order


def test_the_order_falls_back_on_a_sibling_hash_collision(monkeypatch):
    inst = layered_instance(3)
    want = B._static_order(inst, B.BifocalParams())
    monkeypatch.setattr(E, "bifocal_order", lambda inst: (np.zeros(0, np.int64), False))
    assert np.array_equal(B._static_order(inst, B.BifocalParams()), want)
