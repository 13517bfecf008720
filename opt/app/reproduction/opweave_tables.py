"""OpWeave's evaluation figures from serving-sweep records (docs/serving.md
"Measured"): each record's plan re-evaluated on its rebuilt instance with the plan checker, the
figure quantities of :mod:`opt.serving.figures`, and the rows of Fig. 10 (stages, inter-node
payload, price-weighted occupancy), Fig. 11 (mean per-GPU batch), Fig. 13 (heterogeneous
B&B against homogeneous H100 B&B and against the best single type), Table 3 (search
statistics), the ablation and Fig. 14 tables — each with the paper's value, ours, a verdict computed from the numbers and the evidence. Used by
``benchmarks/opweave_figures.py`` and the ``opweave`` bench suite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.app.reproduction import opweave_fig13 as f13
from opt.app.runs.sweep import usable
from opt.common.jsonio import read_json
from opt.common.report import markdown_table
from opt.costlib.hardware import Catalog, load_catalog
from opt.costlib.latency import Link
from opt.costlib.modelcard import load_cards
from opt.serving.builder import ServingWorkload, build_serving_plan
from opt.serving.checker import evaluate_plan
from opt.serving.figures import PlanFigures, plan_figures
from opt.serving.instance import ServingInstance

MIB = 2.0 ** 20
METHODS = ("col", "afd", "cad", "bnb")

@dataclass(frozen=True)
class Row:
    """One record with its plan's figures (None for a record without a plan)."""

    rec: dict[str, Any]
    figs: PlanFigures | None

    @property
    def key(self) -> tuple[str, str, int, float]:
        r = self.rec
        return (r["model"], "+".join(r["gpus"]), int(r["context"]), float(r["slo_ms"]))

    @property
    def cost(self) -> float | None:
        return self.rec["cost_usd_per_mtok"] if usable(self.rec, "cost_usd_per_mtok") else None


def load_records(folders: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every sweep record (a JSON object with ``method`` and ``model``) under ``folders``."""
    out = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            rec = read_json(path)
            if isinstance(rec, dict) and "method" in rec and "model" in rec:
                out.append({**rec, "_path": str(path)})
    return out


def _link_of(d: dict[str, Any] | None) -> Link | None:
    return None if d is None else Link(float(d["latency_s"]), float(d["bandwidth_bytes_per_s"]),
                                       str(d.get("source", "")))


def instance_of(rec: dict[str, Any], catalog: Catalog, cards) -> ServingInstance:
    """The record's instance, built as ``hetopt sweep serving`` builds it (default grid and TP
    degrees)."""
    return build_serving_plan(cards[rec["model"]], catalog, rec["gpus"],
                              ServingWorkload(int(rec["context"]), float(rec["slo_ms"]) / 1e3),
                              gpu_cost=rec.get("gpu_cost", "roofline"),
                              unmeasured_gpu=rec.get("unmeasured_gpu", "roofline"),
                              network=_link_of(rec.get("network_override")))


def figure_rows(records: Sequence[dict[str, Any]], catalog: Catalog | None = None
                ) -> list[Row]:
    """Records with their plans re-evaluated; a plan whose recomputed cost disagrees with the
    record's (the instance changed since the sweep) raises instead of being reported."""
    cat, cards = catalog or load_catalog(), load_cards()
    built: dict[tuple, ServingInstance] = {}
    rows = []
    for rec in records:
        if rec.get("plan") is None or not usable(rec, "cost_usd_per_mtok"):
            rows.append(Row(rec, None))
            continue
        key = (rec["model"], tuple(rec["gpus"]), rec["context"], rec["slo_ms"],
               rec.get("gpu_cost"), rec.get("unmeasured_gpu"), str(rec.get("network_override")))
        if key not in built:
            built[key] = instance_of(rec, cat, cards)
        inst = built[key]
        met = evaluate_plan(inst, rec["plan"])
        if not math.isclose(met.cost_usd_per_mtok, rec["cost_usd_per_mtok"], rel_tol=1e-6):
            raise ValueError(f"{rec['_path']}: the plan costs {met.cost_usd_per_mtok} now, the "
                             f"record says {rec['cost_usd_per_mtok']}: rebuild the records")
        rows.append(Row(rec, plan_figures(inst, rec["plan"], met)))
    return rows


def _md(headers: list[str], rows: list[list[Any]], digits: int = 4) -> str:
    return markdown_table(headers, rows, digits)


#: A measured value "reproduces" a paper value within this relative tolerance (fixed before
#: measuring; stage counts must match exactly).
TOLERANCE = 0.10
TIGHT_SLO = {"gemma-3-27b": 25.0, "qwen3-next-80b-a3b": 40.0}
RELAXED_SLO = {"gemma-3-27b": 60.0, "qwen3-next-80b-a3b": 80.0}
CONTEXTS = (8192, 32768, 131072)
FIG10_PAPER = {  # CAD, AFD, OpWeave
    "gemma-3-27b": {"stages": (124, 124, 20.67), "payload_mib": (6.54, 8.84, 0.39),
                    "occupancy_pct": (49.71, 47.01, 88.08)},
    "qwen3-next-80b-a3b": {"stages": (96, 96, 24), "payload_mib": (2.29, 2.16, 0.35),
                           "occupancy_pct": (51.45, 54.37, 81.74)}}
FIG11_PAPER = {"gemma-3-27b": (0.68, 0.38, 0.39), "qwen3-next-80b-a3b": (0.36, 0.98, 0.98)}
FIG13_PAPER = {"L40S": (1.04, 1.11), "A100": (1.14, 1.28)}  # het vs hom B&B: mean, max
FIG13_BASELINE_PAPER = {("gemma-3-27b", "L40S"): 1.54, ("qwen3-next-80b-a3b", "L40S"): 1.59,
                        ("gemma-3-27b", "A100"): 1.89, ("qwen3-next-80b-a3b", "A100"): 1.66}
TABLE3_PAPER = {"H100": (4.78e6, 228.0), "H100+A100": (13.89e6, 447.0)}  # candidates, s (64 cores)


def verdict(paper: Sequence[float], ours: Sequence[float | None], *, exact: bool = False,
            ratio: bool = False) -> str:
    """Per value, ``reproduced`` or ``differs``: stage counts must match to 2 decimals, other
    values within TOLERANCE relative; a ratio (``ratio``) is compared by its gain r − 1, so
    that 1.00 never reproduces 1.11."""
    out = []
    for p, o in zip(paper, ours):
        if o is None:
            ok = False
        elif exact:
            ok = round(o, 2) == round(p, 2)
        elif ratio:
            ok = abs((o - 1) - (p - 1)) <= TOLERANCE * abs(p - 1)
        else:
            ok = abs(o - p) <= TOLERANCE * abs(p)
        out.append("reproduced" if ok else "differs")
    return " / ".join(out) if len(set(out)) > 1 else out[0]


def by_cell(rows: Sequence[Row]) -> dict[tuple, dict[str, Row]]:
    out: dict[tuple, dict[str, Row]] = {}
    for r in rows:
        out.setdefault(r.key, {})[r.rec["method"]] = r
    return out


def _slash(values: Sequence[Any], digits: int = 2) -> str:
    """Values joined by " / ", numbers with ``digits`` decimals (integers as they are)."""
    return " / ".join("--" if v is None else str(v) if isinstance(v, int) else
                      f"{v:.{digits}f}" for v in values)


def fig10_values(cells_: dict[tuple, dict[str, Row]], model: str
                 ) -> tuple[list[PlanFigures | None], dict[str, list[float | None]]]:
    """Fig. 10's cell (H100, 128K, the tight SLO) of ``model``: the figures of its CAD, AFD and
    B&B plans and, per quantity (``stages``, ``payload_mib``, ``occupancy_pct``), our values in
    that order (None for a method without a plan)."""
    recs = cells_.get((model, "H100", 131072, TIGHT_SLO[model]), {})
    figs = [recs[m].figs if m in recs else None for m in ("cad", "afd", "bnb")]
    return figs, {"stages": [None if f is None else f.stages_per_token for f in figs],
                  "payload_mib": [None if f is None else f.payload_bytes / MIB for f in figs],
                  "occupancy_pct": [None if f is None else 100 * f.occupancy for f in figs]}


def fig10_rows(cells_: dict[tuple, dict[str, Row]]) -> list[list[Any]]:
    """Fig. 10 on H100, 128K, the tight SLO: stages, payload (MiB), occupancy (%), with the
    evidence behind a difference (payload per stage boundary; the plans' μ)."""
    out = []
    for model, paper in FIG10_PAPER.items():
        figs, ours = fig10_values(cells_, model)
        stages, payload, occ = ours["stages"], ours["payload_mib"], ours["occupancy_pct"]
        mus = _slash([None if f is None else f.microbatches for f in figs])
        per_kb = _slash([v * MIB / 1e3 / (st - 1) if v is not None and st else None
                         for v, st in zip(payload, stages)], 1)
        paper_kb = _slash([v * MIB / 1e3 / (st - 1)
                           for v, st in zip(paper["payload_mib"], paper["stages"])], 1)
        out.append([model, "stages per token", _slash(paper["stages"]), _slash(stages),
                    verdict(paper["stages"], stages, exact=True), ""])
        out.append([model, "inter-node payload MiB / token", _slash(paper["payload_mib"]),
                    _slash(payload, 3), verdict(paper["payload_mib"], payload),
                    f"kB per boundary: ours {per_kb}, OpWeave {paper_kb}"])
        out.append([model, "price-weighted occupancy %", _slash(paper["occupancy_pct"]),
                    _slash(occ, 1), verdict(paper["occupancy_pct"], occ),
                    f"our plans' μ = {mus} (OpWeave: AFD / CAD μ = 1)"])
    return out


def microbatch_counts(rows: Sequence[Row]) -> list[list[Any]]:
    """AFD / CAD plans by μ, per SLO class (OpWeave: one microbatch even at 60 ms)."""
    out = []
    for method in ("afd", "cad"):
        for slo_class, slos in (("tight", TIGHT_SLO), ("relaxed", RELAXED_SLO)):
            mus = [r.figs.microbatches for r in rows if r.figs and r.rec["method"] == method
                   and r.key[3] == slos[r.key[0]]]
            out.append([method, slo_class, len(mus), sum(m == 1 for m in mus),
                        sum(m > 1 for m in mus)])
    return out


def fig11_rows(cells_: dict[tuple, dict[str, Row]]) -> list[list[Any]]:
    """Fig. 11 on H100 at the relaxed SLO: per-GPU batch of COL / AFD / CAD over B&B's, per
    context and their geometric mean, for both readings of "per-GPU batch"."""
    out = []
    for model, paper in FIG11_PAPER.items():
        for attr in ("mean_gpu_batch", "served_per_gpu"):
            per_ctx = []
            for ctx in CONTEXTS:
                recs = cells_.get((model, "H100", ctx, RELAXED_SLO[model]), {})
                ref = recs["bnb"].figs if "bnb" in recs else None
                per_ctx.append([getattr(recs[m].figs, attr) / getattr(ref, attr)
                                if ref and m in recs and recs[m].figs else None
                                for m in ("col", "afd", "cad")])
            geo = [_geomean([c[i] for c in per_ctx]) for i in range(3)]
            colocated = [f"{ctx // 1024}K" for ctx in CONTEXTS
                         if (b := cells_.get((model, "H100", ctx, RELAXED_SLO[model]), {})
                             .get("bnb")) is not None and b.figs is not None
                         and len(b.rec["plan"]["owners"]) == 1]
            out.append([model, attr, _slash(paper), " ; ".join(_slash(c) for c in per_ctx),
                        _slash(geo), verdict(paper, geo),
                        f"B&B plan colocated (= COL) at {', '.join(colocated) or 'none'}"])
    return out


def _geomean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def record_cells(cells_: dict[tuple, dict[str, Row]]) -> dict[tuple, dict[str, dict]]:
    """The same cells with each method's record (what :mod:`opweave_fig13` reads)."""
    return {k: {m: r.rec for m, r in v.items()} for k, v in cells_.items()}


def fig13_rows(cells_: dict[tuple, dict[str, Row]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """Relaxed SLO: per setting both readings of "heterogeneous over homogeneous OpWeave"
    (:mod:`opt.app.reproduction.opweave_fig13`: (a) over H100 B&B, the default verdict; (b)
    over the best single-type B&B) with the GPUs of each type in the het plan; then per partner
    GPU the summary against the paper and the best-baseline rows."""
    cells = f13.fig13_cells(record_cells(cells_))
    detail = f13.detail_rows(cells)
    summary = []
    for partner in f13.PARTNERS:
        mine = [c for c in cells if c.partner == partner]
        if not mine:
            continue
        paper = FIG13_PAPER[partner]
        both = sum(len(c.gpus) == 2 for c in mine)
        one = sorted({c.used.split("×")[0] for c in mine if len(c.gpus) == 1})
        differ = sum(c.reading_a is not None and c.reading_b is not None
                     and abs(c.reading_a - c.reading_b) > 1e-9 for c in mine)
        for reading, label in (("a", "over H100 B&B (default)"),
                               ("b", "over the best single type (§3.3 G_het, beside)")):
            mu, mx, n, total = f13.reading_stats(cells, partner, reading)
            ours = (mu, mx)
            summary.append([f"H100+{partner} {label}: mean, max", _slash(paper),
                            _slash(ours, 3) + ("" if n == total else f" ({n} of {total})"),
                            verdict(paper, ours, ratio=True),
                            (f"{f13.WHY_A}; " if reading == "a" else
                             f"(a) and (b) differ in {differ} of {len(mine)} settings; ")
                            + f"het plans using both types: {both} of {len(mine)}"
                            + (f", one type only: {', '.join(one)}" if one else "")])
        for model in FIG10_PAPER:
            gains = [g for c in mine if c.model == model and (g := c.baseline_gain) is not None]
            if not gains:
                continue
            paper_max = FIG13_BASELINE_PAPER[(model, partner)]
            strict = sum(g > 1 + 1e-9 for g in gains)
            summary.append([f"{model} H100+{partner}: best baseline / B&B, max (cells strictly "
                            f"cheaper)", f"{paper_max:.2f} (3 of 3)",
                            f"{max(gains):.3f} ({strict} of {len(gains)})",
                            verdict([paper_max], [max(gains)], ratio=True),
                            f"ties with the best baseline: {len(gains) - strict} of "
                            f"{len(gains)} cells"])
    return detail, summary


def table3_rows(cells_: dict[tuple, dict[str, Row]]) -> list[list[Any]]:
    """The planner-ablation case (Gemma-3-27B, 32K, 60 ms): the B&B records' search counts."""
    out = []
    for mix, (cand, secs) in TABLE3_PAPER.items():
        rec = cells_.get(("gemma-3-27b", mix, 32768, 60.0), {}).get("bnb")
        if rec is None:
            continue
        s = rec.rec.get("search") or {}
        out.append([mix, f"{cand / 1e6:g} M, {secs:g} s (64 cores)", s.get("space"),
                    s.get("candidates"), s.get("nodes"), s.get("evaluations"),
                    s.get("exact_evaluations"), s.get("runtime_s"),
                    "differs" if s.get("candidates") != cand else "reproduced"])
    return out


def ablation_rows(folder: str | Path, cells_: dict[tuple, dict[str, Row]]) -> list[list[Any]]:
    """Each ablation variant's B&B record beside the default planner's (the sweep's): same
    plan?, cost, search counts, runtime, timed out."""
    out = []
    for rec in load_records([folder]):
        name = Path(rec["_path"]).relative_to(folder).parts[0]
        key = (rec["model"], "+".join(rec["gpus"]), int(rec["context"]), float(rec["slo_ms"]))
        ref = cells_.get(key, {}).get("bnb")
        s = rec.get("search") or {}
        same = "--" if ref is None else "yes" if rec.get("plan") == ref.rec["plan"] else "no"
        out.append([key[1], name, same, rec.get("cost_usd_per_mtok"), s.get("candidates"),
                    s.get("nodes"), s.get("evaluations"), s.get("runtime_s"),
                    str(bool(s.get("timed_out")))])
    return out


def fig14_rows(folder: str | Path) -> list[list[Any]]:
    """Per network point: each method's cheapest plan over the GPU mixes solved, and whether
    B&B is the cheapest (ties with a baseline marked)."""
    recs = load_records([folder])
    points: dict[tuple[float, float], dict[str, list[dict[str, Any]]]] = {}
    for rec in recs:
        name = Path(rec["_path"]).relative_to(folder).parts[0]
        lat_s, bw_s = name.removeprefix("lat").split("us-bw")
        points.setdefault((float(lat_s), float(bw_s.removesuffix("GBps"))), {}
                          ).setdefault(rec["method"], []).append(rec)
    out = []
    for (lat, bw), per in sorted(points.items(), key=lambda kv: (kv[0][1] != 32, kv[0])):
        best = {m: min((r["cost_usd_per_mtok"] for r in per.get(m, [])
                        if usable(r, "cost_usd_per_mtok")), default=None) for m in METHODS}
        shown = [best[m] if best[m] is not None else "no plan" if per.get(m) else "--"
                 for m in METHODS]
        mixes = sorted({"+".join(r["gpus"]) for rs in per.values() for r in rs})
        base = [v for m, v in best.items() if m != "bnb" and v is not None]
        b = best["bnb"]
        cheapest = ("--" if b is None else "yes" if not base or b < min(base) * (1 - 1e-9)
                    else "tie" if b <= min(base) * (1 + 1e-9) else "no")
        bnb_recs = [r for r in per.get("bnb", []) if usable(r, "cost_usd_per_mtok")]
        win = min(bnb_recs, key=lambda r: r["cost_usd_per_mtok"]) if bnb_recs else None
        gain = min(base) / b if base and b else None
        out.append([lat, bw, *shown, cheapest, "--" if gain is None else f"{gain:.3f}",
                    win["stages_per_token"] if win else "--", ", ".join(mixes)])
    return out


def mu1_rows(rows: Sequence[Row], free: dict[tuple, dict[str, Row]]) -> list[list[Any]]:
    """The μ = 1 AFD / CAD plans beside the sweep's (μ free): μ, cost, occupancy."""
    out = []
    for r in rows:
        ref = free.get(r.key, {}).get(r.rec["method"])
        if r.figs is None or ref is None or ref.figs is None:
            continue
        out.append([r.key[0], r.rec["method"], f"{ref.figs.microbatches} → 1",
                    f"{ref.cost:.4g} → {r.cost:.4g}",
                    f"{100 * ref.figs.occupancy:.1f} → {100 * r.figs.occupancy:.1f}"])
    return out


