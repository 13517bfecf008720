"""Random serving-plan instances shared by the serving tests (hand-made tables, no builder)."""

from __future__ import annotations

import numpy as np

from opt.serving.instance import ServingInstance, serving_instance_from_dict


def random_plan_instance(seed: int, reshard: bool = False, problem: str = "serving_plan"
                         ) -> ServingInstance:
    """Hand-made: 3 layers, a 2-layer block (truncated last block), 3 ops per layer, two GPU
    types and configurations of TP 1, 1 and 2, memory tight enough to bind, random tied
    embeddings; with ``reshard`` the crossings between TP 1 and 2 carry random redistribution
    tables (zero for TP 1, as the builder's). Times in µs."""
    rng = np.random.default_rng(seed)
    block, per_layer, batches, max_mu = 2, 3, (1, 2, 4), 2
    n = block * per_layer
    mbs = sorted({b // m for b in batches for m in range(1, max_mu + 1) if b % m == 0})
    nc, nm = 3, len(mbs)
    op = rng.integers(5, 50, size=(nc, 1, n)) + rng.integers(0, 10, size=(nc, 1, n)) * \
        np.array(mbs)[None, :, None]
    busy = rng.integers(1, 5, size=(nm, n)) * np.array(mbs)[:, None]
    lat = int(rng.integers(0, 10))
    gpu = {"peak_flops": 1e14, "mem_bw_bytes_per_s": 1e12, "memory_bytes": 2.5e8,
           "gpus_per_node": 8, "intra_node": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e11}}
    obj = {
        "schema": 1, "problem": problem, "time_unit": "us",
        "model": {"name": "rand", "layers": 3, "block_layers": block,
                  "ops": [{"id": f"L{l}.op{j}", "kind": f"op{j}", "layer": l,
                           "weight_bytes": int(rng.integers(1, 100)) * 10**6,
                           "kv_bytes_per_request": int(rng.integers(0, 3)) * 10**6,
                           "out_bytes_per_request": 1000}
                          for l in range(block) for j in range(per_layer)],
                  "embed_weight_bytes": 10**7, "lm_head_weight_bytes": 10**7,
                  "tied_embeddings": bool(rng.integers(0, 2))},
        "hardware": {"gpus": [{"name": "G", "price_usd_per_hour": 2.0, **gpu},
                              {"name": "H", "price_usd_per_hour": 5.0, **gpu}],
                     "network": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10}},
        "configs": [{"id": "G1", "gpu": "G", "tp": 1}, {"id": "H1", "gpu": "H", "tp": 1},
                    {"id": "G2", "gpu": "G", "tp": 2}],
        "workload": {"context_tokens": 1024, "tpot_slo": 900},
        "grid": {"max_gpus": 8, "max_owners": 3, "max_replicas": 4, "max_microbatches": max_mu,
                 "batches": list(batches)},
    }
    obj["latency"] = {
        "microbatch_sizes": mbs, "op_duration": op.tolist(),
        "head_duration": rng.integers(1, 20, size=(nc, nm, 2)).tolist(),
        "transfer_duration": (busy + lat).tolist(), "transfer_busy": busy.tolist(),
        "token_transfer_duration": [lat + 1] * nm, "token_transfer_busy": [1] * nm}
    if reshard:
        redis = rng.integers(0, 8, size=(2, nc, nm, n)) * np.array(mbs)[None, None, :, None]
        redis[:, :2] = 0  # G1, H1: one GPU, nothing to gather or scatter
        obj["latency"]["reshard_out"] = redis[0].tolist()
        obj["latency"]["reshard_in"] = redis[1].tolist()
    return serving_instance_from_dict(obj, "rand.json")
