"""The measured causes of the DOPS verdicts: one input changed at a time, Bifocal and PD
re-run, the largest mover named."""

import json

import numpy as np
import pytest

from opt.app.reproduction import dops_causes as dc
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards

WL = (16, 2, 2)


@pytest.fixture(scope="module")
def env():
    return bundled_catalog(), bundled_cards()


def test_pim_scale_changes_the_pim_columns_only(env):
    catalog, cards = env
    inst = dc.build_case("dops-qwen-1.8b", "HP32", WL, dc.BASE, catalog, cards, layers=1)
    twice = dc.scale_pim(inst, 2.0)
    pim = np.array([d.device_class == "pim" for d in inst.devices])
    legal = inst.cost[:, pim] > 0
    assert (twice.cost[:, pim][legal] == inst.cost[:, pim][legal] * 2).all()
    assert (twice.cost[:, ~pim] == inst.cost[:, ~pim]).all()
    assert (twice.cost < 0).sum() == (inst.cost < 0).sum()


def test_each_perturbation_changes_its_input(env):
    """The load rule, the routing (MoE only) and the PIM speed each give another instance;
    a dense card is untouched by the routing, which then does not apply."""
    catalog, cards = env
    base = dc.build_case("mixtral-8x7b", "HP128", WL, dc.BASE, catalog, cards, layers=1)
    for name in ("load_timing at_use", "moe_routing per_token", "PIM compute x2"):
        (p,) = dc.by_name([name])
        other = dc.build_case("mixtral-8x7b", "HP128", WL, p, catalog, cards, layers=1)
        assert other.fingerprint != base.fingerprint, name
    (routing,) = dc.by_name(["moe_routing per_token"])
    assert dc.applies(routing, cards, "mixtral-8x7b") and not dc.applies(routing, cards,
                                                                        "llama-2-7b")


def test_cause_rows_name_the_largest_mover(tmp_path, env):
    """Records round-trip through the JSONL file; the row's cause is the perturbation whose
    geomean moves most from the base's, with that change."""
    catalog, cards = env
    path = tmp_path / "causes.jsonl"
    for name in ("none", "load_timing at_use", "PIM compute x2"):
        (p,) = dc.by_name([name])
        dc.append_record(path, dc.run_case("dops-qwen-1.8b", "HP32", WL, p, catalog, cards,
                                           layers=1))
    recs = dc.read_records(path)
    (row,) = dc.cause_rows(recs)
    ratio = {r["perturbation"]: r["pd_ms"] / r["bifocal_ms"] for r in recs}
    moves = {n: g - ratio["none"] for n, g in ratio.items() if n != "none"}
    want = max(moves, key=lambda n: abs(moves[n]))
    assert row["base"] == pytest.approx(ratio["none"])
    assert row["cause"] == want and row["delta"] == pytest.approx(moves[want])


def test_a_damaged_record_file_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "causes.jsonl"
    path.write_text(json.dumps({"bifocal_ms": 1.0, "pd_ms": 2.0}) + "\n"
                    + json.dumps({"bifocal_ms": -1.0, "pd_ms": 2.0}) + "\n")
    with pytest.raises(InputError, match="line 2"):
        dc.read_records(path)


def test_an_unknown_perturbation_is_named():
    with pytest.raises(InputError, match="'faster PIM'"):
        dc.by_name(["faster PIM"])
