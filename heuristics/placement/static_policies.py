"""Static placement policies (DOPS Table 1, problems.md §6): each task's device *class* is fixed by its
operator kind and phase; tasks go in HEFT order, each to a device of its class chosen by
``device_choice`` (problems.md §6 "Device inside the class"): ``least_available`` (default, the
DOPS authors' baselines: the device of the class whose last booked task ends first, lowest
index on ties; a task outside any class as under ``fit_in_class``), ``fit_in_class`` or ``eft``
(earliest finish, passing over a device that would evict or not;
:data:`heuristics.placement.list_scheduler.STATIC_DEVICE_CHOICES`).

=============  ========================================  ========================================
policy         prefill (phase 0)                         decode (phase 1)
=============  ========================================  ========================================
``pd``         everything → NPU                          everything → PIM
``af``         attention module → PIM, rest → NPU        attention module → PIM, rest → NPU
``pd+linear``  everything → NPU                          linear projections → PIM, rest → NPU
``pd+attn``    everything → NPU                          qk, softmax, sv, kv_write → PIM, rest NPU
``pd+ffn``     everything → NPU                          FFN / expert ops → PIM, rest → NPU
=============  ========================================  ========================================

Kind sets (task kinds of :mod:`opt.placement.builder`):

- attention module: ``attn_norm, q_proj, k_proj, v_proj, kv_write, qk, softmax, sv, o_proj``
  and ``attn_gate`` (the gated-attention element-wise op between ``sv`` and ``o_proj``, present
  only on cards with an attention output gate). ``add_attn`` (the residual add) is not part of it.
- linear projections: ``q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj`` and
  the GEMMs of routed and shared experts (``expert{e}_gate/_up/_down``, ``shared{s}_gate/_up/
  _down``). ``router`` and ``lm_head`` are GEMMs too but are never legal on PIM.
- FFN / expert ops: ``gate_proj, up_proj, act, down_proj`` and ``expert{e}_*``, ``shared{s}_*``
  (gate, up, act, down). ``ffn_norm``, ``router``, ``combine``, ``add_ffn`` stay on the NPU.
- core attention (``pd+attn``): ``qk, softmax, sv, kv_write``.

Class ``npu`` means the platform's compute accelerators (devices of class ``npu``, or ``gpu``);
``pim`` the PIM devices. Residency is the platform's (DOPS §6.1): a device whose capacity a
load would exceed evicts its least-recently-used blocks, as under Bifocal, so a policy never
leaves its class for want of room; a block larger than every device of the task's class makes
the policy refuse (InputError, one line). A task that is not legal on any device of its policy
class falls back to every device where it is legal
(:class:`heuristics.placement.list_scheduler.DeviceClasses` does this when the class holds
none of its legal devices): ``kv_write`` stays pinned to its KV home, ``router``,
``combine``, ``embed`` and ``lm_head`` run on the NPU, ``allreduce_*`` on the host; on platforms
without PIM (HP0) every policy degenerates to "everything on the NPU". Tasks without a kind or
phase (hand-written instances such as the bundled ones) are not narrowed: plain HEFT.

A policy is data (:func:`policy_device_classes`: each task's class id, computed up front in
numpy) that the list scheduler's loop (:func:`heuristics.placement.state_kernels.eft_loop`)
narrows each task's candidates with (docs/speed.md "Sweeps").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from heuristics.placement.list_scheduler import DeviceClasses, heft_priority_order, list_schedule
from opt.common.errors import UnknownNameError
from opt.placement.instance import PlacementInstance

NPU, PIM = "npu", "pim"
#: Device classes that each policy class stands for.
CLASS_MEMBERS: dict[str, tuple[str, ...]] = {NPU: ("npu", "gpu"), PIM: ("pim",)}

ATTENTION_MODULE = frozenset({"attn_norm", "q_proj", "k_proj", "v_proj", "kv_write", "qk",
                              "softmax", "sv", "attn_gate", "o_proj"})
CORE_ATTENTION = frozenset({"qk", "softmax", "sv", "kv_write"})
_DENSE_LINEAR = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                           "down_proj"})
_DENSE_FFN = frozenset({"gate_proj", "up_proj", "act", "down_proj"})
_EXPERT = re.compile(r"(?:expert|shared)\d+_(gate|up|act|down)")


def is_linear(kind: str) -> bool:
    """A linear projection: q/k/v/o, gate/up/down and the expert GEMMs (gate, up, down)."""
    if kind in _DENSE_LINEAR:
        return True
    m = _EXPERT.fullmatch(kind)
    return m is not None and m.group(1) != "act"


def is_ffn(kind: str) -> bool:
    """An FFN or MoE expert op: gate/up/act/down of the dense FFN or of any expert."""
    return kind in _DENSE_FFN or _EXPERT.fullmatch(kind) is not None


@dataclass(frozen=True)
class StaticPolicy:
    """``rule(kind, phase)`` → ``"npu"`` or ``"pim"``; phase 0 = prefill, 1 = decode."""

    name: str
    description: str
    rule: Callable[[str, int], str]

    def __call__(self, kind: str, phase: int) -> str:
        return self.rule(kind, phase)


def _decode_only(test: Callable[[str], bool]) -> Callable[[str, int], str]:
    return lambda kind, phase: PIM if phase == 1 and test(kind) else NPU


POLICIES: dict[str, StaticPolicy] = {
    "pd": StaticPolicy("pd", "prefill → NPU, decode → PIM",
                       lambda kind, phase: PIM if phase == 1 else NPU),
    "af": StaticPolicy("af", "attention module → PIM in both phases, rest → NPU",
                       lambda kind, phase: PIM if kind in ATTENTION_MODULE else NPU),
    "pd+linear": StaticPolicy("pd+linear", "prefill → NPU; decode linear projections → PIM",
                              _decode_only(is_linear)),
    "pd+attn": StaticPolicy("pd+attn", "prefill → NPU; decode qk/softmax/sv/kv_write → PIM",
                            _decode_only(CORE_ATTENTION.__contains__)),
    "pd+ffn": StaticPolicy("pd+ffn", "prefill → NPU; decode FFN / expert ops → PIM",
                           _decode_only(is_ffn)),
}


def get_policy(policy: str | StaticPolicy) -> StaticPolicy:
    if isinstance(policy, StaticPolicy):
        return policy
    try:
        return POLICIES[policy]
    except KeyError:
        raise UnknownNameError("static policy", policy, POLICIES) from None


#: The policy classes in the order of their ids in :class:`DeviceClasses`.
CLASSES: tuple[str, ...] = (NPU, PIM)


def class_members(inst: PlacementInstance, classes: tuple[str, ...] = CLASSES) -> np.ndarray:
    """bool [len(classes), nd]: the devices each policy class stands for."""
    dev_class = [d.device_class for d in inst.devices]
    return np.array([[dc in CLASS_MEMBERS[c] for dc in dev_class] for c in classes],
                    dtype=bool).reshape(len(classes), inst.n_devices)


def kind_codes(inst: PlacementInstance) -> tuple[list[str], np.ndarray]:
    """(the distinct kinds in first-seen order, each task's position among them: int64 [n],
    −1 for a task without a kind)."""
    kinds = inst.kind or (None,) * inst.n_tasks
    names = list(dict.fromkeys(k for k in kinds if k is not None))
    code: dict[str | None, int] = {None: -1, **{k: i for i, k in enumerate(names)}}
    return names, np.fromiter(map(code.__getitem__, kinds), dtype=np.int64, count=len(kinds))


def task_phases(inst: PlacementInstance) -> np.ndarray:
    """int64 [n]: each task's phase (0 prefill, 1 decode, −1 none)."""
    if inst.phase is None:
        return np.full(inst.n_tasks, -1, np.int64)
    return inst.phase.astype(np.int64)


def policy_device_classes(inst: PlacementInstance, policy: str | StaticPolicy) -> DeviceClasses:
    """The policy as data for :func:`list_schedule`: each task's class id in
    :data:`CLASSES` from its (kind, phase), −1 (not narrowed) without a kind or phase."""
    pol = get_policy(policy)
    names, code = kind_codes(inst)
    phase = task_phases(inst)
    table = np.array([[CLASSES.index(pol(k, ph)) for ph in (0, 1)] for k in names],
                     dtype=np.int64).reshape(len(names), 2)
    tcls = np.full(inst.n_tasks, -1, np.int64)
    ok = (code >= 0) & ((phase == 0) | (phase == 1))
    tcls[ok] = table[code[ok], phase[ok]]
    return DeviceClasses(tcls, class_members(inst), pol.name)


def policy_classes(inst: PlacementInstance, policy: str | StaticPolicy) -> list[str | None]:
    """The policy class of every task (None where the task has no kind or no phase)."""
    tcls = policy_device_classes(inst, policy).task_class
    return [None if c < 0 else CLASSES[c] for c in tcls.tolist()]


def static_schedule(inst: PlacementInstance, policy: str | StaticPolicy, *,
                    device_choice: str = "least_available") -> dict:
    """The schedule of ``policy``: HEFT order (upward rank), each task on a legal device of its
    policy class (all legal devices when the class has none) chosen by ``device_choice``
    (:data:`heuristics.placement.list_scheduler.STATIC_DEVICE_CHOICES`: ``least_available``,
    the one whose last booked task ends first, a task without a class as under
    ``fit_in_class``; ``fit_in_class`` / ``eft``, the earliest finish), inserted into the first idle gap that fits, LRU eviction where a load does not
    fit (problems.md §6; InputError when a block is larger than every device of its task's
    class)."""
    classes = policy_device_classes(inst, policy)
    return list_schedule(inst, heft_priority_order(inst), insertion=True, classes=classes,
                         device_choice=device_choice)


def class_of_assignment(inst: PlacementInstance, solution: dict) -> np.ndarray:
    """The device class (``npu``/``pim``/``gpu``/``cpu``) each task was placed on."""
    cls = {d.name: d.device_class for d in inst.devices}
    return np.array([cls[solution["assignment"][t]] for t in inst.task_ids])
