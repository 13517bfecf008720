"""Ctrl-C at seeded random moments: ``hetopt solve`` (CP-SAT, the MILP, a heuristic) and
``hetopt bench --case`` get SIGINT, sent like a terminal does (to the whole process group), at a
moment drawn from a seeded generator. Whatever the moment, the outcome is one of two:

* exit 0 with a complete, valid output (the result file reads back; the case file is a trusted
  cache), or
* exit 130 with one line ``hetopt: interrupted...`` on stderr, the previous output file
  byte-identical and no case file cached (a SIGINT before Python has installed its handler
  ends the process by the signal: the same outcome, without the line).

Never a traceback, never another exit code. No timing is asserted: the moments only spread the
signals over start-up, solving and writing. The default run sends one signal per command (the
commands run side by side, a few seconds); ``-m slow`` sends many.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from opt.app.bench.runner import BenchCase, load_cached
from opt.common.result import read_result

ROOT = Path(__file__).resolve().parents[2]
#: ``hetopt`` in a child interpreter that writes one byte to the descriptor ``READY_FD`` names
#: as it enters ``main``: the signal moments count from there (before it, interpreter start-up
#: and the first import are Python's own: a SIGINT there ends it with Python's message, before
#: any hetopt code runs)
HETOPT = (sys.executable, "-c", "import os, sys; from opt.app.cli import main; "
          "fd = int(os.environ.pop('READY_FD')); os.write(fd, b'.'); os.close(fd); "
          "sys.exit(main())")
#: a bundled instance no exact method finishes within the limits below
LONG = "p1-llama-2-7b-hp32-p64-d2-l2"
PREVIOUS = b'{"a previous": "output"}\n'
SEED = 20240


@dataclass(frozen=True)
class Command:
    """One command under test: its arguments (``{out}``: the output path), the output kind
    and the latest moment (seconds after start) a signal is drawn from."""

    name: str
    argv: tuple[str, ...]
    kind: str  # "result" (-o FILE) or "bench" (--out DIR)
    horizon_s: float


COMMANDS = (
    Command("cpsat", ("solve", LONG, "--method", "cpsat", "--time-limit", "2", "-o", "{out}"),
            "result", 4.0),
    Command("milp", ("solve", LONG, "--method", "milp", "--time-limit", "2", "-o", "{out}"),
            "result", 4.0),
    Command("heft", ("solve", LONG, "--method", "heft", "-o", "{out}"), "result", 2.0),
    Command("bench", ("bench", "--case", "opweave-eta", "--out", "{out}"), "bench", 3.0),
)


def _start(cmd: Command, tmp: Path) -> tuple[subprocess.Popen, Path]:
    """Start ``cmd`` in its own process group with its previous output in place; returns once
    it has entered ``main``."""
    if cmd.kind == "result":
        out = tmp / f"{cmd.name}.json"
        out.write_bytes(PREVIOUS)
    else:
        out = tmp / f"{cmd.name}-out"
    argv = [a.replace("{out}", str(out)) for a in cmd.argv]
    ready, ready_w = os.pipe()
    try:
        proc = subprocess.Popen([*HETOPT, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                pass_fds=(ready_w,), env={**os.environ,
                                                          "READY_FD": str(ready_w)})
    finally:
        os.close(ready_w)
    with os.fdopen(ready, "rb") as fh:
        assert fh.read(1) == b".", "the command never reached main"
    return proc, out


def _check(cmd: Command, code: int, err: str, out: Path) -> None:
    """The outcome is a complete output (exit 0) or an untouched one (exit 130)."""
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("hetopt")]
    if code == 0:
        assert not lines, err
        if cmd.kind == "result":
            res = read_result(str(out))
            assert res.status in ("OPTIMAL", "FEASIBLE") and res.objective is not None
        else:
            case = BenchCase("core", "opweave-eta", lambda: None)  # type: ignore[arg-type]
            cached, why = load_cached(out / "core" / "opweave-eta.json", case)
            assert cached is not None, why
        return
    assert code in (130, -signal.SIGINT), (cmd.name, code, err[-3000:])
    if code == 130:
        assert len(lines) == 1 and lines[0].startswith("hetopt: interrupted"), err
    if cmd.kind == "result":
        assert out.read_bytes() == PREVIOUS, (cmd.name, code, err[-3000:])
        assert sorted(p.name for p in out.parent.glob(f"*{cmd.name}*")) == [out.name]
    else:
        assert not (out / "core" / "opweave-eta.json").exists()


def _run(rounds: int, tmp_path: Path) -> list[tuple[str, int]]:
    """``rounds`` rounds of every command started side by side, each interrupted at its
    seeded moment; the outcomes."""
    import time

    rng = random.Random(SEED)
    outcomes = []
    for r in range(rounds):
        tmp = tmp_path / f"round{r}"
        tmp.mkdir()
        moments = {c.name: rng.uniform(0.0, c.horizon_s) for c in COMMANDS}
        started = [(c, *_start(c, tmp)) for c in COMMANDS]
        t0 = time.monotonic()
        for cmd, proc, _ in sorted(started, key=lambda s: moments[s[0].name]):
            time.sleep(max(0.0, moments[cmd.name] - (time.monotonic() - t0)))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for cmd, proc, out in started:
            _, err = proc.communicate(timeout=300)
            _check(cmd, proc.returncode, err, out)
            outcomes.append((cmd.name, proc.returncode))
    return outcomes


def test_sigint_at_a_seeded_moment_costs_no_output(tmp_path: Path) -> None:
    outcomes = _run(1, tmp_path)
    assert len(outcomes) == len(COMMANDS)


@pytest.mark.slow
def test_sigint_at_many_seeded_moments_costs_no_output(tmp_path: Path) -> None:
    outcomes = _run(12, tmp_path)
    codes = {code for _, code in outcomes}
    assert 130 in codes and 0 in codes  # the moments covered both sides of the finish


#: a command whose handler gets Ctrl-C inside a callback from C (as numba's compiler calls
#: llvmlite's Python callbacks) and then works on for up to 20 s
SWALLOWED = """
import argparse, ctypes, ctypes.util, sys, time
from opt.app.cli.run import run_command

def handler(args):
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

    def interrupted(a, b):
        raise KeyboardInterrupt  # as the signal handler raises it between two bytecodes

    pair = (ctypes.c_int * 2)(2, 1)
    libc.qsort(pair, 2, ctypes.sizeof(ctypes.c_int), compare(interrupted))
    for _ in range(2000):
        time.sleep(0.01)
    return 0

sys.exit(run_command(argparse.Namespace(func=handler)))
"""


def test_sigint_swallowed_by_a_callback_from_c_still_ends_the_command() -> None:
    proc = subprocess.run([sys.executable, "-c", SWALLOWED], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 130 and proc.stderr.strip() == "hetopt: interrupted", proc.stderr
