"""The static policies' device inside the class (problems.md §6 "Device inside the class"):
``least_available`` (default; the DOPS authors' baselines) takes the device of the class whose
last booked task ends first, lowest index on ties; ``fit_in_class`` and ``eft`` the earliest
finish. A hand-sized case where the two give known, different makespans; a built instance
where they give different schedules; every schedule validated."""

from __future__ import annotations

import pytest

from heuristics.placement.list_params import STATIC_DEVICE_CHOICE_PARAMS
from heuristics.placement.list_scheduler import STATIC_DEVICE_CHOICES, heft
from heuristics.placement.static_policies import POLICIES, static_schedule
from opt.common.errors import InputError
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.instance import Device
from opt.placement.instance_checks import EdgeColumns, TaskColumns, build_instance, make_links
from opt.placement.validator import validate_placement
from solvers import solve
from solvers.placement.backends import static_settings

LATENCY = 3  # ticks of a transfer between two distinct devices


def chain():
    """x → y, both decode q_proj (PD: class PIM), 10 and 2 ticks on either PIM, 1 on the NPU;
    a transfer between distinct devices takes 3 ticks."""
    devices = [Device("NPU", "npu", None), Device("PIM0", "pim", None),
               Device("PIM1", "pim", None)]
    return build_instance(
        time_unit="ns", devices=devices, links=make_links(devices, "full", True, LATENCY, 1e9),
        tasks=TaskColumns(["x", "y"], [[1, 10, 10], [1, 2, 2]], kind=["q_proj", "q_proj"],
                          phase=[1, 1]),
        edges=EdgeColumns([0], [1], [0]))


def test_least_available_takes_the_device_free_first():
    """x: both PIMs free at 0, the tie goes to PIM0 (lowest index); y: PIM1 is free at 0,
    PIM0 at 10, so y goes to PIM1 and waits for x's output (10 + 3) → 15. Earliest finish
    keeps y on PIM0 → 12. Neither leaves the PIM class for the faster NPU."""
    inst = chain()
    least = static_schedule(inst, "pd")
    assert least["assignment"] == {"x": "PIM0", "y": "PIM1"}
    assert validate_placement(inst, least).makespan == 10 + LATENCY + 2
    for choice in ("fit_in_class", "eft"):
        sol = static_schedule(inst, "pd", device_choice=choice)
        assert sol["assignment"] == {"x": "PIM0", "y": "PIM0"}
        assert validate_placement(inst, sol).makespan == 12


def test_default_and_declaration():
    assert STATIC_DEVICE_CHOICES[0] == "least_available"
    assert STATIC_DEVICE_CHOICE_PARAMS.defaults() == {"device_choice": "least_available"}
    assert static_settings({}) == {"device_choice": "least_available"}
    inst = chain()
    assert solve(inst, "pd").objective == 15
    assert solve(inst, "pd", device_choice="fit_in_class").objective == 12
    assert solve(inst, "heft").objective == 2  # HEFT keeps earliest finish: both on the NPU
    with pytest.raises(InputError, match="device_choice"):
        solve(inst, "heft", device_choice="least_available")
    with pytest.raises(InputError, match="device_choice"):
        solve(inst, "pd", device_choice="lowest")


@pytest.fixture(scope="module")
def llama(catalog, cards):
    return build_placement(cards["llama-2-13b"], catalog.platform("HP64"), catalog,
                           Workload(64, 4, 8), BuildOptions(layers=1))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_rule_validates(llama, policy):
    for choice in STATIC_DEVICE_CHOICES:
        validate_placement(llama, static_schedule(llama, policy, device_choice=choice))


def test_the_rules_differ_on_a_built_instance(llama):
    """PD and AF on one Llama-2-13B layer (HP64, 64/4/8): the tasks go to the devices free
    first under least_available and pay the transfers, follow their inputs under fit_in_class
    (66.8 against 61.9 ms for PD, 36.1 against 31.3 for AF when recorded)."""
    for policy in ("pd", "af"):
        least = static_schedule(llama, policy)
        fit = static_schedule(llama, policy, device_choice="fit_in_class")
        assert least["assignment"] != fit["assignment"]
        assert validate_placement(llama, least).makespan > \
            validate_placement(llama, fit).makespan


def test_heft_default_unchanged(llama):
    assert heft(llama) == heft(llama, device_choice="fit_in_class")
