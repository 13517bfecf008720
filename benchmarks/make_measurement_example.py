"""Write the bundled example measured-latency table (docs/measurements.md):
``opt/costlib/data/measurements/example.csv``.

Rows: DOPS' four SK hynix AiM trace figures (:data:`opt.costlib.calibration.PIM_TRACE`,
Llama-7B-like, prefill 512, batch 1) converted to the table format — real measurements, as
DOPS reports them — plus Ascend-910B rows that are *synthetic*: the catalog model with
perturbed parameters (u_max 0.85, gemm overhead 6 µs, softmax overhead 1 µs), 2 % lognormal
noise, seed 0, every row's ``source`` saying so.

    PYTHONPATH=. python benchmarks/make_measurement_example.py
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from opt.costlib.calibration import CALIBRATION_SHAPE, PIM_TRACE
from opt.costlib.fit import default_shapes, synthetic_rows, with_params
from opt.costlib.hardware import load_catalog
from opt.costlib.measured import MeasuredTable, Measurement, write_measurements_csv
from opt.costlib.modelcard import load_cards

OUT = Path(__file__).resolve().parent.parent / "opt/costlib/data/measurements/example.csv"
NPU_CHANGES = {"u_max": 0.85, "kernel_overhead_s.gemm": 6e-6, "kernel_overhead_s.softmax": 1e-6}


def main() -> None:
    cat, card = load_catalog(), load_cards()["llama-2-7b"]
    shape = CALIBRATION_SHAPE
    trace = [Measurement("AiM", p.kind, shape["tokens"], shape["context"], shape["batch"], 1.0,
                         card.name, p.trace_us * 1e-6,
                         "DOPS PIM trace (opt.costlib.calibration.PIM_TRACE, problems.md §5.2)",
                         f"trace[{i}]") for i, p in enumerate(PIM_TRACE)]
    npu = cat.device("Ascend-910B")
    true = replace(npu, latency_model=with_params(npu.latency_model, NPU_CHANGES))
    synth = synthetic_rows(true, card, default_shapes(card, (1,), (0.5,)), rel_noise=0.02,
                           seed=0, source=f"synthetic: catalog Ascend-910B with {NPU_CHANGES}, "
                                          "2% lognormal noise, seed 0")
    header = ("bundled example of hetopt (docs/measurements.md); regenerate with\n"
              "PYTHONPATH=. python benchmarks/make_measurement_example.py\n"
              "AiM rows: DOPS' trace figures (real); Ascend-910B rows: SYNTHETIC (see source)")
    write_measurements_csv(MeasuredTable(tuple(trace) + synth, "log-linear"), OUT, header)
    print(f"{OUT}: {len(trace)} trace rows, {len(synth)} synthetic rows")


if __name__ == "__main__":
    main()
