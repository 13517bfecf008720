"""``hetopt sweep placement``: records per (workload, method), resume, --fresh, table, errors."""

import io
import json

import pytest

from opt.app.cli import main
from opt.app.runs.sweep import Progress, geomean, geomean_speedups, render
from opt.common.jsonio import read_json, write_json

ARGS = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--prefill", "8",
        "--decode", "1", "2", "--methods", "heft", "pd", "--layers", "1"]
WORKLOADS = ("p8-d1-b1", "p8-d2-b1")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_records_resume_fresh(tmp_path, capsys):
    out = tmp_path / "sweep"
    code, text, err = run(capsys, *ARGS, "--out", str(out))
    assert code == 0
    files = {p.relative_to(out).as_posix() for p in out.rglob("*.json")}
    assert files == {f"llama-2-7b/HP32/{w}/{m}.json" for w in WORKLOADS for m in ("heft", "pd")}
    rec = read_json(out / "llama-2-7b/HP32/p8-d2-b1/pd.json")
    assert rec["status"] == "FEASIBLE" and rec["time_unit"] == "ns" and rec["layers"] == 1
    assert rec["makespan"] == rec["ttft"] + rec["decode_time"]
    assert rec["mean_tpot"] == rec["decode_time"] / 2
    assert rec["runtime_s"] >= 0
    # the table: per workload latency, TTFT, decode and speedup over PD; geomean per model
    assert "speedup vs PD" in text and "TTFT ms" in text and "decode ms" in text
    assert "geomean speedup over PD" in text
    assert "[4/4] 100%" in err and "[1/4]" in err  # one progress line per item (not a TTY)

    # a rerun reuses every record, as written (sealed with the instance fingerprint)
    code, text, _ = run(capsys, *ARGS, "--out", str(out), "--json")
    assert code == 0
    data = json.loads(text)
    assert all(r["cached"] for r in data["records"]) and len(data["records"]) == 4
    assert all(r["instance_fingerprint"].startswith("sha256:") and r["digest"]
               for r in data["records"])
    g = {(x["model"], x["method"]): x for x in data["geomean_speedup_vs_pd"]}
    assert g[("llama-2-7b", "pd")]["geomean_speedup"] == pytest.approx(1.0)
    assert g[("llama-2-7b", "heft")]["workloads"] == 2

    # a tampered record is recomputed with one line, never trusted
    rec["makespan"] = 123456789
    write_json(rec, out / "llama-2-7b/HP32/p8-d2-b1/pd.json")
    code, text, err = run(capsys, *ARGS, "--out", str(out), "--json")
    data = json.loads(text)
    assert [r["method"] for r in data["records"] if not r["cached"]] == ["pd"]
    assert "p8-d2-b1/pd.json: cached record not reused (digest mismatch" in err
    assert read_json(out / "llama-2-7b/HP32/p8-d2-b1/pd.json")["makespan"] != 123456789

    # --fresh recomputes everything
    code, text, _ = run(capsys, *ARGS, "--out", str(out), "--json", "--fresh")
    data = json.loads(text)
    assert not any(r["cached"] for r in data["records"])

    # a record built with other options (layers) is not reused
    code, text, _ = run(capsys, *ARGS[:-2], "--layers", "2", "--out", str(out), "--json")
    data = json.loads(text)
    assert not any(r["cached"] for r in data["records"])
    # embed, two layers of 16 ops + 4 attention ops of the second KV head group, final_norm, lm_head
    per_step = 1 + 2 * 20 + 2
    assert {r["tasks"] for r in data["records"]} == {2 * per_step, 3 * per_step}


def test_sweep_unknown_method_exits_2(tmp_path, capsys):
    argv = [a if a != "heft" else "nosuch" for a in ARGS]
    code, out, err = run(capsys, *argv, "--out", str(tmp_path))
    assert code == 2 and out == ""
    assert "unknown method(s) nosuch" in err and "known:" in err and "pd+ffn" in err
    assert not any(tmp_path.iterdir())


def test_sweep_bad_sizes_exit_2(tmp_path, capsys):
    code, _, err = run(capsys, *ARGS[:-2], "--layers", "99", "--out", str(tmp_path))
    assert code == 2 and "layers must be in 1..32" in err
    argv = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32",
            "--prefill", "8", "--decode", "-1", "--methods", "pd", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:  # refused by the parser's bounded type
        run(capsys, *argv)
    assert exc.value.code == 2 and "--decode: expected an integer in 0.." in \
        capsys.readouterr().err
    code, _, err = run(capsys, *[{"HP32": "HP9", "-1": "1"}.get(a, a) for a in argv])
    assert code == 2 and "unknown platform 'HP9'" in err
    assert not any(tmp_path.iterdir())


def test_progress_in_place_on_a_terminal():
    buf = io.StringIO()
    p = Progress(3, stream=buf, tty=True)
    for label in "abc":
        p.start(label)
        p.finish_item(1.0 if label != "b" else None)
    p.close()
    text = buf.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert "[2/3] 33% eta 2s b" in text and "100% done" in text


def test_summaries_without_pd():
    recs = [{"model": "m", "platform": "P", "prefill": 1, "decode": 1, "batch": 1,
             "method": "heft", "status": "FEASIBLE", "makespan": 10, "ttft": 5,
             "decode_time": 5, "runtime_s": 0.1, "time_unit": "ns"}]
    text = render(recs)
    assert "speedup" not in text.splitlines()[0] and "'pd' is not in the sweep" in text
    assert geomean_speedups(recs)[0]["geomean_speedup"] is None
    assert geomean([2.0, 8.0]) == pytest.approx(4.0) and geomean([]) is None


def test_a_record_of_other_method_settings_is_recomputed(tmp_path):
    """Bifocal records keep the effective settings (every default filled in), PD its list
    scheduler's; a rerun under other settings (a changed default, other params) recomputes
    them, while the records of methods whose settings did not change are reused. Records count
    their weight loads and evictions per device class."""
    from opt.app.runs.sweep import SweepOptions, grid, run_sweep
    from opt.app.runs.sweep_calls import SolveCall
    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards

    out = tmp_path / "sweep"
    wls = grid(["llama-2-7b"], ["HP32"], [8], [1], [1])

    def sweep(solve):
        return run_sweep(wls, ["bifocal", "pd"], out, solve, catalog=bundled_catalog(),
                         cards=bundled_cards(), options=SweepOptions(layers=1))

    first = sweep(SolveCall())
    rec = read_json(out / "llama-2-7b/HP32/p8-d1-b1/bifocal.json")
    assert rec["settings"]["copy_cost"] == 0 and rec["settings"]["window"] is True
    assert rec["settings"]["revision"] >= 5
    pd = read_json(out / "llama-2-7b/HP32/p8-d1-b1/pd.json")
    assert pd["settings"] == {"device_choice": "least_available"}
    assert set(pd["loads"]) <= {"NPU", "PIM"} and pd["evictions"] == {}
    assert not any(cached for _, cached in first)
    assert all(cached for _, cached in sweep(SolveCall()))
    other = sweep(SolveCall(params=(("copy_cost", 1.0),), params_prefix="bifocal"))
    assert [(r["method"], cached) for r, cached in other] == [("bifocal", False), ("pd", True)]
    assert read_json(out / "llama-2-7b/HP32/p8-d1-b1/bifocal.json")["settings"]["copy_cost"] == 1


def test_method_params_on_the_command_line(tmp_path, capsys):
    """``--param METHOD.KEY=VALUE`` reaches that method only; its record keeps the resolved
    parameters (defaults filled in); a rerun with the same params reuses it, without them (the
    default λ) recomputes it, and the parameterless PD's record is reused throughout."""
    out = tmp_path / "sweep"
    argv = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--prefill",
            "8", "--decode", "1", "--methods", "bifocal", "pd", "--layers", "1", "--out",
            str(out), "--json"]

    def cached(*extra):
        code, text, _ = run(capsys, *argv, *extra)
        assert code == 0
        return {r["method"]: r["cached"] for r in json.loads(text)["records"]}

    assert cached("--param", "bifocal.lam=0", "--param", "bifocal.token_horizon=steps") == \
        {"bifocal": False, "pd": False}
    rec = read_json(out / "llama-2-7b/HP32/p8-d1-b1/bifocal.json")
    assert rec["settings"]["lam"] == 0 and rec["settings"]["token_horizon"] == "steps"
    assert rec["settings"]["copy_cost"] == 0 and rec["settings"]["gamma"] == 0.4  # defaults
    pd = read_json(out / "llama-2-7b/HP32/p8-d1-b1/pd.json")
    assert pd["settings"] == {"device_choice": "least_available"}
    assert set(pd["loads"]) <= {"NPU", "PIM"} and pd["evictions"] == {}
    assert cached("--param", "bifocal.token_horizon=steps", "--param", "bifocal.lam=0") == \
        {"bifocal": True, "pd": True}
    assert cached() == {"bifocal": False, "pd": True}
    from heuristics.placement.bifocal import BifocalParams

    assert read_json(out / "llama-2-7b/HP32/p8-d1-b1/bifocal.json")["settings"]["lam"] == \
        BifocalParams().lam


@pytest.mark.parametrize("item, message", [
    ("lam=0", "expected METHOD.KEY=VALUE"),
    ("heft.lam=0", "expected METHOD.KEY=VALUE"),  # heft is not among the sweep's methods
    ("pd.lam=0", "method 'pd' takes no param lam"),
    ("bifocal.lamb=0", "did you mean lam?"),
    ("bifocal.lam=-1", "param lam must be a finite number"),
])
def test_bad_method_params_exit_2(tmp_path, capsys, item, message):
    code, out, err = run(capsys, *ARGS[:-5], "--methods", "bifocal", "pd", "--layers", "1",
                         "--param", item, "--out", str(tmp_path))
    assert code == 2 and out == "" and message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_a_changed_default_is_recomputed(tmp_path, monkeypatch):
    """A record made under a former Bifocal default (γ here) is recomputed once it changes
    (simulated by a subclass with another default), and the new record carries the new λ."""
    from dataclasses import dataclass

    import heuristics.placement.bifocal as bifocal_module
    from heuristics.placement.bifocal import BifocalParams
    from opt.app.runs.sweep import SweepOptions, grid, run_sweep
    from opt.app.runs.sweep_calls import SolveCall
    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards

    out = tmp_path / "sweep"
    wls = grid(["llama-2-7b"], ["HP32"], [8], [1], [1])

    def sweep():
        return [(r["method"], c) for r, c in run_sweep(
            wls, ["bifocal", "heft"], out, SolveCall(), catalog=bundled_catalog(),
            cards=bundled_cards(), options=SweepOptions(layers=1))]

    assert sweep() == [("bifocal", False), ("heft", False)]
    assert sweep() == [("bifocal", True), ("heft", True)]

    @dataclass(frozen=True)
    class Changed(BifocalParams):
        gamma: float = BifocalParams().gamma / 2

    monkeypatch.setattr(bifocal_module, "BifocalParams", Changed)
    assert sweep() == [("bifocal", False), ("heft", True)]
    assert read_json(out / "llama-2-7b/HP32/p8-d1-b1/bifocal.json")["settings"]["gamma"] == \
        Changed().gamma


def test_settings_of_methods_with_and_without_params():
    """Resolved settings: every default for the methods that declare them (Bifocal, its layout
    strategies, WLA, policy search, HEFT and the static policies: the list scheduler's
    ``device_choice``, the static policies' default ``least_available``); the given params
    for the exact solvers (their defaults are the back end's)."""
    from solvers.registry import PROBLEMS, method_settings

    listed = {"device_choice": "fit_in_class"}
    static = {"device_choice": "least_available"}
    assert method_settings("pd", PROBLEMS, {}) == static
    assert method_settings("heft", PROBLEMS, {}) == listed
    assert method_settings("heft", PROBLEMS, {"device_choice": "eft"}) == {"device_choice": "eft"}
    assert method_settings("pd/linear", PROBLEMS, {}) == static
    assert method_settings("bifocal", PROBLEMS, {"H": 3}) == \
        method_settings("bifocal", PROBLEMS, {})
    assert method_settings("policy-search", PROBLEMS, {}) == {"max_evaluations": 200,
                                                               **listed}
    assert method_settings("bifocal/linear", PROBLEMS, {"lam": 1}) == \
        method_settings("bifocal", PROBLEMS, {"lam": 1})
    wla = method_settings("bifocal/wla", PROBLEMS, {"budget": 5, "lam": 1})
    assert wla["wla"]["budget"] == 5 and wla["wla"]["wla_rule"] == "paper"
    assert wla["bifocal"]["lam"] == 1
    assert method_settings("cpsat", PROBLEMS, {}) == {}
    assert method_settings("cpsat", PROBLEMS, {"symmetry_breaking": False}) == \
        {"symmetry_breaking": False}


def test_a_record_of_another_load_rule_or_routing_is_rebuilt():
    """A record is reused only under the builder's load rule and MoE routing (records of the
    earlier at_use default, or of per-token routing, or that do not say, are rebuilt)."""
    from opt.app.runs.sweep import _reusable

    rec = {"layers": 1, "tp": 1, "kv_layout": "heads", "precision": "fp16/fp16/fp16",
           "kv_reserved": True, "makespan": 10, "status": "FEASIBLE",
           "load_timing": "overlap", "moe_routing": None}
    assert _reusable(rec, 1, 1, "fp16/fp16/fp16")
    assert _reusable({**rec, "moe_routing": "fixed"}, 1, 1, "fp16/fp16/fp16")
    for change in ({"load_timing": "at_use"}, {"moe_routing": "per_token"}):
        assert not _reusable({**rec, **change}, 1, 1, "fp16/fp16/fp16"), change
    for key in ("load_timing", "moe_routing"):
        assert not _reusable({k: v for k, v in rec.items() if k != key}, 1, 1,
                             "fp16/fp16/fp16"), key
