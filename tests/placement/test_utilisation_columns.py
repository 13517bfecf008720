"""The utilisation shares of a sweep record read a columnar schedule's columns (docs/speed.md,
"Sweeps") and give what its event rows give."""

import numpy as np

from heuristics.placement.static_policies import static_schedule
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.solution_tables import ColumnarSolution
from opt.placement.utilisation import class_shares, compute_events
from opt.placement.validator import validate_placement


def test_columns_and_rows_give_the_same_events_and_shares(catalog, cards):
    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP32"), catalog,
                           Workload(16, 4, 2), BuildOptions(layers=2))
    for policy in ("pd", "af"):
        sol = static_schedule(inst, policy)
        assert isinstance(sol, ColumnarSolution) and not sol.rows_built
        ms = validate_placement(inst, sol).makespan
        cols, shares = compute_events(inst, sol), class_shares(inst, sol, ms)
        assert not sol.rows_built  # read from the columns
        rows = sol.rows()  # a plain dict: the row path
        for a, b in zip(cols, compute_events(inst, rows)):
            assert np.array_equal(a, b)
        assert class_shares(inst, rows, ms) == shares
        assert 0 < shares["u_pim"] < 1 and 0 < shares["u_npu"] < 1
