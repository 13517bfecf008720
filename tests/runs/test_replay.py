"""Request-level serving replay (opt.app.runs.replay, opt.app.runs.replay_schedules, hetopt replay)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opt.app.cli import main
from opt.app.runs.replay import (
    ReplayOptions,
    Request,
    Shape,
    ShapeTimes,
    bucket,
    generate_trace,
    read_burstgpt_csv,
    run_replay,
)
from opt.app.runs.replay_schedules import check_methods, schedule_shape, shape_builder
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

CAT, CARDS = bundled_catalog(), bundled_cards()
HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def test_generated_trace_matches_the_paper_sample():
    tr = generate_trace(500, seed=3)
    ins = np.array([r.input_tokens for r in tr])
    outs = np.array([r.output_tokens for r in tr])
    assert len(tr) == 500 and abs(ins.mean() - 708) < 1.5 and abs(outs.mean() - 286) < 1.5
    assert ins.min() >= 1 and ins.max() <= 2048 and outs.max() <= 1024
    arr = np.array([r.arrival_s for r in tr])
    assert np.all(np.diff(arr) >= 0)
    gaps = np.diff(arr)
    assert gaps.std() / gaps.mean() > 1.5  # bursty: CV well above Poisson's 1
    assert generate_trace(500, seed=3) == tr  # seeded
    half = generate_trace(500, seed=3, time_scale=0.5)
    assert np.allclose([r.arrival_s for r in half], arr * 0.5)
    with pytest.raises(InputError, match="time_scale"):
        generate_trace(10, time_scale=0)
    with pytest.raises(InputError, match="mean_input"):
        generate_trace(10, mean_input=5000)


def test_burstgpt_csv(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "10,ChatGPT,100,50,150,Conversation log\n"
                    "12.5,GPT-4,200,0,200,Conversation log\n"        # failed: skipped
                    "11,GPT-4,300,20,320,API log\n"
                    "14,ChatGPT,30,7,37,API log\n")
    reqs = read_burstgpt_csv(path, time_scale=2.0)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in reqs] == \
        [(0.0, 100, 50), (2.0, 300, 20), (8.0, 30, 7)]
    assert [r.input_tokens for r in read_burstgpt_csv(path, model="ChatGPT")] == [100, 30]
    assert len(read_burstgpt_csv(path, limit=1)) == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("Time,Request tokens\n1,2\n")
    with pytest.raises(InputError, match="Timestamp"):
        read_burstgpt_csv(bad)


def test_bucket():
    b = (64, 128, 256)
    assert [bucket(v, b) for v in (0, 1, 64, 65, 256, 257, 600)] == [0, 64, 64, 128, 256, 512,
                                                                    768]


class FakeSchedules:
    """Token times t_i = 10 µs·prefill·B + 5 ms·i (ns ticks); counts the calls."""

    def __init__(self):
        self.calls = []

    def build(self, shape: Shape) -> Shape:
        return shape

    def __call__(self, shape: Shape, method: str) -> ShapeTimes:
        self.calls.append((method, shape))
        t0 = 10_000 * shape.prefill * shape.batch
        ticks = [t0 + 5_000_000 * i for i in range(shape.decode + 1)]
        return ShapeTimes(ticks, ticks[-1], "ns", 0.0)


def test_fcfs_batching_timeout_and_metrics(tmp_path):
    reqs = [Request(0, 0.0, 100, 3), Request(1, 0.005, 50, 2), Request(2, 0.020, 60, 5),
            Request(3, 0.021, 60, 1), Request(4, 0.022, 60, 2), Request(5, 0.023, 60, 2),
            Request(6, 0.024, 60, 2)]
    fake = FakeSchedules()
    opts = ReplayOptions(input_buckets=(64, 128), output_buckets=(4, 8), decode_prefix=False)
    [(rec, cached)] = run_replay(reqs, ["x"], tmp_path, fake, fake.build, model="m",
                                 platform="p", options=opts)
    assert not cached
    per = {r["id"]: r for r in rec["per_request"]}
    # batch 1: requests 0, 1 (timeout 10 ms after the first arrival), shape b2-p128-d4
    assert per[0]["dispatch_s"] == pytest.approx(0.010) and per[1]["shape"] == "b2-p128-d4"
    t0 = 10_000 * 128 * 2 * 1e-9
    assert per[0]["ttft_s"] == pytest.approx(0.010 + t0)
    assert per[1]["ttft_s"] == pytest.approx(0.005 + t0)
    assert per[0]["e2e_s"] == pytest.approx(0.010 + t0 + 2 * 0.005)  # 3 tokens: steps 0..2
    assert per[0]["tbt_s"] == pytest.approx(0.005)
    busy_until = 0.010 + t0 + 4 * 0.005  # padded to 4 decode steps
    # batch 2: the server is busy: 2, 3, 4, 5 arrived meanwhile → full batch of 4
    assert per[2]["dispatch_s"] == pytest.approx(busy_until)
    assert {per[i]["shape"] for i in (2, 3, 4, 5)} == {"b4-p64-d4"}
    assert per[3]["tbt_s"] is None and per[3]["e2e_s"] == pytest.approx(per[3]["ttft_s"])
    assert per[6]["shape"] == "b1-p64-d4"
    assert rec["batches"] == 3 and rec["distinct_shapes"] == 3
    assert rec["ttft_s"]["median"] <= rec["ttft_s"]["p90"] <= rec["ttft_s"]["p99"]
    # rerun: the method's result and every schedule are reused
    n_calls = len(fake.calls)
    [(again, cached)] = run_replay(reqs, ["x"], tmp_path, fake, fake.build, model="m",
                                   platform="p", options=opts)
    assert cached and len(fake.calls) == n_calls and again["e2e_s"] == rec["e2e_s"]
    # a second method on the same shapes reuses nothing of "x" but the schedule files persist
    (tmp_path / "x.json").unlink()
    run_replay(reqs, ["x"], tmp_path, fake, fake.build, model="m", platform="p", options=opts)
    assert len(fake.calls) == n_calls  # schedules read back from schedules/x/*.json


def test_decode_prefix_schedules_once_per_batch_and_prefill():
    reqs = [Request(i, i * 10.0, 60, o) for i, o in enumerate((20, 3, 9, 2))]
    fake = FakeSchedules()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        [(rec, _)] = run_replay(reqs, ["x"], tmp, fake, fake.build, model="m", platform="p",
                                options=ReplayOptions(input_buckets=(64,),
                                                      output_buckets=(4, 8, 16, 32)))
    # the first batch needs 19 steps → d32; the later, shorter ones reuse its prefix
    assert len(fake.calls) == 1 and fake.calls[0][1] == Shape(1, 64, 32)
    per = {r["id"]: r for r in rec["per_request"]}
    assert per[2]["e2e_s"] - per[2]["ttft_s"] == pytest.approx(8 * 0.005)
    # padding: inputs 60 → 64, no output padding (each batch runs its own steps)
    assert rec["padding_factor"] == pytest.approx((4 * 64 + 4 + 34 - 4) / (4 * 60 + 34))
    assert [b for b in rec["shapes"]] == ["b1-p64-d32"]
    assert per[3]["dispatch_s"] == pytest.approx(30.01)


@pytest.mark.parametrize("method", ["bifocal", "pd", "af"])
def test_decode_prefix_is_exact_for_the_replay_schedulers(method):
    """Steps are chained, so the HEFT-order list schedule of a longer decode starts with the
    schedule of a shorter one (Bifocal without its token term included)."""
    build = shape_builder(CARDS["dops-qwen-1.8b"], CAT.platform("HP32"), CAT, layers=1)
    long = schedule_shape(build(Shape(2, 64, 40)), method)
    short = schedule_shape(build(Shape(2, 64, 12)), method)
    assert long.token_ticks[:13] == short.token_ticks
    assert short.makespan == short.token_ticks[-1]
    assert all(a < b for a, b in zip(long.token_ticks, long.token_ticks[1:]))


def test_methods_checked():
    assert check_methods(["pd", "bifocal", "pd"]) == ["pd", "bifocal"]
    with pytest.raises(InputError, match="methods"):
        check_methods(["bifocal", "cpsat"])


def test_cli_replay_resumes(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text(HEADER + "".join(f"{i * 0.004},ChatGPT,{40 + 7 * i},{2 + i % 5},0,x\n"
                                    for i in range(9)))
    argv = ["replay", "--model", "dops-qwen-1.8b", "--platform", "HP32", "--trace", str(csv),
            "--layers", "1", "--methods", "bifocal", "pd", "--input-buckets", "64", "128",
            "--output-buckets", "8", "--out", str(tmp_path / "out"), "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert [m["method"] for m in first["methods"]] == ["bifocal", "pd"]
    for m in first["methods"]:
        assert m["requests"] == 9 and not m["cached"] and m["batches"] >= 3
        assert m["ttft_s"]["median"] > 0 and m["e2e_s"]["p99"] >= m["ttft_s"]["p99"]
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert all(m["cached"] for m in again["methods"])
    assert main(argv[:-1] + ["--methods", "cpsat"]) == 2


# ---- a fixed progress denominator, --requests ≥ 1, Ctrl-C -------------------------------------

def test_progress_counts_requests_with_a_total_known_up_front(tmp_path):
    import io

    from opt.app.runs.sweep import Progress

    reqs = generate_trace(40, mean_input=100, mean_output=20, rate_per_s=50.0, seed=1)
    stream = io.StringIO()
    progress = Progress(0, stream=stream, tty=False)
    seen = []

    class Watch(FakeSchedules):
        def __call__(self, inst, method):
            seen.append((progress.total, progress.done))
            return super().__call__(inst, method)

    fake = Watch()
    run_replay(reqs, ["x", "y"], tmp_path, fake, fake.build, model="m", platform="p",
               progress=progress)
    assert seen and all(total == 80 for total, _ in seen)  # fixed before the first schedule
    dones = [done for _, done in seen]
    assert dones == sorted(dones) and progress.done == progress.total == 80
    lines = stream.getvalue().splitlines()
    assert all("/80]" in x for x in lines) and lines[-1].startswith("[80/80] 100% done")
    # a rerun: every method cached, still counted in requests
    progress = Progress(0, stream=io.StringIO(), tty=False)
    run_replay(reqs, ["x", "y"], tmp_path, fake, fake.build, model="m", platform="p",
               progress=progress)
    assert progress.done == progress.total == 80 and progress.computed == 0


@pytest.mark.parametrize("extra", [[], ["--trace", "t.csv"]])
def test_cli_replay_rejects_zero_requests(tmp_path, capsys, extra):
    (tmp_path / "t.csv").write_text(HEADER + "0,ChatGPT,40,4,0,x\n")
    argv = ["replay", "--model", "dops-qwen-1.8b", "--platform", "HP32", "--requests", "0",
            "--out", str(tmp_path / "out"), *[str(tmp_path / x) if x.endswith(".csv") else x
                                              for x in extra]]
    with pytest.raises(SystemExit) as exc:  # refused by the parser's bounded type
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--requests" in err \
        and "got '0'" in err
    with pytest.raises(InputError, match="requests"):
        generate_trace(0)
    with pytest.raises(InputError, match="requests"):
        read_burstgpt_csv(tmp_path / "t.csv", limit=0)


def test_ctrl_c_anywhere_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    import opt.app.runs.replay

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(opt.app.runs.replay, "run_replay", interrupted)
    out = tmp_path / "out"
    assert main(["replay", "--model", "dops-qwen-1.8b", "--platform", "HP32", "--requests",
                 "3", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"hetopt: interrupted; finished records are kept in {out}/"]
