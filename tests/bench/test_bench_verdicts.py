"""No bench verdict depends on the wall clock (opt.app.bench.checks ``proves`` /
``agrees`` / ``stopped_by_clock``): an exact method's proof is an invariant only under a
deterministic limit (CP-SAT's deterministic time); a run the wall clock stopped is checked for
what holds whatever the clock did (bound <= optimum <= objective, = when OPTIMAL) and its
"not proven" is a note. The cases are run here with stand-in solver results: a loaded machine
is simulated by results the clock cut short."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from opt.app.bench import placement as bp
from opt.app.bench import serving as bs
from opt.app.bench.checks import agrees, proves, stopped_by_clock


def _res(status: str, objective: float | None, lower_bound: float | None = None,
         method: str = "m", **stats: Any) -> SimpleNamespace:
    gap = None if objective is None or lower_bound is None else 1 - lower_bound / objective
    return SimpleNamespace(status=status, objective=objective, lower_bound=lower_bound,
                           method=method, runtime_s=0.1, gap=gap, stats=stats)


# ---- the helpers -------------------------------------------------------------------------------

def test_stopped_by_clock() -> None:
    assert stopped_by_clock(_res("FEASIBLE", 10, 5))  # a wall-clock limit
    assert not stopped_by_clock(_res("FEASIBLE", 10, 5, deterministic=True))
    assert stopped_by_clock(_res("FEASIBLE", 10, 5, deterministic=False))  # the backstop
    assert not stopped_by_clock(_res("OPTIMAL", 10, 10))
    # a serving search: FEASIBLE means "optimal in its space" unless it timed out
    assert not stopped_by_clock(_res("FEASIBLE", 1.0, search={"timed_out": False}))
    assert stopped_by_clock(_res("FEASIBLE", 1.0, search={"timed_out": True}))


@pytest.mark.parametrize("result, verdict, noted", [
    (_res("OPTIMAL", 50, 50), "pass", False),
    (_res("FEASIBLE", 53, 47), "pass", True),        # not proven in time: a note
    (_res("TIME_LIMIT_NO_SOLUTION", None, None), "pass", True),
    (_res("OPTIMAL", 51, 51), "fail", False),        # proves another optimum
    (_res("FEASIBLE", 49, 40), "fail", False),       # a schedule below the optimum
    (_res("FEASIBLE", 55, 51), "fail", False),       # a bound above it
    (_res("ERROR", None, None), "fail", False),
    (_res("INFEASIBLE", None, None), "fail", False),
])
def test_agrees_checks_what_the_clock_cannot_change(result, verdict: str, noted: bool) -> None:
    check, note = agrees("x: MILP", result, 50)
    assert check.verdict == verdict
    assert bool(note) == noted and (not noted or "not proven optimal" in note)


def test_proves_is_a_proof_under_a_deterministic_limit_only() -> None:
    ok, note = proves("x: CP-SAT", _res("OPTIMAL", 50, 50, deterministic=True), 50)
    assert ok.verdict == "pass" and not note and "deterministic limit" in ok.name
    # the deterministic limit ran out: the same on every machine, so a failure
    short, note = proves("x: CP-SAT", _res("FEASIBLE", 52, 48, deterministic=True), 50)
    assert short.verdict == "fail" and not note
    # the wall-clock backstop ran out first: a note
    cut, note = proves("x: CP-SAT", _res("FEASIBLE", 52, 48, deterministic=False), 50)
    assert cut.verdict == "pass" and "not proven" in note


# ---- the cases under a "loaded machine" ---------------------------------------------------------

def _fake_placement(monkeypatch, outcome) -> list[tuple[str, str, dict[str, Any]]]:
    """references_case with stand-ins: instances are their names, ``outcome(method, optimum,
    kwargs)`` gives each solve's result; returns the calls."""
    import instances

    calls: list[tuple[str, str, dict[str, Any]]] = []
    monkeypatch.setattr(instances, "load", lambda name: SimpleNamespace(name=name, n_tasks=1))

    def solve(inst, method, **kw):
        calls.append((inst.name, method, kw))
        return outcome(method, instances.info(inst.name).optimum, kw)
    monkeypatch.setattr(bp, "solve", solve)
    return calls


def _proved(method: str, opt: float, kw: dict[str, Any]) -> SimpleNamespace:
    if method == "heft":
        return _res("FEASIBLE", opt + 7, opt / 2, method)  # 80 on the HEFT paper's example
    return _res("OPTIMAL", opt, opt, method, deterministic=kw.get("deterministic", False))


def test_references_with_every_proof_passes_without_notes(monkeypatch) -> None:
    calls = _fake_placement(monkeypatch, _proved)
    res = bp.references_case()
    assert res.checks and all(c.verdict in ("pass", "reproduced", "differs")
                              for c in res.checks)
    assert res.notes == ""
    # CP-SAT's proofs run under its deterministic time, one worker: repeatable (on the block
    # search's entry it only brackets the optimum, under a wall-clock limit)
    proofs = [kw for name, m, kw in calls if m == "cpsat" and name.startswith("sinnen")]
    assert proofs and all(kw.get("deterministic") and kw.get("num_workers") == 1
                          for kw in proofs)


def test_references_milp_cut_by_the_clock_is_a_note_not_a_failure(monkeypatch) -> None:
    def loaded(method, opt, kw):
        if method == "milp":  # the run: the MILP did not prove 350 in 30 s
            return _res("FEASIBLE", opt, opt - 3, method)
        if method == "cpsat-blocks":
            return _res("FEASIBLE", opt * 1.01, opt * 0.9, method)
        return _proved(method, opt, kw)
    _fake_placement(monkeypatch, loaded)
    res = bp.references_case()
    assert not [c.name for c in res.checks if c.failed]
    assert "sinnen-Nodes_11_OutTree-p2: MILP: not proven optimal" in res.notes


def test_references_still_fails_a_wrong_optimum(monkeypatch) -> None:
    def wrong(method, opt, kw):
        if method == "milp":
            return _res("OPTIMAL", opt + 1, opt + 1, method)
        return _proved(method, opt, kw)
    _fake_placement(monkeypatch, wrong)
    failed = [c.name for c in bp.references_case().checks if c.failed]
    assert failed and all(": MILP: bound <= optimum <= objective" in n for n in failed)


def test_small_llm_milp_cut_by_the_clock_is_a_note(monkeypatch) -> None:
    def solve(inst, method, **kw):
        return {"cpsat": _res("OPTIMAL", 100, 100, "cpsat", deterministic=True),
                "milp": _res("FEASIBLE", 104, 90, "milp"),
                "heft": _res("FEASIBLE", 120, 60, "heft")}[method]
    monkeypatch.setattr(bp, "solve", solve)
    res = bp.small_llm_case()
    assert [c.verdict for c in res.checks] == ["pass", "pass", "pass"]
    assert "MILP: not proven optimal" in res.notes

    def wrong(inst, method, **kw):
        return _res("OPTIMAL", 101, 101, method) if method == "milp" else solve(inst, method)
    monkeypatch.setattr(bp, "solve", wrong)
    assert [c.verdict for c in bp.small_llm_case().checks] == ["pass", "fail", "pass"]


def test_serving_exact_search_cut_by_the_clock_is_a_note(monkeypatch) -> None:
    def solve(inst, method, **kw):
        if method == "milp":
            return _res("FEASIBLE", 2.0, 0.5, "milp")
        return _res("OPTIMAL" if method == "enum" else "FEASIBLE", 1.0, None, method,
                    search={"timed_out": method == "enum"})
    monkeypatch.setattr(bs, "solve", solve)
    res = bs.exact_case()
    assert not res.checks and "enum stopped by the wall clock" in res.notes
