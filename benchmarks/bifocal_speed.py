"""Speed of Bifocal on the full-size DOPS instance (problems.md §6; target: < 60 s on one core).

Builds Llama-2-7B on HP64 (prefill 1024, decode 1024, batch 16: ~528k tasks), runs HEFT (the
baseline, same list-scheduling core) and Bifocal with default parameters, validates both with
the independent validator and prints wall time, tasks/s, peak memory, makespan, TTFT and the
Bifocal/HEFT ratios of time and makespan.

Peak memory is the growth of the process's peak resident set during the run: the kernel's
high-water mark is reset (``/proc/self/clear_refs``) before each method and read afterwards
(``VmHWM``) minus the resident set before it; where that is unavailable, the growth of
``ru_maxrss``. Each method runs in its own forked child of the process that built the instance
(``--no-fork``: in the process itself), so neither inherits the other's freed memory. The
schedulers are pure Python on one thread; BLAS threads are pinned to one.

    python benchmarks/bifocal_speed.py                 # full size
    python benchmarks/bifocal_speed.py --decode 64     # smaller
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402


def _rss_kb() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _hwm_kb() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def measure(fn):
    """(result, wall seconds, peak memory growth in MiB, method of the memory figure)."""
    gc.collect()
    before = _rss_kb()
    reset = before is not None and _reset_hwm()
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    if reset:
        peak = (_hwm_kb() - before) / 1024
        how = "VmHWM - VmRSS"
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss0) / 1024
        how = "ru_maxrss delta"
    return out, wall, peak, how


def in_child(fn) -> dict:
    """Run ``fn`` in a forked child (a clean memory baseline per method); its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code = 0
        try:
            payload = json.dumps(fn(), default=str).encode()
        except BaseException as exc:  # report, never fall through into the parent's code
            payload = json.dumps({"error": repr(exc)}).encode()
            code = 1
        with os.fdopen(w, "wb") as fh:
            fh.write(payload)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    out = json.loads(data)
    if "error" in out:
        raise RuntimeError(f"benchmark child failed: {out['error']}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--platform", default="HP64")
    ap.add_argument("--prefill", type=int, default=1024)
    ap.add_argument("--decode", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--skip-heft", action="store_true", help="run Bifocal only")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    ap.add_argument("--no-fork", dest="fork", action="store_false",
                    help="run the methods in this process (default: one forked child each, "
                         "for a clean memory baseline)")
    args = ap.parse_args(argv)

    from heuristics.placement.bifocal import bifocal_schedule
    from heuristics.placement.list_scheduler import heft
    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards
    from opt.placement.build_options import Workload
    from opt.placement.builder import build_placement
    from opt.placement.validator import validate_placement

    cat = bundled_catalog()
    cards = bundled_cards()
    t0 = time.perf_counter()
    inst = build_placement(cards[args.model], cat.platform(args.platform), cat,
                           Workload(args.prefill, args.decode, args.batch))
    build_s = time.perf_counter() - t0
    # graph views every method uses (cached on the instance): built once, outside the timings
    t0 = time.perf_counter()
    inst.topological_order, inst.successors, inst.predecessors, inst.load_duration  # noqa: B018
    views_s = time.perf_counter() - t0
    n = inst.n_tasks
    print(f"instance: {args.model} on {args.platform}, prefill {args.prefill}, decode "
          f"{args.decode}, batch {args.batch}: {n} tasks, {inst.n_edges} edges, "
          f"{len(inst.block_ids)} blocks, {inst.n_devices} devices; built in {build_s:.2f} s "
          f"(+ {views_s:.2f} s graph views)")
    print(f"python {sys.version.split()[0]}, pid {os.getpid()}, cpus visible "
          f"{os.cpu_count()} (the schedulers use one thread)")

    rows = {}
    methods = [("bifocal", lambda st: bifocal_schedule(inst, stats=st))]
    if not args.skip_heft:
        methods.insert(0, ("heft", lambda st: heft(inst)))

    def run(name, fn) -> dict:
        stats: dict = {}
        sol, wall, peak, how = measure(lambda: fn(stats))
        t1 = time.perf_counter()
        m = validate_placement(inst, sol)
        val_s = time.perf_counter() - t1
        return {"wall_s": wall, "tasks_per_s": n / wall, "peak_mem_mib": peak,
                "mem_method": how, "makespan": m.makespan, "ttft": m.ttft,
                "mean_tpot": m.mean_tpot, "evictions": m.evictions, "validate_s": val_s,
                "stats": stats}

    for name, fn in methods:
        rows[name] = row = in_child(lambda: run(name, fn)) if args.fork else run(name, fn)
        print(f"{name:8s} wall {row['wall_s']:7.2f} s  {row['tasks_per_s']:9.0f} tasks/s  "
              f"peak +{row['peak_mem_mib']:7.1f} MiB ({row['mem_method']})  makespan "
              f"{row['makespan']} {inst.time_unit}  TTFT {row['ttft']}  mean TPOT "
              f"{row['mean_tpot'] and round(row['mean_tpot'])}  evictions {row['evictions']}  "
              f"[valid, checked in {row['validate_s']:.2f} s]")
        stats = row["stats"]
        if stats.get("time_s"):
            print("         phases: " + ", ".join(f"{k} {v:.2f} s"
                                                  for k, v in stats["time_s"].items()))
            print(f"         tasks per class {stats['tasks_per_class']}, loads "
                  f"{stats['loads']}, task types {stats['types']}")
    if "heft" in rows:
        b, h = rows["bifocal"], rows["heft"]
        print(f"Bifocal / HEFT: time {b['wall_s'] / h['wall_s']:.2f}x, makespan "
              f"{b['makespan'] / h['makespan']:.4f}, TTFT {b['ttft'] / h['ttft']:.4f}")
    limit_ok = rows["bifocal"]["wall_s"] < 60.0
    print(f"Bifocal under 60 s: {'yes' if limit_ok else 'NO'}")
    if args.json:
        print(json.dumps({"instance": {"model": args.model, "platform": args.platform,
                                       "prefill": args.prefill, "decode": args.decode,
                                       "batch": args.batch, "tasks": n},
                          "methods": rows}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
