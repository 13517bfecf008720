"""End to end at full size: where the seconds of ``hetopt solve FILE --method bifocal
-o OUT`` go on the flagship instance (Llama-2-7B, HP64, prefill 1024, decode 1024, batch 16).

One run builds the instance (or reads the cached file), then, ``--repeat`` times, each in a
forked child (a fresh instance object, so no stage reuses another repeat's caches):

* start — a fresh interpreter importing what ``hetopt solve`` imports before it reads
  (``opt.app.cli``, ``solvers``, the Bifocal back end), in a subprocess;
* read — :func:`opt.app.cli.helpers.load_instance` (the CLI's reader);
* schedule — Bifocal with default parameters (the back end's call), and HEFT on the same
  instance as the same-run baseline (not part of the total);
* bound — :func:`opt.placement.certified_bounds.certified_lower_bound` (``solve`` attaches it);
* validate — :func:`solvers.certify.certify` (the independent check);
* fingerprint — :func:`opt.common.fingerprint.instance_fingerprint` (``solve`` stamps it);
* write — :meth:`opt.common.result.Result.write` of the result (``-o OUT.json.gz``);

and, separately, the wall time of the real command ``python -m opt solve FILE --method bifocal
-o OUT`` in a subprocess with its peak resident set (``wait4``). Prints per-stage medians, the
ratio of each to the scheduler and of the total to the scheduler alone, and the peak RSS.

    python benchmarks/end_to_end.py                      # flagship, 3 repeats
    python benchmarks/end_to_end.py --decode 64 --repeat 5
    python benchmarks/end_to_end.py --instance FILE.json.gz --json
    python benchmarks/end_to_end.py --tables rows        # the row layout, for comparison
    python benchmarks/end_to_end.py --format npz         # the binary column container

Times are wall and CPU seconds (``process_time``; the CLI's from ``wait4``) on a shared
machine: quote medians and ratios, not one run. Under load the wall time mostly measures the
share of the cores the run got; its CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bifocal_speed import in_child, measure  # noqa: E402  (this folder; BLAS pinned there)

ROOT = Path(__file__).resolve().parent.parent
#: what ``hetopt solve --method bifocal`` imports before it reads the instance
START_IMPORTS = ("import opt.app.cli, opt.app.cli.placement, solvers, solvers.placement.backends, "
                 "heuristics.placement.bifocal")
STAGES = ("start", "read", "schedule", "bound", "validate", "fingerprint", "write")


def instance_path(args: argparse.Namespace) -> Path:
    """The instance file: ``--instance``, else the cached build of the workload (built once
    with ``hetopt build placement --tables TABLES -o NAME.FORMAT``; the default, auto, is what
    a user's build writes: column tables at full size; ``--format npz`` the binary column
    container, problems.md §1.2c). The layout is in the file name, so a cache written before
    auto became the default (rows, no suffix) is not reused."""
    if args.instance:
        return Path(args.instance)
    tables = "columns" if args.format == "npz" else args.tables
    path = Path(args.cache) / (f"{args.model}-{args.platform}-{args.prefill}-{args.decode}-"
                               f"{args.batch}-{tables}.{args.format}")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _hetopt("build", "placement", "--model", args.model, "--platform", args.platform,
                "--prefill", str(args.prefill), "--decode", str(args.decode), "--batch",
                str(args.batch), "--tables", tables, "-o", str(path))
    return path


def tables_of(path: Path) -> str:
    """``columns``, ``rows`` or ``npz``: the layout of an instance file (problems.md §1.2b,
    §1.2c), from its name (``.npz``) or first bytes (the writer puts ``"columns": 1`` right
    after ``schema`` and ``problem``)."""
    import gzip

    if path.name.endswith(".npz"):
        return "npz"
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(200)
    return "columns" if b'"columns"' in head else "rows"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _hetopt(*argv: str) -> tuple[float, float, float]:
    """Run ``python -m opt ARGV`` (output discarded): (wall seconds, peak RSS MiB, CPU
    seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "opt", *argv], cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):  # 1: FEASIBLE (STATUS_EXIT); anything else failed
        raise RuntimeError(f"hetopt {' '.join(argv)} exited {proc.returncode}: {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def start_seconds() -> tuple[float, float]:
    """(wall, CPU) seconds of a fresh interpreter importing :data:`START_IMPORTS`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", START_IMPORTS], cwd=ROOT, env=_env())
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise RuntimeError("the start probe failed")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def stage_run(path: Path, out: Path, heft_too: bool) -> dict[str, Any]:
    """One repeat of the in-process stages (seconds each; makespans; peak memory growth)."""
    from heuristics.placement.bifocal import BifocalParams, bifocal_schedule
    from heuristics.placement.list_scheduler import heft
    from opt.api import load_instance
    from opt.common.fingerprint import instance_fingerprint
    from opt.common.result import Result
    from opt.placement.certified_bounds import certified_lower_bound
    from solvers.certify import certify

    row: dict[str, Any] = {}

    def timed(name: str, fn):
        t0, c0 = time.perf_counter(), time.process_time()
        value = fn()
        row[name] = time.perf_counter() - t0
        row[f"{name}_cpu"] = time.process_time() - c0
        return value

    inst = timed("read", lambda: load_instance(str(path)))
    stats: dict[str, Any] = {}
    c0 = time.process_time()
    sol, row["schedule"], row["schedule_peak_mib"], _ = measure(
        lambda: bifocal_schedule(inst, BifocalParams(), stats=stats))
    row["schedule_cpu"] = time.process_time() - c0
    row["loop"] = stats["time_s"]["schedule"]
    cert = timed("bound", lambda: certified_lower_bound(inst))
    res = Result(problem="placement", method="bifocal", status="FEASIBLE",
                 lower_bound=float(cert.value), runtime_s=row["schedule"], seed=0, params={},
                 solution=sol, stats=stats)
    res = timed("validate", lambda: certify(inst, res))
    res.instance_fingerprint = timed("fingerprint", lambda: instance_fingerprint(inst))
    timed("write", lambda: res.write(out))
    row["makespan"] = res.objective
    if heft_too:
        row["heft_makespan"] = timed("heft", lambda: max(c["end"] for c in heft(inst)["compute"]))
    row["tasks"] = inst.n_tasks
    return row


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report(rows: list[dict[str, Any]], cli: list[tuple[float, float, float]]
           ) -> dict[str, Any]:
    """Per-stage medians (wall and CPU seconds), ratios to the scheduler, the CLI's total and
    peak RSS (printed)."""
    med = {k: median(rows, k) for k in STAGES}
    cpu = {k: median(rows, f"{k}_cpu") for k in STAGES}
    sched, sched_cpu = med["schedule"], cpu["schedule"]
    total, total_cpu = sum(med.values()), sum(cpu.values())
    print(f"{'stage':12s} {'wall s':>8s} {'/ sched':>8s} {'cpu s':>8s} {'/ sched':>8s}"
          f"   (medians of {len(rows)} repeats)")
    for k in STAGES:
        print(f"{k:12s} {med[k]:8.2f} {med[k] / sched:8.2f} {cpu[k]:8.2f} "
              f"{cpu[k] / sched_cpu:8.2f}")
    print(f"{'sum':12s} {total:8.2f} {total / sched:8.2f} {total_cpu:8.2f} "
          f"{total_cpu / sched_cpu:8.2f}")
    print(f"  Bifocal loop alone {median(rows, 'loop'):.2f} s wall; schedule peak "
          f"+{median(rows, 'schedule_peak_mib'):.0f} MiB")
    out = {"stages_s": med, "stages_cpu_s": cpu, "sum_s": total, "sum_cpu_s": total_cpu,
           "sum_over_schedule": total / sched, "sum_cpu_over_schedule": total_cpu / sched_cpu,
           "loop_s": median(rows, "loop"), "tasks": rows[0]["tasks"],
           "makespan": rows[0]["makespan"]}
    if "heft" in rows[0]:
        out["heft_s"], out["heft_cpu_s"] = median(rows, "heft"), median(rows, "heft_cpu")
        print(f"  HEFT schedule (same run) {out['heft_s']:.2f} s wall, {out['heft_cpu_s']:.2f} "
              f"s CPU: Bifocal/HEFT CPU time {sched_cpu / out['heft_cpu_s']:.2f}x, makespan "
              f"{rows[0]['makespan'] / rows[0]['heft_makespan']:.4f}")
    if cli:
        walls, cpus = [w for w, _, _ in cli], [c for _, _, c in cli]
        out["cli_total_s"], out["cli_total_cpu_s"] = (statistics.median(walls),
                                                      statistics.median(cpus))
        out["cli_peak_rss_mib"] = max(r for _, r, _ in cli)
        print(f"hetopt solve --method bifocal -o OUT: median {out['cli_total_s']:.2f} s wall "
              f"(runs {', '.join(f'{w:.1f}' for w in walls)}), {out['cli_total_cpu_s']:.2f} s "
              f"CPU = {out['cli_total_cpu_s'] / sched_cpu:.2f}x the scheduler's CPU; peak RSS "
              f"{out['cli_peak_rss_mib']:.0f} MiB")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instance", help="instance file (default: build/cache the workload)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "hetopt-e2e"),
                    help="folder of cached instance builds (default %(default)s)")
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--platform", default="HP64")
    ap.add_argument("--prefill", type=int, default=1024)
    ap.add_argument("--decode", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tables", choices=("auto", "rows", "columns"), default="auto",
                    help="layout of the cached build (hetopt build placement --tables; "
                         "default auto, what users get: columns at full size)")
    ap.add_argument("--format", choices=("json.gz", "npz"), default="json.gz",
                    help="file format of the cached build (default json.gz; npz: the binary "
                         "column container, docs/problems.md §1.2c, always columns)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-heft", dest="heft", action="store_false", help="skip the baseline")
    ap.add_argument("--no-cli", dest="cli", action="store_false",
                    help="skip the real `hetopt solve` subprocess runs")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)

    path = instance_path(args)
    print(f"instance {path} ({path.stat().st_size / 2**20:.0f} MiB, {tables_of(path)}), python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus visible, load "
          f"{os.getloadavg()[0]:.2f}")
    rows, cli = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json.gz"
        for i in range(args.repeat):
            row = in_child(lambda: stage_run(path, out, args.heft))
            row["start"], row["start_cpu"] = start_seconds()
            rows.append(row)
            if args.cli:
                cli.append(_hetopt("solve", str(path), "--method", "bifocal", "-o", str(out)))
            print(f"repeat {i + 1} (wall/CPU s): "
                  + ", ".join(f"{k} {row[k]:.2f}/{row[k + '_cpu']:.2f}" for k in STAGES)
                  + (f"; cli {cli[-1][0]:.2f}/{cli[-1][2]:.2f}" if cli else ""), flush=True)
    summary = report(rows, cli)
    if args.json:
        print(json.dumps({"instance": str(path), "tables": tables_of(path), "repeats": rows,
                          "summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
