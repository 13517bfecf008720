"""Evidence tables for three differences between hetopt's DOPS sweep and the paper.

Prints, for one model / platform / workload, the numbers that explain where Bifocal's speedup
over PD comes from in our model (docs/dops_analyses.md §5 quotes them):

``ratios``     per decode operator kind, its duration on the NPU and on one PIM device and the
               PIM / NPU ratio at each batch, from the instance's cost matrix (the cost library
               of problems.md §5; a 1-layer, 1-decode-step instance, so it takes a second).
``weights``    block bytes against device capacities, the KV cache per decode step, and the
               weight-load time of the whole model through one NPU load port and through all
               PIM load ports (rule 5: one load port per device).
``records``    TTFT, decode time and mean TPOT of PD, HEFT and Bifocal (and their speedups)
               from the sweep records (read-only), per workload of a model / platform.
``headroom``   per workload (default: Fig. 7's six shapes), HEFT's and Bifocal's makespans, how many
               assignments differ, Bifocal's certified gap, the NPU load port's busy time before
               the prefill ends, and (``--moves``) the best makespan of a move search from
               Bifocal's schedule (every GEMM kind and softmax, per phase, onto each device and
               onto the PIMs in rotation, replayed and validated: :mod:`heuristics.placement.improve`);
               ``--slice-time-limit S`` also proves a 1-layer slice's optimum with CP-SAT.
``placement``  builds one instance, solves it with each method (validated) and prints the
               per-phase times, loads, and how many decode tasks of each operator kind run on
               each device class; plus two per-step references: the critical path of one decode
               step at every task's fastest device (transfers free) and the same step serial on
               the NPU alone, and from them a ceiling on any schedule's speedup over PD
               (steps are chained, so the decode time is at least the sum of the steps'
               critical paths; the prefill ends no earlier than its own critical path or than
               all blocks can be moved through all load ports). Full size takes 10–30 s for
               decode 128 and 1.5–3 min for decode 1024 (2–4 GB); ``--layers N`` slices scale
               the per-kind counts and per-step times with the layers, not TTFT.

Usage (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/dops_explain.py ratios --model llama-2-7b --platform HP32
    PYTHONPATH=$PWD python benchmarks/dops_explain.py weights --model mixtral-8x7b --platform HP128
    PYTHONPATH=$PWD python benchmarks/dops_explain.py records --model dops-qwen-1.8b --platform HP32
    PYTHONPATH=$PWD python benchmarks/dops_explain.py placement --model llama-2-7b \\
        --platform HP64 --prefill 128 --decode 128 --batch 16

Every model is built in DOPS' precision (INT8 weights / activations / KV for Mixtral-8x7B and
Llama-2-70B, fp16 otherwise), as the sweep does (``--paper-precision``). Times are model times
(ms); they do not depend on the machine.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from opt.costlib.hardware import load_catalog
from opt.costlib.modelcard import load_cards
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance

#: the DOPS suite's build cache (``hetopt bench --suite dops``, run from the same folder)
CACHE = "results/bench/dops/cache/dops"
METHODS = ("pd", "heft", "bifocal")
#: operator kinds grouped for the per-kind device-class table (expert kinds are folded)
GEMM_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
              "expert_gate", "expert_up", "expert_down")


def build(model: str, platform: str, prefill: int, decode: int, batch: int,
          layers: int | None = None) -> PlacementInstance:
    """The sweep's instance of the workload (DOPS precision, default build options)."""
    cat, cards = load_catalog(), load_cards()
    return build_placement(cards[model], cat.platform(platform), cat,
                           Workload(prefill, decode, batch),
                           BuildOptions(layers=layers, precision=paper_precision(model)))


def fold(kind: str) -> str:
    """``expert3_gate`` → ``expert_gate`` (the experts of one layer are one row)."""
    if kind.startswith("expert") and "_" in kind:
        return "expert_" + kind.split("_", 1)[1]
    return kind


def ms(ticks: float | None, inst_unit_ns: float = 1.0) -> str:
    """Ticks of ns as milliseconds."""
    return "-" if ticks is None else f"{ticks * inst_unit_ns / 1e6:,.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A Markdown table."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print()


# ---- ratios ------------------------------------------------------------------------------------

def cmd_ratios(args: argparse.Namespace) -> None:
    """Decode-op durations NPU vs PIM per batch from the cost matrix (1 layer, 1 decode step)."""
    per_batch: dict[int, dict[str, tuple[float, float, int]]] = {}
    for b in args.batches:
        inst = build(args.model, args.platform, args.prefill, 1, b, layers=1)
        names = [d.name for d in inst.devices]
        npu, pim = names.index("NPU0"), names.index("PIM0")
        rows: dict[str, tuple[float, float, int]] = {}
        for t in np.flatnonzero(inst.phase == 1):
            kind = fold(inst.kind[t])
            c_n, c_p = int(inst.cost[t, npu]), int(inst.cost[t, pim])
            if c_p < 0 or kind in rows:
                continue  # PIM-illegal, or a second expert / head group of the same kind
            if kind == "kv_write":
                continue  # pinned to its KV home: no choice
            groups = sum(1 for u in np.flatnonzero(inst.phase == 1)
                         if fold(inst.kind[u]) == kind and inst.layer[u] == inst.layer[t])
            rows[kind] = (c_n / 1e3, c_p / 1e3, groups)
        per_batch[b] = rows
    kinds = list(per_batch[args.batches[0]])
    print(f"{args.model} {args.platform} ({precision_tag(args.model)}), decode step at context "
          f"{args.prefill + 1}, one layer; µs NPU / PIM (ratio PIM / NPU); `×n` = n tasks of "
          f"the kind per layer (head groups or experts), each of this size\n")
    header = ["kind"] + [f"B = {b}" for b in args.batches]
    rows_out = []
    for k in kinds:
        cells = []
        for b in args.batches:
            n, p, g = per_batch[b][k]
            cells.append(f"{n:.1f} / {p:.1f} ({p / n:.2f})" if n > 0 else f"- / {p:.1f}")
        label = k + (f" ×{per_batch[args.batches[0]][k][2]}"
                     if per_batch[args.batches[0]][k][2] > 1 else "")
        rows_out.append([label] + cells)
    table(header, rows_out)
    # per-layer sums of the GEMMs (one device each)
    sums = []
    for b in args.batches:
        n_sum = sum(n * g for k, (n, p, g) in per_batch[b].items() if k in GEMM_KINDS)
        p_sum = sum(p * g for k, (n, p, g) in per_batch[b].items() if k in GEMM_KINDS)
        sums.append(f"{n_sum:.0f} / {p_sum:.0f} ({p_sum / n_sum:.2f})")
    table(["per layer", *[f"B = {b}" for b in args.batches]],
          [["Σ decode GEMMs, µs NPU / PIM (ratio)", *sums]])


def precision_tag(model: str) -> str:
    p = paper_precision(model)
    return f"{p.weight}/{p.activation}/{p.kv}"


# ---- weights -----------------------------------------------------------------------------------

def cmd_weights(args: argparse.Namespace) -> None:
    """Block bytes vs capacities; KV per step; whole-model load time per port."""
    inst = build(args.model, args.platform, args.prefill, 1, args.batch)
    names = [d.name for d in inst.devices]
    total = int(inst.block_bytes.sum())
    load = inst.block_load["linear"]
    npu = names.index("NPU0")
    pims = [i for i, d in enumerate(inst.devices) if d.device_class == "pim"]
    t_npu = load[:, npu].sum()
    t_pim_one = load[:, pims[0]].sum() if pims else 0
    caps = {d.name: d.weight_capacity for d in inst.devices}
    cards = load_cards()
    card = cards[args.model]
    kv_res = inst.meta.get("kv_reserved_bytes")
    print(f"{args.model} {args.platform} ({precision_tag(args.model)}), "
          f"{args.prefill}/{args.decode}/{args.batch}\n")
    rows = [["blocks", len(inst.block_ids)],
            ["block bytes (GB)", f"{total / 1e9:.2f}"],
            ["NPU weight capacity (GB)", f"{(caps['NPU0'] or 0) / 1e9:.2f}"],
            ["PIM devices × weight capacity (GB)",
             f"{len(pims)} × " + ", ".join(f"{(caps[names[p]] or 0) / 1e9:.2f}" for p in pims)],
            ["KV reserved per home (MB, peak of the workload)",
             "-" if not kv_res else ", ".join(f"{v / 1e6:,.0f}" for v in
                                              (kv_res.values() if isinstance(kv_res, dict)
                                               else kv_res))],
            ["all blocks through the NPU load port (ms)", f"{t_npu / 1e6:,.1f}"],
            ["all blocks through one PIM load port (ms)", f"{t_pim_one / 1e6:,.1f}"],
            ["all blocks spread over all PIM ports (ms)",
             f"{t_pim_one / max(1, len(pims)) / 1e6:,.1f}"],
            ["all blocks spread over NPU + all PIM ports (ms)",
             f"{1e-6 / (1 / t_npu + len(pims) / t_pim_one):,.1f}" if pims else "-"]]
    moe = card.moe
    if moe is not None:
        rows.append(["MoE experts per layer in the instance (deterministic top-k) / card",
                     f"{moe.top_k} / {moe.num_experts}"])
    table(["quantity", "value"], rows)
    # KV read per decode step, all layers, at the first and last decode step
    prec = paper_precision(args.model)
    kv_tok = card.kv_dim * prec.k * 2 * card.layers  # K and V, bytes per token of one sequence
    first, last = args.prefill + 1, args.prefill + args.decode
    table(["KV read per decode step (all layers)", f"context {first}", f"context {last}"],
          [["GB", f"{kv_tok * first * args.batch / 1e9:.3f}",
            f"{kv_tok * last * args.batch / 1e9:.3f}"]])


# ---- records -----------------------------------------------------------------------------------

def cmd_records(args: argparse.Namespace) -> None:
    """Per-phase times of PD / HEFT / Bifocal from the sweep records of a model/platform."""
    rows, sp_b, sp_by_batch = [], [], defaultdict(list)
    for wdir in sorted(glob.glob(os.path.join(args.cache, args.model, args.platform, "p*"))):
        recs = {}
        for f in glob.glob(os.path.join(wdir, "*.json")):
            with open(f) as fh:
                r = json.load(fh)
            recs[r["method"]] = r
        if not all(m in recs and recs[m].get("makespan") for m in METHODS):
            continue
        pd, bf, hf = recs["pd"], recs["bifocal"], recs["heft"]
        wl = (pd["prefill"], pd["decode"], pd["batch"])
        if args.corners and not (wl[0] in (128, 2048) and wl[1] in (128, 1024)
                                 and wl[2] in (1, 16)):
            continue
        s = pd["makespan"] / bf["makespan"]
        sp_b.append(s)
        sp_by_batch[wl[2]].append(s)
        rows.append([f"{wl[0]}/{wl[1]}/{wl[2]}",
                     f"{pd['ttft'] / 1e6:,.1f} / {bf['ttft'] / 1e6:,.1f}",
                     f"{pd['decode_time'] / 1e6:,.1f} / {bf['decode_time'] / 1e6:,.1f}",
                     f"{pd['mean_tpot'] / 1e6:.2f} / {hf['mean_tpot'] / 1e6:.2f} / "
                     f"{bf['mean_tpot'] / 1e6:.2f}",
                     f"{pd['ttft'] / pd['makespan']:.2f}",
                     f"{pd['makespan'] / hf['makespan']:.3f}", f"{s:.3f}"])
    rows.sort(key=lambda r: tuple(int(x) for x in r[0].split("/"))[::-1])
    print(f"{args.model} {args.platform}: sweep records in {args.cache} (ms; model times)\n")
    table(["prefill/decode/batch", "TTFT PD / Bifocal", "decode time PD / Bifocal",
           "TPOT PD / HEFT / Bifocal", "PD TTFT share", "HEFT / PD", "Bifocal / PD"], rows)

    def geo(xs: list[float]) -> str:
        return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.3f}" if xs else "-"

    table(["workloads", "geomean Bifocal / PD"],
          [["all listed", f"{geo(sp_b)} ({len(sp_b)})"],
           *[[f"batch {b}", f"{geo(v)} ({len(v)})"] for b, v in sorted(sp_by_batch.items())]])


# ---- placement ---------------------------------------------------------------------------------

def step_references(inst: PlacementInstance, step: int) -> tuple[float, float]:
    """(critical path of decode step ``step`` with every task at its fastest legal device and
    free transfers; the step's tasks serial on NPU0 where legal, else at their fastest), ticks."""
    sel = np.flatnonzero(inst.step == step)
    cost = inst.cost[sel].astype(np.float64)
    cost[cost < 0] = np.inf
    fastest = cost.min(axis=1)
    npu = [d.name for d in inst.devices].index("NPU0")
    serial = float(np.where(np.isfinite(cost[:, npu]), cost[:, npu], fastest).sum())
    local = {int(t): i for i, t in enumerate(sel)}
    finish = np.zeros(len(sel))
    order = [t for t in inst.topological_order if int(t) in local]
    pred_ptr, pred_idx = inst.predecessors
    for t in order:
        i = local[int(t)]
        ready = 0.0
        for e in pred_idx[pred_ptr[t]:pred_ptr[t + 1]]:
            u = int(inst.edge_src[e])
            if u in local:
                ready = max(ready, finish[local[u]])
        finish[i] = ready + fastest[i]
    return float(finish.max()), serial


def load_bound(inst: PlacementInstance) -> float:
    """A lower bound on the prefill's end from the weight loads: every block is used in the
    prefill, so each is loaded once before it on some device; the load ports (one per device,
    rule 5) move at most Σ_d rate_d bytes per tick together, rate_d = the device's fastest
    bytes per tick over the blocks. Returns Σ bytes / Σ_d rate_d (ticks)."""
    load = inst.block_load[inst.layout.default].astype(np.float64)
    nbytes = inst.block_bytes.astype(np.float64)
    rates = [float(np.max(nbytes / load[:, d])) for d in range(inst.n_devices)
             if (load[:, d] > 0).all()]
    return float(nbytes.sum()) / sum(rates)


def cmd_placement(args: argparse.Namespace) -> None:
    """Solve one workload with each method; per-phase times and per-kind device classes."""
    from opt.api import solve

    inst = build(args.model, args.platform, args.prefill, args.decode, args.batch, args.layers)
    dclass = np.array([d.device_class for d in inst.devices])
    dev_index = inst.device_index
    size = "full size" if args.layers is None else f"--layers {args.layers}"
    print(f"{args.model} {args.platform} ({precision_tag(args.model)}) "
          f"{args.prefill}/{args.decode}/{args.batch}, {size}: {inst.n_tasks:,} tasks, "
          f"{len(inst.block_ids)} blocks\n")
    results = {}
    for m in args.methods:
        res = solve(inst, m, time_limit=None)
        results[m] = res
    # per-phase times
    rows = []
    for m, res in results.items():
        met = res.stats["metrics"]
        sol = res.solution
        loads = Counter(dclass[dev_index[ld["device"]]] for ld in sol.get("loads", []))
        # PIM load-port time, and the part of it after the prefill's end (TTFT)
        pim_lt = [(ld["start"], ld["end"]) for ld in sol.get("loads", [])
                  if dclass[dev_index[ld["device"]]] == "pim"]
        total = sum(e - s for s, e in pim_lt)
        late = sum(e - max(s, met["ttft"]) for s, e in pim_lt if e > met["ttft"])
        last = max((e for _, e in pim_lt), default=0)
        rows.append([m, ms(met["makespan"]), ms(met["ttft"]), ms(met["decode_time"]),
                     f"{met['mean_tpot'] / 1e6:.3f}" if met["mean_tpot"] else "-",
                     f"{loads.get('npu', 0)} / {loads.get('pim', 0)}",
                     f"{ms(total)} / {ms(late)} / {ms(last)}", met["evictions"],
                     f"{results['pd'].objective / res.objective:.3f}"
                     if "pd" in results else "-"])
    table(["method", "makespan ms", "TTFT ms", "decode ms", "mean TPOT ms", "loads NPU / PIM",
           "PIM load-port ms: summed / after TTFT / last end", "evictions", "speedup over PD"],
          rows)
    # per-kind device class in decode and prefill
    for phase, label in ((1, "decode"), (0, "prefill")):
        sel = np.flatnonzero(inst.phase == phase)
        kinds = sorted({fold(inst.kind[t]) for t in sel})
        counts: dict[str, dict[str, Counter]] = {}
        for m, res in results.items():
            assign = res.solution["assignment"]
            c: dict[str, Counter] = defaultdict(Counter)
            for t in sel:
                c[fold(inst.kind[t])][dclass[dev_index[assign[inst.task_ids[t]]]]] += 1
            counts[m] = c
        rows = []
        for k in kinds:
            cells = []
            for m in results:
                cnt = counts[m][k]
                tot = sum(cnt.values())
                cells.append(f"{cnt.get('npu', 0) / tot:.0%} / {cnt.get('pim', 0) / tot:.0%}")
            rows.append([k, *cells])
        print(f"{label}: share of the tasks of each kind on NPU / PIM")
        table(["kind", *results], rows)
    # per-step references
    if args.decode:
        ref_rows, crits = [], []
        for s in sorted({1, args.decode}):
            crit, serial = step_references(inst, s)
            crits.append(crit)
            ref_rows.append([s, f"{crit / 1e6:.3f}", f"{serial / 1e6:.3f}"])
        print("per decode step: a reference for the TPOTs above (transfers and loads ignored)")
        table(["step", "critical path at fastest devices ms", "serial on NPU0 ms"], ref_rows)
        if "pd" in results:
            # steps are chained (step i+1's embed waits for step i's lm_head), so no schedule's
            # decode time is below the sum of the steps' critical paths; the path grows
            # linearly with the context (attention), hence the mean of the first and last
            bound = args.decode * (crits[0] + crits[-1]) / 2
            pd_met = results["pd"].stats["metrics"]
            pd_dec = pd_met["decode_time"]
            crit0, _ = step_references(inst, 0)  # the prefill (step 0) is an ancestor of step 1
            ttft_lb = max(crit0, load_bound(inst))
            whole = ttft_lb + bound
            print(f"ceiling on any schedule's speedup over PD (critical paths at the fastest "
                  f"devices, transfers free): decode time {pd_dec / 1e6:,.1f} / "
                  f"{bound / 1e6:,.1f} ms = {pd_dec / bound:.2f}; makespan "
                  f"{pd_met['makespan'] / 1e6:,.1f} / ({ttft_lb / 1e6:,.1f} prefill, the larger "
                  f"of its critical path {crit0 / 1e6:,.1f} and the load bound "
                  f"{load_bound(inst) / 1e6:,.1f}, + {bound / 1e6:,.1f}) ms = "
                  f"{pd_met['makespan'] / whole:.2f}\n")
    # busy time per device class in decode, per step
    rows = []
    dec = inst.phase == 1
    steps = max(1, args.decode)
    for m, res in results.items():
        busy: Counter = Counter()
        idx = inst.task_index
        for ev in res.solution["compute"]:
            t = idx[ev["task"]]
            if dec[t]:
                busy[dclass[dev_index[ev["device"]]]] += ev["end"] - ev["start"]
        rows.append([m, f"{busy.get('npu', 0) / steps / 1e6:.3f}",
                     f"{busy.get('pim', 0) / steps / 1e6:.3f}"])
    print("decode compute time per step, summed over the devices of each class (ms)")
    table(["method", "NPU", "PIM (all devices)"], rows)


# ---- headroom ----------------------------------------------------------------------------------

#: operator kinds the headroom move search re-assigns (every task of the kind in one phase)
MOVE_KINDS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
              "softmax")


def headroom_moves(inst: PlacementInstance) -> list:
    """Every kind of :data:`MOVE_KINDS` in each phase onto each device, and onto all PIM devices
    rotating over the layers (:class:`heuristics.placement.improve.Move`)."""
    from heuristics.placement.improve import Move

    pims = tuple(i for i, d in enumerate(inst.devices) if d.device_class == "pim")
    targets = [(d,) for d in range(inst.n_devices)] + ([pims] if len(pims) > 1 else [])
    present = set(inst.kind)
    return [Move(k, t, ph) for ph in (0, 1) for k in MOVE_KINDS if k in present
            for t in targets]


def port_busy_before(sol: dict, device: str, until: float) -> float:
    """Ticks the load port of ``device`` is busy before ``until`` in ``sol``."""
    return float(sum(min(ld["end"], until) - ld["start"] for ld in sol.get("loads", [])
                     if ld["device"] == device and ld["start"] < until))


def cmd_headroom(args: argparse.Namespace) -> None:
    """HEFT against Bifocal per workload, and how much any re-assignment found gains over both."""
    from heuristics.placement.improve import improve
    from opt.api import solve

    rows = []
    for prefill in args.prefill:
        for decode in args.decode:
            inst = build(args.model, args.platform, prefill, decode, args.batch)
            heft, bif = (solve(inst, m, time_limit=None) for m in ("heft", "bifocal"))
            differ = sum(heft.solution["assignment"][t] != bif.solution["assignment"][t]
                         for t in inst.task_ids)
            ttft = bif.stats["metrics"]["ttft"]
            npu = next(d.name for d in inst.devices if d.device_class == "npu")
            busy = port_busy_before(bif.solution, npu, ttft)
            best = "-"
            if args.moves:
                _, log = improve(inst, bif.solution, headroom_moves(inst))
                spans = [e["makespan"] for e in log[1:] if "makespan" in e]
                best = (f"{min(spans) / bif.objective - 1:+.2%} ({len(spans)} moves)"
                        if spans else "-")
            rows.append([f"{prefill}/{decode}/{args.batch}", f"{inst.n_tasks:,}",
                         ms(heft.objective), ms(bif.objective),
                         f"{bif.objective / heft.objective - 1:+.3%}", f"{differ:,}",
                         f"{1 - bif.lower_bound / bif.objective:.1%}",
                         f"{ms(ttft)} / {ms(busy)}", best])
            print(f"{prefill}/{decode}/{args.batch} done", flush=True)
    print(f"\n{args.model} {args.platform} batch {args.batch}, full size: HEFT and Bifocal "
          f"(validated), and the best of a move search from Bifocal's schedule\n")
    table(["workload", "tasks", "HEFT ms", "Bifocal ms", "Bifocal / HEFT − 1",
           "assignments differing", "Bifocal's certified gap", "TTFT ms / NPU load port busy ms",
           "best move / Bifocal − 1"], rows)
    if args.slice_time_limit:
        inst = build(args.model, args.platform, args.prefill[0], 3, args.batch, layers=1)
        res = {m: solve(inst, m, time_limit=args.slice_time_limit,
                        num_workers=args.slice_workers, seed=0)
               if m == "cpsat" else solve(inst, m, time_limit=None)
               for m in ("heft", "bifocal", "cpsat")}
        print(f"1-layer slice {args.prefill[0]}/3/{args.batch} ({inst.n_tasks} tasks), CP-SAT "
              f"{args.slice_time_limit:g} s, {args.slice_workers} workers, seed 0:")
        table(["method", "status", "makespan ms", "vs CP-SAT"],
              [[m, r.status, ms(r.objective), f"{r.objective / res['cpsat'].objective:.3f}"]
               for m, r in res.items()])


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p: argparse.ArgumentParser, workload: bool = True) -> None:
        p.add_argument("--model", required=True)
        p.add_argument("--platform", required=True)
        if workload:
            p.add_argument("--prefill", type=int, default=128)
            p.add_argument("--decode", type=int, default=128)
            p.add_argument("--batch", type=int, default=1)

    p = sub.add_parser("ratios", help="decode-op durations NPU vs PIM per batch")
    common(p, workload=False)
    p.add_argument("--prefill", type=int, default=1024, help="context before the decode step")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8, 16])
    p = sub.add_parser("weights", help="block bytes, capacities, load times, KV per step")
    common(p)
    p = sub.add_parser("records", help="per-phase times from the sweep records")
    common(p, workload=False)
    p.add_argument("--cache", default=CACHE)
    p.add_argument("--corners", action="store_true", help="only the 2×2×2 corners")
    p = sub.add_parser("placement", help="solve one workload; per-kind device classes")
    common(p)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p = sub.add_parser("headroom", help="HEFT vs Bifocal, and a move search's best gain")
    common(p, workload=False)
    p.add_argument("--prefill", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--decode", type=int, nargs="+", default=[128, 512, 1024])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--moves", action="store_true", help="run the move search (a replay each)")
    p.add_argument("--slice-time-limit", type=float, default=0.0,
                   help="also solve a 1-layer, 3-step slice with CP-SAT (seconds; 0 = skip)")
    p.add_argument("--slice-workers", type=int, default=2, help="CP-SAT threads on the slice")
    args = ap.parse_args(argv)
    {"ratios": cmd_ratios, "weights": cmd_weights, "records": cmd_records,
     "placement": cmd_placement, "headroom": cmd_headroom}[args.cmd](args)


if __name__ == "__main__":
    main()
