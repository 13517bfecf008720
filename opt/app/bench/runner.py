"""``hetopt bench``: the bundled benchmark suite, run case by case with results written as they
finish (one JSON file per case) so an interrupted run resumes without redoing finished cases.

A case returns a :class:`CaseResult`: a table (headers, rows), its checks (invariants and paper
figures, :mod:`opt.app.bench.checks`), free-form data and the files it wrote (``artifacts``,
e.g. viewer pages, paths relative to the bench folder). Speed cases report ratios against a
baseline measured in the same run, never absolute-time assertions.

A cached case file is trusted only when it is a complete file of this format for this case and
its digest holds (sealed like the sweep records, :mod:`opt.common.fingerprint`), and every
check's verdict is recomputed from its numbers when it is read: a torn, foreign, old-format or
edited file is recomputed with a one-line note, never a crash and never a stale verdict.

Only verdicts are cached, never failures: a case that raised or was interrupted (Ctrl-C) writes
no file; a case with a failed invariant writes its file (the report shows it) but a rerun
recomputes it rather than replaying the failure. A case that raised is reported as a failed
invariant "ran to completion" naming the error, and the other cases still run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from opt.app.bench.checks import (
    DIFFERS,
    FAIL,
    PASS,
    REPRODUCED,
    VERDICTS,
    Check,
    invariant,
    paper_text,
)
from opt.common.errors import InputError
from opt.common.fingerprint import DIGEST_KEY, seal, seal_error
from opt.common.jsonio import read_json, write_json_atomic
from opt.common.report import fmt, table

#: Version of the case files; files of another version are recomputed (3: sealed with a
#: digest, :func:`opt.common.fingerprint.seal`, like the sweep records).
CASE_FORMAT = 3
#: Seconds between the "still running" lines of a long case.
HEARTBEAT_S = 60.0


@dataclass
class CaseResult:
    """What a case reports: its table, checks, notes, data and the files it wrote
    (``artifacts``: label → path relative to the bench folder); ``runtime_s`` in seconds."""

    title: str
    headers: list[str]
    rows: list[list[Any]]
    checks: list[Check] = field(default_factory=list)
    notes: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    runtime_s: float = 0.0
    artifacts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (checks through :meth:`Check.to_dict`)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["checks"] = [c.to_dict() for c in self.checks]
        return d


@dataclass(frozen=True)
class BenchCase:
    """One benchmark case of a suite; ``run`` does the work and returns a :class:`CaseResult`."""

    suite: str
    name: str
    run: Callable[[], CaseResult]


def _typed(d: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(d[key], kind):
        raise ValueError(f"field {key!r} is a {type(d[key]).__name__}")
    return d[key]


def result_from_file(d: Any, case: BenchCase) -> CaseResult:
    """A case file's content → :class:`CaseResult`; :class:`ValueError` naming what is wrong
    when it is not a complete file of :data:`CASE_FORMAT` for ``case``."""
    if not isinstance(d, dict):
        raise ValueError("not a JSON object")
    if d.get("format") != CASE_FORMAT:
        raise ValueError(f"format {d.get('format')!r}, not {CASE_FORMAT}")
    if (d.get("suite"), d.get("case")) != (case.suite, case.name):
        raise ValueError(f"a file of case {d.get('suite')}/{d.get('case')}")
    sealed = seal_error(d)
    if sealed:
        raise ValueError(sealed)
    names = {f.name for f in fields(CaseResult)} | {"format", "suite", "case", DIGEST_KEY}
    if set(d) != names:
        raise ValueError(f"fields {sorted(set(d) ^ names)} differ")
    rows = _typed(d, "rows", list)
    if not all(isinstance(r, list) for r in rows):
        raise ValueError("a row is not a list")
    artifacts = _typed(d, "artifacts", dict)
    if not all(isinstance(v, str) for v in artifacts.values()):
        raise ValueError("an artifact path is not text")
    if not all(isinstance(c, dict) for c in _typed(d, "checks", list)):
        raise ValueError("a check is not an object")
    checks = [Check.from_dict(c) for c in d["checks"]]
    return CaseResult(title=_typed(d, "title", str), headers=_typed(d, "headers", list),
                      rows=rows, checks=checks, notes=_typed(d, "notes", str),
                      data=_typed(d, "data", dict),
                      runtime_s=float(_typed(d, "runtime_s", (int, float))),
                      artifacts=artifacts)


def load_cached(path: Path, case: BenchCase) -> tuple[CaseResult | None, str]:
    """The cached result of ``case`` at ``path`` and ``""``, or None and why it cannot be
    trusted (unreadable, torn, foreign or old-format file, or a failed check: a failure is
    always recomputed, never replayed)."""
    try:
        result = result_from_file(read_json(path), case)
    except InputError as exc:
        return None, str(exc)
    except (ValueError, TypeError, KeyError) as exc:
        return None, f"{path}: {exc}"
    failed = [c.name for c in result.checks if c.failed]
    if failed:
        return None, f"{path}: it records {len(failed)} failed check(s) ({failed[0]}" \
                     f"{', ...' if len(failed) > 1 else ''}); a failure is recomputed"
    return result, ""


def write_case(path: Path, case: BenchCase, result: CaseResult) -> None:
    """Write ``result`` as ``case``'s file (atomically: a killed run leaves no torn file)."""
    write_json_atomic(seal({"format": CASE_FORMAT, "suite": case.suite, "case": case.name,
                            **result.to_dict()}), path)


def errored(case: BenchCase, exc: Exception, runtime_s: float) -> CaseResult:
    """What a case that raised reports: one failed invariant naming the error (never
    written to the cache)."""
    what = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return CaseResult(f"{case.suite}/{case.name} raised an error", [], [],
                      [invariant("the case ran to completion", what, "no error", False)],
                      notes="not cached: the next run recomputes it", runtime_s=runtime_s)


def _run_timed(case: BenchCase, echo: Callable[[str], None], heartbeat_s: float) -> CaseResult:
    """Run ``case``, echoing a "still running" line every ``heartbeat_s`` seconds."""
    stop = threading.Event()
    t0 = time.perf_counter()

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            echo(f"    ... {case.suite}/{case.name} still running "
                 f"({time.perf_counter() - t0:.0f} s)")

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        result = case.run()
    finally:
        stop.set()
        ticker.join()
    result.runtime_s = time.perf_counter() - t0
    return result


def run_cases(cases: Sequence[BenchCase], out_dir: Path, *, resume: bool = True,
              echo: Callable[[str], None] = print,
              on_done: Callable[[BenchCase, CaseResult, bool], None] | None = None,
              heartbeat_s: float = HEARTBEAT_S) -> list[tuple[BenchCase, CaseResult, bool]]:
    """Run ``cases`` writing ``out_dir/<suite>/<name>.json`` after each (not after one that
    raised: :func:`errored`; Ctrl-C propagates, the case unwritten); with ``resume`` a case
    whose file is a trusted cache (:func:`load_cached`: no failed check) is loaded instead of
    rerun, any other file is recomputed with a note; ``on_done(case, result, cached)`` is called as each
    finishes (e.g. to print its table at once). Returns (case, result, was_cached) triples."""
    done = []
    for i, case in enumerate(cases, 1):
        path = out_dir / case.suite / f"{case.name}.json"
        result = None
        if resume and path.exists():
            result, why = load_cached(path, case)
            if result is None:
                echo(f"note: recomputing {case.suite}/{case.name}: cached file not usable "
                     f"({why})")
        cached = result is not None
        if result is None:
            echo(f"[{i}/{len(cases)}] {case.suite}/{case.name} ...")
            t0 = time.perf_counter()
            try:  # Ctrl-C (KeyboardInterrupt) goes up: the case writes nothing
                result = _run_timed(case, echo, heartbeat_s)
            except Exception as exc:  # an error is reported, never cached
                result = errored(case, exc, time.perf_counter() - t0)
                echo(f"error: {case.suite}/{case.name}: {result.checks[0].ours}")
            else:
                write_case(path, case, result)
        done.append((case, result, cached))
        if on_done is not None:
            on_done(case, result, cached)
    return done


def _check_line(c: Check) -> str:
    """One check on the console: verdict, name, ours against the expectation or the paper."""
    if c.verdict in (PASS, FAIL):
        line = f"  [{'pass' if c.verdict == PASS else 'FAIL'}] {c.name}: ours {fmt(c.ours)}, " \
               f"expected {fmt(c.expected)}" + (f" ({c.tolerance})" if c.tolerance else "")
    else:
        line = f"  [{c.verdict}] {c.name}: ours {fmt(c.ours)}, paper " \
               f"{paper_text(c.paper)} ({c.tolerance}; {c.source})"
    return line + (f" — {c.shown_reason()}" if c.shown_reason() else "")


def render_case(case: BenchCase, res: CaseResult, cached: bool) -> str:
    """One case's block of the report: its table, its checks, notes and files written."""
    head = f"== {case.suite}/{case.name}: {res.title}"
    head += f"  ({res.runtime_s:.2f} s{', cached' if cached else ''})"
    parts = [head, table(res.headers, res.rows), *map(_check_line, res.checks)]
    if res.notes:
        parts.append(f"  note: {res.notes}")
    parts += [f"  wrote {label}: {p}" for label, p in res.artifacts.items()]
    parts.append("")
    return "\n".join(parts)


def verdict_counts(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> dict[str, int]:
    """How many checks of the run have each verdict."""
    checks = [c for _, res, _ in done for c in res.checks]
    return {v: sum(c.verdict == v for c in checks) for v in VERDICTS}


def any_failed(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> bool:
    """Whether an invariant failed (the bench's exit status)."""
    return verdict_counts(done)[FAIL] > 0


def summary(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """The closing line of a bench run: invariants passed / failed, paper figures reproduced /
    differing."""
    n = verdict_counts(done)
    return (f"bench: {len(done)} cases; invariants: {n[PASS]} passed, {n[FAIL]} failed; "
            f"paper figures: {n[REPRODUCED]} reproduced, {n[DIFFERS]} differ")


def render(done: Sequence[tuple[BenchCase, CaseResult, bool]]) -> str:
    """Human-readable report of a bench run: every table, its checks, and a summary line."""
    return "\n".join([*(render_case(*d) for d in done), summary(done)])
