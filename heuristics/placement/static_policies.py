"""Static placement policies (DOPS Table 1, problems.md §6): each task's device *class* is fixed by its
operator kind and phase; the device within the class is chosen by EFT in HEFT order.

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
(:func:`heuristics.placement.list_scheduler.list_schedule` does this when the candidates are
empty): ``kv_write`` stays pinned to its KV home, ``router``,
``combine``, ``embed`` and ``lm_head`` run on the NPU, ``allreduce_*`` on the host; on platforms
without PIM (HP0) every policy degenerates to "everything on the NPU". Tasks without a kind or
phase (hand-written instances such as the bundled ones) are not narrowed: plain HEFT.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from heuristics.placement.list_scheduler import list_schedule, priority_order, upward_rank
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


def policy_classes(inst: PlacementInstance, policy: str | StaticPolicy) -> list[str | None]:
    """The policy class of every task (None where the task has no kind or no phase)."""
    pol = get_policy(policy)
    kinds = inst.kind or (None,) * inst.n_tasks
    phases = inst.phase.tolist() if inst.phase is not None else [-1] * inst.n_tasks
    memo: dict[tuple[str, int], str] = {}
    out: list[str | None] = []
    for kind, phase in zip(kinds, phases):
        if kind is None or phase not in (0, 1):
            out.append(None)
            continue
        key = (kind, phase)
        if key not in memo:
            memo[key] = pol(kind, phase)
        out.append(memo[key])
    return out


def policy_candidates(inst: PlacementInstance, policy: str | StaticPolicy
                      ) -> Callable[[int, list[int]], list[int]]:
    """``candidates(t, legal)`` for :func:`list_schedule`: the legal devices of t's class."""
    classes = policy_classes(inst, policy)
    dev_class = [d.device_class for d in inst.devices]
    members = {c: frozenset(d for d, dc in enumerate(dev_class) if dc in CLASS_MEMBERS[c])
               for c in CLASS_MEMBERS}

    def candidates(t: int, legal: list[int]) -> list[int]:
        c = classes[t]
        if c is None:
            return legal
        return [d for d in legal if d in members[c]]  # empty → list_schedule tries all legal

    return candidates


def static_schedule(inst: PlacementInstance, policy: str | StaticPolicy) -> dict:
    """The schedule of ``policy``: HEFT order (upward rank), insertion-based EFT among the legal
    devices of each task's policy class (all legal devices when the class has none), LRU
    eviction where a load does not fit (problems.md §6; InputError when a block is larger
    than every device of its task's class)."""
    order = priority_order(inst, upward_rank(inst))
    return list_schedule(inst, order, insertion=True,
                         candidates=policy_candidates(inst, policy),
                         policy_name=get_policy(policy).name)


def class_of_assignment(inst: PlacementInstance, solution: dict) -> np.ndarray:
    """The device class (``npu``/``pim``/``gpu``/``cpu``) each task was placed on."""
    cls = {d.name: d.device_class for d in inst.devices}
    return np.array([cls[solution["assignment"][t]] for t in inst.task_ids])
