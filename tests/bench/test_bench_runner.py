"""The bench runner (opt.app.bench.runner), its checks (opt.app.bench.checks) and reports
(opt.app.bench.report): each case's table is shown as soon as that case is done; cached cases
come back with their checks; an unusable cached file is recomputed; paper figures carry a
source, a tolerance and, when they differ, a reason; report.md links the pages cases wrote."""

from __future__ import annotations

import csv
import json
import re
import threading
from pathlib import Path

import pytest

from opt.app.bench.checks import (
    EXACT,
    RATIO,
    Check,
    Tolerance,
    invariant,
    paper_figure,
    within,
)
from opt.app.bench.report import CSV_COLUMNS, write_reports
from opt.app.bench.runner import (
    BenchCase,
    CaseResult,
    any_failed,
    render,
    render_case,
    run_cases,
    summary,
    verdict_counts,
)

REASON = "docs/serving.md §Measured: a named modelling choice"


def _case(name: str, log: list[str], passed: bool = True) -> BenchCase:
    def run() -> CaseResult:
        log.append(f"run {name}")
        return CaseResult(f"title {name}", ["a"], [[1]],
                          [invariant(f"check {name}", 1, 1, passed),
                           paper_figure(f"figure {name}", 2.0, 2.05, RATIO, "paper Fig. 1")])
    return BenchCase("t", name, run)


def test_each_case_is_shown_before_the_next_runs(tmp_path: Path) -> None:
    log: list[str] = []
    cases = [_case("one", log), _case("two", log, passed=False)]
    done = run_cases(cases, tmp_path, echo=log.append,
                     on_done=lambda c, r, cached: log.append(render_case(c, r, cached)))
    assert log[0].startswith("[1/2]") and log[1] == "run one"
    assert "== t/one: title one" in log[2] and "[pass] check one" in log[2]
    assert "[reproduced] figure one: ours 2, paper 2.05 (±5 % rel; paper Fig. 1)" in log[2]
    assert log[3].startswith("[2/2]") and log[4] == "run two"
    assert "[FAIL] check two" in log[5]
    assert summary(done) == ("bench: 2 cases; invariants: 1 passed, 1 failed; "
                             "paper figures: 2 reproduced, 0 differ")
    assert any_failed(done)
    # a rerun resumes from the files: the passing case is not run again, the callback still
    # shows every case; the failed one was written (for the report) but is recomputed
    assert (tmp_path / "t" / "two.json").exists()
    log.clear()
    again = run_cases(cases, tmp_path, echo=log.append,
                      on_done=lambda c, r, cached: log.append(f"shown {c.name} {cached}"))
    assert log[0] == "shown one True" and log[-1] == "shown two False"
    assert "run two" in log and "run one" not in log
    assert any(x.startswith("note: recomputing t/two") and "failed check" in x for x in log)
    assert [c.verdict for c in again[1][1].checks] == ["fail", "reproduced"]
    assert render(again).endswith(summary(again))


def _raising(name: str, log: list[str], exc: BaseException) -> BenchCase:
    def run() -> CaseResult:
        log.append(f"run {name}")
        raise exc
    return BenchCase("t", name, run)


def test_a_case_that_raises_is_a_failure_and_never_cached(tmp_path: Path) -> None:
    log: list[str] = []
    cases = [_raising("bad", log, ValueError("solver said no\nsecond line")),
             _case("good", log)]
    done = run_cases(cases, tmp_path, echo=log.append)
    assert log.count("run good") == 1  # the next case still runs
    (_, bad, cached), _ = done
    assert not cached and any_failed(done)
    assert [(c.name, c.ours, c.verdict) for c in bad.checks] == [
        ("the case ran to completion", "ValueError: solver said no", "fail")]
    assert "error: t/bad: ValueError: solver said no" in log
    assert not (tmp_path / "t" / "bad.json").exists()
    assert "[FAIL] the case ran to completion" in render(done)
    write_reports(done, tmp_path)  # an errored case has no table: the report still renders
    log.clear()
    run_cases(cases, tmp_path, echo=log.append)
    assert log.count("run bad") == 1 and "run good" not in log


def test_an_interrupted_case_is_not_cached_and_finished_ones_are_kept(tmp_path: Path) -> None:
    log: list[str] = []
    cases = [_case("first", log), _raising("stopped", log, KeyboardInterrupt())]
    with pytest.raises(KeyboardInterrupt):
        run_cases(cases, tmp_path, echo=log.append)
    assert (tmp_path / "t" / "first.json").exists()
    assert not (tmp_path / "t" / "stopped.json").exists()
    log.clear()
    with pytest.raises(KeyboardInterrupt):
        run_cases(cases, tmp_path, echo=log.append)
    assert "run first" not in log and "run stopped" in log


def test_cli_bench_interrupted_exits_130_with_one_line(tmp_path: Path, monkeypatch,
                                                       capsys) -> None:
    from opt.app.cli import main
    from opt.app.cli import runs as cli_runs  # the bench command's module, which holds the name

    log: list[str] = []
    monkeypatch.setattr(cli_runs, "suite_cases", lambda name, out, jobs=1: [
        _case("first", log), _raising("stopped", log, KeyboardInterrupt())])
    assert main(["bench", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err.splitlines()
    assert [x for x in err if x.startswith("hetopt")] == [
        f"hetopt: interrupted; finished records are kept in {tmp_path}/"]
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["first.json"]


# ---- checks ------------------------------------------------------------------------------------

def test_paper_verdict_comes_from_the_numbers() -> None:
    assert paper_figure("x", 2.12, 2.23, RATIO, "s", REASON).verdict == "reproduced"  # -4.9 %
    assert paper_figure("x", 2.11, 2.23, RATIO, "s", REASON).verdict == "differs"  # -5.4 %
    assert paper_figure("x", 1.31, (1.89, 2.43), RATIO, "s", REASON).verdict == "differs"
    assert paper_figure("x", 1.80, (1.89, 2.43), RATIO, "s").verdict == "reproduced"
    assert paper_figure("x", 2.55, (1.89, 2.43), RATIO, "s").verdict == "reproduced"
    assert paper_figure("x", 2.56, (1.89, 2.43), RATIO, "s", REASON).verdict == "differs"
    assert paper_figure("x", 124.0, 124, EXACT, "s").verdict == "reproduced"
    assert paper_figure("x", 123.0, 124, EXACT, "s", REASON).verdict == "differs"
    assert paper_figure("x", 1.0, (1.0, None), EXACT, "s").verdict == "reproduced"
    assert paper_figure("x", 0.99, (1.0, None), EXACT, "s", REASON).verdict == "differs"
    two = Tolerance(0.005, relative=False)
    assert paper_figure("eta", 1.4249, 1.42, two, "s").verdict == "reproduced"
    assert paper_figure("eta", 1.4251, 1.42, two, "s", REASON).verdict == "differs"
    assert paper_figure("x", None, 2.23, RATIO, "s", REASON).verdict == "differs"
    assert within("p", 6.74 * 1.0099, 6.74, Tolerance(0.01)).verdict == "pass"
    assert within("p", 6.74 * 1.0101, 6.74, Tolerance(0.01)).verdict == "fail"


def test_paper_figures_are_rejected_without_source_tolerance_or_reason() -> None:
    with pytest.raises(ValueError, match="without a reason"):
        paper_figure("x", 1.3, 2.23, RATIO, "DOPS Fig. 7")
    with pytest.raises(ValueError, match="without a reason"):
        paper_figure("x", 1.3, 2.23, RATIO, "DOPS Fig. 7", "not yet explained")
    with pytest.raises(ValueError, match="one line"):
        paper_figure("x", 1.3, 2.23, RATIO, "DOPS Fig. 7", "docs/a.md\nsecond line")
    with pytest.raises(ValueError, match="no source"):
        paper_figure("x", 2.2, 2.23, RATIO, " ")
    with pytest.raises(ValueError, match="no tolerance"):
        Check("paper", "x", 2.2, paper=2.23, source="s")
    with pytest.raises(ValueError, match="paper value"):
        paper_figure("x", 2.2, "> 1", RATIO, "s")
    with pytest.raises(ValueError, match="paper value"):
        paper_figure("x", 2.2, (3.0, 2.0), RATIO, "s")
    with pytest.raises(ValueError, match="not from passed"):
        Check("paper", "x", 2.2, passed=True, paper=2.23, tolerance=RATIO, source="s")
    with pytest.raises(ValueError, match="make it a paper figure"):
        Check("invariant", "x", 2.2, passed=True, paper=2.23)
    with pytest.raises(ValueError, match="passed must be a bool"):
        Check("invariant", "x", 2.2)
    with pytest.raises(ValueError, match=">= 0"):
        Tolerance(-0.1)
    with pytest.raises(ValueError, match="kind"):
        Check("claim", "x", 1, passed=True)


def test_check_json_round_trip_recomputes_the_verdict() -> None:
    for c in (paper_figure("x", 1.31, (1.89, 2.43), RATIO, "s", REASON),
              invariant("y", [1, 2], "≤ 3", True, source="problems.md")):
        assert Check.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    forged = paper_figure("x", 1.31, 2.23, RATIO, "s", REASON).to_dict()
    forged["verdict"] = "reproduced"
    with pytest.raises(ValueError, match="stored verdict"):
        Check.from_dict(forged)


# ---- cached case files -------------------------------------------------------------------------

def _counting_case(calls: list[int]) -> BenchCase:
    def run() -> CaseResult:
        calls.append(1)
        return CaseResult("counted", ["n"], [[7]], [invariant("seven", 7, 7, True),
                                                    paper_figure("p", 1.0, 2.0, RATIO, "s",
                                                                 REASON)],
                          data={"n": 7})
    return BenchCase("t", "counted", run)


@pytest.mark.parametrize("damage", ["truncate", "old-format", "foreign", "not-json-object",
                                    "forged-verdict"])
def test_unusable_cached_file_is_recomputed(tmp_path: Path, damage: str) -> None:
    calls: list[int] = []
    case = _counting_case(calls)
    (_, first, _), = run_cases([case], tmp_path, echo=lambda s: None)
    path = tmp_path / "t" / "counted.json"
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "old-format":  # the Check(name, value, expected, passed) shape, no format
        path.write_text(json.dumps({"title": "counted", "headers": ["n"], "rows": [[7]],
                                    "checks": [{"name": "seven", "value": 7, "expected": 7,
                                                "passed": True}],
                                    "notes": "", "data": {}, "runtime_s": 0.1}))
    elif damage == "foreign":
        path.write_text(text.replace('"case": "counted"', '"case": "other"'))
    elif damage == "not-json-object":
        path.write_text("[1, 2]")
    else:
        path.write_text(text.replace('"verdict": "differs"', '"verdict": "reproduced"'))
    notes: list[str] = []
    (_, again, cached), = run_cases([case], tmp_path, echo=notes.append)
    assert calls == [1, 1] and not cached
    assert len([n for n in notes if n.startswith("note: recomputing t/counted")]) == 1
    assert again.rows == first.rows and again.checks == first.checks
    assert again.data == first.data
    # the rewritten file is trusted again
    (_, _, cached), = run_cases([case], tmp_path, echo=notes.append)
    assert cached and calls == [1, 1]


def test_long_case_prints_progress_lines(tmp_path: Path) -> None:
    # the case runs until two heartbeats were printed (an event, not a sleep: no clock race)
    lines: list[str] = []
    two_beats = threading.Event()

    def echo(line: str) -> None:
        lines.append(line)
        if sum("t/slow still running" in x for x in lines) >= 2:
            two_beats.set()

    def slow() -> CaseResult:
        assert two_beats.wait(600), "no heartbeat"
        return CaseResult("slow", [], [])
    run_cases([BenchCase("t", "slow", slow)], tmp_path, echo=echo, heartbeat_s=0.01)
    beats = [x for x in lines if "t/slow still running" in x]
    assert len(beats) >= 2 and all(x.strip().startswith("...") for x in beats)


# ---- reports -----------------------------------------------------------------------------------

def _with_pages(root: Path) -> BenchCase:
    def run() -> CaseResult:
        (root / "viewer").mkdir(parents=True, exist_ok=True)
        (root / "viewer" / "plan.html").write_text("<html></html>")
        return CaseResult("pages", [], [], [paper_figure("p", 1.0, 2.0, RATIO, "s", REASON)],
                          artifacts={"serving plan": "viewer/plan.html",
                                     "schedule": "viewer/gone.html"})
    return BenchCase("t", "pages", run)


def test_report_links_the_pages_cases_wrote(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    done = run_cases([_with_pages(root)], root, echo=lambda s: None)
    report_dir = root / "suite-reports"  # a report beside, not at, the bench root
    _, _, md = write_reports(done, report_dir, root=root)
    links = re.findall(r"\[([^]]+)\]\(([^)]+)\)", md.read_text())
    assert ("plan.html", "../viewer/plan.html") in links
    for _, target in links:
        if "gone" not in target:
            assert (report_dir / target).resolve().is_file()
    assert "gone.html](../viewer/gone.html) (missing" in md.read_text()
    assert not any_failed(done)  # a paper figure that differs does not fail the bench


def test_checks_csv_and_report_columns(tmp_path: Path) -> None:
    log: list[str] = []
    done = run_cases([_case("one", log), _case("two", log, passed=False)], tmp_path,
                     echo=log.append)
    _, checks, md = write_reports(done, tmp_path)
    with checks.open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["case"], r["kind"], r["verdict"]) for r in rows] == [
        ("one", "invariant", "pass"), ("one", "paper", "reproduced"),
        ("two", "invariant", "fail"), ("two", "paper", "reproduced")]
    assert rows[1]["paper"] == "2.05" and rows[1]["tolerance"] == "±5 % rel"
    assert rows[1]["source"] == "paper Fig. 1" and rows[0]["expected"] == "1"
    text = md.read_text()
    assert summary(done) in text and verdict_counts(done)["fail"] == 1
    assert "| ❌ FAIL | invariant | check two |" in text


def test_bench_viewer_pages_are_written_and_linked(tmp_path: Path) -> None:
    """The two page writers of the default suite (the flagship schedule of full-size-build,
    the B&B plan of serving-costs), on small instances: the pages exist, are viewer pages of
    the right kind, and report.md links them relative to itself."""
    import instances
    from opt.app.bench.placement import schedule_view
    from opt.app.bench.serving import plan_view
    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.builder import build_placement
    from solvers.api import solve

    root = tmp_path / "bench"
    cat = bundled_catalog()
    small = build_placement(bundled_cards()["llama-2-7b"], cat.platform("HP32"), cat,
                            Workload(16, 2, 1), BuildOptions(layers=1))
    serving = instances.load("p3-tiny-gemma-a100-l40s")

    def run() -> CaseResult:
        res = CaseResult("pages", [], [])
        schedule_view(small, root, res, title="small schedule")
        res.artifacts.update(plan_view(serving, solve(serving, "bnb"), root, "tiny plan"))
        return res

    done = run_cases([BenchCase("t", "pages", run)], root, echo=lambda s: None)
    res = done[0][1]
    assert [c.verdict for c in res.checks] == ["pass"] and "small schedule" in res.notes
    assert sorted(res.artifacts.values()) == ["viewer/flagship-schedule.html",
                                              "viewer/serving-plan.html"]
    _, _, md = write_reports(done, root / "default-report", root=root)
    links = dict(re.findall(r"\[([^]]+)\]\(([^)]+)\)", md.read_text()))
    assert links == {"flagship-schedule.html": "../viewer/flagship-schedule.html",
                     "serving-plan.html": "../viewer/serving-plan.html"}
    kinds = []
    for target in links.values():
        page = (md.parent / target).resolve()
        text = page.read_text()
        assert text.startswith("<!doctype html>") and 'content="hetopt view"' in text
        kinds.append(re.search(r'"kind": ?"(\w+)"', text).group(1))
    assert sorted(kinds) == ["placement", "serving"]


def test_opweave_figures_from_cost_table_cells() -> None:
    """OpWeave Figs. 9/13 computed from cost-table cells: maxima of best baseline / B&B,
    strictly-cheapest and infeasible counts, heterogeneous B&B against H100 B&B (a) and
    against the best single type (b)."""
    from opt.app.bench.opweave_figures import opweave_checks

    def plan(*owners):
        return {"owners": [{"gpu": g, "tp": 2, "batch": 8, "replicas": 1} for g in owners]}

    def cell(col, afd, cad, bnb, gpus=("H100",)):
        recs = {m: {"cost_usd_per_mtok": c} for m, c in
                zip(("col", "afd", "cad", "bnb"), (col, afd, cad, bnb))}
        recs["bnb"]["plan"] = plan(*gpus)
        return recs
    cells = {}
    for model, slos in (("gemma-3-27b", (25.0, 60.0)), ("qwen3-next-80b-a3b", (40.0, 80.0))):
        for ctx in (8192, 32768, 131072):
            for slo in slos:
                cells[(model, "H100", ctx, slo)] = cell(2.0, None, 3.0, 1.0)  # 2x cheaper
                cells[(model, "H100+L40S", ctx, slo)] = cell(1.0, 1.5, 1.5, 1.0)  # a tie
                # an A100-only plan: (a) H100 / het = 1 / 0.78, (b) = 1
                cells[(model, "H100+A100", ctx, slo)] = cell(1.56, 2.0, 2.0, 0.78, ("A100",))
    got = {c.name.split(" (")[0]: c for c in opweave_checks(cells)}
    assert got["Fig. 9 Gemma-3-27B H100: max best baseline / B&B"].ours == 2.0
    assert got["Fig. 9 H100: settings where B&B is strictly cheapest"].ours == 12
    assert got["Fig. 9 H100: infeasible baseline configurations"].ours == 12  # AFD everywhere
    assert got["Fig. 13 Gemma-3-27B H100+L40S: max best baseline / B&B"].ours == 1.0
    assert got["Fig. 13: settings where heterogeneous B&B is strictly cheapest"].ours == 6
    mean_l40s = got["Fig. 13 H100+L40S: homogeneous H100 B&B / heterogeneous B&B"]
    by_name = {c.name: c for c in opweave_checks(cells)}
    a_max = by_name["Fig. 13 H100+A100: homogeneous H100 B&B / heterogeneous B&B (default), "
                    "max of 6"]
    b_max = by_name["Fig. 13 H100+A100: best single-type B&B / heterogeneous B&B (§3.3 G_het, "
                    "beside), max of 6"]
    assert mean_l40s.ours == 1.0 and mean_l40s.verdict == "differs"  # 1.00 is not 1.04
    assert a_max.ours == pytest.approx(1 / 0.78) and a_max.verdict == "reproduced"
    assert b_max.ours == pytest.approx(1.0) and b_max.verdict == "differs"
    assert got["Fig. 13 Gemma-3-27B H100+A100: max best baseline / B&B"].ours == 2.0


def test_cli_bench_recomputes_a_truncated_case_file(tmp_path: Path, capsys) -> None:
    """A truncated case file does not stop ``hetopt bench`` (no exit 2); the
    case is recomputed with a one-line note on stderr and gives the same result."""
    from opt.app.cli import main

    args = ["bench", "--out", str(tmp_path), "--case", "opweave-eta"]
    assert main(args) == 0
    first = capsys.readouterr().out
    path = tmp_path / "core" / "opweave-eta.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 3])
    assert main(args) == 0
    captured = capsys.readouterr()
    notes = [x for x in captured.err.splitlines() if x.startswith("note:")]
    assert len(notes) == 1 and "recomputing core/opweave-eta" in notes[0]
    assert "malformed JSON" in notes[0] and "cached" not in captured.out.splitlines()[0]

    def table(out: str) -> list[str]:  # the case block without its timing line
        return [x for x in out.splitlines() if x.startswith(("H100", "  [", "gpu1"))]
    assert table(captured.out) == table(first) and len(table(first)) > 4


def _edit(path: Path, edit) -> None:
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d))


@pytest.mark.parametrize("edit", [
    lambda d: d["checks"][0].update(ours=9.99),            # the model-cards edit
    lambda d: d["rows"][0].__setitem__(0, 70),              # a table number typed over
    lambda d: d.pop("digest"),                              # an unsealed file
])
def test_edited_case_file_is_recomputed_not_trusted(tmp_path: Path, edit) -> None:
    """Case files are sealed; an edited number is never shown as a pass."""
    calls: list[int] = []

    def run() -> CaseResult:
        calls.append(1)
        return CaseResult("sealed", ["n"], [[73]], [within("count", 6.74, 6.74, EXACT)])

    case = BenchCase("t", "sealed", run)
    run_cases([case], tmp_path, echo=lambda s: None)
    _edit(tmp_path / "t" / "sealed.json", edit)
    notes: list[str] = []
    (_, again, cached), = run_cases([case], tmp_path, echo=notes.append)
    assert not cached and calls == [1, 1] and again.rows == [[73]]
    assert again.checks[0].ours == 6.74 and again.checks[0].verdict == "pass"
    assert any("recomputing t/sealed" in n for n in notes)


def test_within_verdict_is_recomputed_from_the_numbers() -> None:
    """A within() invariant's verdict comes from ours, expected and the tolerance, whatever
    ``passed`` says; a stored passed that the numbers contradict is refused."""
    c = within("count", 9.99, 6.74, EXACT)
    assert c.verdict == "fail"
    forged = {**c.to_dict(), "passed": True, "verdict": "pass"}
    with pytest.raises(ValueError, match="the numbers give"):
        Check.from_dict(forged)
