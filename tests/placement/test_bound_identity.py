"""Speed work on the certified lower bound keeps every component bit-identical: the component
values (and details, wall times aside) and the digests of the cheapest
heads and tails and of the chain tails equal those recorded with the code before the speed
changes (``benchmarks/bound_identity.py``; data/bound_values.json). The cases whose bound
takes several seconds run with ``-m slow``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_ROOT = Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("bound_identity",
                                               _ROOT / "benchmarks" / "bound_identity.py")
assert _spec and _spec.loader
bound_identity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bound_identity)

REFERENCE = json.loads((Path(__file__).parent / "data" / "bound_values.json").read_text())
CASES = dict(bound_identity.cases())
#: cases whose bound takes seconds (device_path and branch and bound on 1,000+ tasks)
SLOW = ("llama-2-13b", "llama-2-7b", "dops-qwen-1.8b-HP32-64-", "random-3000")


def test_every_case_has_a_reference():
    assert set(CASES) == set(REFERENCE)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n.startswith(SLOW) else n for n in sorted(REFERENCE)])
def test_bound_matches_the_reference(name):
    inst = CASES[name]()
    for opt_name, kwargs in bound_identity.OPTIONS.items():
        assert bound_identity.bound_values(inst, kwargs) == REFERENCE[name][opt_name], opt_name


#: cases also run with the compiled loops forced (numba, normally only from JIT_TASKS = 4,000 tasks)
COMPILED = ("heft-topcuoglu-2002", "sinnen-Nodes_8_Random-p2", "p1-llama-2-7b-hp32-p64-d2-l2",
            "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5", "dops-qwen-1.8b-HP32-256-8-8-2-0.5",
            "random-300")


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_loops_match_the_reference(name, monkeypatch):
    pytest.importorskip("numba")
    from opt.placement import bound_options

    monkeypatch.setattr(bound_options, "JIT_TASKS", 0)
    inst = CASES[name]()
    for opt_name, kwargs in bound_identity.OPTIONS.items():
        assert bound_identity.bound_values(inst, kwargs) == REFERENCE[name][opt_name], opt_name


def test_unique_cost_rows_is_numpys_unique():
    import numpy as np

    from opt.placement.work_bound import unique_cost_rows

    rng = np.random.default_rng(3)
    for shape in [(0, 3), (1, 1), (50, 1), (2000, 5), (500, 7)]:
        a = rng.integers(-1, 4, size=shape) * rng.choice([1, 10**12], size=shape)
        got, want = unique_cost_rows(a), np.unique(a, axis=0, return_counts=True)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_row_labels_are_the_first_equal_rows():
    import numpy as np

    from opt.placement.chain_bound import _row_labels

    rng = np.random.default_rng(4)
    for w in (1, 7, 8, 13):
        keys = rng.integers(0, 3, size=(3000, w)).astype(np.uint8)
        first: dict[bytes, int] = {}
        want = [first.setdefault(row.tobytes(), i) for i, row in enumerate(keys)]
        assert _row_labels(keys).tolist() == want
