"""Startup of the command line: import time of a HEFT solve of a small
bundled instance and wall / CPU time of ``hetopt --help`` and of that solve, for one or more
checkouts side by side.

For each checkout (a folder put first on ``PYTHONPATH``), ``--runs`` rounds, the checkouts
interleaved within each round so that they share the machine's load alike:

* import — ``python -X importtime -m opt solve heft-topcuoglu-2002 --method heft``: the sum of
  the top-level entries' cumulative times (every module the process imported, the
  interpreter's own ``site`` and ``encodings`` included), in seconds;
* help — ``python -m opt --help``, wall and CPU seconds (``wait4``);
* solve — ``python -m opt solve heft-topcuoglu-2002 --method heft``, wall and CPU seconds.

Prints the medians and minima, the 1-minute load average before and after, and (``--tops N``) the N
largest top-level import entries of each checkout (medians). ``--bytecode DIR`` lets Python
cache bytecode under ``DIR`` (``PYTHONPYCACHEPREFIX``, one folder per checkout, warmed by two
runs first) even when ``PYTHONDONTWRITEBYTECODE`` is set: without it every module of the
project is compiled from source in every run, which is a large share of the import time.

    python benchmarks/startup.py /path/to/base /path/to/branch --runs 5
    python benchmarks/startup.py . --runs 11 --bytecode /tmp/pyc --tops 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SOLVE = ("-m", "opt", "solve", "heft-topcuoglu-2002", "--method", "heft")
HELP = ("-m", "opt", "--help")


def environment(root: str, bytecode: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=root)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(bytecode) / root.strip("/").replace("/", "_"))
    return env


def import_times(root: str, env: dict[str, str]) -> dict[str, int]:
    """Top-level entries of ``-X importtime`` of the solve: name -> cumulative µs."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *SOLVE], cwd=root, env=env,
                          capture_output=True, text=True, check=True)
    tops: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):  # one space: top level
            tops[name.strip()] = tops.get(name.strip(), 0) + int(cumulative)
    return tops


def timed(root: str, env: dict[str, str], args: tuple[str, ...]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python ARGS`` (CPU: user + system of the child, from wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode} in {root}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", help="checkouts to measure (put first on PYTHONPATH)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--bytecode", metavar="DIR", help="cache bytecode under DIR")
    ap.add_argument("--tops", type=int, default=0, metavar="N",
                    help="also print the N largest top-level import entries")
    args = ap.parse_args(argv)
    roots = [str(Path(r).resolve()) for r in args.roots]
    envs = {r: environment(r, args.bytecode) for r in roots}
    if args.bytecode:
        for r in roots:
            for _ in range(2):
                import_times(r, envs[r])
                timed(r, envs[r], HELP)
    runs: dict[str, dict[str, list]] = {r: {k: [] for k in ("import", "tops", "help", "help_cpu",
                                                             "solve", "solve_cpu")}
                                        for r in roots}
    load0 = os.getloadavg()[0]
    for _ in range(args.runs):
        for r in roots:
            tops = import_times(r, envs[r])
            runs[r]["tops"].append(tops)
            runs[r]["import"].append(sum(tops.values()) / 1e6)
            for key, cmd in (("help", HELP), ("solve", SOLVE)):
                wall, cpu = timed(r, envs[r], cmd)
                runs[r][key].append(wall)
                runs[r][f"{key}_cpu"].append(cpu)
    load1 = os.getloadavg()[0]
    med = statistics.median
    print(f"load average (1 min) {load0:.2f} before, {load1:.2f} after; {args.runs} runs; "
          f"bytecode {'cached' if args.bytecode else 'as the environment says'}"
          f" (PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})")
    keys = ("import", "help", "help_cpu", "solve", "solve_cpu")
    print(f"median (min) s: {'checkout':32s} " + " ".join(f"{k:>13s}" for k in keys))
    for r in roots:
        print(f"{'':16s}{r:32s} " + " ".join(f"{med(runs[r][k]):6.3f} ({min(runs[r][k]):.3f})"
                                              for k in keys))
    for r in roots if args.tops else ():
        tops = runs[r]["tops"]
        names = sorted({k for t in tops for k in t},
                       key=lambda k: -med([t.get(k, 0) for t in tops]))
        print(f"{r}: " + ", ".join(f"{k} {med([t.get(k, 0) for t in tops]) / 1000:.1f} ms"
                                   for k in names[:args.tops]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
