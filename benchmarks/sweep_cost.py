"""What the DOPS §6.2 grid (7 models × 64 workloads × the 7 methods of the DOPS sweep) costs to
run, measured on parts of it (docs/speed.md, "Sweeps"). Each part runs the sweep's own work
items (``run_sweep``: build, solve, certified bound, validation, record) serially in this
process, so ``/usr/bin/time`` counts every CPU second (the bound's child processes are waited);
records go to ``--out`` (``--fresh`` semantics: recomputed).

``latin``: a Latin-square quarter of one model's grid, 16 of its 64 workloads (prefill i,
decode j, batch (i + j) mod 4): every (prefill, decode), (prefill, batch) and (decode, batch)
pair once, so a cost that is a sum of two-factor terms averages over it as over the whole
grid. ``--half 0|1`` runs every other one of the 16 (two processes, one per core).
``models``: one workload on each model of the grid, for the per-model scale.

    nice -n 10 /usr/bin/time -v python benchmarks/sweep_cost.py latin --half 0 &
    nice -n 10 /usr/bin/time -v python benchmarks/sweep_cost.py latin --half 1
    nice -n 10 /usr/bin/time -v python benchmarks/sweep_cost.py models --workload 1024 256 16
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from opt.app.runs.sweep import Progress, SweepOptions, SweepWorkload, run_sweep
from opt.app.runs.sweep_calls import SolveCall
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

METHODS = ("bifocal", "heft", "pd", "af", "pd+linear", "pd+attn", "pd+ffn")
#: The grid's models on their platforms (benchmarks/dops_sweep.sh).
MODELS = ("dops-qwen-1.8b:HP32", "dops-qwen-7b:HP32", "dops-qwen-14b:HP32", "llama-2-7b:HP64",
          "llama-2-13b:HP64", "mixtral-8x7b:HP128", "llama-2-70b:HP128")
PREFILL, DECODE, BATCH = (128, 512, 1024, 2048), (128, 256, 512, 1024), (1, 4, 8, 16)


def latin_square(model: str, platform: str) -> list[SweepWorkload]:
    """The 16 workloads (prefill i, decode j, batch (i + j) mod 4) of ``model``."""
    return [SweepWorkload(model, platform, PREFILL[i], DECODE[j], BATCH[(i + j) % 4])
            for i in range(4) for j in range(4)]


def cpu_s() -> float:
    """CPU seconds of this process and its waited children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run(workloads: list[SweepWorkload], out: Path) -> dict:
    """Sweep ``workloads`` × METHODS serially; CPU and wall seconds, tasks, errors."""
    c0, t0 = cpu_s(), time.perf_counter()
    done = run_sweep(workloads, list(METHODS), out, SolveCall(), catalog=bundled_catalog(),
                     cards=bundled_cards(),
                     options=SweepOptions(paper_precision=True, resume=False,
                                          progress=Progress(len(workloads) * len(METHODS),
                                                            stream=sys.stderr)))
    recs = [rec for rec, _ in done]
    return {"workloads": len(workloads), "results": len(recs),
            "cpu_s": round(cpu_s() - c0, 1), "wall_s": round(time.perf_counter() - t0, 1),
            "tasks": sum(rec.get("tasks") or 0 for rec in recs) // len(METHODS),
            "errors": [(rec["method"], rec.get("error")) for rec in recs
                       if rec.get("status") == "ERROR"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("latin", "models"))
    ap.add_argument("--model", default="llama-2-7b:HP64", help="latin: model:platform")
    ap.add_argument("--half", type=int, choices=(0, 1), help="latin: every other workload")
    ap.add_argument("--workload", type=int, nargs=3, default=(1024, 256, 16),
                    metavar=("PREFILL", "DECODE", "BATCH"), help="models: the workload")
    ap.add_argument("--models", nargs="+", default=list(MODELS), help="models: model:platform")
    ap.add_argument("--out", type=Path, default=Path("/tmp/sweep-cost"))
    args = ap.parse_args(argv)
    if args.part == "latin":
        model, platform = args.model.split(":")
        wls = latin_square(model, platform)
        if args.half is not None:
            wls = wls[args.half::2]
        print(json.dumps({"model": model, "half": args.half, **run(wls, args.out)}), flush=True)
        return 0
    pre, dec, batch = args.workload
    for mp in args.models:
        model, platform = mp.split(":")
        row = run([SweepWorkload(model, platform, pre, dec, batch)], args.out)
        print(json.dumps({"model": model, "platform": platform, **row}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
