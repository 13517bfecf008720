"""The time-indexed MILP's row matrix (models.placement.milp_time._Rows.csr): the rows in the
order added, each row's columns ascending, duplicate entries summed, zeros dropped — the
same matrix as the terms summed densely."""

from __future__ import annotations

import numpy as np

from models.placement.milp_time import _Rows, build_time_model
from models.placement.milp_time_solve import prep_of
from tests.placement.test_milp_time import identical_instance
from tests.placement.test_placement_milp import brute_force


def _dense(rows: _Rows, width: int) -> np.ndarray:
    """The terms of ``rows`` summed into a dense matrix (rows × width)."""
    out = np.zeros((rows.n, width))
    np.add.at(out, (np.concatenate(rows.rows), np.concatenate(rows.cols)),
              np.concatenate(rows.vals))
    return out


def _check(rows: _Rows, width: int) -> None:
    starts, index, value, lower, upper = rows.csr()
    assert starts.dtype == index.dtype == np.int64
    assert len(starts) == rows.n + 1 and len(lower) == len(upper) == rows.n
    got = np.zeros((rows.n, width))
    for r in range(rows.n):
        cols = index[starts[r]:starts[r + 1]]
        assert list(cols) == sorted(set(cols))  # ascending, no duplicate
        got[r, cols] = value[starts[r]:starts[r + 1]]
    assert np.all(value != 0)
    assert np.array_equal(got, _dense(rows, width))


def test_duplicates_summed_zeros_dropped_columns_sorted():
    rows = _Rows()
    rows.add([(np.array([3, 0]), 1.0), (np.array([1, 0]), -1.0), (np.array([3, -1]), 2.0)],
             -np.inf, 0.0)  # row 0: 3 + 3 → 3.0 on col 3, col 1 -1; row 1: col 0 cancels out
    rows.add([(np.array([2]), 1.0)], 1.0, 1.0)
    starts, index, value, lower, upper = rows.csr()
    assert starts.tolist() == [0, 2, 2, 3]
    assert index.tolist() == [1, 3, 2] and value.tolist() == [-1.0, 3.0, 1.0]
    assert lower.tolist() == [-np.inf, -np.inf, 1.0] and upper.tolist() == [0.0, 0.0, 1.0]
    _check(rows, 4)


def test_no_rows():
    starts, index, value, lower, upper = _Rows().csr()
    assert starts.tolist() == [0] and not len(index) and not len(value) and not len(lower)


def test_a_time_model_matches_its_dense_sum(monkeypatch):
    """Every row family of a real model, checked against the dense sum of its terms."""
    seen: list[_Rows] = []
    real = _Rows.csr

    def keep(self):
        seen.append(self)
        return real(self)

    monkeypatch.setattr(_Rows, "csr", keep)
    inst = identical_instance(5, n_devices=2, comm=True)
    prep, _ = prep_of(inst, True)
    tm = build_time_model(inst, prep, horizon=brute_force(inst) + 3, lb=0)
    [rows] = seen
    _check(rows, tm.num_col)
