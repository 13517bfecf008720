"""The list scheduler's device choice under capacity (problems.md §6 "Device choice under
capacity"): ``fit_in_class`` passes over a device whose load would evict when a device of the
same class runs the task without evicting; ``eft`` takes the earliest finish whatever it evicts.

The instance is built for the rule: PD on two Llama-2-13B layers (HP64, at-use loads) with every
PIM's weight capacity cut to 0.4 × the model's block bytes, so no single PIM holds the decode
weights but the four together do. Earliest finish keeps the decode GEMMs on the PIM their
inputs are on and reloads there every step; ``fit_in_class`` spreads them and never evicts."""

from __future__ import annotations

import pytest

from heuristics.placement.list_scheduler import DEVICE_CHOICES, heft, list_schedule
from heuristics.placement.static_policies import static_schedule
from opt.common.errors import InputError
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.io import instance_from_dict
from opt.placement.validator import validate_placement
from solvers import solve

PIM_SHARE = 0.4  # each PIM's weight capacity, × the model's total block bytes


@pytest.fixture(scope="module")
def tight(catalog, cards):
    inst = build_placement(cards["llama-2-13b"], catalog.platform("HP64"), catalog,
                           Workload(128, 16, 8), BuildOptions(layers=2, load_timing="at_use"))
    d = inst.to_dict()
    total = int(inst.block_bytes.sum())
    for dv in d["devices"]:
        if dv["class"] == "pim":
            dv["weight_capacity"] = int(PIM_SHARE * total)
    return instance_from_dict(d)


def _pim_evictions(sol):
    return sum(1 for e in sol["evictions"] if e["device"].startswith("PIM"))


def test_fit_in_class_stops_the_thrash(tight):
    eft = static_schedule(tight, "pd", device_choice="eft")
    fit = static_schedule(tight, "pd", device_choice="fit_in_class")
    ms_eft = validate_placement(tight, eft).makespan
    ms_fit = validate_placement(tight, fit).makespan
    assert _pim_evictions(eft) > 50  # earliest finish reloads on the PIM its inputs are on
    assert _pim_evictions(fit) == 0  # the four PIMs hold the decode weights between them
    assert ms_fit * 5 < ms_eft


def test_heft_default_is_fit_in_class(tight):
    """HEFT's default; the static policies' is ``least_available``
    (tests/placement/test_static_device_choice.py)."""
    assert DEVICE_CHOICES[0] == "fit_in_class"
    default = solve(tight, "heft")
    named = solve(tight, "heft", device_choice="fit_in_class")
    assert default.objective == named.objective
    assert solve(tight, "pd", device_choice="fit_in_class").objective < \
        solve(tight, "pd", device_choice="eft").objective


@pytest.mark.parametrize("choice", DEVICE_CHOICES)
def test_schedules_validate(tight, choice):
    for sol in (static_schedule(tight, "pd", device_choice=choice),
                heft(tight, device_choice=choice)):
        validate_placement(tight, sol)


def test_heft_takes_the_rule_too(catalog, cards):
    """HEFT on two Qwen-1.8B layers (HP32, prefetch) with every device's capacity 0.2 × the
    block bytes / devices (a case of benchmarks/schedule_identity.py): fewer evictions and a
    shorter schedule under fit_in_class (137 against 298 evictions when recorded)."""
    inst = build_placement(cards["dops-qwen-1.8b"], catalog.platform("HP32"), catalog,
                           Workload(64, 32, 1), BuildOptions(layers=2, load_timing="prefetch"))
    d = inst.to_dict()
    cap = max(int(inst.block_bytes.max()), int(0.2 * int(inst.block_bytes.sum()) / inst.n_devices))
    for dv in d["devices"]:
        dv["weight_capacity"] = cap
    inst = instance_from_dict(d)
    fit, eft = heft(inst, device_choice="fit_in_class"), heft(inst, device_choice="eft")
    assert len(fit["evictions"]) < len(eft["evictions"])
    assert validate_placement(inst, fit).makespan < validate_placement(inst, eft).makespan


def test_unknown_choice_is_refused(tight):
    with pytest.raises(InputError, match="device_choice"):
        list_schedule(tight, range(tight.n_tasks), device_choice="lowest")
    with pytest.raises(InputError, match="device_choice"):
        solve(tight, "heft", device_choice="lowest")
    res = solve(tight, "policy-search", device_choice="eft", max_evaluations=3)
    assert res.objective is not None
