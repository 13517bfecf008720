"""Cached sweep records are re-checked before they enter a table."""

import pytest

from opt.app.runs.layout_sweep import makespans
from opt.app.runs.sweep import record_error, speedups, trusted_record
from opt.common.fingerprint import seal
from opt.common.jsonio import write_json

FP = "sha256:" + "0" * 64
BASE = {"model": "m", "platform": "HP32", "prefill": 8, "decode": 1, "batch": 1,
        "method": "pd", "status": "FEASIBLE", "makespan": 446_000_000, "ttft": 300_000_000,
        "decode_time": 146_000_000, "lower_bound": 223_000_000.0, "time_unit": "ns",
        "instance_fingerprint": FP}


def test_a_sealed_consistent_record_is_trusted(tmp_path):
    path = tmp_path / "pd.json"
    write_json(seal(BASE), path)
    assert trusted_record(path, lambda r: True) == seal(BASE)


@pytest.mark.parametrize("edit, reason", [
    ({"makespan": 1}, "lower bound 2.23e+08 exceeds the objective 1"),  # the record
    ({"status": "OPTIMAL"}, "status OPTIMAL but the lower bound"),
    ({"ttft": 500_000_000}, "ttft 500000000 exceeds the makespan"),
    ({"makespan": -5}, "makespan = -5 is not a finite number ≥ 0"),
    ({"makespan": "fast"}, "makespan = 'fast'"),
    ({"makespan": None}, "status FEASIBLE but no objective"),
    ({"status": "DONE"}, "unknown status 'DONE'"),
    ({"instance_fingerprint": None}, "no instance fingerprint"),
])
def test_inconsistent_numbers_are_caught_even_with_a_recomputed_digest(edit, reason):
    assert reason in record_error(seal({**BASE, **edit}))


def test_edited_or_unsealed_records_are_recomputed_with_one_line(tmp_path, capsys):
    path = tmp_path / "pd.json"
    write_json({**seal(BASE), "makespan": 400_000_000}, path)  # plausible, but edited
    assert trusted_record(path, lambda r: True) is None
    write_json(BASE, path)  # no digest: an older hetopt, or removed
    assert trusted_record(path, lambda r: True) is None
    path.write_text('{"makespan": 1')  # truncated
    assert trusted_record(path, lambda r: True) is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all("cached record not reused" in x for x in lines)
    assert "digest mismatch" in lines[0] and "no digest" in lines[1] and "malformed" in lines[2]


def test_records_of_another_build_are_skipped_silently(tmp_path, capsys):
    path = tmp_path / "pd.json"
    write_json(seal(BASE), path)
    assert trusted_record(path, lambda r: r["batch"] == 4) is None
    assert capsys.readouterr().err == ""


def test_serving_records_check_cost_bound_and_slo():
    rec = {"status": "FEASIBLE", "cost_usd_per_mtok": 0.66, "lower_bound": 0.54,
           "t_rtt_ms": 5.5, "slo_ms": 6.0, "instance_fingerprint": FP}
    assert record_error(seal(rec), "cost_usd_per_mtok") is None
    assert "exceeds the objective" in record_error(seal({**rec, "cost_usd_per_mtok": 0.1}),
                                                   "cost_usd_per_mtok")
    assert "exceeds the SLO" in record_error(seal({**rec, "t_rtt_ms": 60.0}),
                                             "cost_usd_per_mtok")
    infeasible = {**rec, "status": "INFEASIBLE", "cost_usd_per_mtok": None, "lower_bound": None}
    assert record_error(seal(infeasible), "cost_usd_per_mtok") is None


def test_summaries_skip_error_and_invalid_records():
    ok = {**BASE, "method": "bifocal/wla", "makespan": 100}
    bad = {**BASE, "method": "pd/linear", "status": "ERROR", "makespan": 1, "invalid": True}
    assert makespans([ok, bad]) == {("m", "HP32", 8, 1, 1): {"bifocal/wla": 100.0}}
    assert speedups([{**bad, "method": "pd"}, ok])[(("m", "HP32", 8, 1, 1), "bifocal/wla")] \
        is None


def test_a_record_of_another_slot_is_recomputed_with_one_line(tmp_path, capsys):
    """A sealed record copied into another slot's file keeps its digest; the
    slot fields (model, platform, workload, method) catch it."""
    from opt.app.runs.sweep import SweepWorkload, placement_slot

    path = tmp_path / "af.json"
    write_json(seal(BASE), path)  # a pd record in af's file
    slot = placement_slot(SweepWorkload("m", "HP32", 8, 1, 1), "af")
    assert trusted_record(path, lambda r: True, slot=slot) is None
    other = placement_slot(SweepWorkload("m", "HP32", 8, 2, 1), "pd")  # another workload
    assert trusted_record(path, lambda r: True, slot=other) is None
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("copied from another slot" in x for x in lines)
    assert "method 'pd', this slot is method 'af'" in lines[0] and "decode 1" in lines[1]
    assert trusted_record(path, lambda r: True, slot=placement_slot(
        SweepWorkload("m", "HP32", 8, 1, 1), "pd")) == seal(BASE)


def test_sweep_rerun_after_copying_a_record_recomputes_it(tmp_path, capsys, catalog, cards):
    """The issue's steps on a real sweep: copy af.json over pd.json and into another
    workload's folder, rerun: both are recomputed with a warning, the records and the
    geomeans equal the first run's."""
    import shutil

    from opt.app.runs.sweep import SweepOptions, geomean_speedups, grid, run_sweep
    from opt.app.runs.sweep_calls import SolveCall

    wls = grid(["llama-2-7b"], ["HP32"], [16], [1, 2], [1])
    out = tmp_path / "sweep"
    solve = SolveCall(time_limit=5)
    first = [r for r, _ in run_sweep(wls, ["pd", "af"], out, solve, catalog=catalog,
                                     cards=cards, options=SweepOptions(layers=1))]
    a, b = wls[0].folder(out), wls[1].folder(out)
    shutil.copy(a / "af.json", a / "pd.json")
    shutil.copy(a / "af.json", b / "af.json")
    capsys.readouterr()
    again = run_sweep(wls, ["pd", "af"], out, solve, catalog=catalog, cards=cards,
                      options=SweepOptions(layers=1))
    err = capsys.readouterr().err.splitlines()
    assert [c for _, c in again] == [False, True, True, False]
    assert len(err) == 2 and all("copied from another slot" in x for x in err)
    recs = [r for r, _ in again]
    assert [(r["decode"], r["method"]) for r in recs] == [(1, "pd"), (1, "af"), (2, "pd"),
                                                          (2, "af")]
    assert geomean_speedups(recs) == geomean_speedups(first)


def test_a_cached_record_of_another_instance_is_recomputed(tmp_path, capsys, catalog, cards):
    """A record that names its slot but whose instance fingerprint is not the one this run
    builds for it (sealed again after the edit) is recomputed once the workload's instance is
    built."""
    from opt.app.runs.sweep import SweepOptions, grid, run_sweep
    from opt.app.runs.sweep_calls import SolveCall
    from opt.common.jsonio import read_json

    wls = grid(["llama-2-7b"], ["HP32"], [16], [1], [1])
    out = tmp_path / "sweep"
    solve = SolveCall(time_limit=5)
    run_sweep(wls, ["pd", "af"], out, solve, catalog=catalog, cards=cards,
              options=SweepOptions(layers=1))
    folder = wls[0].folder(out)
    pd = read_json(folder / "pd.json")
    write_json(seal({**pd, "instance_fingerprint": FP}), folder / "pd.json")
    (folder / "af.json").unlink()  # af is recomputed: its worker builds the instance
    capsys.readouterr()
    again = run_sweep(wls, ["pd", "af"], out, solve, catalog=catalog, cards=cards,
                      options=SweepOptions(layers=1))
    err = capsys.readouterr().err
    assert [c for _, c in again] == [False, False] and "instance fingerprint" in err
    assert read_json(folder / "pd.json")["instance_fingerprint"] == pd["instance_fingerprint"]
