"""Solver results (problems.md §0): one JSON object per run, whatever the method.

``objective`` is always recomputed from ``solution`` by the validator (never copied from a
solver); ``lower_bound`` is a proven bound or None; ``gap = (objective − lower_bound)/objective``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opt.common.jsonio import Fields, read_json, write_json

SCHEMA = 1
STATUSES = ("OPTIMAL", "FEASIBLE", "INFEASIBLE", "TIME_LIMIT_NO_SOLUTION", "ERROR")


@dataclass
class Result:
    """The outcome of one solve. ``solution`` is the problem's solution dict (or None)."""

    problem: str
    method: str
    status: str
    objective: float | None = None
    lower_bound: float | None = None
    gap: float | None = None
    runtime_s: float = 0.0
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    solution: dict[str, Any] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def has_solution(self) -> bool:
        return self.solution is not None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    def write(self, path: str | Path) -> None:
        write_json(self.to_dict(), path, indent=None if _big(self.solution) else 1)


def _big(solution: dict[str, Any] | None) -> bool:
    return bool(solution) and len(solution.get("compute", ())) > 2000


def gap_of(objective: float | None, lower_bound: float | None) -> float | None:
    """(objective − lower_bound) / objective, or None when either is missing."""
    if objective is None or lower_bound is None:
        return None
    if objective == 0:
        return 0.0
    return max(0.0, (objective - lower_bound) / objective)


def result_from_dict(obj: Any, source: str | None = None) -> Result:
    f = Fields(obj, source, "")
    f.check_keys({"schema"} | set(Result.__dataclass_fields__))
    if f.get("schema", SCHEMA) != SCHEMA:
        raise f.error("schema", f"unsupported schema {obj.get('schema')!r}; this version reads "
                                f"{SCHEMA}")
    status = f.str("status")
    if status not in STATUSES:
        raise f.error("status", f"unknown status '{status}'; known: {', '.join(STATUSES)}")
    sol = f.get("solution", None)
    if sol is not None and not isinstance(sol, dict):
        raise f.error("solution", "expected an object or null")
    return Result(problem=f.str("problem"), method=f.str("method"), status=status,
                  objective=f.num("objective", None, minimum=None),
                  lower_bound=f.num("lower_bound", None, minimum=None),
                  gap=f.num("gap", None, minimum=None), runtime_s=f.num("runtime_s", 0.0),
                  seed=f.int("seed", None, minimum=None), params=f.get("params", {}) or {},
                  solution=sol, stats=f.get("stats", {}) or {})


def read_result(path: str | Path) -> Result:
    return result_from_dict(read_json(path), source=str(path))

