"""Options of the certified P1 lower bound (:mod:`opt.placement.certified_bounds`)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class BoundOptions:
    """max_assignments: device assignments enumerated per segment evaluation; max_evaluations:
    distinct segments of one shape evaluated exactly before bucketing;
    max_release_evaluations: segment re-evaluations with weight-load release times; lp: compute
    ``work_lp`` (needs scipy's HiGHS); max_device_path_tasks: largest instance (tasks) that
    gets the ``device_path`` component; device_path_assignments: neighbour device choices
    enumerated per (task, device) there (``device_heads_tails``' ``max_assignments``);
    branch: raise the tables of segments too large to enumerate by branch and bound
    (:mod:`opt.placement.segment_branch`), on at most max_branch_evaluations buckets per
    shape; cut_loads: compute the ``cut_loads`` component under ``load_timing`` ``at_use``
    and ``overlap`` (:mod:`opt.placement.cut_load_bound`; a Python pass over the tasks)."""

    max_assignments: int = 20_000
    max_evaluations: int = 128
    max_release_evaluations: int = 4096
    lp: bool = True
    max_device_path_tasks: int = 5_000
    device_path_assignments: int = 256
    branch: bool = True
    max_branch_evaluations: int = 16
    cut_loads: bool = True


#: Tasks from which the bound's sequential loops run compiled (:mod:`opt.placement.bound_jit`,
#: numba) when numba is installed; smaller solves never import numba (start-up time).
#: Break-even with numba's ≈ 0.8 s of import and cache loads: at 1,798 tasks (Llama-2-7B HP64,
#: 1024 + 1 tokens, batch 16) numpy 0.93 s, compiled 1.1–1.25 s of CPU; at 4,495 tasks 2.1–2.4
#: against 1.6–1.8; at 19,778 tasks 3.9–4.6 against 1.0 (docs/speed.md, "The certified bound",
#: **Compiled from 4,000 tasks**).
JIT_TASKS = 4_000


def jit_kernels(n_tasks: int) -> ModuleType | None:
    """:mod:`opt.placement.bound_jit` for an instance of ``n_tasks`` tasks, or None (small
    instance or no numba: the pure Python/numpy code, with the same values, runs instead)."""
    if n_tasks < JIT_TASKS:
        return None
    try:
        from opt.placement import bound_jit
    except ImportError:
        return None
    return bound_jit
