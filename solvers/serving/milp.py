"""The ``milp`` back end of P3 serving plans (:mod:`solvers.serving.methods` describes it): the
MILP over the full template space (``models.serving.milp``), in a module of its own so that
the searches load no MILP stack."""

from __future__ import annotations

from heuristics.serving import search as ss
from models.options import SolveOptions
from models.serving.milp import solve_serving_milp_result
from opt.common.result import Result
from opt.serving.instance import ServingInstance
from solvers.registry import parsed_params
from solvers.serving import outcomes
from solvers.serving.methods import ENUM_MAX_OPS, initial_plan


def milp(inst: ServingInstance, options: SolveOptions) -> Result:
    """The exact MILP over the full template space (``models.serving.milp``, HiGHS); a proven
    infeasibility says why (the tightest plans of the searched spaces)."""
    params = parsed_params("milp", "serving", options.params)
    deadline = outcomes.deadline(options)
    res = solve_serving_milp_result(inst, options,
                                    initial_plan=initial_plan(inst, options.initial_solution),
                                    **params)
    if res.solution is None and res.status == "INFEASIBLE":
        got = (ss.full_space if inst.n_ops <= ENUM_MAX_OPS else ss.structured_space)(
            inst, deadline=deadline, max_sequences=ss.MAX_SEQUENCES)
        return outcomes.infeasible(inst, "milp", got.sequences, None, res.stats, deadline)
    return res
