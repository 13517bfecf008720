#!/bin/sh
# The DOPS evaluation runs (docs/dops_analyses.md §5) under the platform rules (the builder's
# defaults: loads at first use, `load_timing: at_use`; LRU residency for every policy), each
# resumable (a rerun continues where it stopped; records of other method settings are
# recomputed), nice 10, one job unless JOBS says otherwise:
#   1. the full §6.2 grid of the seven models on their platforms and Fig. 7's Llama-7B HP32
#      batch-16 workloads (7 methods), then the tables and docs/data/dops_grid_at_use.csv;
#   2. the Fig. 13 ablation at the Fig. 7 batches (benchmarks/bifocal_ablation.py);
#   3. WLA on the §6.5 sweep (HP32, the four models that fit it; prefill and decode
#      {8, 32, 64, 128, 1024}, batch {1, 4, 8}: 75 workloads each);
#   4. the scaling points of Insights 1-4 (Bifocal, HP0 -> HP128).
# Usage: sh benchmarks/dops_sweep.sh   (OUT=results/dops-at-use by default)
set -e
OUT=${OUT:-results/dops-at-use}
JOBS=${JOBS:-1}
PY=${PY:-python}
$PY benchmarks/dops_sweep_tables.py --run --jobs "$JOBS" "$OUT/grid" \
    --csv docs/data/dops_grid_at_use.csv --docs docs/dops_analyses.md
nice -n 10 $PY benchmarks/bifocal_ablation.py --out "$OUT/ablation_at_use.jsonl" \
    --variants=all,eft,-window,-phase,-token,-copy,rank,insertion
nice -n 10 hetopt sweep layout --models dops-qwen-1.8b llama-2-7b dops-qwen-7b dops-qwen-14b \
    --platforms HP32 --prefill 8 32 64 128 1024 --decode 8 32 64 128 1024 --batch 1 4 8 \
    --methods bifocal/linear bifocal/wla pd/linear --out "$OUT/wla" --jobs "$JOBS"
scale() { nice -n 10 hetopt scaling --paper-precision --out "$OUT/scaling" "$@"; }
scale --models llama-2-13b --prefill 128 2048 --decode 1024 --batch 16
scale --models llama-2-13b --prefill 2048 --decode 128 1024 --batch 4
scale --models llama-2-13b --prefill 2048 --decode 1024 --batch 1 4
scale --models llama-2-7b llama-2-13b llama-2-70b --prefill 2048 --decode 512 --batch 8
$PY benchmarks/dops_sweep_tables.py "$OUT/grid" --scaling "$OUT/scaling" \
    --docs docs/dops_analyses.md
