"""Peak memory and time of HEFT + the certified lower bound + validation on random DAGs
(target: memory linear in the DAG, ≤ 1 GB at 100,000 tasks). One process per size
(peak RSS is per process); machine-dependent wall times, read the ratios.

    python benchmarks/bound_memory.py [N ...]        # default 20000 50000 100000
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import numpy as np


def random_dag(n: int, seed: int = 0):
    """n tasks on 4 identical CPUs, each task with up to 2 predecessors among the 50 before it,
    durations 1..99, payloads 0..49 bytes (1 byte per tick, latency 1)."""
    from opt.placement.instance import Device
    from opt.placement.instance_checks import EdgeColumns, TaskColumns, build_instance, make_links

    rng = np.random.default_rng(seed)
    devs = [Device(f"P{i}", "cpu", None) for i in range(4)]
    src, dst = [], []
    for v in range(1, n):
        for u in rng.choice(min(v, 50), size=min(2, v), replace=False):
            src.append(v - 1 - int(u))
            dst.append(v)
    return build_instance(
        time_unit="unit", devices=devs, links=make_links(devs, "full", True, 1, 1.0),
        tasks=TaskColumns([f"t{i}" for i in range(n)], rng.integers(1, 100, size=(n, 4))),
        edges=EdgeColumns(src, dst, rng.integers(0, 50, size=len(src))))


def one(n: int) -> None:
    from opt.api import solve

    inst = random_dag(n)
    t0 = time.perf_counter()
    res = solve(inst, "heft")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"{n:>7} tasks  heft {res.objective}  bound {res.lower_bound:.0f} "
          f"({res.stats.get('lower_bound_source', '')})  {time.perf_counter() - t0:.1f} s  "
          f"peak {peak_gb:.2f} GB")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        one(int(sys.argv[2]))
    else:
        for n in [int(x) for x in sys.argv[1:]] or [20000, 50000, 100000]:
            subprocess.run([sys.executable, __file__, "--one", str(n)], check=True)
