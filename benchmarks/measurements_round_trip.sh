#!/usr/bin/env bash
# The round trip of docs/measurements.md on synthetic measurements of perturbed parameters:
# synthesise a "measured" table from the catalog AiM and Ascend-910B models with perturbed
# parameters (2 % lognormal noise, seed 0), fit both devices back, build the same workload
# with the bundled catalog, with the fitted catalog and with the table itself (the stand-in
# for the hardware), schedule each with HEFT, and compare the predictions with the table
# (per op class and end to end: DOPS' Δ).
#   benchmarks/measurements_round_trip.sh OUT_DIR      (run from the repository root)
set -euo pipefail
out=${1:?usage: $0 OUT_DIR}
mkdir -p "$out"
H=(env "PYTHONPATH=$PWD" "${PYTHON:-python}" -m opt)
SETS=(--set AiM:u_min=0.26 --set AiM:u_max=0.45 --set AiM:knee_flops=2.5e8 --set AiM:slope=2.4
      --set AiM:slowdown.softmax=500 --set AiM:slowdown.norm=300 --set AiM:slowdown.attention=8
      --set Ascend-910B:u_max=0.85 --set Ascend-910B:kernel_overhead_s.gemm=6e-6
      --set Ascend-910B:kernel_overhead_s.softmax=1e-6)
SYNTH=(synth-measurements --device AiM --device Ascend-910B --model llama-2-7b "${SETS[@]}"
       --cell-share 0.5)
W=(--model llama-2-7b --platform HP32 --prefill 512 --decode 32 --layers 2)
"${H[@]}" "${SYNTH[@]}" -o "$out/measured.csv"
"${H[@]}" calibrate --device AiM --measurements "$out/measured.csv" -o "$out/aim.json"
"${H[@]}" calibrate --device Ascend-910B --measurements "$out/measured.csv" \
    --catalog "$out/aim.json" -o "$out/fitted.json"
"${H[@]}" build placement "${W[@]}" -o "$out/bundled.json"
"${H[@]}" build placement "${W[@]}" --catalog "$out/fitted.json" -o "$out/fitted_model.json"
"${H[@]}" build placement "${W[@]}" --measurements "$out/measured.csv" -o "$out/hardware.json"
for n in bundled fitted_model hardware; do
    "${H[@]}" solve "$out/$n.json" --method heft -o "$out/${n}_heft.json" > /dev/null
done
# the "verified" end-to-end latency: the hardware stand-in's schedule
"${H[@]}" "${SYNTH[@]}" --end-to-end "$out/hardware.json:$out/hardware_heft.json" \
    -o "$out/measured.csv"
echo "== bundled catalog against the measurements"
"${H[@]}" compare-measured "$out/bundled.json" "$out/bundled_heft.json" \
    --measurements "$out/measured.csv"
echo "== fitted catalog against the measurements"
"${H[@]}" compare-measured "$out/fitted_model.json" "$out/fitted_model_heft.json" \
    --measurements "$out/measured.csv" --catalog "$out/fitted.json"
