"""``hetopt bench``: the bundled benchmark suite, run case by case with results written as they
finish (one JSON file per case) so an interrupted run resumes without redoing finished cases.

A case returns a :class:`CaseResult`: a table (headers, rows), named checks of reproduced
figures (each pass/fail with the values compared) and free-form data. Speed cases report ratios
against a baseline measured in the same run, never absolute-time assertions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opt.jsonio import read_json, write_json
from opt.report import table


@dataclass
class Check:
    """A reproduced figure: ``name``, what we got, what the reference says, pass/fail."""

    name: str
    value: Any
    expected: Any
    passed: bool


@dataclass
class CaseResult:
    title: str
    headers: list[str]
    rows: list[list[Any]]
    checks: list[Check] = field(default_factory=list)
    notes: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    runtime_s: float = 0.0


@dataclass(frozen=True)
class BenchCase:
    """One benchmark case of a suite; ``run`` does the work and returns a :class:`CaseResult`."""

    suite: str
    name: str
    run: Callable[[], CaseResult]


def _result_from_dict(d: dict[str, Any]) -> CaseResult:
    checks = [Check(**c) for c in d.pop("checks", [])]
    return CaseResult(checks=checks, **d)


def run_cases(cases: Sequence[BenchCase], out_dir: Path, *, resume: bool = True,
              echo: Callable[[str], None] = print) -> list[tuple[BenchCase, CaseResult, bool]]:
    """Run ``cases`` writing ``out_dir/<suite>/<name>.json`` after each; with ``resume`` a case
    whose file exists is loaded instead of rerun. Returns (case, result, was_cached) triples."""
    done = []
    for i, case in enumerate(cases, 1):
        path = out_dir / case.suite / f"{case.name}.json"
        cached = resume and path.exists()
        if cached:
            result = _result_from_dict(read_json(path))
        else:
            echo(f"[{i}/{len(cases)}] {case.suite}/{case.name} ...")
            t0 = time.perf_counter()
            result = case.run()
            result.runtime_s = time.perf_counter() - t0
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".json.tmp")
            write_json(asdict(result), tmp)
            tmp.replace(path)
        done.append((case, result, cached))
    return done


def render(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """Human-readable report of a bench run: every table, its checks, and a summary line."""
    parts = []
    n_pass = n_fail = 0
    for case, res, cached in done:
        head = f"== {case.suite}/{case.name}: {res.title}"
        head += f"  ({res.runtime_s:.2f} s{', cached' if cached else ''})"
        parts.append(head)
        parts.append(table(res.headers, res.rows))
        for c in res.checks:
            mark = "ok  " if c.passed else "FAIL"
            parts.append(f"  [{mark}] {c.name}: got {c.value}, reference {c.expected}")
            n_pass += c.passed
            n_fail += not c.passed
        if res.notes:
            parts.append(f"  note: {res.notes}")
        parts.append("")
    parts.append(f"bench: {len(done)} cases; reproduced figures: {n_pass} passed, {n_fail} failed")
    return "\n".join(parts)
