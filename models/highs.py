"""HiGHS through Pyomo's appsi interface, shared by the MILPs (placement, serving)."""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import Any

import pyomo.environ as pyo

from models.interrupt import interruptible

#: HiGHS' complaint when a run asks for another thread count than the OS thread's pool has.
SCHEDULER_CLASH = "scheduler has already been initialized"
_LOG = logging.getLogger(__name__)


def highs_solver() -> Any:
    """A fresh appsi HiGHS solver (RuntimeError when highspy is missing)."""
    from pyomo.contrib.appsi.solvers import Highs

    solver = Highs()
    if not solver.available():
        raise RuntimeError("HiGHS is not available to Pyomo (install highspy)")
    return solver


class LogCapture(logging.Handler):
    """Keeps HiGHS' log lines (and forwards them to this module's logger at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage().rstrip()
        if msg.strip():
            self.lines.append(msg)
            _LOG.debug("highs: %s", msg)


#: Pyomo's appsi HiGHS logger: it warns of the status HiGHS ends with when it was stopped
APPSI_LOGGER = "pyomo.contrib.appsi.solvers.highs"


class DropInterrupted(logging.Filter):
    """Drops appsi's warning about HiGHS' ``kInterrupt`` status: a stop asked for by Ctrl-C
    (:func:`models.interrupt.interruptible`), which is then raised as KeyboardInterrupt."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "kInterrupt" not in record.getMessage()


def run_highs_once(model: pyo.ConcreteModel, highs_options: dict[str, Any],
                   deadline: float | None, warmstart: bool, stream: bool = False
                   ) -> tuple[Any, Any, list[str]]:
    """One HiGHS run through Pyomo's appsi interface; returns (solver, results, log lines).
    ``deadline``: ``time.perf_counter()`` value by which to stop (the model hand-over to HiGHS
    counts against it); ``warmstart``: hand the variables' current values over as a MIP start;
    ``stream``: HiGHS' log lines also go to stderr as they come."""
    solver = highs_solver()
    solver.set_instance(model)
    upd = solver.update_config  # the model does not change between hand-over and solve
    for key in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                "check_for_new_or_removed_params", "check_for_new_objective",
                "update_constraints", "update_vars", "update_params",
                "update_named_expressions", "update_objective"):
        setattr(upd, key, False)
    capture = LogCapture()
    sink = logging.Logger("hetopt.highs", logging.INFO)  # private, unregistered: no propagation
    sink.addHandler(capture)
    if stream:
        sink.addHandler(logging.StreamHandler(sys.stderr))
    cfg = solver.config
    cfg.load_solution = False
    cfg.stream_solver = False
    cfg.solver_output_logger = sink
    cfg.log_level = logging.INFO
    cfg.mip_gap = 0.0
    if deadline is not None:
        cfg.time_limit = max(0.0, deadline - time.perf_counter())
    cfg.warmstart = warmstart
    solver.highs_options = dict(highs_options)
    highs = solver._solver_model  # highspy.Highs: its interrupt callback polls cancelSolve
    highs.HandleUserInterrupt = True
    appsi_log = logging.getLogger(APPSI_LOGGER)
    quiet = DropInterrupted()
    appsi_log.addFilter(quiet)
    try:
        with interruptible(highs.cancelSolve):  # Ctrl-C: KeyboardInterrupt, not a result
            res = solver.solve(model)
    finally:
        appsi_log.removeFilter(quiet)
    return solver, res, capture.lines


def run_highs(model: pyo.ConcreteModel, highs_options: dict[str, Any], deadline: float | None,
              warmstart: bool, stream: bool = False) -> tuple[Any, Any, list[str], bool]:
    """:func:`run_highs_once`, run again after resetting HiGHS' thread pool when the first
    run hit :data:`SCHEDULER_CLASH` (HiGHS keeps one pool per OS thread; another ``threads``
    needs a fresh one). Returns (solver, results, log lines, whether the pool was reset)."""
    solver, res, log = run_highs_once(model, highs_options, deadline, warmstart, stream)
    reset = any(SCHEDULER_CLASH in line for line in log)
    if reset:
        import highspy

        highspy.Highs.resetGlobalScheduler(True)
        solver, res, log = run_highs_once(model, highs_options, deadline, warmstart, stream)
    return solver, res, log, reset


def count_binaries(model: pyo.ConcreteModel, *, free_only: bool = False) -> int:
    """Binary variables of ``model`` (``free_only``: not fixed)."""
    return sum(1 for v in model.component_data_objects(pyo.Var)
               if v.is_binary() and not (free_only and v.fixed))


def mip_progress(lines: list[str], start_objective: float | None) -> dict[str, Any]:
    """From HiGHS' MIP log: ``root_bound``, the last finite best bound while no node was
    processed yet (the root node's, cuts included) or, when the root's bound was never logged
    as finite, the first finite one (``root_bound_nodes``: nodes processed then), and ``first_better``, (objective, seconds) of the first
    incumbent below ``start_objective`` (the MIP start's) as {objective, s}, both None when
    absent."""
    root, first = None, None
    in_table = False
    for ln in lines:
        if "BestBound" in ln and "BestSol" in ln:
            in_table = True
            continue
        if not in_table:
            continue
        parts = ln.split()
        if not parts or not parts[-1].endswith("s"):
            if parts and parts[0] in ("Solving", "Status"):
                in_table = False
            continue
        if parts[0].isalpha() and len(parts[0]) <= 2:
            parts = parts[1:]  # the solution source letter (H, T, R, …)
        try:
            proc = int(parts[0])
            bound, sol = float(parts[4]), parts[5]
            secs = float(parts[-1].rstrip("s"))
        except (ValueError, IndexError):
            continue
        if math.isfinite(bound) and (root is None or proc == 0):
            if root is None or root[1] == 0:
                root = (bound, proc)
        if first is None and start_objective is not None and sol not in ("inf", "-inf"):
            try:
                if float(sol) < start_objective - 1e-6:
                    first = {"objective": float(sol), "s": secs}
            except ValueError:
                pass
    return {"root_bound": None if root is None else root[0],
            "root_bound_nodes": None if root is None else root[1], "first_better": first}
