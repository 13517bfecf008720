#!/bin/sh
# The DOPS evaluation runs of issue 22 item 6, resumable (a rerun continues where it stopped;
# records of an older build are recomputed): the 2x2x2 corners of all seven models on their
# platforms, DOPS Fig. 7's Llama-7B HP32 workloads, the scaling points of Insights 1-4, then the
# full 4x4x4 grids of dops-qwen-1.8b and llama-2-7b. Records: results/bench/dops/cache/dops and
# .../scaling (the `dops` bench suite reads the same folders); tables:
# python benchmarks/dops_sweep_tables.py.
# Usage: sh benchmarks/dops_sweep.sh [extra `sweep placement` args, e.g. --jobs 2]
OUT=${OUT:-results/bench/dops/cache/dops}
SC=${SC:-results/bench/dops/cache/scaling}
METHODS="bifocal heft pd af pd+linear pd+attn pd+ffn"
run() { hetopt sweep placement --paper-precision --methods $METHODS --out "$OUT" "$@"; }
scale() { hetopt scaling --paper-precision --out "$SC" "$@"; }
CORNERS="--prefill 128 2048 --decode 128 1024 --batch 1 16"
FULL="--prefill 128 512 1024 2048 --decode 128 256 512 1024 --batch 1 4 8 16"
for mp in dops-qwen-1.8b:HP32 dops-qwen-7b:HP32 dops-qwen-14b:HP32 llama-2-7b:HP64 \
          llama-2-13b:HP64 mixtral-8x7b:HP128 llama-2-70b:HP128; do
  run --models "${mp%%:*}" --platforms "${mp##*:}" $CORNERS "$@"
done
# DOPS Fig. 7: Llama-7B on HP32, batch 16 (Qwen-1.8B batch 8 is inside its full grid)
run --models llama-2-7b --platforms HP32 --prefill 128 1024 --decode 128 512 1024 --batch 16 "$@"
# DOPS Insights 1-4 (Figs. 14/15): Bifocal on HP0 -> HP32 -> HP64 -> HP128
scale --models llama-2-13b --prefill 128 2048 --decode 1024 --batch 16
scale --models llama-2-13b --prefill 2048 --decode 128 1024 --batch 4
scale --models llama-2-13b --prefill 2048 --decode 1024 --batch 1 4
scale --models llama-2-7b llama-2-13b llama-2-70b --prefill 2048 --decode 512 --batch 8
run --models dops-qwen-1.8b --platforms HP32 $FULL "$@"
run --models llama-2-7b --platforms HP64 $FULL "$@"
