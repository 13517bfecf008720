"""Options every exact back end receives from ``solvers.solve`` (solver knobs pass through)
and the deadline its model building and solving share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

#: the time limit of a solve (seconds) unless one is given: ``solvers.solve``, ``opt.api.solve``
#: and ``hetopt solve --time-limit`` share it
DEFAULT_TIME_LIMIT_S = 60.0
#: solver threads of a solve unless given (one: a run repeats under ``deterministic``):
#: ``solvers.solve``, ``opt.api.solve`` and ``hetopt solve --num-workers`` share it
DEFAULT_NUM_WORKERS = 1


@dataclass(frozen=True)
class SolveOptions:
    """time_limit: wall-clock limit (None = none); num_workers: solver threads; seed: random
    seed; initial_solution: a problems.md §1.2a solution dict used as a warm start / hint;
    params: back-end specific knobs passed through untouched (e.g. CP-SAT parameter names);
    export_path: write the model (MILP: .mps or .lp) before solving; deterministic: CP-SAT
    runs repeatably (the time limit is its deterministic time, interleaved search with several
    workers); log: the solver streams its progress to stderr."""

    time_limit: float | None = DEFAULT_TIME_LIMIT_S
    num_workers: int = DEFAULT_NUM_WORKERS
    seed: int = 0
    initial_solution: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    export_path: str | None = None
    deterministic: bool = False
    log: bool = False


class TimeLimitReached(Exception):
    """The time limit ran out before the solver ran: while the back end was building its
    model or preparing the solve (``stage``)."""

    def __init__(self, stage: str):
        super().__init__(f"the time limit ran out before the solver ran ({stage})")
        self.stage = stage


@dataclass(frozen=True)
class Deadline:
    """A ``time.perf_counter()`` value by which a back end stops (None = no limit), so that
    model building and solving share one time limit."""

    at: float | None = None

    @classmethod
    def after(cls, seconds: float | None, start: float | None = None) -> Deadline:
        """The deadline ``seconds`` after ``start`` (default: now); None seconds = none."""
        if seconds is None:
            return cls(None)
        return cls((time.perf_counter() if start is None else start) + float(seconds))

    def remaining(self) -> float | None:
        """Seconds left (≥ 0), None without a limit."""
        return None if self.at is None else max(0.0, self.at - time.perf_counter())

    def check(self, stage: str) -> None:
        """Raise :class:`TimeLimitReached` naming ``stage`` when the deadline has passed."""
        if self.at is not None and time.perf_counter() >= self.at:
            raise TimeLimitReached(stage)


#: the deadline of an unlimited run (immutable)
NO_DEADLINE = Deadline()
