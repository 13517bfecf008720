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

from opt.common.jsonio import read_json, write_json_atomic
from opt.common.report import fmt, table


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
              echo: Callable[[str], None] = print,
              on_done: Callable[[BenchCase, CaseResult, bool], None] | None = None
              ) -> list[tuple[BenchCase, CaseResult, bool]]:
    """Run ``cases`` writing ``out_dir/<suite>/<name>.json`` after each; with ``resume`` a case
    whose file exists is loaded instead of rerun; ``on_done(case, result, cached)`` is called as
    each finishes (e.g. to print its table at once). Returns (case, result, was_cached)
    triples."""
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
            write_json_atomic(asdict(result), path)
        done.append((case, result, cached))
        if on_done is not None:
            on_done(case, result, cached)
    return done


def render_case(case: BenchCase, res: CaseResult, cached: bool) -> str:
    """One case's block of the report: its table, its checks and notes."""
    head = f"== {case.suite}/{case.name}: {res.title}"
    head += f"  ({res.runtime_s:.2f} s{', cached' if cached else ''})"
    parts = [head, table(res.headers, res.rows)]
    for c in res.checks:
        mark = "ok  " if c.passed else "FAIL"
        parts.append(f"  [{mark}] {c.name}: got {c.value}, reference {c.expected}")
    if res.notes:
        parts.append(f"  note: {res.notes}")
    parts.append("")
    return "\n".join(parts)


def summary(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """The closing line of a bench run: cases and reproduced figures passed / failed."""
    checks = [c for _, res, _ in done for c in res.checks]
    n_pass = sum(c.passed for c in checks)
    return (f"bench: {len(done)} cases; reproduced figures: {n_pass} passed, "
            f"{len(checks) - n_pass} failed")


def render(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """Human-readable report of a bench run: every table, its checks, and a summary line."""
    return "\n".join([*(render_case(*d) for d in done), summary(done)])


def _md_cell(v: Any) -> str:
    """A Markdown table cell: the CLI tables' formatting (``opt.common.report.fmt``), pipes escaped."""
    return "–" if v is None else fmt(v).replace("|", "\\|")


def markdown(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """The bench run as a Markdown report: a summary of every check, then each case's table."""
    n_pass = sum(c.passed for _, r, _ in done for c in r.checks)
    n_fail = sum(not c.passed for _, r, _ in done for c in r.checks)
    out = ["# hetopt bench report", "",
           f"{len(done)} cases; reproduced figures: **{n_pass} passed, {n_fail} failed**. "
           "Times come from a shared machine: read ratios, not seconds.", "",
           "| case | title | checks | runtime s |", "|---|---|---|---|"]
    for case, res, cached in done:
        ok = sum(c.passed for c in res.checks)
        out.append(f"| {case.suite}/{case.name} | {_md_cell(res.title)} | {ok}/{len(res.checks)}"
                   f" | {res.runtime_s:.1f}{' (cached)' if cached else ''} |")
    for case, res, _ in done:
        out += ["", f"## {case.suite}/{case.name}: {_md_cell(res.title)}", ""]
        if res.headers:
            out.append("| " + " | ".join(_md_cell(h) for h in res.headers) + " |")
            out.append("|" + "---|" * len(res.headers))
            for row in res.rows:
                out.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
        if res.checks:
            out.append("")
            for c in res.checks:
                out.append(f"- {'✅' if c.passed else '❌'} {_md_cell(c.name)}: got "
                           f"`{_md_cell(c.value)}`, reference `{_md_cell(c.expected)}`")
        if res.notes:
            out += ["", f"_{res.notes}_"]
    return "\n".join(out) + "\n"


def write_reports(done: Sequence[tuple[BenchCase, CaseResult, bool]], out_dir: Path) -> list[Path]:
    """Write ``results.jsonl`` (one case per line), ``checks.csv`` (one reproduced figure per
    row) and ``report.md`` into ``out_dir``; returns their paths."""
    import csv
    import json

    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / "results.jsonl"
    with jsonl.open("w") as fh:
        for case, res, cached in done:
            fh.write(json.dumps({"suite": case.suite, "case": case.name, "cached": cached,
                                 **asdict(res)}, default=str) + "\n")
    checks = out_dir / "checks.csv"
    with checks.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["suite", "case", "check", "value", "expected", "passed"])
        for case, res, _ in done:
            for c in res.checks:
                w.writerow([case.suite, case.name, c.name, c.value, c.expected, c.passed])
    report = out_dir / "report.md"
    report.write_text(markdown(done))
    return [jsonl, checks, report]
