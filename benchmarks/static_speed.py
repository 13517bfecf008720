"""The static policies (DOPS Table 1: pd, af, pd+linear, pd+attn, pd+ffn) on one instance file,
Python engine against the compiled one (docs/speed.md, "Sweeps").

Each (policy, engine) run is a forked child of a process that has read the instance and loaded
numba's kernels (so the children time the schedule alone: task order, classes, loop,
solution); the engines alternate within each repeat; the figures are medians of the CPU and
wall seconds of ``static_schedule``. Every run's solution is hashed and the two engines'
digests compared (byte-identical schedules at full size). BLAS threads are pinned to one.

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

_INST: Any = None  # the instance, read once by the parent and inherited by each forked child


def _run(policy: str, engine: str) -> dict[str, Any]:
    """CPU and wall seconds of one schedule in this (forked) process, and its digest."""
    import orjson

    from heuristics.placement.static_policies import static_schedule
    from opt.common.jsonio import json_default

    c0, t0 = time.process_time(), time.perf_counter()
    sol = static_schedule(_INST, policy, engine=engine)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    blob = orjson.dumps(sol, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                        default=json_default)
    return {"cpu_s": cpu, "wall_s": wall, "digest": hashlib.sha256(blob).hexdigest()[:16]}


def main(argv: list[str] | None = None) -> int:
    global _INST
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instance", help="placement instance file (.npz or .json.gz)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", nargs="+", default=["pd", "af", "pd+linear", "pd+attn",
                                                      "pd+ffn"])
    ap.add_argument("--engines", nargs="+", default=["python", "compiled"])
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)

    from heuristics.placement.engine import kernels
    from opt.placement.io import read_instance

    _INST = read_instance(args.instance)
    c0 = time.process_time()
    kernels()  # numba and the cached kernels, once, before the children fork
    print(f"{_INST.n_tasks:,} tasks; kernels loaded in {time.process_time() - c0:.2f} CPU s",
          flush=True)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    ctx = get_context("fork")
    for _ in range(args.repeat):
        for policy in args.policies:
            for engine in args.engines:
                with ProcessPoolExecutor(1, mp_context=ctx) as pool:
                    r = pool.submit(_run, policy, engine).result()
                runs.setdefault((policy, engine), []).append(r)
                print(f"  {policy:9s} {engine:8s} {r['cpu_s']:7.2f} CPU s {r['wall_s']:7.2f} "
                      f"wall s  {r['digest']}", flush=True)
    table = {}
    for policy in args.policies:
        row = {}
        for engine in args.engines:
            rs = runs[policy, engine]
            row[engine] = {"cpu_s": statistics.median(r["cpu_s"] for r in rs),
                           "wall_s": statistics.median(r["wall_s"] for r in rs)}
        digests = {r["digest"] for e in args.engines for r in runs[policy, e]}
        row["identical"] = len(digests) == 1
        table[policy] = row
    print("\npolicy     " + "".join(f"{e + ' CPU s':>16s}" for e in args.engines) + "   ratio  same")
    for policy, row in table.items():
        cpu = [row[e]["cpu_s"] for e in args.engines]
        ratio = cpu[0] / cpu[-1] if cpu[-1] > 0 else float("nan")
        print(f"{policy:10s} " + "".join(f"{c:16.2f}" for c in cpu)
              + f"   {ratio:5.1f}  {row['identical']}")
    if args.json:
        print(json.dumps(table))
    return 0 if all(row["identical"] for row in table.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
