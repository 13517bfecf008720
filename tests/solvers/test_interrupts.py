"""Ctrl-C during an exact solve: the library raises KeyboardInterrupt (never a FEASIBLE or
ERROR result that looks like a time limit), leaves no solver thread or signal state behind,
and ``hetopt solve -o FILE`` exits 130 with one line and FILE untouched (models.interrupt)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import instances
from models.highs import LogCapture
from models.interrupt import deferred, finishing, interruptible
from models.placement import cpsat_run as cpsat
from solvers.api import solve

#: a bundled instance no exact method proves within its time limit here (CP-SAT, the MILP and
#: the block search all run until they are stopped)
LONG = "p1-llama-2-7b-hp32-p64-d2-l2"
ROOT = Path(__file__).resolve().parents[2]
#: ``hetopt`` in a child interpreter
HETOPT = (sys.executable, "-c", "import sys; from opt.app.cli import main; sys.exit(main())")


@pytest.fixture
def interrupt_at_first_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT to this process at the solver's first log line (CP-SAT's or HiGHS'), i.e. while
    the solver runs (a solve with ``log=True``)."""
    sent = threading.Event()

    def once() -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

    emit = LogCapture.emit
    monkeypatch.setattr(cpsat, "_log_line", lambda line: once())
    monkeypatch.setattr(LogCapture, "emit", lambda self, record: (once(), emit(self, record)))


@pytest.mark.parametrize("method", ["cpsat", "milp", "cpsat-blocks"])
def test_an_interrupted_exact_solve_raises_keyboard_interrupt(
        method: str, interrupt_at_first_log: None) -> None:
    inst = instances.load(LONG)
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        solve(inst, method, time_limit=60, num_workers=2, seed=0, log=True)
    # the handler and the wake-up descriptor are Python's again, no watcher or node thread
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1
    assert threading.active_count() == before, [t.name for t in threading.enumerate()]


def test_interruptible_asks_the_solver_to_stop_until_the_call_returns() -> None:
    stopped = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        with interruptible(stopped.set):
            os.kill(os.getpid(), signal.SIGINT)
            assert stopped.wait(30)  # a C call would be running here; the watcher stops it
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_interruptible_without_a_signal_changes_nothing() -> None:
    with interruptible(lambda: None):
        value = 42
    assert value == 42
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1


def test_a_deferred_signal_is_raised_after_the_block() -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with deferred():  # e.g. a C extension's import: not interrupted inside
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("the block ran to its end")
    assert steps == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_while_finishing_is_dropped() -> None:
    with finishing():
        os.kill(os.getpid(), signal.SIGINT)
        done = True
    assert done
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_cli_solve_interrupted_exits_130_and_keeps_the_previous_output(
        tmp_path: Path, method: str) -> None:
    out = tmp_path / "r.json"
    previous = b'{"a previous": "result"}\n'
    out.write_bytes(previous)
    proc = subprocess.Popen(
        [*HETOPT, "solve", LONG, "--method", method,
         "--time-limit", "120", "--log", "-o", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the solver's log has begun: the solve is running
    assert first, "the solver printed no log line"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in (first + err).splitlines() if ln.startswith("hetopt")]
    assert proc.returncode == 130, err[-2000:]
    assert lines == ["hetopt: interrupted"]
    assert out.read_bytes() == previous
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary file left
