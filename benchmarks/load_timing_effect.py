"""What the load rule (problems.md §1.2 rule 5, ``load_timing``) changes on a built instance:
per rule and method the validated makespan, TTFT, how many loads onto PIM
devices end before the first token, the first decode step's time (ns) and the compute ns of
prefill tasks placed on PIM (all, and those the NPU could have run)::

    PYTHONPATH=$PWD python benchmarks/load_timing_effect.py INSTANCE [--methods bifocal pd]

The instance is read once and scheduled under both values of ``load_timing``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np


def measure(inst, method: str) -> dict:
    """Schedule ``inst`` with ``method`` (bifocal, heft or a static policy), validate it and
    return its figures."""
    from heuristics.placement.bifocal import bifocal_schedule
    from heuristics.placement.list_scheduler import heft
    from heuristics.placement.static_policies import static_schedule
    from opt.placement.validator import validate_placement

    t0 = time.perf_counter()
    if method == "bifocal":
        sol = bifocal_schedule(inst)
    elif method == "heft":
        sol = heft(inst)
    else:
        sol = static_schedule(inst, method)
    wall = time.perf_counter() - t0
    met = validate_placement(inst, sol)
    cls = {d.name: d.device_class for d in inst.devices}
    dev = np.array([inst.device_index[d] for d in
                    (sol["assignment"][t] for t in inst.task_ids)])
    start = np.array([c["start"] for c in sol["compute"]])
    end = np.array([c["end"] for c in sol["compute"]])
    order = np.array([inst.task_index[c["task"]] for c in sol["compute"]])
    s_t, e_t = np.empty_like(start), np.empty_like(end)
    s_t[order], e_t[order] = start, end
    pim = np.array([inst.devices[d].device_class == "pim" for d in range(inst.n_devices)])
    pim_loads = [ld for ld in sol["loads"] if cls[ld["device"]] == "pim"]
    dec = inst.is_decode()
    first = int(inst.step[dec].min()) if dec.any() else None
    step1 = dec & (inst.step == first) if first is not None else dec
    pre_on_pim = inst.is_prefill() & pim[dev]
    # ... of which the NPU could have run (not pinned to PIM like a KV write)
    npu_legal = (inst.cost[:, ~pim] >= 0).any(axis=1)
    return {"method": method, "load_timing": inst.load_timing, "makespan_ns": met.makespan,
            "ttft_ns": met.ttft, "loads": len(sol["loads"]), "evictions": met.evictions,
            "pim_loads": len(pim_loads),
            "pim_loads_before_first_token": sum(ld["end"] <= met.ttft for ld in pim_loads),
            "first_decode_step_ns": int(e_t[step1].max()) - met.ttft if step1.any() else None,
            "prefill_tasks_on_pim": int(pre_on_pim.sum()),
            "prefill_ns_on_pim": int((e_t - s_t)[pre_on_pim].sum()),
            "prefill_tasks_on_pim_npu_legal": int((pre_on_pim & npu_legal).sum()),
            "prefill_ns_on_pim_npu_legal": int((e_t - s_t)[pre_on_pim & npu_legal].sum()),
            "schedule_s": round(wall, 2)}


def main() -> None:
    from opt.placement.io import read_instance

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--methods", nargs="+", default=["bifocal", "pd"])
    ap.add_argument("--timings", nargs="+", default=["at_use", "prefetch"])
    args = ap.parse_args()
    base = read_instance(args.instance)
    for lt in args.timings:
        inst = dataclasses.replace(base, load_timing=lt)
        for m in args.methods:
            print(json.dumps(measure(inst, m)), flush=True)


if __name__ == "__main__":
    main()
