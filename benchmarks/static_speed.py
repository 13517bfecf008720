"""The static policies (DOPS Table 1: pd, af, pd+linear, pd+attn, pd+ffn) on one instance file,
timed against HEFT's list schedule in the same run (docs/speed.md, "Sweeps").

Each (policy) run is a forked child of a process that has read the instance and loaded numba's
kernels (so the children time the schedule alone: task order, classes, loop, solution); the
policies alternate within each repeat; the figures are medians of the CPU and wall seconds of
``static_schedule`` (``heft`` for the baseline) and the ratio of each policy's median CPU
seconds to HEFT's. Every run's solution is hashed: the repeats of one policy must agree.
BLAS threads are pinned to one.

    hetopt build placement --model llama-2-7b --platform HP64 --prefill 1024 --decode 1024 \\
        --batch 16 --paper-precision -o full.npz
    nice -n 10 python benchmarks/static_speed.py full.npz --repeat 3
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from multiprocessing import get_context  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402

from heuristics.placement.list_scheduler import heft  # noqa: E402
from heuristics.placement.static_policies import static_schedule  # noqa: E402
from opt.common.jsonio import json_default  # noqa: E402
from opt.placement.io import read_instance  # noqa: E402

_INST: Any = None  # the instance, read once by the parent and inherited by each forked child
BASELINE = "heft"


def _run(policy: str) -> dict[str, Any]:
    """CPU and wall seconds of one schedule in this (forked) process, and its digest."""
    c0, t0 = time.process_time(), time.perf_counter()
    sol = heft(_INST) if policy == BASELINE else static_schedule(_INST, policy)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    blob = orjson.dumps(sol, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                        default=json_default)
    return {"cpu_s": cpu, "wall_s": wall, "digest": hashlib.sha256(blob).hexdigest()[:16]}


def _table(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per policy: median CPU and wall seconds, the ratio to HEFT's CPU seconds, and whether
    every repeat gave the same schedule."""
    base = statistics.median(r["cpu_s"] for r in runs[BASELINE])
    table = {}
    for policy, rs in runs.items():
        cpu = statistics.median(r["cpu_s"] for r in rs)
        table[policy] = {"cpu_s": cpu, "wall_s": statistics.median(r["wall_s"] for r in rs),
                         "ratio_to_heft": cpu / base if base > 0 else float("nan"),
                         "identical": len({r["digest"] for r in rs}) == 1}
    return table


def main(argv: list[str] | None = None) -> int:
    global _INST
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instance", help="placement instance file (.npz or .json.gz)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", nargs="+", default=["pd", "af", "pd+linear", "pd+attn",
                                                      "pd+ffn"])
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)
    _INST = read_instance(args.instance)
    c0 = time.process_time()
    heft(_INST)  # numba's kernels compiled or loaded once, before the children fork
    print(f"{_INST.n_tasks:,} tasks; kernels loaded and HEFT run in "
          f"{time.process_time() - c0:.2f} CPU s", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {}
    ctx = get_context("fork")
    for _ in range(args.repeat):
        for policy in [BASELINE, *args.policies]:
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                r = pool.submit(_run, policy).result()
            runs.setdefault(policy, []).append(r)
            print(f"  {policy:9s} {r['cpu_s']:7.2f} CPU s {r['wall_s']:7.2f} wall s  "
                  f"{r['digest']}", flush=True)
    table = _table(runs)
    print("\npolicy        CPU s   wall s  / HEFT  same")
    for policy, row in table.items():
        print(f"{policy:10s} {row['cpu_s']:8.2f} {row['wall_s']:8.2f} {row['ratio_to_heft']:7.2f}"
              f"  {row['identical']}")
    if args.json:
        print(json.dumps(table))
    return 0 if all(row["identical"] for row in table.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
