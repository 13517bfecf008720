"""Quantisation and sparsity in built P1 instances (docs/dops_analyses.md).

For each model: total weight-block bytes and the mean block load duration (linear format, NPU
and PIM) at fp16 / int8 / int4 weights, the ratio to fp16, and a validated Bifocal makespan of
a short workload (prefill 128, decode 8, batch 1) on the model's DOPS platform; then the effect
of sparsity on one decode step's FLOPs and bytes. Model cards are checked to be untouched.

    python benchmarks/quantisation_check.py [--decode 8] [--models llama-2-7b mixtral-8x7b ...]
"""

from __future__ import annotations

import argparse
import time

from opt.app.runs.replay_schedules import validated_heuristic
from opt.common.report import table
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.costlib.operators import Precision, Sparsity, layer_ops
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement

PLATFORM = {"llama-2-7b": "HP64", "llama-2-13b": "HP64", "mixtral-8x7b": "HP128",
            "llama-2-70b": "HP128", "dops-qwen-1.8b": "HP32"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["llama-2-7b", "mixtral-8x7b", "llama-2-70b"])
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=8)
    args = ap.parse_args()
    cat, cards = bundled_catalog(), bundled_cards()
    before = {m: (cards[m].total_params, cards[m].active_params) for m in cards.names()}
    rows = []
    for model in args.models:
        plat = PLATFORM.get(model, "HP128")
        base = None
        for label, prec in (("fp16", Precision()), ("int8 (W8A8KV8, paper)" if
                                                     model in ("mixtral-8x7b", "llama-2-70b")
                                                     else "int8 weights",
                                                     paper_precision(model) if model in
                                                     ("mixtral-8x7b", "llama-2-70b")
                                                     else Precision(weight="int8")),
                            ("int4 weights", Precision(weight="int4"))):
            t0 = time.perf_counter()
            inst = build_placement(cards[model], cat.platform(plat), cat,
                                   Workload(args.prefill, args.decode, 1),
                                   BuildOptions(precision=prec))
            kinds = [d.device_class for d in inst.devices]
            lin = inst.block_load["linear"]
            npu = float(lin[:, kinds.index("npu")].mean())
            pim = float(lin[:, kinds.index("pim")].mean()) if "pim" in kinds else None
            res = validated_heuristic(inst, "bifocal")
            cur = (int(inst.block_bytes.sum()), npu, pim, res.objective)
            base = base or cur
            rows.append([model, plat, label, cur[0] / 1e9, cur[0] / base[0], npu / 1e6,
                         npu / base[1], None if pim is None else pim / 1e6,
                         res.objective / 1e6, base[3] / res.objective,
                         res.stats["metrics"]["evictions"], time.perf_counter() - t0])
    print(table(["model", "platform", "precision", "block GB", "x fp16", "NPU load ms",
                 "x fp16", "PIM load ms", "Bifocal ms", "speedup", "evictions", "wall s"], rows))
    after = {m: (cards[m].total_params, cards[m].active_params) for m in cards.names()}
    print("model cards untouched:", before == after)

    card = cards["llama-2-7b"]
    dense = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=1024, batch=1)}
    srows = []
    for label, sp in (("weight 0.5", Sparsity(weight=0.5)),
                      ("activation decode 0.5", Sparsity(activation_decode=0.5)),
                      ("attention 0.75", Sparsity(attention=0.75))):
        ops = {o.kind: o for o in layer_ops(card, 0, tokens=1, context=1024, batch=1,
                                            sparsity=sp, phase="decode")}
        for kind in ("q_proj", "down_proj", "qk", "softmax", "sv"):
            srows.append([label, kind, ops[kind].flops / dense[kind].flops,
                          ops[kind].bytes / dense[kind].bytes,
                          (ops[kind].weight_bytes / dense[kind].weight_bytes
                           if dense[kind].weight_bytes else None)])
    print("\nllama-2-7b layer 0, one decode step at context 1024, batch 1 (ratios to dense):")
    print(table(["sparsity", "op", "FLOPs", "bytes", "stored weight bytes"], srows))


if __name__ == "__main__":
    main()
