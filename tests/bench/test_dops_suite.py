"""The ``dops`` bench suite's cases on stand-in records (no solving): a verdict from a full grid
only, the 2 % rule an invariant that can fail, the per-workload CSV written from the records."""

from __future__ import annotations

from pathlib import Path

import opt.app.bench.dops as dops


def _stand_in(speed: dict[str, float], drop: int = 0):
    """Records of every workload asked for (makespan 1000 / speed[method]); the last ``drop``
    workloads of a call are left unfinished (no Bifocal record)."""
    def records(cache, workloads, jobs=1):
        out = []
        for i, w in enumerate(workloads):
            for m in dops.METHODS:
                if m == "bifocal" and i >= len(workloads) - drop:
                    continue
                out.append({"model": w.model, "platform": w.platform, "prefill": w.prefill,
                            "decode": w.decode, "batch": w.batch, "method": m,
                            "status": "FEASIBLE", "makespan": 1000 / speed.get(m, 1.0),
                            "time_unit": "ns", "u_co": 0.2 if m == "bifocal" else 0.0})
        return out
    return records


def test_model_case_states_the_paper_value_and_no_goal(monkeypatch):
    """One check per model, the paper's geomean; the workloads where Bifocal is slower than
    PD are reported in the notes, never checked (no goal departs from the paper's rules)."""
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 0.97, "heft": 1.1}))
    res = dops._model_case(Path("unused"), "mixtral-8x7b")
    assert len(res.rows) == 64  # the full 4 x 4 x 4 grid
    (paper,) = res.checks
    assert paper.paper == 1.72 and abs(paper.ours - 0.97) < 1e-9 and paper.verdict == "differs"
    assert "not yet measured" in paper.reason and "slower than PD: 64" in res.notes
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 1.72}))
    (paper,) = dops._model_case(Path("unused"), "mixtral-8x7b").checks
    assert paper.verdict == "reproduced"


def test_an_unfinished_grid_gives_no_verdict(monkeypatch):
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 1.72}, drop=3))
    res = dops._model_case(Path("unused"), "mixtral-8x7b")
    assert res.checks == [] and "pending (61/64)" in res.notes


def test_fig7_ranges_and_the_grid_table(monkeypatch, tmp_path):
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 2.0}))
    checks = dops._fig7_case(Path("unused")).checks
    verdicts = {c.name: c.verdict for c in checks}
    # each end against the paper's end: 2.0 is neither 1.89 nor 2.43 (± 5 %), nor 1.10 / 1.48
    assert set(verdicts.values()) == {"differs"} and len(verdicts) == 4
    assert [c.ours for c in checks] == [2.0] * 4
    res = dops._grid_table_case(Path("unused"), tmp_path)
    csv = (tmp_path / res.artifacts["per-workload grid (CSV)"]).read_text()
    assert csv.startswith("# rules: load_timing overlap")
    # the seven grids and Fig. 7's six Llama-7B HP32 workloads (Qwen's are in its grid)
    assert len([x for x in csv.splitlines() if not x.startswith("#")]) == 1 + (7 * 64 + 6) * 7
    assert [r[6] for r in res.rows] == ["differs"] * 6 + ["differs"]  # 2.0 vs every paper value
    fig10 = dops._fig10_case(Path("unused"))
    (claims,) = fig10.checks
    assert claims.ours == 3.0 and claims.verdict == "reproduced"
    assert [c.name for c in dops.dops_cases(Path("x"))][-3:] == ["fig7", "fig10", "grid-table"]


def test_jobs_reach_the_sweeps_executor_and_a_bad_value_is_refused(monkeypatch):
    import pytest

    from opt.app.bench.suites import suite_cases
    from opt.app.runs.executor import ProcessExecutor, SerialExecutor
    from opt.common.errors import InputError

    seen = []
    monkeypatch.setattr(dops, "run_sweep",
                        lambda *a, options, **k: seen.append(options.executor) or [])
    for jobs in (1, 2):
        dops._records(Path("unused"), [], jobs)
    assert [type(e) for e in seen] == [SerialExecutor, ProcessExecutor]
    assert len(suite_cases("dops", Path("x"), 2)) == 10
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InputError, match="jobs"):
            suite_cases("dops", Path("x"), bad)
