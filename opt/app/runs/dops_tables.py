"""The DOPS evaluation side by side (issue 22, DOPS §6.2–6.3): tables computed from the records
of ``hetopt sweep placement`` (:mod:`opt.app.runs.sweep`) over the seven models on their platforms.

Every number comes from validated sweep records (ERROR and invalid records never count);
speedups are PD's makespan over the method's (model ticks, machine-independent). The paper's
values are DOPS' own (§6.2: Figs. 7, 10 and the sweep's geometric means in the text).
Nothing here is fitted to them: a verdict is ``reproduced`` when ours is within the stated
tolerance, else ``differs``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opt.app.runs.bench_checks import RATIO
from opt.app.runs.sweep import geomean, speedups, usable, workload_key

#: Model → (platform, DOPS' geometric-mean Bifocal speedup over PD) (DOPS §6.2, text).
PAPER_GEOMEAN: dict[str, tuple[str, float]] = {
    "dops-qwen-1.8b": ("HP32", 2.23), "dops-qwen-7b": ("HP32", 1.36),
    "dops-qwen-14b": ("HP32", 1.44), "llama-2-7b": ("HP64", 1.20),
    "llama-2-13b": ("HP64", 1.25), "mixtral-8x7b": ("HP128", 1.72),
    "llama-2-70b": ("HP128", 1.20),
}
#: DOPS Fig. 7 (HP32): model, batch, prefills, decodes, paper's Bifocal/PD range.
PAPER_FIG7: tuple[tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[float, float]], ...] = (
    ("llama-2-7b", 16, (128, 1024), (128, 512, 1024), (1.10, 1.48)),
    ("dops-qwen-1.8b", 8, (128, 1024), (128, 512, 1024), (1.89, 2.43)),
)
#: The static policies of DOPS Table 1 besides PD.
STATIC = ("af", "pd+linear", "pd+attn", "pd+ffn")
#: Relative tolerance of a reproduced ratio (the bench's RATIO: stated, not tuned).
TOLERANCE = RATIO.amount


@dataclass(frozen=True)
class Verdict:
    """A paper figure against ours under :data:`opt.app.runs.bench_checks.RATIO` (the bench's
    rule): ``reproduced`` when ours lies within the tolerance of the paper's value, or, for a
    range, ours lies inside it widened by the tolerance; else ``differs``."""

    name: str
    paper: Any
    ours: Any
    tolerance: float
    verdict: str


def _verdict(name: str, paper: Any, ours: Any, low: float, high: float,
             values: tuple[float, ...] | None) -> Verdict:
    ok = values is not None and all(RATIO.admits(v, low, high) for v in values)
    return Verdict(name, paper, ours, TOLERANCE, "reproduced" if ok else "differs")


def verdict_value(name: str, paper: float, ours: float | None) -> Verdict:
    return _verdict(name, paper, ours, paper, paper, None if ours is None else (ours,))


def verdict_range(name: str, paper: tuple[float, float], ours: tuple[float, float] | None
                  ) -> Verdict:
    return _verdict(name, paper, ours, paper[0], paper[1], ours)


def _by_model(records: Sequence[dict[str, Any]], model: str, platform: str
              ) -> list[dict[str, Any]]:
    return [r for r in records if r["model"] == model and r["platform"] == platform]


def geomean_table(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model on its DOPS platform: workloads, geomean speedup over PD of Bifocal, HEFT and
    the best static policy per workload, the paper's Bifocal value and the verdict."""
    rows = []
    for model, (platform, paper) in PAPER_GEOMEAN.items():
        recs = _by_model(records, model, platform)
        sp = speedups(recs)
        keys = sorted({workload_key(r) for r in recs})
        bif = [sp.get((k, "bifocal")) for k in keys]
        both = [k for k, s in zip(keys, bif) if s is not None]
        if not both:
            continue
        best_static = [max((sp.get((k, m)) or 0.0 for m in ("pd", *STATIC)), default=0.0)
                       for k in both]
        bif_sp = [float(sp[(k, "bifocal")] or 0.0) for k in both]
        g = geomean(bif_sp)
        rows.append({"model": model, "platform": platform, "workloads": len(both),
                     "bifocal": g, "heft": geomean([float(sp.get((k, "heft")) or 0.0)
                                                    for k in both]),
                     "best_static": geomean(best_static), "worst_bifocal": min(bif_sp),
                     "paper": paper, "verdict": verdict_value(model, paper, g).verdict})
    return rows


def static_winners(records: Sequence[dict[str, Any]]) -> dict[tuple, str]:
    """Workload key → the static policy (PD or one of DOPS Table 1's) with the shortest
    makespan."""
    best: dict[tuple, tuple[float, str]] = {}
    for r in records:
        if r["method"] in ("pd", *STATIC) and usable(r):
            k = workload_key(r)
            if k not in best or r["makespan"] < best[k][0]:
                best[k] = (r["makespan"], r["method"])
    return {k: m for k, (_, m) in best.items()}


def fig7(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """DOPS Fig. 7: Bifocal over PD per workload and the range against the paper's."""
    out = []
    for model, batch, prefills, decodes, paper in PAPER_FIG7:
        recs = [r for r in _by_model(records, model, "HP32") if r["batch"] == batch
                and r["prefill"] in prefills and r["decode"] in decodes]
        sp = speedups(recs)
        vals = {(p, d): sp.get(((model, "HP32", p, d, batch), "bifocal"))
                for p in prefills for d in decodes}
        got = [v for v in vals.values() if v is not None]
        rng = (min(got), max(got)) if len(got) == len(vals) else None
        below = sorted({m for r in recs for m in STATIC
                        if (sp.get((workload_key(r), m)) or 2.0) < 1.0})
        out.append({"model": model, "batch": batch, "speedups": vals, "range": rng,
                    "paper": paper, "static_below_pd": below,
                    "verdict": verdict_range(model, paper, rng).verdict})
    return out


def fig10(records: Sequence[dict[str, Any]], model: str = "llama-2-7b",
          platform: str = "HP64") -> list[dict[str, Any]]:
    """DOPS Fig. 10 over a model's workloads: per method the median and 90th-percentile
    speedup over PD and the median NPU, PIM and NPU–PIM co-utilisation (Eq. 5)."""
    recs = _by_model(records, model, platform)
    sp = speedups(recs)
    rows = []
    for method in dict.fromkeys(r["method"] for r in recs):
        mine = [r for r in recs if r["method"] == method and usable(r)]
        s = sorted(v for v in (sp.get((workload_key(r), method)) for r in mine) if v)
        if not s:
            continue

        def med(key: str) -> float | None:
            vals = [r[key] for r in mine if r.get(key) is not None]
            return statistics.median(vals) if vals else None

        rows.append({"method": method, "workloads": len(s), "median": statistics.median(s),
                     "p90": s[min(len(s) - 1, int(0.9 * len(s)))],
                     "u_npu": med("u_npu"), "u_pim": med("u_pim"), "u_co": med("u_co")})
    return rows


#: DOPS Insights 1–4 (§6.4, Figs. 14/15): the workloads compared, as (model,
#: prefill, decode, batch), and the increment with the largest marginal gain at the first and
#: at the last of them.
PAPER_INSIGHTS: tuple[tuple[str, str, tuple[tuple[str, int, int, int], ...],
                            tuple[str, str]], ...] = (
    ("1", "Llama-13B, batch 16, decode 1024: prefill 128 → 2048",
     (("llama-2-13b", 128, 1024, 16), ("llama-2-13b", 2048, 1024, 16)),
     ("HP0->HP32", "HP64->HP128")),
    ("2", "Llama-13B, batch 4, prefill 2048: decode 128 → 1024",
     (("llama-2-13b", 2048, 128, 4), ("llama-2-13b", 2048, 1024, 4)),
     ("HP0->HP32", "HP32->HP64")),
    ("3", "Llama-13B, prefill 2048, decode 1024: batch 1 → 4",
     (("llama-2-13b", 2048, 1024, 1), ("llama-2-13b", 2048, 1024, 4)),
     ("HP0->HP32", "HP64->HP128")),
    ("4", "batch 8, prefill 2048, decode 512: Llama-7B → 13B → 70B",
     (("llama-2-7b", 2048, 512, 8), ("llama-2-13b", 2048, 512, 8),
      ("llama-2-70b", 2048, 512, 8)),
     ("HP0->HP32", "HP64->HP128")),
)


def insights(records: Sequence[dict[str, Any]], catalog: Any,
             platforms: Sequence[str] = ("HP0", "HP32", "HP64", "HP128")
             ) -> list[dict[str, Any]]:
    """Per insight: the highest-marginal-gain increment of each workload (opt.app.runs.scaling
    summary; a workload whose first platform has no schedule says why) against the paper's
    first → last, and the verdict."""
    from opt.app.runs.scaling import summarise

    summary = {(r["model"], r["prefill"], r["decode"], r["batch"]): r
               for r in summarise(records, platforms, catalog)}
    errors = {(r["model"], r["prefill"], r["decode"], r["batch"], r["platform"]):
              r.get("error", "") for r in records if r.get("status") == "ERROR"}
    out = []
    for name, what, workloads, paper in PAPER_INSIGHTS:
        ours: list[str | None] = []
        for wl in workloads:
            row = summary.get(wl)
            err = errors.get((*wl, platforms[0]))
            if err:
                why = "KV cache > memory" if "exceeds its memory" in err else err[-60:]
                ours.append(f"{platforms[0]}: no schedule ({why})")
            elif row is None:
                ours.append(None)
            else:
                ours.append(row["best_increment"] or "none pays")
        ok = ours[0] == paper[0] and ours[-1] == paper[1]
        out.append({"insight": name, "workloads": what, "paper": paper, "ours": ours,
                    "verdict": "reproduced" if ok else "differs"})
    return out
