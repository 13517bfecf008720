"""The measured cause of a DOPS verdict: the one input that moves Bifocal's speedup over PD
most, and by how much.

A :class:`Perturbation` changes one input of the DOPS grid — a build option of the instance
(the load rule, MoE routing), the method or a method's parameter (Bifocal best of the §6.2
grid, PD's device inside its class, Bifocal's ready-set order), or the PIM's compute speed
(every PIM task duration × ``pim_scale``, loads unchanged). :func:`run_case` builds one
workload of a model under one perturbation (each model in DOPS' precision), schedules it with
Bifocal and PD (every schedule validated by ``solve``) and returns a record;
:func:`cause_rows` compares, per model, the geometric mean of PD/Bifocal over the sample under
each perturbation with the one under none and names the largest mover. The sample is a stated
subset of the §6.2 grid (:data:`SAMPLE`): a cause measured there is evidence about the grid's
geomean, not the grid's value itself. Makespans in model ticks (ns).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.costlib.hardware import Catalog
from opt.costlib.modelcard import CardSet
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance
from solvers import solve

#: The workloads a cause is measured on: the corners of the §6.2 grid (prefill {128, 2048} ×
#: decode {128, 1024} × batch {1, 16}).
SAMPLE: tuple[tuple[int, int, int], ...] = tuple(itertools.product((128, 2048), (128, 1024),
                                                                   (1, 16)))


@dataclass(frozen=True)
class Perturbation:
    """One input changed (module docstring). ``build``: BuildOptions fields; ``bifocal``: the
    method run in Bifocal's place; ``params``: (method, name, value) triples; ``pim_scale``:
    factor on every PIM task duration; ``moe_only``: applies to MoE models only."""

    name: str
    build: tuple[tuple[str, Any], ...] = ()
    bifocal: str = "bifocal"
    params: tuple[tuple[str, str, Any], ...] = ()
    pim_scale: float = 1.0
    moe_only: bool = False

    def method_params(self, method: str) -> dict[str, Any]:
        """The params this perturbation gives ``method``."""
        return {k: v for m, k, v in self.params if m == method}


BASE = Perturbation("none")
#: The inputs tried, each alone (problems.md §1.2 rule 5, §1.4 MoE, §6; docs/departures.md).
PERTURBATIONS: tuple[Perturbation, ...] = (
    Perturbation("load_timing at_use", build=(("load_timing", "at_use"),)),
    Perturbation("moe_routing per_token", build=(("moe_routing", "per_token"),), moe_only=True),
    Perturbation("Bifocal best of the §6.2 grid", bifocal="bifocal-grid"),
    Perturbation("Bifocal ready_set rank", params=(("bifocal", "ready_set", "rank"),)),
    Perturbation("Bifocal window_patterns devices",
                 params=(("bifocal", "window_patterns", "devices"),)),
    Perturbation("PD device_choice fit_in_class", params=(("pd", "device_choice",
                                                            "fit_in_class"),)),
    Perturbation("PIM compute x2", pim_scale=2.0),
    Perturbation("PIM compute x0.5", pim_scale=0.5),
)


def by_name(names: Iterable[str]) -> tuple[Perturbation, ...]:
    """The perturbations named (InputError naming an unknown one)."""
    known = {p.name: p for p in (BASE, *PERTURBATIONS)}
    out = []
    for n in names:
        if n not in known:
            raise InputError(f"unknown perturbation '{n}'; known: {', '.join(known)}",
                             field="perturbation")
        out.append(known[n])
    return tuple(out)


def scale_pim(inst: PlacementInstance, factor: float) -> PlacementInstance:
    """``inst`` with every legal PIM task duration × ``factor`` (rounded, at least 1 tick);
    loads, transfers and the other devices unchanged."""
    if factor == 1.0:
        return inst
    pim = np.array([d.device_class == "pim" for d in inst.devices])
    cost = inst.cost.copy()
    cols = cost[:, pim]
    cost[:, pim] = np.where(cols > 0, np.maximum(1, np.rint(cols * factor)), cols)
    return dataclasses.replace(inst, cost=cost)


def build_case(model: str, platform: str, workload: tuple[int, int, int], p: Perturbation,
               catalog: Catalog, cards: CardSet, layers: int | None = None
               ) -> PlacementInstance:
    """The instance of ``workload`` (prefill, decode, batch) for ``model`` on ``platform``
    under ``p``, in DOPS' precision (``layers``: the first layers only, for tests)."""
    opts = BuildOptions(layers=layers, precision=paper_precision(model), **dict(p.build))
    inst = build_placement(cards[model], catalog.platform(platform), catalog,
                           Workload(*workload), opts)
    return scale_pim(inst, p.pim_scale)


def applies(p: Perturbation, cards: CardSet, model: str) -> bool:
    """Whether ``p`` changes anything for ``model`` (MoE-only perturbations on dense cards do
    not)."""
    return not p.moe_only or cards[model].moe is not None


def run_case(model: str, platform: str, workload: tuple[int, int, int], p: Perturbation,
             catalog: Catalog, cards: CardSet, *, layers: int | None = None,
             time_limit: float | None = None) -> dict[str, Any]:
    """Bifocal (or ``p.bifocal``) and PD on one case; a record with both makespans (ticks)."""
    inst = build_case(model, platform, workload, p, catalog, cards, layers)
    bif = solve(inst, p.bifocal, time_limit=time_limit, **p.method_params("bifocal"))
    pd = solve(inst, "pd", time_limit=time_limit, **p.method_params("pd"))
    prefill, decode, batch = workload
    return {"model": model, "platform": platform, "prefill": prefill, "decode": decode,
            "batch": batch, "layers": layers, "perturbation": p.name,
            "bifocal_ms": _ms(bif.objective), "pd_ms": _ms(pd.objective),
            "tasks": inst.n_tasks, "fingerprint": inst.fingerprint}


def _ms(ticks: Any) -> float:
    if not isinstance(ticks, (int, float)) or ticks <= 0:
        raise InputError(f"a schedule without a positive makespan: {ticks!r}", field="objective")
    return float(ticks) / 1e6


def record_key(rec: Mapping[str, Any]) -> tuple:
    """(model, platform, prefill, decode, batch, layers, perturbation)."""
    return tuple(rec.get(k) for k in ("model", "platform", "prefill", "decode", "batch",
                                      "layers", "perturbation"))


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file written by :func:`append_record`; a line that is not a
    record with two positive makespans is an InputError naming the file and line."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            rec = json.loads(line)
            ok = all(isinstance(rec.get(k), (int, float)) and math.isfinite(rec[k])
                     and rec[k] > 0 for k in ("bifocal_ms", "pd_ms"))
        except (ValueError, AttributeError):
            ok = False
        if not ok:
            raise InputError(f"line {i} is not a cause record", source=str(path), field="line")
        out.append(rec)
    return out


def append_record(path: Path, rec: Mapping[str, Any]) -> None:
    """Append one record (a line of JSON) to ``path``."""
    with path.open("a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


def geomean_ratio(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Geometric mean of PD/Bifocal over ``records`` (None when empty)."""
    if not records:
        return None
    return math.exp(sum(math.log(r["pd_ms"] / r["bifocal_ms"]) for r in records)
                    / len(records))


def cause_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, platform): the sample's geomean PD/Bifocal under no perturbation and under
    each perturbation measured on every workload the base has, its change, and the largest
    mover (``cause``, ``delta``: the geomean under it minus the base's). A perturbation with
    a missing workload is left out of that model's row."""
    groups: dict[tuple, dict[str, dict[tuple, Mapping[str, Any]]]] = {}
    for r in records:
        wl = (r["prefill"], r["decode"], r["batch"], r.get("layers"))
        groups.setdefault((r["model"], r["platform"]), {}).setdefault(
            r["perturbation"], {})[wl] = r
    rows = []
    for (model, platform), per in groups.items():
        base = per.get(BASE.name, {})
        g0 = geomean_ratio(list(base.values()))
        moves = {name: geomean_ratio([recs[w] for w in base])
                 for name, recs in per.items() if name != BASE.name and set(base) <= set(recs)}
        deltas = {n: g - g0 for n, g in moves.items() if g is not None and g0 is not None}
        cause = max(deltas, key=lambda n: abs(deltas[n]), default=None)
        rows.append({"model": model, "platform": platform, "workloads": len(base),
                     "base": g0, "under": moves, "cause": cause,
                     "delta": None if cause is None else deltas[cause]})
    return rows
