"""The files a ``hetopt bench`` run writes beside its case files: ``results.jsonl`` (one case
per line), ``checks.csv`` (one check per row) and ``report.md`` (a summary, then per case its
table, its checks and relative links to the pages it wrote, e.g. viewer pages)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opt.app.bench.checks import DIFFERS, FAIL, PASS, REPRODUCED, Check, paper_text
from opt.app.bench.runner import BenchCase, CaseResult, summary, verdict_counts
from opt.common.report import fmt

Done = Sequence[tuple[BenchCase, CaseResult, bool]]
#: Columns of ``checks.csv``.
CSV_COLUMNS = ("suite", "case", "kind", "name", "ours", "expected", "paper", "tolerance",
               "verdict", "source", "reason")
_MARK = {PASS: "✅ pass", FAIL: "❌ FAIL", REPRODUCED: "✅ reproduced", DIFFERS: "≠ differs"}


def _cell(v: Any) -> str:
    """A Markdown table cell: the CLI tables' formatting (``opt.common.report.fmt``), pipes
    escaped."""
    return "–" if v is None or v == "" else fmt(v).replace("|", "\\|").replace("\n", " ")


def check_fields(c: Check) -> dict[str, Any]:
    """One check as the CSV / report columns (without suite and case)."""
    return {"kind": c.kind, "name": c.name, "ours": c.ours, "expected": c.expected,
            "paper": paper_text(c.paper), "tolerance": "" if c.tolerance is None
            else str(c.tolerance), "verdict": c.verdict, "source": c.source,
            "reason": c.shown_reason()}


def _links(res: CaseResult, root: Path, report_dir: Path) -> list[str]:
    """Markdown links (relative to ``report_dir``) to the case's artifacts under ``root``."""
    out = []
    for label, rel in res.artifacts.items():
        target = root / rel
        link = Path(os.path.relpath(target, report_dir)).as_posix()
        missing = "" if target.exists() else " (missing: rerun the case with --fresh)"
        out.append(f"- {label}: [{Path(rel).name}]({link}){missing}")
    return out


def _checks_table(checks: Sequence[Check]) -> list[str]:
    out = ["| verdict | kind | check | ours | expected / paper | tolerance | source | reason |",
           "|---|---|---|---|---|---|---|---|"]
    for c in checks:
        f = check_fields(c)
        ref = f["paper"] if c.kind == "paper" else c.expected
        out.append(f"| {_MARK[c.verdict]} | {c.kind} | {_cell(c.name)} | {_cell(c.ours)} | "
                   f"{_cell(ref)} | {_cell(f['tolerance'])} | {_cell(c.source)} | "
                   f"{_cell(f['reason'])} |")
    return out


def _case_section(case: BenchCase, res: CaseResult, root: Path, report_dir: Path) -> list[str]:
    out = ["", f"## {case.suite}/{case.name}: {_cell(res.title)}", ""]
    if res.headers:
        out.append("| " + " | ".join(_cell(h) for h in res.headers) + " |")
        out.append("|" + "---|" * len(res.headers))
        out += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in res.rows]
    if res.checks:
        out += ["", *_checks_table(res.checks)]
    if res.notes:
        out += ["", f"_{res.notes}_"]
    if res.artifacts:
        out += ["", "Pages written:", "", *_links(res, root, report_dir)]
    return out


def markdown(done: Done, root: Path, report_dir: Path) -> str:
    """The run as Markdown: the verdict counts, one line per case, then each case's table,
    checks and links (artifacts under ``root``, linked relative to ``report_dir``)."""
    n = verdict_counts(done)
    out = ["# hetopt bench report", "",
           f"{summary(done)}.", "",
           f"Invariants (correctness properties): **{n[PASS]} passed, {n[FAIL]} failed**; a "
           f"failure makes the bench exit non-zero. Paper figures: **{n[REPRODUCED]} "
           f"reproduced, {n[DIFFERS]} differ**; each that differs names the modelling choice "
           "and the doc "
           "with the evidence. Times come from a shared machine: read ratios, not seconds.",
           "", "| case | title | pass | fail | reproduced | differs | runtime s |",
           "|---|---|---|---|---|---|---|"]
    for case, res, cached in done:
        c = verdict_counts([(case, res, cached)])
        out.append(f"| {case.suite}/{case.name} | {_cell(res.title)} | {c[PASS]} | {c[FAIL]} "
                   f"| {c[REPRODUCED]} | {c[DIFFERS]} | "
                   f"{res.runtime_s:.1f}{' (cached)' if cached else ''} |")
    pages = [line for case, res, _ in done for line in _links(res, root, report_dir)]
    if pages:
        out += ["", "Viewer pages and other files the cases wrote:", "", *pages]
    for case, res, _ in done:
        out += _case_section(case, res, root, report_dir)
    return "\n".join(out) + "\n"


def write_reports(done: Done, out_dir: Path, *, root: Path | None = None) -> list[Path]:
    """Write ``results.jsonl``, ``checks.csv`` and ``report.md`` into ``out_dir``; artifacts
    are resolved under ``root`` (default ``out_dir``). Returns the three paths."""
    root = out_dir if root is None else root
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / "results.jsonl"
    with jsonl.open("w") as fh:
        for case, res, cached in done:
            fh.write(json.dumps({"suite": case.suite, "case": case.name, "cached": cached,
                                 **res.to_dict()}, default=str) + "\n")
    checks = out_dir / "checks.csv"
    with checks.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for case, res, _ in done:
            for c in res.checks:
                f = check_fields(c)
                w.writerow([case.suite, case.name, *(f[k] for k in CSV_COLUMNS[2:])])
    report = out_dir / "report.md"
    report.write_text(markdown(done, root, out_dir))
    return [jsonl, checks, report]
