"""Bifocal ablation in the form of DOPS Fig. 13 (problems.md §6): EFT only, EFT + one term (window,
phase, token, and our extension the copy cost), all terms, and all terms but one, each in DOPS
Algorithm 1's ready-set order (``ready_set: score``); and all terms in HEFT's static order
(``rank``, with the siblings' extension and HEFT's
insertion into idle gaps), and all terms with that insertion in the score order
(``insertion``: HEFT's start rule instead of DOPS Eq. 1 and 3's avail(k)), on
Qwen-1.8B (``dops-qwen-1.8b``, batch 8) and Llama-7B (batch 16) workloads on HP32, full size;
every schedule validated (with ``--batch1`` also the same shapes at batch 1).

Per run: the makespan (model time, ticks of the cost library: independent of the machine), the
ratio to all terms, the evictions and, per term, the decisions it flipped
(``stats["flipped_decisions"]``). Records are appended to ``--out`` (JSON lines) as they finish
and a rerun skips the records already there; ``--table`` prints the markdown tables of
``docs/dops_analyses.md`` §4 from that file.

    python benchmarks/bifocal_ablation.py [--out results/bifocal_ablation.jsonl] [--table]
    python benchmarks/bifocal_ablation.py --batch1 ...   # also the shapes at batch 1
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from heuristics.placement.bifocal import BIFOCAL_VERSION, FLIP_TERMS, bifocal_schedule
from opt.common.errors import InputError
from opt.common.outpath import NEW_FILE, output_error
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.validator import validate_placement

#: (model, batch) × (prefill, decode): five workloads per model (decode ≤ 256 keeps a run of
#: the full model under ~10 s on the shared machine).
MODELS = (("dops-qwen-1.8b", 8), ("llama-2-7b", 16))
#: ``--batch1``: the same shapes at batch 1, where decode runs on PIM and loads are exposed
#: (the terms act there; at batches 8/16 decode's GEMMs keep most weights on the NPU).
MODELS_BATCH1 = (("dops-qwen-1.8b", 1), ("llama-2-7b", 1))
SHAPES = ((128, 128), (512, 128), (1024, 128), (128, 256), (512, 256))
#: The variants: Fig. 13's "EFT only", one term added, all, and one term removed, and ``rank``.
#: ``copy`` is the copy cost (an extension beyond DOPS, ``copy_cost``; off = 0); ``rank`` all
#: terms in HEFT's order (``ready_set: rank``; not a term, so not in the term variants);
#: ``insertion`` all terms with HEFT's insertion into idle gaps (not a term either).
_OFF = {"window": {"window": False}, "phase": {"phase": False}, "token": {"token": False},
        "copy": {"copy_cost": 0.0}}
#: The score terms among them whose flipped decisions are counted (the order is not a term).
_FLIPPED = [t for t in _OFF if t in FLIP_TERMS]
VARIANTS = {
    "eft": {k: v for off in _OFF.values() for k, v in off.items()},
    **{f"+{term}": {k: v for other, off in _OFF.items() if other != term
                    for k, v in off.items()} for term in _OFF},
    "all": {},
    **{f"-{term}": off for term, off in _OFF.items()},
    "rank": {"ready_set": "rank"},
    "insertion": {"insertion": True},
}
#: DOPS Fig. 13: latency increase when the term is removed (HP32, five Qwen-1.8B and Llama-7B
#: workloads; the paper gives ranges, not per-workload values).
PAPER_REMOVED = {"window": (6.4, 11.8), "phase": (7.0, 10.0), "token": (16.0, 25.6)}
#: The summary rows of the variants that are not terms: variant -> (row label, paper cell).
NOT_TERMS = {
    "rank": ("order: HEFT's (ready_set rank) instead of the score's",
             "– (Algorithm 1's order is the paper's)"),
    "insertion": ("start: HEFT's insertion into idle gaps instead of avail(k) (Eq. 1, 3)",
                  "– (Eq. 1 and 3's start rule is the paper's)"),
}


def _timing(rec: dict) -> str:
    """The load rule a record was measured under (a record without the field was measured under
    ``prefetch``)."""
    return rec.get("load_timing", "prefetch")


#: A record's fields and the check each value must pass (the file may come from anyone).
_FIELDS = {
    "model": lambda v: v in {m for m, _ in MODELS + MODELS_BATCH1},
    "prefill": lambda v: v in {s[0] for s in SHAPES},
    "decode": lambda v: v in {s[1] for s in SHAPES},
    "batch": lambda v: v in {b for _, b in MODELS + MODELS_BATCH1},
    "variant": lambda v: v in VARIANTS,
    "makespan": lambda v: type(v) is int and v > 0,
    "flips": lambda v: isinstance(v, dict) and all(
        k in FLIP_TERMS and type(n) is int and n >= 0 for k, n in v.items()),
}


def records(out: Path) -> list[dict]:
    """The records of ``out`` (JSON lines), each checked: :class:`InputError` naming the file,
    the line and the field of the first bad one (a record is never trusted unchecked, for a
    resume or a table)."""
    if not out.is_file():
        raise InputError("file not found", source=str(out))
    recs = []
    for i, line in enumerate(out.read_text().splitlines(), start=1):
        try:
            r = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg})", source=str(out), field=f"line {i}") \
                from None
        if not isinstance(r, dict):
            raise InputError("not a JSON object", source=str(out), field=f"line {i}")
        for name, ok in _FIELDS.items():
            if type(r.get(name)) is bool or not ok(r.get(name)):
                raise InputError(f"{r.get(name)!r} is not a value of this ablation",
                                 source=str(out), field=f"line {i}.{name}")
        recs.append(r)
    return recs


def run(out: Path, models: tuple[tuple[str, int], ...] = MODELS,
        variants: tuple[str, ...] = tuple(VARIANTS)) -> None:
    """Every (workload, variant) of ``models`` and ``variants`` not yet in ``out`` (a record of
    another Bifocal version does not count), appended as it finishes."""
    cat, cards = bundled_catalog(), bundled_cards()
    done = set()
    if out.exists():
        for r in records(out):
            if r.get("revision", 2) == BIFOCAL_VERSION and _timing(r) == BuildOptions().load_timing:
                done.add((r["model"], r["prefill"], r["decode"], r["batch"], r["variant"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    for model, batch in models:
        for prefill, decode in SHAPES:
            keys = [(model, prefill, decode, batch, v) for v in variants]
            if all(k in done for k in keys):
                continue
            inst = build_placement(cards[model], cat.platform("HP32"), cat,
                                   Workload(prefill, decode, batch), BuildOptions())
            for key, name in zip(keys, variants):
                params = VARIANTS[name]
                if key in done:
                    continue
                t0 = time.perf_counter()
                stats: dict = {}
                sol = bifocal_schedule(inst, params, stats=stats)
                span = validate_placement(inst, sol).makespan
                rec = {"model": model, "prefill": prefill, "decode": decode, "batch": batch,
                       "variant": name, "makespan": span, "tasks": inst.n_tasks,
                       "evictions": stats["evictions"], "flips": stats["flipped_decisions"],
                       "wall_s": time.perf_counter() - t0, "revision": BIFOCAL_VERSION,
                       "load_timing": inst.load_timing}
                with out.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(json.dumps(rec), flush=True)


def table(out: Path) -> str:
    """The per-workload table and the per-term summary (markdown)."""
    recs = records(out)
    by: dict[tuple, dict[str, dict]] = {}
    for r in recs:
        by.setdefault((r["model"], r["prefill"], r["decode"], r["batch"]), {})[r["variant"]] = r
    lines = ["| model | B | prefill | decode | " + " | ".join(f"{v} / all" for v in VARIANTS
                                                           if v != "all")
             + f" | all ms | flips {' / '.join(_FLIPPED)} (all) |",
             "|---" * (5 + len(VARIANTS)) + "|"]
    removed: dict[str, dict[str, list[float]]] = {}  # batch set -> term -> increases (%)
    for (model, p, d, b), v in sorted(by.items()):
        if "all" not in v:
            continue
        base = v["all"]["makespan"]
        cells = [f"{v[k]['makespan'] / base:.4f}" if k in v else "–" for k in VARIANTS
                 if k != "all"]
        fl = v["all"]["flips"]
        lines.append(f"| {model} | {b} | {p} | {d} | " + " | ".join(cells)
                     + f" | {base / 1e6:,.1f} | "
                     + " / ".join(str(fl.get(t, "–")) for t in _FLIPPED) + " |")
        group = removed.setdefault("batch 1" if b == 1 else "Fig. 7 batches (8, 16)",
                                   {t: [] for t in _OFF})
        for t in _OFF:
            if f"-{t}" in v:
                group[t].append(100.0 * (v[f"-{t}"]["makespan"] / base - 1))
        for variant, (row, _) in NOT_TERMS.items():  # not terms: order or start rule replaced
            if variant in v:
                group.setdefault(row, []).append(100.0 * (v[variant]["makespan"] / base - 1))
    flips: dict[str, dict[str, list[int]]] = {}  # batch set -> term -> flips (all terms on)
    for (model, p, d, b), v in by.items():
        if "all" in v:
            group = flips.setdefault("batch 1" if b == 1 else "Fig. 7 batches (8, 16)", {})
            for t in _FLIPPED:
                group.setdefault(t, []).append(int(v["all"]["flips"].get(t, 0)))
    lines += ["", "| workloads | term removed | paper: latency increase | ours: min … max | "
              "ours: geomean ratio | flips with all terms on: total (workloads with any) | "
              "verdict |", "|---|---|---|---|---|---|---|"]
    for name, t, xs in ((n, t, xs) for n, g in sorted(removed.items()) for t, xs in g.items()):
        if not xs:
            continue
        g = math.exp(sum(math.log(1 + x / 100) for x in xs) / len(xs))
        fl = flips.get(name, {}).get(t)
        flip_cell = f"{sum(fl)} ({sum(1 for f in fl if f)})" if fl is not None else "– (not a term)"
        not_term = {row: cell for row, cell in NOT_TERMS.values()}
        if t in not_term:
            paper, verdict = not_term[t], "–"
        elif t in PAPER_REMOVED:
            lo, hi = PAPER_REMOVED[t]
            paper = f"+{lo}–{hi} %"
            verdict = "reproduced" if min(xs) >= lo * 0.5 and max(xs) <= hi * 1.5 else "differs"
        else:
            paper, verdict = "– (extension)", "–"
        lines.append(f"| {name} ({len(xs)}) | {t} | {paper} | {min(xs):+.2f} … "
                     f"{max(xs):+.2f} % | {g:.4f} | {flip_cell} | {verdict} |")
    rules = sorted({_timing(r) for r in recs})
    lines += ["", f"Load rule of these records: {', '.join(rules)}; verdict: reproduced when "
              "ours' smallest increase is at least half the paper's low end and its largest at "
              "most 1.5 × the paper's high end (the paper gives a range over five workloads, "
              "not per-workload values)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/bifocal_ablation.jsonl"))
    ap.add_argument("--table", action="store_true", help="print the tables of --out and stop")
    ap.add_argument("--batch1", action="store_true",
                    help="also the same shapes at batch 1 (MODELS_BATCH1)")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated variants to run (default all of them; names start "
                         "with '-', hence one argument): " + ",".join(VARIANTS))
    args = ap.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if not args.table:
        why = output_error(args.out, NEW_FILE)
        if why:  # checked before any work (opt.common.outpath)
            ap.error(f"--out: cannot write '{args.out}': {why}")
    try:
        if not args.table:
            run(args.out, MODELS + MODELS_BATCH1 if args.batch1 else MODELS, variants)
        print(table(args.out))
    except InputError as exc:
        print(f"bifocal_ablation: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
