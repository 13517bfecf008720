"""Instance fingerprints and record digests (opt.common.fingerprint)."""

import dataclasses

import numpy as np

import instances
from opt.common.fingerprint import instance_fingerprint, seal, seal_error
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
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


def test_fingerprint_covers_every_entry_of_large_arrays():
    """At full size (900 k tasks) the fingerprint still reads every cost entry and task id
    (its speed is measured by benchmarks/end_to_end.py's ``fingerprint`` stage)."""
    inst = instances.load("heft-topcuoglu-2002")
    n = 900_000
    cost = np.ones((n, 4), dtype=np.int64)
    ids = tuple(f"t{i}" for i in range(n))
    big = dataclasses.replace(inst, cost=cost, task_ids=ids)
    fp = instance_fingerprint(big)
    assert instance_fingerprint(dataclasses.replace(inst, cost=cost.copy(), task_ids=ids)) == fp
    last = cost.copy()
    last[-1, -1] = 2
    assert instance_fingerprint(dataclasses.replace(big, cost=last)) != fp
    renamed = (*ids[:-1], "t-last")
    assert instance_fingerprint(dataclasses.replace(big, task_ids=renamed)) != fp


def test_seal_detects_an_edited_field():
    rec = seal({"makespan": 223_000_000, "lower_bound": 223_000_000.0, "status": "OPTIMAL"})
    assert seal_error(rec) is None
    assert "mismatch" in seal_error({**rec, "makespan": 1})
    assert "no digest" in seal_error({k: v for k, v in rec.items() if k != "digest"})
    assert seal_error([1, 2]) == "not a JSON object"


def test_load_timing_changes_the_fingerprint_but_prefetch_keeps_the_former_one():
    """``load_timing`` (problems.md §1.2 rule 5) is problem data, but at ``prefetch`` — the
    value of every instance before the field existed — it leaves the fingerprint as it was."""
    import dataclasses
    import hashlib

    from opt.common.fingerprint import PREFIX, _feed, instance_fingerprint
    from tests.placement.test_load_timing import worked_example

    pre = worked_example("prefetch")
    at_use = dataclasses.replace(pre, load_timing="at_use")
    assert instance_fingerprint(pre) != instance_fingerprint(at_use)
    # the former hash: every field but meta and source, no load_timing
    h = hashlib.sha256()
    h.update(f"D{type(pre).__name__}(".encode())
    for f in dataclasses.fields(pre):
        if f.name not in ("meta", "source", "load_timing"):
            h.update(f"{f.name}=".encode())
            _feed(h, getattr(pre, f.name))
    h.update(b")")
    assert instance_fingerprint(pre) == PREFIX + h.hexdigest()


def test_cached_fingerprint_is_the_instances_own_and_follows_its_copies():
    inst = instances.load("heft-topcuoglu-2002")
    assert inst.fingerprint == instance_fingerprint(inst)
    assert inst.fingerprint is inst.fingerprint  # computed once
    cost = inst.cost.copy()
    cost[0, 0] += 1
    changed = dataclasses.replace(inst, cost=cost)
    assert changed.fingerprint == instance_fingerprint(changed) != inst.fingerprint
