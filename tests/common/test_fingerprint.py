"""Instance fingerprints and record digests (opt.common.fingerprint, issue 18 item 5)."""

import dataclasses
import time

import numpy as np

import instances
from opt.common.fingerprint import instance_fingerprint, seal, seal_error
from opt.placement.builder import BuildOptions, Workload, build_placement
from opt.placement.io import read_instance
from opt.problems import read_problem_instance


def test_fingerprint_survives_a_json_round_trip(tmp_path, catalog, cards):
    built = build_placement(cards["dops-qwen-1.8b"], catalog.platform("HP32"), catalog,
                            Workload(8, 2, 1), BuildOptions(layers=1))
    built.write(tmp_path / "p.json.gz")
    assert instance_fingerprint(read_instance(tmp_path / "p.json.gz")) == \
        instance_fingerprint(built)
    serving = instances.load("p3-tiny-gemma-a100-l40s")
    serving.write(tmp_path / "s.json")
    assert instance_fingerprint(read_problem_instance(tmp_path / "s.json")) == \
        instance_fingerprint(serving)


def test_fingerprint_ignores_provenance_but_not_data():
    inst = instances.load("heft-topcuoglu-2002")
    fp = instance_fingerprint(inst)
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    assert instance_fingerprint(dataclasses.replace(inst, meta={"build_s": 1.0},
                                                    source="elsewhere.json")) == fp
    cost = inst.cost.copy()
    cost[0, 0] += 1
    assert instance_fingerprint(dataclasses.replace(inst, cost=cost)) != fp
    assert instance_fingerprint(dataclasses.replace(inst, task_ids=inst.task_ids[::-1])) != fp
    other = instances.load("sinnen-Nodes_7_OutTree-p2")
    assert instance_fingerprint(other) != fp


def test_fingerprint_is_cheap_on_large_arrays():
    inst = instances.load("heft-topcuoglu-2002")
    n = 900_000
    big = dataclasses.replace(inst, cost=np.ones((n, 4), dtype=np.int64),
                              task_ids=tuple(f"t{i}" for i in range(n)))
    t0 = time.perf_counter()
    instance_fingerprint(big)
    assert time.perf_counter() - t0 < 2.0  # measured ≈ 0.2 s for a 900 k-task DOPS instance


def test_seal_detects_an_edited_field():
    rec = seal({"makespan": 223_000_000, "lower_bound": 223_000_000.0, "status": "OPTIMAL"})
    assert seal_error(rec) is None
    assert "mismatch" in seal_error({**rec, "makespan": 1})
    assert "no digest" in seal_error({k: v for k, v in rec.items() if k != "digest"})
    assert seal_error([1, 2]) == "not a JSON object"
