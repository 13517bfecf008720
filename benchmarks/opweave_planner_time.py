"""CPU time of the default B&B on OpWeave's Table-3 case (Gemma-3-27B, 32K, 60 ms), for the
planner-time comparison of docs/serving.md ("Planner time on the Table-3 case").

    python benchmarks/opweave_planner_time.py --gpu-cost calibrated [--gpus H100]
        [--search-file OLD/search.py] [--profile]

Builds the instance with ``build_serving_plan(..., gpu_cost=...)``, runs
``search(inst, structured_sequences(inst))`` and prints one JSON line: CPU seconds of the search
(``time.process_time``), wall seconds, cost ($ per million tokens), exact T_rtt (ticks), plan and
search counts. ``--search-file`` loads another version of ``heuristics/serving/search.py`` (e.g.
``git show COMMIT:heuristics/serving/search.py > old.py``) to time it on the same instance;
``--profile`` adds the cProfile table (25 functions by own time) on stderr.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import pstats
import sys
import time
from collections.abc import Sequence
from types import ModuleType

from opt.costlib.hardware import load_catalog
from opt.costlib.modelcard import load_cards
from opt.serving.builder import ServingWorkload, build_serving_plan


def search_module(path: str | None) -> ModuleType:
    """The search module: the installed one, or the file ``path``."""
    if path is None:
        from heuristics.serving import search
        return search
    spec = importlib.util.spec_from_file_location("search_under_test", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu-cost", default="calibrated", choices=["calibrated", "roofline"])
    p.add_argument("--gpus", default="H100", help="comma-separated GPU types")
    p.add_argument("--search-file", default=None)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    ss = search_module(args.search_file)
    inst = build_serving_plan(load_cards()["gemma-3-27b"], load_catalog(),
                              args.gpus.split(","), ServingWorkload(32768, 0.060),
                              gpu_cost=args.gpu_cost)
    seqs = ss.structured_sequences(inst)
    prof = cProfile.Profile() if args.profile else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    out = ss.search(inst, seqs)
    if prof:
        prof.disable()
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"search": args.search_file or "heuristics/serving/search.py",
                      "gpu_cost": args.gpu_cost, "gpus": args.gpus, "cpu_s": round(cpu_s, 2),
                      "wall_s": round(wall_s, 2),
                      "usd_per_mtok": None if out.cost_usd_per_token is None
                      else out.cost_usd_per_token * 1e6,
                      "t_rtt": str(out.t_rtt), "plan": str(out.plan),
                      "stats": out.stats.to_dict()}))
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
