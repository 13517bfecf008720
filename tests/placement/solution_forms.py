"""Run a validator test module against both forms of a solution: rows (a plain §1.2a dict) and
columns (:class:`ColumnarSolution`). Import :func:`solution_form` into a test module: the module
then runs twice, and in the columns run every ``validate_placement`` call (also through
``solvers.certify.certify``) also checks the same solution, as fresh columns, on the columnar path
alone — it must never accept what the row path rejects, and must agree on the metrics — and
returns or raises exactly what the row path does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import opt.placement.validator as V
from opt.placement.schedule_error import ScheduleError, Undecided
from opt.placement.solution_tables import ColumnarSolution, columnar_from_rows


def as_rows(sol: Any) -> Any:
    """A plain dict copy of ``sol`` (its rows when columnar)."""
    return copy.deepcopy(sol.rows() if isinstance(sol, ColumnarSolution) else sol)


def _outcome(fn, *args) -> tuple[str, Any]:
    try:
        return "ok", fn(*args)
    except ScheduleError as exc:
        return "invalid", str(exc)


def checked(original):
    """``validate_placement`` that also runs the columnar path on the columns of the same
    rows and checks it against the row path (whose outcome it returns or raises)."""
    def validate(inst, sol):
        rows = as_rows(sol)
        expected = _outcome(original, inst, rows)
        col = columnar_from_rows(copy.deepcopy(rows))
        if col is not None:
            assert _outcome(original, inst, col) == expected
            try:
                fast: tuple[str, Any] = ("ok", V._validate_columns(inst, col))
            except (Undecided, ScheduleError) as exc:
                fast = ("rejected", repr(exc))
            if expected[0] == "invalid":
                assert fast[0] == "rejected", (expected, fast)
            elif fast[0] == "ok":
                assert fast[1] == expected[1]
        if expected[0] == "invalid":
            raise ScheduleError(expected[1])
        return expected[1]
    return validate


@pytest.fixture(scope="module", params=["rows", "columns"], autouse=True)
def solution_form(request):
    """Module-wide: validate solutions as rows, or as columns cross-checked with rows."""
    original = V.validate_placement
    if request.param == "rows":
        def patched(inst, sol):
            return original(inst, as_rows(sol))
    else:
        patched = checked(original)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(V, "validate_placement", patched)
        m.setattr("solvers.certify.validate_placement", patched)  # certify's own import
        if hasattr(request.module, "validate_placement"):
            m.setattr(request.module, "validate_placement", patched)
        yield request.param
