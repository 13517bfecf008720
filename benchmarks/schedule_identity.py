"""Digests of the Bifocal and HEFT schedules (default parameters; Bifocal also in HEFT's order,
``ready_set: rank``) on a fixed set of instances:
the evidence that a speed change left every schedule byte-identical.

Each case's solution dict (assignment, compute, transfers, loads, evictions, formats) is
serialised with sorted keys and hashed (SHA-256, first 16 hex digits); Bifocal's statistics
(loads, evictions, flipped decisions, ties, … — all but the wall times) are hashed too. A method that rejects an instance records its error message instead.

Run it once with the reference tree and once with the changed one and compare::

    PYTHONPATH=/path/to/main python benchmarks/schedule_identity.py -o ref.json
    PYTHONPATH=$PWD python benchmarks/schedule_identity.py -o new.json --compare ref.json
    ... --full          # also the full-size flagship (Llama-2-7B HP64 1024/1024/16; minutes)

Uses only the public API (instances, builder, the two schedulers), so any tree runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from opt.common.jsonio import json_default

#: (model, platform, prefill, decode, batch, layers, capacity scale or None[, links]):
#: links "star" (uplink + downlink channels) or "free" (no contention); default as built
BUILT = (
    ("llama-2-13b", "HP64", 128, 16, 4, 2, None, "star"),
    ("dops-qwen-1.8b", "HP32", 64, 32, 1, 2, 0.2, "star"),
    ("llama-2-7b", "HP64", 128, 64, 16, 2, None, "free"),
    ("llama-2-13b", "HP64", 128, 16, 4, 2, None),
    ("llama-2-13b", "HP64", 128, 16, 4, 2, 0.05),
    ("dops-qwen-1.8b", "HP32", 64, 32, 1, 2, None),
    ("dops-qwen-1.8b", "HP32", 64, 32, 1, 2, 0.2),
    ("dops-qwen-1.8b", "HP32", 256, 8, 8, 2, 0.5),
    ("llama-2-7b", "HP64", 128, 64, 16, 2, None),
    ("llama-2-7b", "HP64", 128, 64, 16, 2, 0.35),
)
FULL = ("llama-2-7b", "HP64", 1024, 1024, 16, None, None)
#: Bifocal's runs: its defaults (the ready set by score) and HEFT's static order
#: (``ready_set: rank``; a tree without the parameter records its rejection)
BIFOCAL_PARAMS: dict[str, dict[str, Any]] = {"bifocal": {}, "bifocal-rank": {"ready_set": "rank"}}


def digest(obj: Any) -> str:
    """First 16 hex digits of the SHA-256 of ``obj`` as sorted-key JSON."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS
                                       | orjson.OPT_SERIALIZE_NUMPY,
                                       default=json_default)).hexdigest()[:16]


def variant(inst, scale: float | None, links: str | None = None):
    """``inst`` with every device's weight capacity set to ``scale`` × (the total block bytes
    / number of devices), at least the largest block (None: unchanged), and its links made
    ``star`` or contention-free (``free``; None: unchanged)."""
    if scale is None and links is None:
        return inst
    from opt.placement.io import instance_from_dict

    d = inst.to_dict()
    if scale is not None:
        total, largest = int(inst.block_bytes.sum()), int(inst.block_bytes.max())
        cap = max(largest, int(scale * total / inst.n_devices))
        for dv in d["devices"]:
            dv["weight_capacity"] = cap
    if links == "star":
        d["links"]["topology"] = "star"
    elif links == "free":
        d["links"]["contention"] = False
    return instance_from_dict(d)


def built(spec: tuple) -> Any:
    from opt.costlib.hardware import bundled_catalog
    from opt.costlib.modelcard import bundled_cards
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.builder import build_placement

    model, platform, pre, dec, batch, layers, scale, *links = spec
    cat = bundled_catalog()
    # the cases are prefetch instances (problems.md §1.2 rule 5), as built before the builder
    # made at_use its default; older trees have no load_timing and build prefetch anyway
    timing = {"load_timing": "prefetch"} if "load_timing" in BuildOptions.__dataclass_fields__ \
        else {}
    inst = build_placement(bundled_cards()[model], cat.platform(platform), cat,
                           Workload(pre, dec, batch), BuildOptions(layers=layers, **timing))
    return variant(inst, scale, *links)


def cases(full: bool, bundled: bool = True) -> Iterator[tuple[str, Callable[[], Any]]]:
    """(name, instance factory) of every case."""
    if bundled:
        import instances

        for name in instances.names(("placement", "layout")):  # every P1 schedule
            yield name, lambda name=name: instances.load(name)
    for spec in BUILT + ((FULL,) if full else ()):
        yield "-".join(map(str, spec)), lambda spec=spec: built(spec)


def schedule_digests(inst) -> dict[str, Any]:
    """{method: {"solution": digest, "stats": digest} or {"error": message}}."""
    from heuristics.placement.bifocal import bifocal_schedule
    from heuristics.placement.list_scheduler import heft
    from opt.common.errors import InputError

    out: dict[str, Any] = {}
    for method in ("heft", "bifocal", "bifocal-rank"):
        stats: dict[str, Any] = {}
        try:
            sol = heft(inst) if method == "heft" else \
                bifocal_schedule(inst, BIFOCAL_PARAMS[method], stats=stats)
        except InputError as exc:
            out[method] = {"error": str(exc)}
            continue
        stats.pop("time_s", None)
        out[method] = {"solution": digest(sol), "stats": digest(stats),
                       "makespan": max((c["end"] for c in sol["compute"]), default=0),
                       "evictions": len(sol["evictions"])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", help="write the digests (JSON) here")
    ap.add_argument("--compare", help="digests of the reference tree: exit 1 on a difference")
    ap.add_argument("--full", action="store_true", help="also the full-size flagship")
    args = ap.parse_args(argv)
    result = {}
    for name, make in cases(args.full):
        result[name] = schedule_digests(make())
        print(name, json.dumps(result[name]), flush=True)
    if args.output:
        with open(args.output, "w") as fh:
            json.dump(result, fh, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as fh:
            ref = json.load(fh)
        diff = [k for k in result if result[k] != ref.get(k)]
        print(f"{len(result) - len(diff)}/{len(result)} cases identical"
              + (f"; DIFFERENT: {', '.join(diff)}" if diff else ""))
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
