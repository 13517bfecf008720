"""PIM per-operator cost evidence for the Qwen-1.8B gap (docs/dops_analyses.md §6).

Two studies on dops-qwen-1.8b, HP32 (full model), Bifocal and PD, every schedule validated:

``measured``  Bifocal/PD with and without the DOPS authors' AiM operator table
              (``opt/costlib/data/measurements/triform-aim-*.csv``, benchmarks/triform_pim_table.py)
              through the builder's ``measurements`` path.
``factors``   Bifocal/PD when every PIM task cost of one operator class is multiplied by a factor
              f (classes: ``gemm`` = projections and FFN, ``attention_decode`` = decode qk/sv,
              ``vector`` = norm/softmax/activation/elementwise, ``all``): which factors our
              model would need to reach the paper's Qwen-1.8B geomean (2.23) and Fig. 7 range
              (batch 8: 1.89–2.43). Evidence about the gap, never a default.

    PYTHONPATH=. nice -n 10 python benchmarks/pim_sensitivity.py measured
    PYTHONPATH=. nice -n 10 python benchmarks/pim_sensitivity.py factors --factors 2 4 8 16 32

Prints a markdown table; ``--json FILE`` also writes the records.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from opt.common.units import TIME_UNITS
from opt.costlib.hardware import load_catalog
from opt.costlib.latency import regime_class
from opt.costlib.measured import read_measurements
from opt.costlib.modelcard import load_cards
from opt.costlib.operators import head_ops, layer_ops
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement
from solvers import solve

MODEL, PLATFORM = "dops-qwen-1.8b", "HP32"
TABLE = (Path(__file__).resolve().parent.parent
         / "opt/costlib/data/measurements/triform-aim-dops-qwen-1.8b-hp32.csv")
VECTOR = frozenset({"norm", "softmax", "activation", "elementwise"})
CLASSES = ("gemm", "attention_decode", "vector", "all")
PAPER = {"geomean": 2.23, "fig7_batch8": (1.89, 2.43)}


def op_class_of_tasks(inst: PlacementInstance, card) -> np.ndarray:
    """The latency class of every task (decode qk/sv: ``attention_decode``)."""
    ops = layer_ops(card, 0, tokens=1, context=1, batch=1)
    embed, tail = head_ops(card, tokens=1, batch=1, prefill=False)
    cls = {o.kind: o.op_class for o in [*ops, embed, *tail]}
    out = []
    for kind, phase in zip(inst.kind, inst.phase):
        c = cls.get(kind, "collective")
        out.append(regime_class(c, bool(phase)) if c != "collective" else c)
    return np.array(out)


def scaled(inst: PlacementInstance, classes: np.ndarray, which: str, factor: float
           ) -> PlacementInstance:
    """``inst`` with the PIM costs of the tasks of class ``which`` multiplied by ``factor``."""
    pim = [d for d, dev in enumerate(inst.devices) if dev.device_class == "pim"]
    sel = {"all": np.isin(classes, ["gemm", "attention_decode", "attention", *VECTOR]),
           "vector": np.isin(classes, list(VECTOR))}.get(which, classes == which)
    cost = np.array(inst.cost, copy=True)
    block = cost[np.ix_(sel, pim)]
    cost[np.ix_(sel, pim)] = np.where(block >= 0, np.rint(block * factor), block)
    return dataclasses.replace(inst, cost=cost.astype(np.int64))


def ratio(inst: PlacementInstance) -> dict[str, float]:
    """Bifocal and PD makespans (validated, ms) and Bifocal/PD."""
    out = {}
    for method in ("bifocal", "pd"):
        res = solve(inst, method)
        out[method] = validate_placement(inst, res.solution).makespan * TIME_UNITS[inst.time_unit] * 1e3
    out["speedup"] = out["pd"] / out["bifocal"]
    return out


def workloads(spec: list[str]) -> list[Workload]:
    return [Workload(*map(int, w.split("/"))) for w in spec]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study", choices=("measured", "factors"))
    ap.add_argument("--workloads", nargs="+", default=["128/128/1", "128/128/8", "1024/128/8"],
                    help="prefill/decode/batch")
    ap.add_argument("--factors", type=float, nargs="+", default=[2, 4, 8, 16, 32])
    ap.add_argument("--classes", nargs="+", default=list(CLASSES), choices=CLASSES)
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    cat, card = load_catalog(), load_cards()[MODEL]
    records = []
    for w in workloads(args.workloads):
        base = build_placement(card, cat.platform(PLATFORM), cat, w, BuildOptions())
        r0 = ratio(base)
        tag = f"{w.prefill}/{w.decode}/{w.batch}"
        records.append({"workload": tag, "variant": "model", **r0})
        print(f"| {tag} | model | {r0['bifocal']:.1f} | {r0['pd']:.1f} | {r0['speedup']:.3f} |",
              flush=True)
        if args.study == "measured":
            table = read_measurements(args.table, cat)
            inst = build_placement(card, cat.platform(PLATFORM), cat, w,
                                   BuildOptions(measurements=table))
            r = ratio(inst)
            used = inst.meta["measurements"]["task_costs"]
            records.append({"workload": tag, "variant": "authors' AiM table", **r,
                            "task_costs": used})
            print(f"| {tag} | authors' AiM table ({used['exact'] + used['interpolated']} "
                  f"costs) | {r['bifocal']:.1f} | {r['pd']:.1f} | {r['speedup']:.3f} |",
                  flush=True)
            continue
        classes = op_class_of_tasks(base, card)
        for which in args.classes:
            for f in args.factors:
                r = ratio(scaled(base, classes, which, f))
                records.append({"workload": tag, "variant": f"{which} x{f:g}", **r})
                print(f"| {tag} | PIM {which} x{f:g} | {r['bifocal']:.1f} | {r['pd']:.1f} | "
                      f"{r['speedup']:.3f} |", flush=True)
    variants = sorted({r["variant"] for r in records}, key=lambda v: [x["variant"] for x in
                                                                       records].index(v))
    print("\n| variant | geomean Bifocal/PD over the workloads |\n|---|---|")
    for v in variants:
        s = [r["speedup"] for r in records if r["variant"] == v]
        print(f"| {v} | {math.exp(sum(map(math.log, s)) / len(s)):.3f} |")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
