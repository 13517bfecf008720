"""Sweep executors (opt.app.runs.executor): serial, process pool and a real Dask LocalCluster give the
same records; a sweep killed with SIGKILL resumes losing nothing and recomputing only what is
missing; torn files are recomputed; ERROR / invalid records never enter a summary."""

import builtins
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opt.app.cli import main
from opt.app.runs.executor import SerialExecutor, comparable, drive, make_executor, write_record
from opt.app.runs.serving_sweep import ServingSweepOptions, cells, run_serving_sweep
from opt.app.runs.serving_sweep import render as render_serving
from opt.app.runs.sweep import (
    Progress,
    SweepOptions,
    geomean_speedups,
    grid,
    render,
    run_sweep,
    speedups,
    usable,
)
from opt.app.runs.sweep_calls import SolveCall
from opt.common.errors import InputError
from opt.common.jsonio import read_json
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

ROOT = Path(__file__).resolve().parents[2]
SERVING = ["sweep", "serving", "--models", "gemma-3-27b", "--gpus", "H100", "H100,L40S",
           "--contexts", "8192", "32768", "--slo-ms", "60",
           "--param", "sub_block_layers=1"]  # 1-layer templates: the executors are tested here
N_SERVING = 2 * 2 * 4  # mixes x contexts x methods (col afd cad bnb)


def _records(out: Path) -> dict[str, dict]:
    return {p.relative_to(out).as_posix(): comparable(read_json(p)) for p in out.rglob("*.json")}


def _placement(out: Path, executor=None):
    wls = grid(["llama-2-7b"], ["HP32"], [8], [1, 2], [1])
    return run_sweep(wls, ["heft", "pd", "bifocal"], out, SolveCall(time_limit=10),
                     catalog=bundled_catalog(), cards=bundled_cards(),
                     options=SweepOptions(layers=1, executor=executor))


def _serving(out: Path, executor=None):
    todo = cells(["gemma-3-27b"], ["H100", "H100,L40S"], [8192, 32768], [60])
    call = SolveCall(time_limit=60, params=(("sub_block_layers", 1),), params_prefix="bnb")
    return run_serving_sweep(todo, ["col", "afd", "cad", "bnb"], out, call,
                             catalog=bundled_catalog(), cards=bundled_cards(),
                             options=ServingSweepOptions(executor=executor))


# ---- the serial references, computed once per module ---------------------------------------------

@pytest.fixture(scope="module")
def placement_serial(tmp_path_factory) -> dict[str, dict]:
    """The records of :func:`_placement` run serially."""
    out = tmp_path_factory.mktemp("p-serial")
    _placement(out)
    return _records(out)


@pytest.fixture(scope="module")
def serving_serial(tmp_path_factory) -> Path:
    """The folder of :func:`_serving` run serially (tests copy it before writing to it)."""
    out = tmp_path_factory.mktemp("s-serial")
    _serving(out)
    return out


@pytest.fixture(scope="module")
def serving_cli_serial(tmp_path_factory) -> dict[str, dict]:
    """The records of the CLI sweep ``SERVING`` run serially and uninterrupted."""
    out = tmp_path_factory.mktemp("s-cli-serial")
    assert main([*SERVING, "--out", str(out), "--executor", "serial"]) == 0
    return _records(out)


# ---- the factory ---------------------------------------------------------------------------------

def test_make_executor_choices_and_errors(monkeypatch):
    assert make_executor("serial").kind == "serial"
    ex = make_executor(None, jobs=3)
    assert ex.kind == "process" and ex.workers == 3 and not ex.in_order
    with pytest.raises(InputError, match="unknown executor 'gpu'"):
        make_executor("gpu")
    with pytest.raises(InputError, match="--scheduler needs --executor dask"):
        make_executor("process", scheduler="tcp://localhost:8786")
    with pytest.raises(InputError, match="jobs must be ≥ 1"):
        make_executor("process", jobs=0)

    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(InputError, match=r"--executor dask / --scheduler need dask.*hetopt\[dist\]"):
        make_executor("dask")
    with pytest.raises(InputError, match="--executor dask"):
        make_executor(scheduler="tcp://localhost:8786")


def test_process_pool_rejects_unpicklable_work(tmp_path):
    wls = grid(["llama-2-7b"], ["HP32"], [8], [1], [1])
    with make_executor("process", jobs=2) as ex, \
            pytest.raises(InputError, match="picklable work items"):
        run_sweep(wls, ["heft", "pd"], tmp_path, lambda inst, m: None,
                  catalog=bundled_catalog(), cards=bundled_cards(),
                  options=SweepOptions(layers=1, executor=ex))
    assert not list(tmp_path.rglob("*.json"))


def test_drive_progress_in_and_out_of_order():
    import io

    buf = io.StringIO()
    p = Progress(3, stream=buf, tty=False)
    got = list(drive(SerialExecutor(), lambda x: {"v": x, "wall_s": 1.0}, [1, 2, 3],
                     ["a", "b", "c"], p))
    p.close()
    assert [i for i, _ in got] == [0, 1, 2]
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("[1/3] 0% eta ? a") and lines[2].startswith("[3/3] 66% eta 1s c")
    assert "3 computed, 0 cached" in lines[-1]


# ---- same records whatever the executor ----------------------------------------------------------

def test_process_pool_same_records_as_serial(tmp_path, placement_serial, serving_serial):
    with make_executor("process", jobs=2) as ex:
        done = _placement(tmp_path / "p-pool", ex)
        assert [(r["decode"], r["method"]) for r, _ in done] == \
            [(d, m) for d in (1, 2) for m in ("heft", "pd", "bifocal")]  # grid order kept
        _serving(tmp_path / "s-pool", ex)
    a, b = placement_serial, _records(tmp_path / "p-pool")
    assert len(a) == 6 and a == b
    a, b = _records(serving_serial), _records(tmp_path / "s-pool")
    assert len(a) == 16 and a == b
    assert not list(tmp_path.rglob("*.tmp"))


def test_dask_local_cluster_same_records(tmp_path, capsys, placement_serial,
                                        serving_cli_serial):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        with make_executor("dask", scheduler=cluster.scheduler_address) as ex:
            assert ex.kind == "dask" and ex.workers == 2
            _placement(tmp_path / "p-dask", ex)
        # the CLI path: --scheduler
        assert main([*SERVING, "--out", str(tmp_path / "s-dask"), "--json",
                     "--scheduler", cluster.scheduler_address]) == 0
        data = json.loads(capsys.readouterr().out)
        assert len(data["records"]) == N_SERVING and not any(r["cached"] for r in data["records"])
    assert _records(tmp_path / "p-dask") == placement_serial
    assert len(_records(tmp_path / "s-dask")) == N_SERVING
    assert _records(tmp_path / "s-dask") == serving_cli_serial


# ---- killed and resumed --------------------------------------------------------------------------

def _kill_after(argv: list[str], out: Path, n: int) -> int:
    """Run ``python -m opt *argv`` and SIGKILL it once ``n`` records exist; return how many
    records were complete then."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "opt", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list(out.rglob("*.json"))) >= n:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it was killed"
    return len(list(out.rglob("*.json")))


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_killed_sweep_resumes_losing_nothing(tmp_path, capsys, executor, serving_cli_serial):
    out = tmp_path / "killed"
    before = _kill_after([*SERVING, "--out", str(out), "--executor", executor, "--jobs", "2"],
                         out, 6)
    assert 0 < before < N_SERVING
    files = {p: p.read_bytes() for p in out.rglob("*.json")}
    for p in files:  # every file written before the kill is a whole record
        assert read_json(p)["method"] in ("col", "afd", "cad", "bnb")
    # a torn record (as a non-atomic writer would leave) and a stray temporary file
    torn = next(iter(files))
    torn.write_text('{"model": "gemma-3-27b", "gpus": ["H1')
    (torn.parent / "bnb.json.123.tmp").write_text("{")

    assert main([*SERVING, "--out", str(out), "--json", "--executor", "serial"]) == 0
    data = json.loads(capsys.readouterr().out)
    cached = [r for r in data["records"] if r["cached"]]
    assert len(data["records"]) == N_SERVING
    assert len(cached) == before - 1  # everything finished was reused, the torn file redone
    for p, text in files.items():
        if p != torn:
            assert p.read_bytes() == text  # untouched
    read_json(torn)
    # ... and the result is exactly that of an uninterrupted run
    assert _records(out) == serving_cli_serial


# ---- invalid results never enter a table ---------------------------------------------------------

def _broken_heft(inst, method):
    """HEFT's schedule with one task started a tick late: the validator must reject it."""
    from solvers import solve
    from solvers.certify import certify

    res = solve(inst, "heft")
    if method == "heft":
        ev = res.solution["compute"][-1]
        ev["start"] += 1
        return certify(inst, res)
    return solve(inst, method)


def test_invalid_schedule_is_marked_excluded_and_retried(tmp_path):
    wls = grid(["llama-2-7b"], ["HP32"], [8], [1], [1])
    kw = dict(catalog=bundled_catalog(), cards=bundled_cards(), options=SweepOptions(layers=1))
    done = run_sweep(wls, ["heft", "pd"], tmp_path, _broken_heft, **kw)
    bad = next(r for r, _ in done if r["method"] == "heft")
    assert bad["status"] == "ERROR" and bad["invalid"] is True and bad["makespan"] is None
    assert "invalid schedule: rule" in bad["error"] and not usable(bad)
    records = [r for r, _ in done]
    assert all(v is None for (k, m), v in speedups(records).items() if m == "heft")
    g = {x["method"]: x for x in geomean_speedups(records)}
    assert g["heft"]["workloads"] == 0 and g["heft"]["geomean_speedup"] is None
    row = next(line for line in render(records).splitlines() if " heft " in line)
    assert "ERROR (invalid)" in row
    # a rerun retries the ERROR record and reuses the good one
    done = run_sweep(wls, ["heft", "pd"], tmp_path, _broken_heft, **kw)
    assert [c for _, c in done] == [False, True]


def test_serving_error_record_marked_not_compared(tmp_path, serving_serial):
    recs = [{"model": "m", "gpus": ["H100"], "context": 8192, "slo_ms": 60.0, "method": m,
             "status": s, "cost_usd_per_mtok": c, "tightest_t_rtt_ms": None}
            for m, s, c in [("col", "FEASIBLE", 2.0), ("bnb", "ERROR", 1.0)]]
    recs[1]["invalid"] = True
    text = render_serving(recs)
    assert "ERROR" in text and "1.0000" not in text
    assert text.splitlines()[-1].split()[-2:] == ["2.0000", "ERROR"]  # and no ratio
    # an ERROR record on disk is recomputed by a rerun
    out = tmp_path / "s"
    shutil.copytree(serving_serial, out)  # what `_serving(out)` writes
    p = out / "gemma-3-27b" / "H100" / "s8192-slo60" / "bnb.json"
    rec = read_json(p)
    write_record({**rec, "status": "ERROR", "invalid": True, "cost_usd_per_mtok": None}, p)
    done = _serving(out)
    assert sum(not c for _, c in done) == 1 and read_json(p)["status"] == rec["status"]


# ---- Ctrl-C stops a pool at once, workers stay quiet -----------------------------------------

def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_pool_workers_ignore_sigint():
    code = ("import os, signal; from opt.app.runs.executor import _watch_parent; "
            "_watch_parent(os.getpid()); print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "True"


def test_ctrl_c_terminates_running_pool_items():
    """The workers running the 60 s items are terminated (SIGTERM), not waited for."""
    workers = []
    with pytest.raises(KeyboardInterrupt):
        with make_executor("process", 2) as ex:
            for _ in ex.map_unordered(_sleep, [0.1, 60.0, 60.0]):
                workers = list(ex._pool._processes.values())
                raise KeyboardInterrupt
    assert workers
    for proc in workers:
        proc.join(timeout=20)
    codes = [proc.exitcode for proc in workers]
    assert None not in codes and -signal.SIGTERM in codes, codes


def test_ctrl_c_cancels_nothing_from_the_main_thread(monkeypatch):
    """On Ctrl-C only the pool's manager thread cancels queued futures; a
    future cancelled from the main thread and then failed by the manager when its worker is
    terminated was an ``InvalidStateError: CANCELLED`` traceback after the one line."""
    import threading
    from concurrent.futures import Future

    main_cancels, thread_errors = [], []
    real_cancel = Future.cancel

    def cancel(self):
        if threading.current_thread() is threading.main_thread():
            main_cancels.append(self)
        return real_cancel(self)

    monkeypatch.setattr(Future, "cancel", cancel)
    monkeypatch.setattr(threading, "excepthook", lambda a: thread_errors.append(a.exc_type))
    with pytest.raises(KeyboardInterrupt):
        with make_executor("process", 2) as ex:
            gen = ex.map_unordered(_sleep, [0.05] + [30.0] * 6)
            next(gen)
            gen.throw(KeyboardInterrupt)
    assert main_cancels == [] and thread_errors == []
