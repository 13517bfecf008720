#!/bin/sh
# The DOPS scheduling sweep of issue 22 item 6, resumable (rerun continues where it stopped):
# first the 2x2x2 corners of all seven models on their platforms, the Fig. 7 Llama-7B HP32
# workloads, then the full 4x4x4 grids of dops-qwen-1.8b and llama-2-7b. Records:
# results/bench/dops/cache/dops (the `dops` bench suite reads the same folder). Usage: sh benchmarks/dops_sweep.sh [extra sweep args, e.g. --jobs 2]
set -e
OUT=${OUT:-results/bench/dops/cache/dops}
METHODS="bifocal heft pd af pd+linear pd+attn pd+ffn"
run() { hetopt sweep placement --paper-precision --methods $METHODS --out "$OUT" "$@"; }
CORNERS="--prefill 128 2048 --decode 128 1024 --batch 1 16"
FULL="--prefill 128 512 1024 2048 --decode 128 256 512 1024 --batch 1 4 8 16"
for mp in dops-qwen-1.8b:HP32 dops-qwen-7b:HP32 dops-qwen-14b:HP32 llama-2-7b:HP64 \
          llama-2-13b:HP64 mixtral-8x7b:HP128 llama-2-70b:HP128; do
  run --models "${mp%%:*}" --platforms "${mp##*:}" $CORNERS "$@"
done
# DOPS Fig. 7: Llama-7B on HP32, batch 16 (Qwen-1.8B batch 8 is inside its full grid)
run --models llama-2-7b --platforms HP32 --prefill 128 1024 --decode 128 512 1024 --batch 16 "$@"
run --models dops-qwen-1.8b --platforms HP32 $FULL "$@"
run --models llama-2-7b --platforms HP64 $FULL "$@"
