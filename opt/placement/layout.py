"""P2 weight layout (problems.md §2): format assignments, storage under the memory budget, and the
instance views every layout method shares.

A *format assignment* maps each block id to one of ``layout.formats``; blocks in
``layout.fixed`` keep their fixed format. Storage of an assignment (bytes) is
``Σ_b bytes(b) · storage_multiplier[φ(b)]`` and must not exceed ``layout.memory_budget``
(None = unlimited). Load durations per format are the integers ``block_load[fmt][b, d]`` the
builder computed from the conversion chains (problems.md §5.4), so exact models and heuristics read
the same numbers.

Views (all share the task, edge and cost arrays of the original; nothing is copied):

- :func:`with_formats` — the P1 instance "blocks stored as φ" (``layout.fixed`` = φ): any P1
  method scheduled on it produces a schedule whose loads use φ's durations and whose
  ``solution["formats"]`` is φ, valid for the original P2 instance.
- :func:`relaxed_instance` — every block loads in its cheapest allowed format on each device
  (per device, independently): a relaxation, so P1 lower bounds computed on it are valid P2
  bounds.
- :func:`with_budget` — the same instance with another memory budget.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.placement.instance import LAYOUT_FORMATS, MAX_BYTES, Layout, PlacementInstance

#: Each device class's own optimised format (the format it loads without conversion).
NATIVE_FORMAT = {"npu": "npu_opt", "gpu": "npu_opt", "pim": "pim_opt"}
#: The paper's WLA chooses among these (``dual`` is a baseline there, an option here).
WLA_FORMATS = ("linear", "npu_opt", "pim_opt")

#: cached properties of an instance that do not depend on its layout (carried over by views)
_LAYOUT_FREE_CACHES = ("task_index", "device_index", "block_index", "legal", "successors",
                       "predecessors", "topological_order")


def _view(inst: PlacementInstance, **changes: Any) -> PlacementInstance:
    out = dataclasses.replace(inst, **changes)
    for key in _LAYOUT_FREE_CACHES:
        if key in inst.__dict__:
            out.__dict__[key] = inst.__dict__[key]
    return out


def allowed_formats(inst: PlacementInstance, formats: Iterable[str] | None = None
                    ) -> tuple[str, ...]:
    """The formats a layout method may choose: ``formats`` (default all of ``layout.formats``)
    ∩ ``layout.formats``, restricted to those with load durations for every block."""
    wanted = tuple(formats) if formats is not None else tuple(inst.layout.formats)
    for f in wanted:
        if f not in LAYOUT_FORMATS:
            raise InputError(f"unknown format '{f}'; known: {', '.join(LAYOUT_FORMATS)}",
                             field="formats")
    return tuple(f for f in wanted if f in inst.layout.formats and f in inst.block_load)


def storage_bytes(inst: PlacementInstance, assignment: Mapping[str, str]) -> float:
    """Bytes the blocks take in main memory under ``assignment`` (missing blocks: P1 format)."""
    mult = inst.layout.storage_multiplier
    fmts = [assignment.get(b, f) for b, f in zip(inst.block_ids, inst.block_format)]
    return float(sum(int(n) * float(mult[f]) for n, f in zip(inst.block_bytes.tolist(), fmts)))


def fits_budget(inst: PlacementInstance, assignment: Mapping[str, str]) -> bool:
    budget = inst.layout.memory_budget
    return budget is None or storage_bytes(inst, assignment) <= budget


def min_storage(inst: PlacementInstance, formats: Iterable[str] | None = None) -> float:
    """The least storage any assignment over ``formats`` can take (fixed blocks as fixed)."""
    allowed = allowed_formats(inst, formats)
    mult = inst.layout.storage_multiplier
    total = 0.0
    for b, n in zip(inst.block_ids, inst.block_bytes.tolist()):
        if b in inst.layout.fixed:
            total += n * float(mult[inst.layout.fixed[b]])
        else:
            total += n * min(float(mult[f]) for f in allowed)
    return total


def budget_message(inst: PlacementInstance, formats: Iterable[str] | None = None) -> str | None:
    """None when some assignment over ``formats`` fits the memory budget, else why not."""
    allowed = allowed_formats(inst, formats)
    if not allowed:
        return (f"none of the formats {list(formats or ())} is available in this instance "
                f"(layout.formats {list(inst.layout.formats)})")
    budget = inst.layout.memory_budget
    if budget is None:
        return None
    need = min_storage(inst, allowed)
    if need > budget:
        return (f"memory budget {budget} bytes is below the least storage of the weight blocks "
                f"in formats {list(allowed)}: {need:.0f} bytes")
    return None


def uniform(inst: PlacementInstance, fmt: str) -> dict[str, str]:
    """Every non-fixed block in ``fmt`` (fixed blocks keep their format)."""
    return {b: inst.layout.fixed.get(b, fmt) for b in inst.block_ids}


def with_formats(inst: PlacementInstance, assignment: Mapping[str, str]) -> PlacementInstance:
    """The P1 view of ``inst`` with blocks stored as ``assignment`` (see the module docstring).
    Raises InputError for an unknown block, a format without load durations, a change of a
    fixed block, or a block that some legal device of one of its tasks cannot load."""
    fixed = dict(inst.layout.fixed)
    bindex = inst.block_index
    for b, f in assignment.items():
        if b not in bindex:
            raise InputError(f"unknown block '{b}'", field="formats")
        if f not in inst.layout.formats or f not in inst.block_load:
            raise InputError(f"block '{b}': format '{f}' is not available (layout.formats "
                             f"{list(inst.layout.formats)})", field="formats")
        if b in inst.layout.fixed and inst.layout.fixed[b] != f:
            raise InputError(f"block '{b}' is fixed to '{inst.layout.fixed[b]}'", field="formats")
        fixed[b] = f
    view = _view(inst, layout=dataclasses.replace(inst.layout, fixed=fixed))
    has = np.flatnonzero(inst.task_block >= 0)
    if len(has):
        bad = (inst.cost[has] >= 0) & (view.load_duration[inst.task_block[has]] < 0)
        if bad.any():
            r, d = map(int, np.argwhere(bad)[0])
            b = int(inst.task_block[has[r]])
            raise InputError(f"block '{inst.block_ids[b]}' in format "
                             f"'{view.block_format[b]}' cannot be loaded on "
                             f"'{inst.devices[d].name}'", field="formats")
    return view


def relaxed_instance(inst: PlacementInstance, formats: Iterable[str] | None = None
                     ) -> PlacementInstance:
    """Every block loads in its cheapest allowed format on each device (fixed blocks in their
    format): P1 lower bounds of this view bound every P2 schedule over ``formats`` from below.

    The view is memoised per instance object and format set, so bounds cached on it (e.g.
    :func:`opt.placement.certified_bounds.certified_lower_bound`) are computed once per sweep instance."""
    allowed = allowed_formats(inst, formats)
    key = tuple(allowed)
    cached = _RELAXED.get(inst, {}).get(key)
    if cached is not None:
        return cached
    view = _relaxed(inst, allowed)
    _RELAXED.setdefault(inst, {})[key] = view
    return view


#: relaxed views per instance (a cache: entries die with their instance)
_RELAXED: weakref.WeakKeyDictionary[PlacementInstance, dict[tuple, PlacementInstance]] = \
    weakref.WeakKeyDictionary()


def _relaxed(inst: PlacementInstance, allowed) -> PlacementInstance:
    nb, nd = len(inst.block_ids), inst.n_devices
    big = np.iinfo(np.int64).max
    best = np.full((nb, nd), big, dtype=np.int64)
    for f in allowed:
        a = inst.block_load[f]
        best = np.where(a >= 0, np.minimum(best, a), best)
    for b, f in inst.layout.fixed.items():
        best[inst.block_index[b]] = inst.block_load[f][inst.block_index[b]]
    best[best == big] = -1
    best.setflags(write=False)
    lay = Layout(formats=("linear",), fixed={}, default="linear",
                 storage_multiplier=dict(inst.layout.storage_multiplier), memory_budget=None)
    return _view(inst, block_load={"linear": best}, layout=lay)


def with_budget(inst: PlacementInstance, budget_bytes: int | None) -> PlacementInstance:
    """``inst`` with ``layout.memory_budget`` = ``budget_bytes`` (None = unlimited)."""
    if budget_bytes is not None and budget_bytes < 0:
        raise InputError(f"memory budget must be ≥ 0 bytes, got {budget_bytes}",
                         field="memory_budget")
    return _view(inst, layout=dataclasses.replace(inst.layout, memory_budget=budget_bytes))


def check_budget(gb: float | None = None, factor: float | None = None) -> None:
    """The memory-budget options on their own, before any instance is built: at most one of
    ``gb`` (a finite number of 10⁹ bytes in [0, 2^53 bytes]) and ``factor`` (a finite number
    ≥ 0); InputError naming ``budget_gb`` / ``budget_factor``."""
    if gb is not None and factor is not None:
        raise InputError("give a memory budget in GB or as a factor, not both",
                         field="memory_budget")
    for field, value, what in (("budget_gb", gb, "memory budget must be ≥ 0 GB"),
                               ("budget_factor", factor, "budget factor must be ≥ 0")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real)
                                  or not math.isfinite(value) or value < 0):
            raise InputError(f"{what}, got {value!r}", field=field)
    if gb is not None:
        _budget_bytes(gb * 1e9, "budget_gb", gb)


def budget_from(inst: PlacementInstance, *, gb: float | None = None,
                factor: float | None = None) -> int | None:
    """A budget in bytes from ``gb`` (10⁹ bytes) or ``factor`` × the blocks' linear bytes
    (:func:`check_budget`); at most the instance's largest byte count, ``MAX_BYTES``
    (InputError naming the option)."""
    check_budget(gb, factor)
    if gb is not None:
        return _budget_bytes(gb * 1e9, "budget_gb", gb)
    if factor is not None:
        return _budget_bytes(factor * int(inst.block_bytes.sum()), "budget_factor", factor)
    return None


def _budget_bytes(nbytes: float, field: str, given: float) -> int:
    """``nbytes`` rounded down to an integer, refused above ``MAX_BYTES`` (InputError naming
    ``field`` and the ``given`` value)."""
    if not nbytes <= MAX_BYTES:
        raise InputError(f"{given!r} gives a budget above 2^53 bytes, the largest byte count "
                         f"of an instance", field=field)
    return int(math.floor(nbytes))


def format_mix(assignment: Mapping[str, str]) -> dict[str, int]:
    """Blocks per format, in the order of :data:`opt.placement.instance.LAYOUT_FORMATS`."""
    c = Counter(assignment.values())
    return {f: c[f] for f in LAYOUT_FORMATS if c[f]}


def load_pressure(inst: PlacementInstance, solution: Mapping[str, Any]
                  ) -> dict[str, dict[str, float]]:
    """Per block, the load time (ticks) it put on each device class's load ports in
    ``solution``, divided by the number of devices of the class (time per port)."""
    cls = {d.name: d.device_class for d in inst.devices}
    ports = Counter(cls.values())
    out: dict[str, dict[str, float]] = {}
    for ev in solution.get("loads", ()):
        c = cls[ev["device"]]
        per = out.setdefault(ev["block"], {})
        per[c] = per.get(c, 0.0) + (int(ev["end"]) - int(ev["start"])) / ports[c]
    return out
