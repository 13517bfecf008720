"""The bench runner (opt.runs.bench): each case's table is shown as soon as that case is done,
before the next one starts; cached cases come back with their checks; the summary counts."""

from __future__ import annotations

from pathlib import Path

from opt.runs.bench import BenchCase, CaseResult, Check, render, render_case, run_cases, summary


def _case(name: str, log: list[str], passed: bool = True) -> BenchCase:
    def run() -> CaseResult:
        log.append(f"run {name}")
        return CaseResult(f"title {name}", ["a"], [[1]],
                          [Check(f"check {name}", 1, 1, passed)])
    return BenchCase("t", name, run)


def test_each_case_is_shown_before_the_next_runs(tmp_path: Path) -> None:
    log: list[str] = []
    cases = [_case("one", log), _case("two", log, passed=False)]
    done = run_cases(cases, tmp_path, echo=log.append,
                     on_done=lambda c, r, cached: log.append(render_case(c, r, cached)))
    assert log[0].startswith("[1/2]") and log[1] == "run one"
    assert "== t/one: title one" in log[2] and "[ok  ] check one" in log[2]
    assert log[3].startswith("[2/2]") and log[4] == "run two"
    assert "[FAIL] check two" in log[5]
    assert summary(done) == "bench: 2 cases; reproduced figures: 1 passed, 1 failed"
    # a rerun resumes from the files: nothing runs, the callback still shows every case
    log.clear()
    again = run_cases(cases, tmp_path, echo=log.append,
                      on_done=lambda c, r, cached: log.append(f"shown {c.name} {cached}"))
    assert log == ["shown one True", "shown two True"]
    assert render(again).endswith(summary(again))
