"""Measured causes of the DOPS verdicts (opt.app.reproduction.dops_causes): per model on its
platform, Bifocal and PD over a sample of the §6.2 grid under each one-input perturbation;
prints the table (markdown) of PD/Bifocal geomeans and the largest mover.

    PYTHONPATH=. nice -n 10 python benchmarks/dops_causes.py --out results/dops-causes.jsonl
    PYTHONPATH=. python benchmarks/dops_causes.py --out F --models llama-2-7b --layers 4

Records are appended one per (model, workload, perturbation) as they finish; a rerun skips
the ones the file holds (a damaged file is refused, naming the line).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from opt.app.reproduction.dops_causes import (
    BASE,
    PERTURBATIONS,
    SAMPLE,
    append_record,
    applies,
    by_name,
    cause_rows,
    read_records,
    record_key,
    run_case,
)
from opt.app.reproduction.dops_tables import PAPER_GEOMEAN
from opt.common.outpath import output_error
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="records (JSONL), appended")
    ap.add_argument("--models", nargs="+", default=list(PAPER_GEOMEAN))
    ap.add_argument("--perturbations", nargs="+", default=[p.name for p in PERTURBATIONS])
    ap.add_argument("--layers", type=int, help="first layers only (a slice, not the paper's)")
    ap.add_argument("--workloads", nargs="+", metavar="P,D,B",
                    help="prefill,decode,batch triples (default: the sample's corners)")
    ap.add_argument("--report", action="store_true", help="print the table of the records only")
    a = ap.parse_args(argv)
    why = output_error(a.out)  # checked before any work
    if why:
        print(f"dops_causes.py: error: --out {a.out}: {why}", file=sys.stderr)
        return 2
    catalog, cards = bundled_catalog(), bundled_cards()
    perts = (BASE, *by_name(a.perturbations))
    done = {record_key(r) for r in read_records(a.out)}
    sample = [tuple(int(x) for x in w.split(",")) for w in a.workloads] if a.workloads else SAMPLE
    for model in [] if a.report else a.models:
        platform = PAPER_GEOMEAN[model][0]
        for p in perts:
            if not applies(p, cards, model):
                continue
            for wl in sample:
                key = (model, platform, *wl, a.layers, p.name)
                if key in done:
                    continue
                t0 = time.perf_counter()
                rec = run_case(model, platform, wl, p, catalog, cards, layers=a.layers)
                append_record(a.out, rec)
                print(f"{model} {wl} {p.name}: PD/Bifocal {rec['pd_ms'] / rec['bifocal_ms']:.3f}"
                      f" ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    print("| model | workloads | PD/Bifocal geomean | largest mover | change | all |")
    print("|---|---:|---:|---|---:|---|")
    for row in cause_rows(read_records(a.out)):
        under = "; ".join(f"{n} {g:.3f}" for n, g in row["under"].items() if g is not None)
        delta = "" if row["delta"] is None else f"{row['delta']:+.3f}"
        print(f"| {row['model']} | {row['workloads']} | {row['base']:.3f} | {row['cause']} | "
              f"{delta} | {under} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
