"""Format decisions shared by the P2 CP-SAT models (joint placement + format, format-only)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ortools.sat.python import cp_model

from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance


def storage_milli(inst: PlacementInstance, b: int, fmt: str) -> int:
    """Stored bytes of block b in ``fmt`` × 1000 (multipliers such as 1.0 and 2.0 stay exact)."""
    return round(int(inst.block_bytes[b]) * float(inst.layout.storage_multiplier[fmt]) * 1000)


def format_literals(m: cp_model.CpModel, inst: PlacementInstance, formats: Sequence[str],
                    devices_of: Mapping[int, Iterable[int]], blocks: Iterable[int],
                    constant: Callable[[], Any], where: str) -> dict[tuple[int, str], Any]:
    """One exactly-one choice per block of ``blocks`` among its allowed formats (its fixed one,
    else ``formats``) that load on every device of ``devices_of[b]``; single candidates become
    ``constant()``. InputError naming the block when none is left (``where`` says which
    devices)."""
    lits: dict[tuple[int, str], Any] = {}
    for b in blocks:
        bid = inst.block_ids[b]
        cands = [inst.layout.fixed[bid]] if bid in inst.layout.fixed else list(formats)
        devs = list(devices_of.get(b, ()))
        cands = [f for f in cands if f in inst.block_load
                 and all(inst.block_load[f][b, d] >= 0 for d in devs)]
        if not cands:
            raise InputError(f"block '{bid}' has no allowed format loadable {where}",
                             field="layout.formats")
        row = []
        for f in cands:
            lit = constant() if len(cands) == 1 else m.new_bool_var(f"fmt{b}_{f}")
            lits[(b, f)] = lit
            row.append(lit)
        m.add_exactly_one(row)
    return lits


def add_storage_budget(m: cp_model.CpModel, inst: PlacementInstance,
                       lits: Mapping[tuple[int, str], Any], fixed_milli: int = 0) -> None:
    """Σ stored bytes of the chosen formats (+ ``fixed_milli``/1000) ≤ the memory budget."""
    budget = inst.layout.memory_budget
    if budget is None:
        return
    m.add(sum(storage_milli(inst, b, f) * lit for (b, f), lit in lits.items())
          + fixed_milli <= budget * 1000)
