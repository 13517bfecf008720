"""The chain component's compiled paths (opt.placement.bound_jit, from JIT_TASKS tasks) give
the numpy paths' arrays and values: the decomposition and shape labels
(``chain_decompose``, ``segment_labels``) and the segment rows' values against a bound
(``segment_below``: per-cell minima and below-bound flags, rows stopped early or not)."""

from __future__ import annotations

import numpy as np
import pytest
from test_placement_milp import random_instance

import opt.placement.segment_bound as sb
from opt.placement import bound_options
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.chain_bound import _decompose, _shapes
from opt.placement.device_symmetry import interchangeable_devices

pytest.importorskip("numba")


def _instances(catalog, cards):
    """A 1-layer LLM build (head-sharded attention), one on identical PIMs (single KV
    layout: device groups), random instances with identical devices and loads."""
    yield build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                          Workload(64, 6, 4), BuildOptions(layers=1))
    yield build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                          Workload(32, 4, 2), BuildOptions(layers=1, kv_layout="single"))
    for seed in range(4):
        yield random_instance(seed, n_tasks=9, n_devices=3, identical=True, n_blocks=2)


def _both(monkeypatch, fn):
    """fn() with the numpy path, then with the compiled one."""
    monkeypatch.setattr(bound_options, "JIT_TASKS", 10 ** 12)
    plain = fn()
    monkeypatch.setattr(bound_options, "JIT_TASKS", 0)
    return plain, fn()


def test_compiled_decomposition_and_labels_match_numpy(monkeypatch, catalog, cards):
    for inst in _instances(catalog, cards):
        plain, comp = _both(monkeypatch, lambda inst=inst: _decompose(inst))
        for name in ("order", "cuts", "starts", "ends", "has_prev", "has_end", "lu", "lv",
                     "eb", "e_off", "seg_rmax"):
            np.testing.assert_array_equal(getattr(comp, name), getattr(plain, name), name)
        s_plain, s_comp = _both(monkeypatch, lambda inst=inst, ch=plain: _shapes(inst, ch))
        assert list(s_comp) == list(s_plain)
        for key, members in s_plain.items():
            assert list(s_comp[key]) == list(members)
            for data, segs in members.items():
                np.testing.assert_array_equal(s_comp[key][data], segs)


def _rows(inst, seg, budget):
    """(legal, cost, rel, tt, enum, dev, first) of a segment evaluation (numpy path)."""
    nd = inst.n_devices
    legal = seg.cost >= 0
    cost = seg.cost.copy()
    if seg.has_prev:
        cost[0] = np.where(legal[0], 0, -1)
    rel = np.zeros_like(cost) if seg.release is None else seg.release
    tt = inst.links.transfer_durations(seg.ebytes) if len(seg.ebytes) else \
        np.zeros((0, nd, nd), dtype=np.int64)
    enum = sb._enumerated_columns(seg, legal, cost, tt, budget)
    dev = sb._assigned_devices(legal, enum, interchangeable_devices(inst), nd)
    return legal, cost, rel, tt, enum, dev, int(seg.has_prev)


@pytest.mark.parametrize("thresholds", [False, True])
def test_segment_below_matches_numpy_values(thresholds, catalog, cards):
    from opt.placement import bound_jit

    rng = np.random.default_rng(5)
    for inst in _instances(catalog, cards):
        ch = _decompose(inst)
        nd = inst.n_devices
        for k in range(ch.n_seg):
            seg = ch.segment(k)
            if seg.has_prev and k % 2:  # some segments with release times
                seg.release = rng.integers(0, 30, seg.cost.shape)
                seg.release[0] = 0
            n = seg.cost.shape[0]
            for budget in (1, 40, 3000):
                legal, cost, rel, tt, enum, dev, first = _rows(inst, seg, budget)
                inner = [j for j in np.flatnonzero(enum).tolist()
                         if not (seg.has_prev and j == 0) and not (seg.has_end and j == n - 1)]
                if k % 3 == 0 and inner:  # a partial assignment, as in branching
                    dev = dev.copy()
                    dev[:, inner[-1]] = -1
                    enum = (dev >= 0).all(axis=0)
                cols = np.arange(n)[None, :]
                c = np.where(enum, cost[cols, np.maximum(dev, 0)],
                             np.where(legal, cost, sb.BIG).min(axis=1))
                r = np.where(enum, rel[cols, np.maximum(dev, 0)],
                             np.where(legal, rel, sb.BIG).min(axis=1))
                edur = sb._edge_durations(seg, legal, tt, enum, dev)
                want = sb._assignment_values(seg, dev, c, r, edur, first, nd, thresholds)
                cell = sb.cell_index(seg, dev, nd)
                tables = sb.kernel_tables(seg, legal, cost, rel, tt)
                least = np.full(nd * nd, np.inf)
                np.minimum.at(least, cell, want)
                for ordered in (False, True):
                    got = np.full(nd * nd, np.inf)
                    sb.compiled_below(bound_jit, tables, enum, dev, first, cell, got, True,
                                      thresholds, ordered)
                    np.testing.assert_array_equal(got, least)
                    limit = rng.permutation(np.concatenate([want, [np.inf]]))[:nd * nd]
                    limit = np.resize(limit, nd * nd)
                    below = sb.compiled_below(bound_jit, tables, enum, dev, first, cell,
                                              limit.copy(), False, thresholds, ordered)
                    np.testing.assert_array_equal(below, want < limit[cell])
