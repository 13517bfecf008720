"""The ``dops`` bench suite's cases on stand-in records (no solving): the paper figure is the
model's geomean against DOPS' value, and the 2 % rule is an invariant that can fail."""

from __future__ import annotations

from pathlib import Path

import opt.app.bench.dops as dops


def _stand_in(speed: dict[str, float]):
    def records(cache, workloads):
        out = []
        for w in workloads:
            for m in dops.METHODS:
                out.append({"model": w.model, "platform": w.platform, "prefill": w.prefill,
                            "decode": w.decode, "batch": w.batch, "method": m,
                            "status": "FEASIBLE", "makespan": 1000 / speed.get(m, 1.0)})
        return out
    return records


def test_model_case_states_the_paper_value_and_the_two_percent_rule(monkeypatch):
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 0.97, "heft": 1.1}))
    res = dops._model_case(Path("unused"), "mixtral-8x7b")
    assert len(res.rows) == 8  # the 2 x 2 x 2 corners
    paper, rule = res.checks
    assert paper.paper == 1.72 and abs(paper.ours - 0.97) < 1e-9 and paper.verdict == "differs"
    assert rule.verdict == "fail"  # 0.97 < 1 / 1.02
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 1.72}))
    paper, rule = dops._model_case(Path("unused"), "mixtral-8x7b").checks
    assert paper.verdict == "reproduced" and rule.verdict == "pass"


def test_full_grid_models_and_fig7_ranges(monkeypatch):
    monkeypatch.setattr(dops, "_records", _stand_in({"bifocal": 2.0}))
    assert len(dops._model_case(Path("unused"), "dops-qwen-1.8b").rows) == 64
    checks = dops._fig7_case(Path("unused")).checks
    verdicts = {c.name: c.verdict for c in checks}
    # 2.0 lies in Qwen's 1.89-2.43 and above Llama's 1.10-1.48
    assert verdicts["Fig. 7 dops-qwen-1.8b batch 8: lowest Bifocal over PD"] == "differs"
    assert [c.ours for c in checks] == [2.0] * 4
    assert [c.name for c in dops.dops_cases(Path("x"))][-2:] == ["fig7", "fig10"]
