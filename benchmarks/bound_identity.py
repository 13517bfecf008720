"""Values of every component of the certified lower bound (and digests of the cheapest heads
and tails and of the chain-strengthened tails) on a fixed set of small and medium instances:
the evidence that a speed change left the bound bit-identical.

Cases: those of ``benchmarks/schedule_identity.py`` (bundled placement instances, 2-layer
builds), a 1-layer build with 256 decode steps (bucketing of one shape's members), random DAGs
of ``benchmarks/bound_memory.py``; each under the default options and under small budgets
(buckets, branch-and-bound buckets and release re-evaluations all capped).

    PYTHONPATH=/path/to/base python benchmarks/bound_identity.py -o ref.json
    PYTHONPATH=$PWD python benchmarks/bound_identity.py --compare ref.json
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

_HERE = Path(__file__).parent

#: option sets: the defaults and small budgets (name -> BoundOptions keyword arguments)
OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "small": {"max_assignments": 64, "max_evaluations": 3, "max_release_evaluations": 5,
              "max_branch_evaluations": 2, "max_device_path_tasks": 0},
}
#: extra builds (schedule_identity.built's spec): many decode steps of one shape
EXTRA = (("dops-qwen-1.8b", "HP32", 64, 256, 1, 1, None),)
#: random DAG sizes (bound_memory.random_dag)
RANDOM = (300, 3000)


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, _HERE / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    """(name, instance factory) of every case."""
    si = _module("schedule_identity")
    yield from si.cases(full=False)
    for spec in EXTRA:
        yield "-".join(map(str, spec)), lambda spec=spec: si.built(spec)
    bm = _module("bound_memory")
    for n in RANDOM:
        yield f"random-{n}", lambda n=n: bm.random_dag(n)


def _digest(a: np.ndarray | None) -> str | None:
    if a is None:
        return None
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.int64).tobytes()).hexdigest()[:16]


def bound_values(inst: Any, options: dict[str, Any]) -> dict[str, Any]:
    """{component: [value, detail without wall times]} and the arrays' digests."""
    from opt.placement.bound_options import BoundOptions
    from opt.placement.certified_bounds import certified_lower_bound
    from opt.placement.chain_bound import chain_bound
    from opt.placement.lower_bounds import heads_tails

    opts = BoundOptions(**options)
    b = certified_lower_bound(inst, opts)
    out: dict[str, Any] = {"value": b.value, "best": b.best}
    for c in b.components:
        detail = {k: v for k, v in c.detail.items() if not k.endswith("_s")}
        out[c.name] = [c.value, json.loads(json.dumps(detail))]
    if inst.n_tasks:
        head, tail = heads_tails(inst)
        out["head"], out["tail"] = _digest(head), _digest(tail)
        out["chain_tails"] = _digest(chain_bound(inst, opts, tail)[2])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", help="write the values (JSON) here")
    ap.add_argument("--compare", help="values of the reference tree: exit 1 on a difference")
    args = ap.parse_args(argv)
    result = {}
    for name, make in cases():
        inst = make()
        result[name] = {o: bound_values(inst, kw) for o, kw in OPTIONS.items()}
        print(name, result[name]["default"]["value"], flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if args.compare:
        ref = json.loads(Path(args.compare).read_text())
        bad = [k for k in sorted(set(ref) | set(result)) if ref.get(k) != result.get(k)]
        print("differences:", bad or "none")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
