"""OpWeave's Fig. 9 as model against measurement: how a step-time spread moves feasibility and
the cost ratios.

OpWeave's Fig. 9 is *measured*: COL on vLLM and the disaggregated plans on its runtime, on a
RoCE H100 cluster, a configuration feasible iff its **p95** step-level TPOT meets the SLO
(§7.1 "Metrics"). Ours is the model's steady-state period T_rtt (:mod:`opt.serving.period`), a
mean without run-to-run spread. The sensitivity here assumes a spread s: p95 = T_rtt × (1 + s),
so a plan is feasible iff T_rtt ≤ SLO / (1 + s), and each method's optimum under spread s is its
optimum under the SLO SLO / (1 + s).

Computed without re-solving where the answer is known: a method's plan at s = 0 whose
T_rtt × (1 + s) still meets the SLO stays its optimum (the optimum over a superset that lies in
the subset); a method with no plan at s = 0 has none at s > 0 (the feasible set shrinks).
Otherwise ``resolve(record, slo_ms)`` solves the method again at the tightened SLO (None: not
solved — the method is *unknown* at that spread, never counted as infeasible). So more spread
never makes fewer configurations infeasible and never lowers a method's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPREADS = (0.0, 0.05, 0.10, 0.20)
BASELINES = ("col", "afd", "cad")
METHODS = (*BASELINES, "bnb")
#: A method's record at a tightened SLO (ms), or None when it has no record there.
Resolve = Callable[[Mapping[str, Any], float], Mapping[str, Any] | None]
RecordCells = Mapping[tuple, Mapping[str, Mapping[str, Any]]]


def _cost(rec: Mapping[str, Any] | None) -> float | None:
    c = None if rec is None else rec.get("cost_usd_per_mtok")
    return float(c) if isinstance(c, (int, float)) else None


@dataclass(frozen=True)
class SpreadCost:
    """A method's optimum under spread ``spread``: its cost ($ per million output tokens; None:
    no plan), its model T_rtt (ms), whether it was re-solved (else it is the s = 0 plan or
    the s = 0 infeasibility), whether it is ``known`` (False: the re-solve has no record) and
    whether the re-solve ``stopped`` at its time limit (its cost: the incumbent's)."""

    spread: float
    cost: float | None
    t_rtt_ms: float | None
    resolved: bool
    known: bool = True
    stopped: bool = False


def spread_cost(rec: Mapping[str, Any], spread: float, resolve: Resolve) -> SpreadCost:
    """The method's optimum when p95 = T_rtt × (1 + ``spread``) must meet the record's SLO
    (module docstring)."""
    if spread < 0:
        raise ValueError(f"spread must be >= 0, got {spread}")
    cost, t = _cost(rec), rec.get("t_rtt_ms")
    limit = float(rec["slo_ms"]) / (1 + spread)
    if cost is None:
        return SpreadCost(spread, None, None, False)
    if t is not None and float(t) <= limit * (1 + 1e-12):
        return SpreadCost(spread, cost, float(t), False)
    again = resolve(rec, limit)
    if again is None:
        return SpreadCost(spread, None, None, True, known=False)
    new = _cost(again)
    return SpreadCost(spread, new, None if new is None else again.get("t_rtt_ms"), True,
                      stopped=bool((again.get("search") or {}).get("timed_out")))


@dataclass(frozen=True)
class SpreadPoint:
    """Every cell's methods under one spread: ``costs[key][method]``."""

    spread: float
    costs: dict[tuple, dict[str, SpreadCost]]

    def infeasible(self) -> list[tuple[tuple, str]]:
        """(cell, baseline) pairs without a plan."""
        return [(k, m) for k, per in sorted(self.costs.items()) for m in BASELINES
                if m in per and per[m].cost is None and per[m].known]

    def unknown(self) -> int:
        """Methods whose re-solve has no record."""
        return sum(not c.known for per in self.costs.values() for c in per.values())

    def ratio(self, key: tuple) -> float | None:
        """Best feasible baseline / B&B in one cell (None when a method is unknown)."""
        per = self.costs[key]
        if not all(c.known for c in per.values()):
            return None
        base = [c.cost for m in BASELINES if m in per and (c := per[m]).cost is not None]
        bnb = per["bnb"].cost if "bnb" in per else None
        return min(base) / bnb if base and bnb else None


def spread_points(cells: RecordCells, spreads: Sequence[float], resolve: Resolve
                  ) -> list[SpreadPoint]:
    """Each spread's optimum per cell and method (cells: key → method → s = 0 record)."""
    return [SpreadPoint(s, {k: {m: spread_cost(rec, s, resolve) for m, rec in per.items()
                                if m in METHODS}
                            for k, per in cells.items()}) for s in spreads]


def _cell_name(key: tuple) -> str:
    return f"{key[0].split('-')[0]} {key[2] // 1024}K/{key[3]:g}"


def spread_rows(points: Sequence[SpreadPoint]) -> list[list[Any]]:
    """Per spread: infeasible baseline configurations (count and the ones new against the
    previous spread), the maximum ratio per model, cells where B&B is strictly cheapest / tied,
    re-solved methods."""
    out, before = [], set()
    for p in points:
        bad = p.infeasible()
        new = [f"{_cell_name(k)} {m}" for k, m in bad if (k, m) not in before]
        before = set(bad)
        ratios = {k: r for k in p.costs if (r := p.ratio(k)) is not None}
        maxima = []
        for model in sorted({k[0] for k in p.costs}):
            mine = {k: r for k, r in ratios.items() if k[0] == model}
            if mine:
                k = max(mine, key=lambda x: mine[x])
                maxima.append(f"{model.split('-')[0]} {mine[k]:.3f} ({_cell_name(k)})")
        strict = sum(r > 1 + 1e-9 for r in ratios.values())
        tied = sum(abs(r - 1) <= 1e-9 for r in ratios.values())
        resolved = sum(c.resolved for per in p.costs.values() for c in per.values())
        unknown = p.unknown()
        out.append([f"{p.spread:g}", f"{len(bad)} of {3 * len(p.costs)}"
                    + (f" ({unknown} methods not re-solved)" if unknown else ""),
                    ", ".join(new) or "--", "; ".join(maxima),
                    f"{strict} strictly, {tied} tied", resolved])
    return out


SPREAD_HEADERS = ["spread s (p95 = T_rtt (1 + s))", "baseline configurations infeasible",
                  "newly infeasible", "max best baseline / B&B per model",
                  "B&B cheapest", "methods re-solved"]


def ratio_grid(points: Sequence[SpreadPoint]) -> list[list[Any]]:
    """Per cell, best baseline / B&B at every spread ("✗": the cell's B&B has no plan; "?": a
    method not re-solved yet; "*": a re-solve stopped at its time limit), and the baselines
    infeasible at the largest spread."""
    out = []
    for k in sorted(points[0].costs):
        vals = []
        for p in points:
            r = p.ratio(k)
            b = p.costs[k].get("bnb")
            star = "*" if any(c.stopped for c in p.costs[k].values()) else ""
            vals.append("?" if any(not c.known for c in p.costs[k].values())
                        else "✗" if b is not None and b.cost is None
                        else "--" if r is None else f"{r:.3f}{star}")
        last = points[-1].costs[k]
        gone = [m for m in BASELINES if m in last and last[m].cost is None and last[m].known]
        out.append([_cell_name(k), *vals, ", ".join(gone) or "--"])
    return out


def cached_resolver(out: str | Path) -> Resolve:
    """A :data:`Resolve` that reads the records :func:`sweep_resolver` wrote under ``out`` and
    solves nothing (None: not solved yet)."""
    from opt.app.runs.serving_sweep import ServingCell
    from opt.common.jsonio import read_json

    def resolve(rec: Mapping[str, Any], slo_ms: float) -> Mapping[str, Any] | None:
        cell = ServingCell(rec["model"], tuple(rec["gpus"]), int(rec["context"]),
                           round(slo_ms, 6))
        path = cell.folder(Path(out)) / f"{rec['method']}.json"
        return read_json(path) if path.exists() else None

    return resolve


def sweep_resolver(out: str | Path, time_limit: float = 600.0) -> Resolve:
    """A :data:`Resolve` that solves the record's cell again at the tightened SLO through
    :func:`opt.app.runs.serving_sweep.run_serving_sweep` (resumable records under ``out``, the
    record's GPU cost model and unmeasured-GPU rule)."""
    from opt.app.runs.serving_sweep import ServingCell, ServingSweepOptions, run_serving_sweep
    from opt.app.runs.sweep_calls import SolveCall
    from opt.costlib.hardware import load_catalog
    from opt.costlib.modelcard import load_cards

    catalog, cards = load_catalog(), load_cards()

    def resolve(rec: Mapping[str, Any], slo_ms: float) -> Mapping[str, Any] | None:
        cell = ServingCell(rec["model"], tuple(rec["gpus"]), int(rec["context"]),
                           round(slo_ms, 6))
        opts = ServingSweepOptions(gpu_cost=rec.get("gpu_cost", "calibrated"),
                                   unmeasured_gpu=rec.get("unmeasured_gpu", "transfer"))
        done = run_serving_sweep([cell], [rec["method"]], Path(out),
                                 SolveCall(time_limit=time_limit), catalog=catalog,
                                 cards=cards, options=opts)
        return done[0][0] if done else None

    return resolve
