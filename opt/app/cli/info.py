"""``hetopt models``, ``hetopt hardware``, ``hetopt instances``: what is bundled."""

from __future__ import annotations

import argparse

import instances
from opt.app.cli.helpers import print_json
from opt.app.cli.sources import cards, catalog
from opt.common.report import table


def cmd_models(args: argparse.Namespace) -> int:
    """The model cards: layers, parameters, KV bytes per token, layer pattern."""
    rows = [{"name": c.name, "layers": c.layers, "total_params": c.total_params,
             "active_params": c.active_params, "kv_bytes_per_token": c.kv_bytes_per_token(),
             "layer_pattern": list(c.layer_pattern), "source": c.source} for c in cards(args)]
    if args.json:
        print_json(rows)
        return 0
    print(table(["model", "layers", "total params", "active params", "KV bytes/token", "pattern"],
                [[r["name"], r["layers"], r["total_params"], r["active_params"],
                  int(r["kv_bytes_per_token"]), "/".join(r["layer_pattern"])] for r in rows]))
    return 0


def cmd_hardware(args: argparse.Namespace) -> int:
    """The catalog: devices, platforms and GPU node types."""
    cat = catalog(args)
    if args.json:
        print_json(cat.to_dict())
        return 0
    print(table(["device", "class", "TFLOPS", "GB/s", "memory GB", "$/h", "latency model"],
                [[d.name, d.device_class, d.peak_flops / 1e12, d.mem_bw_bytes_per_s / 1e9,
                  d.memory_bytes and d.memory_bytes / 1e9, d.price_usd_per_hour,
                  d.latency_model.kind if d.latency_model else "-"] for d in cat.devices.values()]))
    print()
    print(table(["platform", "devices", "topology", "fabric GB/s", "latency us"],
                [[p.name, " + ".join(f"{m.count}x{m.device}" for m in p.members), p.topology,
                  p.fabric.bandwidth_bytes_per_s / 1e9, p.fabric.latency_s * 1e6]
                 for p in cat.platforms.values()]))
    print()
    print(table(["node type", "gpu", "gpus/node", "intra GB/s", "network GB/s", "network us"],
                [[n.name, n.gpu, n.gpus_per_node, n.intra_node.bandwidth_bytes_per_s / 1e9,
                  n.network.bandwidth_bytes_per_s / 1e9, n.network.latency_s * 1e6]
                 for n in cat.node_types.values()]))
    return 0


def cmd_instances(args: argparse.Namespace) -> int:
    """The bundled benchmark instances (the STG graphs included) and their known optima /
    bounds."""
    rows = instances.bundled()
    if args.json:
        from dataclasses import asdict

        print_json([asdict(r) for r in rows])
    else:
        print(table(["name", "problem", "optimum", "lower", "upper"],
                    [[r.name, r.problem, r.optimum, r.lower_bound, r.upper_bound] for r in rows]))
    return 0
