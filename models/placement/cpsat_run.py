"""Running a CP-SAT model: the solver with the options' workers, seed, time limit (wall clock
or CP-SAT's deterministic time) and parameters, interruptible by Ctrl-C, and the typed
:class:`opt.common.result.Result` of a run (status, objective, bound, statistics)."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from ortools.sat.python import cp_model

from models.interrupt import interruptible
from models.options import SolveOptions
from opt.common.result import Result

_STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE",
           cp_model.INFEASIBLE: "INFEASIBLE", cp_model.UNKNOWN: "TIME_LIMIT_NO_SOLUTION",
           cp_model.MODEL_INVALID: "ERROR"}



def make_solver(params: dict[str, Any], options: SolveOptions, time_limit: float | None
                ) -> cp_model.CpSolver:
    """A CP-SAT solver with ``options``' workers and seed, ``time_limit`` (None = none) and
    the CP-SAT ``params`` by field name (repeated fields as lists). ``options.deterministic``:
    the limit is CP-SAT's deterministic time (``max_deterministic_time``, roughly seconds but
    independent of the machine's load) and several workers interleave their search, so two
    runs give the same result; ``options.log``: the search progress goes to stderr."""
    solver = cp_model.CpSolver()
    sp = solver.parameters
    if time_limit is not None:
        if options.deterministic:
            sp.max_deterministic_time = float(time_limit)
            sp.max_time_in_seconds = DETERMINISTIC_BACKSTOP * float(time_limit)
        else:
            sp.max_time_in_seconds = float(time_limit)
    sp.num_workers = int(options.num_workers)
    sp.random_seed = int(options.seed)
    if options.deterministic and options.num_workers > 1:
        sp.interleave_search = True
    if options.log:
        sp.log_search_progress = True
        sp.log_to_stdout = False
        solver.log_callback = _log_line
    for key, value in params.items():
        if isinstance(value, (list, tuple)):  # repeated fields, e.g. subsolvers
            field = getattr(sp, key)
            field.clear()
            field.extend(value)
        else:
            setattr(sp, key, value)
    # Ctrl-C is ours, not CP-SAT's: its own handler would end the search as if the time ran
    # out (FEASIBLE); models.interrupt stops it and raises KeyboardInterrupt instead
    sp.catch_sigint_signal = False
    return solver


#: with ``deterministic``, CP-SAT also stops after this many times the limit in wall-clock
#: seconds (its deterministic time can run far slower than the clock on a loaded machine);
#: a run stopped so is not repeatable and says so (``stats["deterministic"]`` false)
DETERMINISTIC_BACKSTOP = 100.0


def _log_line(line: str) -> None:
    """One line of the CP-SAT log on stderr (stdout stays for the results)."""
    print(line, file=sys.stderr, flush=True)


def run_cpsat(cp: cp_model.CpModel, params: dict[str, Any], options: SolveOptions, t0: float,
              method: str, extract, extra: dict[str, Any]) -> Result:
    """Solve a built CP-SAT model with ``options`` and CP-SAT ``params`` (repeated fields as
    lists), and wrap the outcome: ``extract(solver)`` gives the solution dict."""
    build_s = time.perf_counter() - t0
    remaining = options.time_limit  # the build counts against a wall-clock limit
    if remaining is not None and not options.deterministic:
        remaining = max(1e-3, remaining - build_s)
    solver = make_solver(params, options, remaining)
    with interruptible(solver.stop_search):  # Ctrl-C: KeyboardInterrupt, not a result
        code = solver.solve(cp)
    status = _STATUS.get(code, "ERROR")
    solution = extract(solver) if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    lb = None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        lb = float(math.ceil(solver.best_objective_bound - 1e-6))
    proto = cp.proto
    deterministic = options.deterministic
    if deterministic and remaining is not None and \
            solver.wall_time >= DETERMINISTIC_BACKSTOP * remaining * 0.999:
        deterministic = False
        extra = {**extra, "message": f"CP-SAT stopped at the wall-clock backstop "
                                     f"({DETERMINISTIC_BACKSTOP:g}x the limit) before its "
                                     f"deterministic time: this run is not repeatable"}
    if status == "ERROR":  # an ERROR always says why
        extra = {**extra, "message": f"CP-SAT: {solver.status_name(code)}: "
                                     f"{cp.validate() or solver.response_proto.solution_info}"}
    return Result(
        problem="placement", method=method, status=status,
        objective=float(solver.objective_value) if solution is not None else None,
        lower_bound=lb, runtime_s=time.perf_counter() - t0, seed=options.seed,
        params={"time_limit": options.time_limit, "num_workers": options.num_workers,
                **options.params},
        solution=solution,
        stats={**extra, "build_s": build_s, "solve_s": solver.wall_time,
               "branches": solver.num_branches, "conflicts": solver.num_conflicts,
               "variables": len(proto.variables), "constraints": len(proto.constraints),
               "solver": f"ortools {cp_model.__name__} {ortools_version()}",
               "deterministic": deterministic,
               "deterministic_time": solver.response_proto.deterministic_time,
               "warm_start": options.initial_solution is not None})


def ortools_version() -> str:
    from importlib.metadata import version

    return version("ortools")
