"""Command-line checks of goals and options: decode goals need decode steps, SLOs are stored
without rounding noise and shown in ms, an error names the bad CSV column or option, swapped
instance and result files are named, ``theory hom --gpus 0`` is refused and a decode-time lower
bound is never negative."""

from __future__ import annotations

import json

import pytest

from opt.common.errors import InputError
from opt.common.units import ms_to_ticks, ticks_ms_text
from tests.cli.run import run

BUILD = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "16",
         "--layers", "1"]




def one_line(code: int, err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ---- objectives and SLOs that need decode steps -------------------------------------------------

@pytest.mark.parametrize("goal,field", [(["--objective", "decode_time"], "objective"),
                                        (["--slo-tpot-ms", "1"], "slo.mean_tpot")])
def test_decode_goals_need_decode_steps(capsys, tmp_path, goal, field):
    code, _, err = run(capsys, *BUILD, "--decode", "0", *goal, "-o", tmp_path / "i.json")
    one_line(code, err, field, "needs decode steps")
    assert not (tmp_path / "i.json").exists()


def test_decode_goals_need_decode_steps_in_files_too(capsys, tmp_path):
    """The instance reader applies the same rule: a file cannot bring the goal back."""
    path = tmp_path / "i.json"
    assert run(capsys, *BUILD, "--decode", "0", "-o", path)[0] == 0
    doc = json.loads(path.read_text())
    doc["objective"] = "decode_time"
    path.write_text(json.dumps(doc))
    code, _, err = run(capsys, "solve", path, "--method", "pd")
    one_line(code, err, "objective", "needs decode steps")


# ---- units in the units the user gave -----------------------------------------------------------

def test_slo_ms_stored_without_rounding_noise_and_shown_in_ms(capsys, tmp_path):
    assert ms_to_ticks(1, "ns") == 1_000_000.0       # not 999999.9999999999
    assert ms_to_ticks(0.3, "us") == 300.0
    assert ticks_ms_text(1_000_000.0, "ns") == "1 ms"
    path = tmp_path / "i.json"
    assert run(capsys, *BUILD, "--decode", "2", "--slo-tpot-ms", "1", "-o", path)[0] == 0
    assert json.loads(path.read_text())["slo"] == {"mean_tpot": 1_000_000.0}
    assert run(capsys, *BUILD, "--decode", "2", "--slo-tpot-ms", "0.001", "-o", path)[0] == 0
    code, out, _ = run(capsys, "solve", path, "--method", "pd")
    line = next(ln for ln in out.splitlines() if ln.startswith("SLO broken"))
    assert line.endswith("> 0.001 ms") and "mean_tpot" in line and "ns" not in line


# ---- errors name the right thing ----------------------------------------------------------------

def test_replay_csv_error_names_the_bad_column(tmp_path):
    from opt.app.runs.replay import read_burstgpt_csv

    head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    for col, row in (("Request tokens", "1,m,abc,3,4,x"), ("Response tokens", "1,m,3,,4,x"),
                     ("Timestamp", "nan,m,3,3,4,x")):
        (tmp_path / "t.csv").write_text(head + row + "\n")
        with pytest.raises(InputError) as exc:
            read_burstgpt_csv(tmp_path / "t.csv")
        assert exc.value.field == col


@pytest.mark.parametrize("argv", [["theory", "hom", "--gpu", "H100", "--model", "llama-2-7b"],
                                  ["theory", "het", "--gpu1", "H100", "--gpu2", "L40S",
                                   "--model", "llama-2-7b"]])
@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf"])
def test_theory_context_error_names_the_option(capsys, argv, value):
    code, _, err = run(capsys, *argv, "--context", value)
    line = one_line(code, err, "--context")
    assert "m_kv_bytes" not in line


def test_theory_price_error_names_the_option(capsys):
    code, _, err = run(capsys, "theory", "hom", "--gpu", "H100", "--model", "llama-2-7b",
                       "--context", "4096", "--price", "-1")
    assert "c_usd_per_s" not in one_line(code, err, "--price")


@pytest.mark.parametrize("command", [["validate"], ["view"], ["plot", "gantt"]])
def test_swapped_instance_and_result_are_named(capsys, tmp_path, command):
    inst, res = tmp_path / "i.json", tmp_path / "r.json"
    assert run(capsys, *BUILD, "--decode", "1", "-o", inst)[0] == 0
    assert run(capsys, "solve", inst, "--method", "pd", "-o", res)[0] == 0
    extra = ["-o", tmp_path / "x.out"] if command != ["validate"] else []
    code, _, err = run(capsys, *command, res, inst, *extra)
    one_line(code, err, str(res), "look swapped")
    code, out, err = run(capsys, "validate", inst, res)   # the right order still works
    assert code == 0 and out.startswith("valid"), err


def test_theory_hom_gpus_zero_is_refused_not_defaulted(capsys):
    """Found by the rerun audit (benchmarks/hardening_audit.py): ``--group-size 0`` silently
    back to the default group size."""
    code, _, err = run(capsys, "theory", "hom", "--gpu", "H100", "--model", "llama-2-7b",
                       "--context", "4096", "--group-size", "0")
    one_line(code, err, "--group-size")


def test_decode_time_lower_bound_is_never_negative(capsys, tmp_path):
    """Decode goals, continued: CP-SAT's bound on makespan − TTFT can be far below 0 (−8.3e7 on
    this instance); a duration's bound is reported as at least 0."""
    path = tmp_path / "i.json"
    assert run(capsys, *BUILD, "--decode", "2", "--objective", "decode_time", "-o", path)[0] == 0
    code, out, err = run(capsys, "solve", path, "--method", "cpsat", "--time-limit", "3",
                         "--num-workers", "1", "--json", "--no-solution")
    res = json.loads(out)
    assert code == 0 and res["lower_bound"] is not None and res["lower_bound"] >= 0, err
    assert res["lower_bound"] <= res["objective"]
