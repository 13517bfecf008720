"""Options every exact back end receives from ``solvers.solve`` (solver knobs pass through)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SolveOptions:
    """time_limit: wall-clock limit (None = none); num_workers: solver threads; seed: random
    seed; initial_solution: a problems.md §1.2a solution dict used as a warm start / hint;
    params: back-end specific knobs passed through untouched (e.g. CP-SAT parameter names);
    export_path: write the model (MILP: .mps or .lp) before solving."""

    time_limit: float | None = 60.0
    num_workers: int = 1
    seed: int = 0
    initial_solution: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    export_path: str | None = None
