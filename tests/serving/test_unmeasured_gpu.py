"""GPU types without measurements under ``gpu_cost="calibrated"`` (problems.md §5.3b "Unmeasured
GPUs"): ``unmeasured_gpu="transfer"`` (default) applies the nearest measured GPU's fitted
classes on the GPU's own datasheet peaks, ``"roofline"`` keeps the catalog roofline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from heuristics.serving.search import baseline_sequences, search
from opt.app.cli.parser import main
from opt.common.errors import InputError
from opt.costlib.gpu_calib import BUNDLED_CALIBRATION, read_calibrations
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.serving.builder import ServingWorkload, build_serving_plan
from opt.serving.instance import ServingGrid
from opt.serving.kernel_cost import nearest_calibrated

CAT = bundled_catalog()
CALS = read_calibrations(BUNDLED_CALIBRATION, CAT)


def _l40s(unmeasured_gpu: str, gpu_cost: str = "calibrated"):
    card = replace(bundled_cards()["gemma-3-27b"], layers=6)
    grid = ServingGrid(max_gpus=8, max_owners=2, max_replicas=2, max_microbatches=1,
                       batches=(16, 32, 64))
    return build_serving_plan(card, CAT, ["L40S"], ServingWorkload(131072, 0.06), grid=grid,
                              tp_degrees=(4, 8), gpu_cost=gpu_cost,
                              unmeasured_gpu=unmeasured_gpu)


def test_the_donor_is_the_closest_measured_card():
    """Same memory technology and interconnect first, then nearest in (ln FLOP/s,
    ln bandwidth): the L40S (GDDR, PCIe) takes the A40's classes, the H20 the A100's, the
    B200 the H100's."""
    def donor(name):
        return nearest_calibrated(name, CAT, CALS).card
    assert (donor("L40S"), donor("H20"), donor("B200")) == ("A40", "A100", "H100")
    assert donor("H100") == "H100" and donor("A100") == "A100"


def test_transfer_changes_the_l40s_kernels_and_the_optimum():
    """Decode attention on the L40S at the A100's measured class (η_m 0.58, borrowed by its
    closest measured card, the A40) instead of the roofline's 0.80: slower wherever the
    KV-cache read dominates (microbatches ≥ 32; at 16 on TP 8 the launches and the A40's
    element-wise classes weigh as much: within 10 %), and the cheapest colocated plan costs
    more;
    the provenance names the model, the card, why, and that the predictions lie outside the
    measured regime; under ``roofline`` costs the option is inert."""
    tr, rf = _l40s("transfer"), _l40s("roofline")
    got = tr.meta["gpu_models"]["L40S"]
    assert got == {"model": "transferred", "donor": "A40", "why": got["why"],
                   "source": got["source"],
                   "outside_measured_regime": got["outside_measured_regime"]}
    assert "A40" in got["source"] and "GDDR" in got["why"] and "PCIe" in got["why"]
    assert "attention_decode from A100" in got["outside_measured_regime"]
    assert rf.meta["gpu_models"]["L40S"]["model"] == "roofline"
    assert tr.meta["unmeasured_gpu"] == "transfer" and rf.meta["unmeasured_gpu"] == "roofline"
    attn = [o.kind for o in tr.ops].index("attn")
    t_tr, t_rf = tr.op_duration[:, :, attn], rf.op_duration[:, :, attn]
    assert (t_tr[:, 1:] > t_rf[:, 1:]).all() and (t_tr > 0.9 * t_rf).all()
    a = search(tr, baseline_sequences(tr, "col"))
    b = search(rf, baseline_sequences(rf, "col"))
    assert a.cost_usd_per_token > b.cost_usd_per_token * 1.01
    # the network of an unmeasured type stays the catalog's (no measured links)
    assert tr.network.latency_s == pytest.approx(20e-6)
    r1, r2 = _l40s("transfer", "roofline"), _l40s("roofline", "roofline")
    assert (r1.op_duration == r2.op_duration).all()


def test_bad_rule_is_an_input_error(capsys):
    with pytest.raises(InputError, match="unmeasured_gpu"):
        _l40s("nearest")
    with pytest.raises(SystemExit) as exc:
        main(["build", "serving-plan", "--model", "gemma-3-27b", "--gpus", "L40S",
              "--context", "8192", "--slo-ms", "60", "--unmeasured-gpu", "bogus",
              "-o", "x.json"])
    assert exc.value.code == 2
