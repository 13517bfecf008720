"""A list scheduler that respects every rule of problems.md §1.2 and the HEFT heuristic built on it.

Tasks are taken in a given priority order (which must be topological); each goes to the
candidate device of earliest finish time (EFT), starting at the earliest moment its inputs
have arrived, its block is resident and the device is idle (insertion into idle gaps when
``insertion`` is true, HEFT-style). Transfers are booked on their channel (``full``: the
ordered device pair; ``star``: the source's uplink and the destination's downlink) when links
have contention; weight loads are booked on the device's load port the first time a block is
needed there (under ``load_timing: at_use``, problems.md §1.2 rule 5, in the task's own slot
on the device from its dispatch on: load, then compute; under ``overlap`` a slot of
max(t_load, p_v) from the dispatch, the load at its start, the compute at its end); a load
that does not fit evicts the device's least-recently-used blocks (DOPS §6.1: "Loaded weight blocks remain resident while
capacity permits; otherwise, they are evicted according to an LRU policy" — a platform rule,
so every policy follows it); only a block larger than the device makes it ineligible. The
result is a problems.md §1.2a solution dict.

The loop and the partial schedule's bookkeeping are numba kernels
(:func:`heuristics.placement.state_kernels.eft_loop`, shared with the static policies, policy
search and the replay of :mod:`heuristics.placement.improve`; Bifocal's loop commits through
the same kernels); :mod:`heuristics.placement.schedule_arrays` builds their arrays (task
durations deduplicated by cost row, transfer durations by payload size).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from heuristics.placement import schedule_arrays as _arrays
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance

#: How a list schedule picks among the devices able to run a task (problems.md §6, "Device
#: choice under capacity"): ``fit_in_class`` passes over a device whose load would evict when
#: a device of the same class runs the task without evicting, then takes the earliest finish
#: (the default); ``eft`` takes the earliest finish whatever it evicts
DEVICE_CHOICES = ("fit_in_class", "eft")
#: The static policies' device choices (problems.md §6, "Device inside the class"):
#: ``least_available`` (their default, the DOPS authors' baseline scheduler) takes the
#: eligible device of the task's class whose timeline ends first, whatever its finish (a task
#: outside any class: ``fit_in_class``); then :data:`DEVICE_CHOICES`
STATIC_DEVICE_CHOICES = ("least_available", *DEVICE_CHOICES)


def upward_rank(inst: PlacementInstance) -> np.ndarray:
    """HEFT's upward rank: mean legal duration + max over successors of (mean transfer time
    between distinct devices + their rank). Mean transfer uses all ordered device pairs."""
    return _arrays.upward_ranks(inst)


def priority_order(inst: PlacementInstance, priority: np.ndarray) -> list[int]:
    """Topological order taking the highest ``priority`` among ready tasks first (ties: the
    lowest index)."""
    return _arrays.priority_array(inst, priority).tolist()


@dataclass(frozen=True)
class DeviceClasses:
    """A candidates policy as data (the static policies, policy search, the replay):
    ``task_class`` int64 [n], each task's class (−1: every legal device); ``members`` bool [K, nd], the devices of each class; ``name``, the policy's, for its
    refusal. A task's candidates are its legal devices in its class, or every legal device
    when the class holds none of them (kv_write pinned to its KV home, router on the NPU, …)."""

    task_class: np.ndarray
    members: np.ndarray
    name: str = ""

    def arrays(self, inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray]:
        """(task_class int64 [n], members uint8 [K, nd]) checked against ``inst``."""
        tcls = np.ascontiguousarray(self.task_class, dtype=np.int64).reshape(-1)
        mem = np.ascontiguousarray(self.members, dtype=np.uint8)
        if len(tcls) != inst.n_tasks or mem.ndim != 2 or mem.shape[1] != inst.n_devices or \
                (len(tcls) and int(tcls.max()) >= len(mem)):
            raise InputError(f"device classes of policy '{self.name}' do not match the "
                             f"instance ({len(tcls)} tasks, members {mem.shape})",
                             field="classes")
        return tcls, mem


def check_device_choice(device_choice: str,
                        choices: tuple[str, ...] = DEVICE_CHOICES) -> bool:
    """Whether ``device_choice`` (one of ``choices``) is ``fit_in_class``."""
    if device_choice not in choices:
        raise InputError(f"device_choice must be one of {', '.join(choices)}, "
                         f"not {device_choice!r}", field="device_choice")
    return device_choice == "fit_in_class"


def device_class_codes(inst: PlacementInstance) -> np.ndarray:
    """int64 [nd]: each device's class (``Device.device_class``) as a code < nd."""
    names = [d.device_class for d in inst.devices]
    code = {c: i for i, c in enumerate(dict.fromkeys(names))}
    return np.array([code[c] for c in names], dtype=np.int64)


def list_schedule(inst: PlacementInstance, order: Iterable[int], *, insertion: bool = True,
                  classes: DeviceClasses | None = None,
                  device_choice: str = "fit_in_class") -> dict:
    """Schedule tasks in ``order`` (topological), each on the candidate device with the earliest
    finish time, evicting LRU blocks where a load does not fit. ``device_choice``
    (:data:`STATIC_DEVICE_CHOICES`, problems.md §6 "Device choice under capacity"):
    ``fit_in_class`` passes over a device whose load would evict when a candidate of the same
    device class runs the task without evicting; ``eft`` takes the earliest finish whatever
    it evicts; ``least_available`` takes, for a task narrowed to its class (``classes``), the
    candidate whose timeline ends first, and ``fit_in_class``'s choice for the others.
    ``classes`` narrows each task's candidates to its class (:class:`DeviceClasses`); when
    some are in the class but none is eligible (the block is larger than each), the policy
    cannot keep the task in its class: InputError."""
    least = device_choice == "least_available"
    fit = check_device_choice(device_choice, STATIC_DEVICE_CHOICES) or least
    fit_cls = device_class_codes(inst) if fit else None
    arrays = classes.arrays(inst) if classes is not None else None
    name = classes.name if classes is not None else ""
    return _arrays.eft_schedule(inst, order, _arrays.unique_rows(inst.cost), insertion=insertion,
                                classes=arrays, policy_name=name, fit_classes=fit_cls,
                                least_available=least)


def heft_priority_order(inst: PlacementInstance) -> np.ndarray:
    """HEFT's task order: the priority order of the upward rank (int64 task indices)."""
    return _arrays.heft_order(inst)


def heft(inst: PlacementInstance, *, device_choice: str = "fit_in_class") -> dict:
    """HEFT (Topcuoglu et al. 2002): upward-rank order, insertion-based EFT device choice
    (``device_choice``: :func:`list_schedule`)."""
    return list_schedule(inst, heft_priority_order(inst), insertion=True,
                         device_choice=device_choice)
