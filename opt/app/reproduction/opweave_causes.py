"""The measured cause of an OpWeave verdict: the input that moves the compared quantity most,
and by how much.

A :class:`Perturbation` changes one input of the serving instances — the SLO (× ``slo_scale``),
the cost of a network crossing (latency × k, bandwidth / k: ``crossing_scale`` k, every GPU
type's inter-node link set to the scaled link of the cell's first GPU type), or the batch grid
(powers of two up to ``batch_cap``). Each method of each cell is solved again under it, except
where the answer is known without solving (:func:`keeps`): a perturbation that only restricts
(tighter SLO, dearer crossings, fewer batches) never lowers a plan's cost nor enlarges the
feasible set, so a method without a plan keeps none, and a plan the perturbation leaves
feasible at its cost stays the method's optimum.

:func:`cause_row` evaluates a quantity (a function of the cells' records) on the base records
and on every perturbation's and names the one that moves it most.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.app.reproduction.opweave_spread import RecordCells

METHODS = ("col", "afd", "cad", "bnb")
#: Solve one method of a cell under a perturbation: (s = 0 record, perturbation) → its record.
Solver = Callable[[Mapping[str, Any], "Perturbation"], Mapping[str, Any] | None]
Quantity = Callable[[RecordCells], float | None]


@dataclass(frozen=True)
class Perturbation:
    """One input changed (module docstring); ``name`` labels it in tables."""

    name: str
    slo_scale: float = 1.0
    crossing_scale: float = 1.0
    batch_cap: int | None = None

    @property
    def restricts(self) -> bool:
        """Only removes plans or raises costs (so :func:`keeps` may answer)."""
        return self.slo_scale <= 1 and self.crossing_scale >= 1

    def batches(self) -> tuple[int, ...] | None:
        """The batch grid under the cap (None: the instance's own)."""
        if self.batch_cap is None:
            return None
        return tuple(1 << k for k in range(int(self.batch_cap).bit_length()))


def _cost(rec: Mapping[str, Any] | None) -> float | None:
    c = None if rec is None else rec.get("cost_usd_per_mtok")
    return float(c) if isinstance(c, (int, float)) else None


def keeps(rec: Mapping[str, Any], p: Perturbation) -> bool:
    """Whether the record stays the method's answer under a restricting perturbation: no plan
    stays no plan; a plan stays optimal when it still meets the scaled SLO, crosses no network
    (one owner) if crossings get dearer, and uses no batch above the cap."""
    if not p.restricts:
        return False
    if _cost(rec) is None:
        return True
    plan = rec.get("plan") or {}
    t = rec.get("t_rtt_ms")
    if p.slo_scale < 1 and (t is None or float(t) > float(rec["slo_ms"]) * p.slo_scale):
        return False
    if p.crossing_scale > 1 and len(plan.get("owners", ())) > 1:
        return False
    if p.batch_cap is not None and any(int(o["batch"]) > p.batch_cap
                                       for o in plan.get("owners", ())):
        return False
    return True


def perturbed_cells(cells: RecordCells, p: Perturbation, solver: Solver
                    ) -> dict[tuple, dict[str, Mapping[str, Any] | None]]:
    """Every cell's methods under ``p``, keyed as ``cells`` (the base SLO in the key)."""
    return {k: {m: rec if keeps(rec, p) else solver(rec, p) for m, rec in per.items()
                if m in METHODS} for k, per in cells.items()}


def solved_count(cells: RecordCells, p: Perturbation) -> int:
    """Methods :func:`perturbed_cells` solves again (the others are known)."""
    return sum(not keeps(rec, p) for per in cells.values() for m, rec in per.items()
               if m in METHODS)


def unsolved(perturbed: Mapping[tuple, Mapping[str, Mapping[str, Any] | None]]) -> int:
    """Methods without a record under the perturbation (a solver that returned None)."""
    return sum(r is None for per in perturbed.values() for r in per.values())


def cause_row(name: str, quantity: Quantity, base: RecordCells,
              perturbed: Mapping[str, RecordCells], digits: int = 3,
              missing: Mapping[str, int] | None = None) -> list[Any]:
    """[quantity, base value, value under each perturbation, the largest mover "name: base →
    value (Δ)"]; a perturbation the quantity is undefined under shows "--", one with
    ``missing[name]`` > 0 unsolved methods shows "n/a" and never names the mover."""
    b = quantity(base)
    gaps = dict(missing or {})
    vals = {n: None if gaps.get(n) else quantity(c) for n, c in perturbed.items()}

    def fmt(v: float | None) -> str:
        return "--" if v is None else f"{v:.{digits}f}" if v != int(v) else f"{v:g}"

    deltas = {n: v - b for n, v in vals.items() if v is not None and b is not None}
    top = max(deltas, key=lambda n: abs(deltas[n])) if deltas else None
    moved = ("--" if top is None else "none moves it" if deltas[top] == 0 else
             f"{top}: {fmt(b)} → {fmt(vals[top])} ({deltas[top]:+.{digits}f})")
    shown = [f"n/a ({gaps[n]} unsolved)" if gaps.get(n) else fmt(vals[n]) for n in perturbed]
    return [name, fmt(b), *shown, moved]


def cached_solver(out: str | Path) -> Solver:
    """A :data:`Solver` that reads the records :func:`sweep_solver` wrote under ``out`` and
    solves nothing (None: not solved yet)."""
    from opt.app.runs.serving_sweep import ServingCell
    from opt.common.jsonio import read_json

    def solve(rec: Mapping[str, Any], p: Perturbation) -> Mapping[str, Any] | None:
        cell = ServingCell(rec["model"], tuple(rec["gpus"]), int(rec["context"]),
                           round(float(rec["slo_ms"]) * p.slo_scale, 6))
        path = cell.folder(Path(out) / _slug(p.name)) / f"{rec['method']}.json"
        return read_json(path) if path.exists() else None

    return solve


def sweep_solver(out: str | Path, time_limit: float = 600.0) -> Solver:
    """A :data:`Solver` through :func:`opt.app.runs.serving_sweep.run_serving_sweep`
    (resumable records under ``out/<perturbation name>``), the record's GPU cost model."""
    from opt.app.runs.serving_sweep import ServingCell, ServingSweepOptions, run_serving_sweep
    from opt.app.runs.sweep_calls import SolveCall
    from opt.costlib.hardware import load_catalog
    from opt.costlib.latency import Link
    from opt.costlib.modelcard import load_cards
    from opt.serving.builder import ServingWorkload, build_serving_plan
    from opt.serving.instance import ServingGrid

    catalog, cards = load_catalog(), load_cards()

    def link_of(rec: Mapping[str, Any], k: float) -> Link | None:
        if k == 1:
            return None
        inst = build_serving_plan(cards[rec["model"]], catalog, rec["gpus"][:1],
                                  ServingWorkload(int(rec["context"]),
                                                  float(rec["slo_ms"]) / 1e3),
                                  gpu_cost=rec.get("gpu_cost", "calibrated"),
                                  unmeasured_gpu=rec.get("unmeasured_gpu", "transfer"))
        net = inst.network
        return Link(net.latency_s * k, net.bandwidth_bytes_per_s / k,
                    f"{net.source} (crossing x{k:g})")

    def solve(rec: Mapping[str, Any], p: Perturbation) -> Mapping[str, Any] | None:
        cell = ServingCell(rec["model"], tuple(rec["gpus"]), int(rec["context"]),
                           round(float(rec["slo_ms"]) * p.slo_scale, 6))
        batches = p.batches()
        opts = ServingSweepOptions(grid=None if batches is None else ServingGrid(batches=batches),
                                   gpu_cost=rec.get("gpu_cost", "calibrated"),
                                   unmeasured_gpu=rec.get("unmeasured_gpu", "transfer"),
                                   network=link_of(rec, p.crossing_scale))
        done = run_serving_sweep([cell], [rec["method"]], Path(out) / _slug(p.name),
                                 SolveCall(time_limit=time_limit), catalog=catalog,
                                 cards=cards, options=opts)
        return done[0][0] if done else None

    return solve


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-")


def as_cells(perturbed: Mapping[tuple, Mapping[str, Mapping[str, Any] | None]]) -> RecordCells:
    """Drop the methods without a record (a solver that returned None)."""
    return {k: {m: r for m, r in per.items() if r is not None} for k, per in perturbed.items()}


__all__: Sequence[str] = ("Perturbation", "keeps", "perturbed_cells", "solved_count",
                          "cause_row", "sweep_solver", "cached_solver", "as_cells", "unsolved")
