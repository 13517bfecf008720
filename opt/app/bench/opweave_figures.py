"""OpWeave's evaluation figures (Figs. 9 and 13) checked against the records of the full cost
table (``hetopt bench --suite opweave``: the 36 cells and the partner GPUs alone at the relaxed
SLOs): ours, the paper's value, a tolerance and a verdict,
with the modelling choice behind each difference (docs/serving.md §Measured)."""

from __future__ import annotations

from typing import Any

from opt.app.bench.checks import EXACT, RATIO, Check, Tolerance, paper_figure
from opt.app.reproduction import opweave_fig13 as f13

#: (model, "GPU+GPU", context, SLO ms) → method → sweep record.
Cells = dict[tuple[str, str, int, float], dict[str, dict[str, Any]]]
METHODS = ("col", "afd", "cad", "bnb")
BASELINES = ("col", "afd", "cad")
MODELS = {"gemma-3-27b": "Gemma-3-27B", "qwen3-next-80b-a3b": "Qwen3-Next-80B-A3B"}
#: The relaxed SLO per model (Fig. 13's setting), ms.
RELAXED_SLO_MS = {"gemma-3-27b": 60.0, "qwen3-next-80b-a3b": 80.0}
#: Ratios near 1 (gains of a few %): ±0.02 absolute, half the smallest gain the paper reports
#: (1.04), so that "no gain" (1.00) never reproduces "a 4 % gain"; ±5 % would swallow it.
GAIN_NEAR_ONE = Tolerance(0.02, relative=False)
SOURCE = "OpWeave §7.2/§7.4, {fig}"
#: Fig. 9 is measured (p95 step time on a RoCE H100 cluster, §7.1); ours is the model's mean.
KIND = "(model T_rtt mean vs OpWeave's measured p95)"

#: Why our gains over the best baseline are smaller.
STRONG_BASELINES = ("docs/serving.md §OpWeave's evaluation on the calibrated model (Causes): "
                    "as in OpWeave §7.1 our baselines search the planner's configurations, "
                    "batches and μ under their disaggregation policy; the gap follows the "
                    "GPU cost model (colocated Gemma plans cheaper with measured kernels, "
                    "Qwen3-Next's full/linear attention imbalance larger)")
#: Why B&B is strictly cheapest in fewer settings.
COLOCATED_WINS = ("docs/serving.md §OpWeave's evaluation on the calibrated model: where the best plan is colocated "
                  "(10.33 / 12 stages per token) COL already finds it, since our baselines "
                  "also choose configurations, batches and μ")
#: Why no baseline configuration is infeasible.
NO_INFEASIBLE = ("docs/serving.md §OpWeave's evaluation on the calibrated model (Causes): a "
                 "network crossing costs the measured H100 inter-node send/recv (18.5 us + "
                 "b / 36.2 GB/s), so AFD / CAD's 124 / 96 crossings per token fit every SLO")
#: Why the L40S / A100 change the best plan's cost differently from OpWeave's Fig. 13.
MIX_REASON = {"H100+L40S": "docs/serving.md §OpWeave's evaluation on the calibrated model "
                           "(the L40S): where it never enters a best plan its bandwidth "
                           "per dollar loses to the H100's (on the roofline, and calibrated "
                           "on the classes of its closest measured card, the A40: "
                           "problems.md §5.3b), and an H100-only plan crosses at the H100's "
                           "own link (problems.md §3.1), so the het optimum is the hom one",
              "H100+A100": "docs/serving.md §Fig. 13 both ways: a colocated A100 plan "
                           "(a baseline) already takes most of the A100's gain; and our "
                           "baselines search configurations, batches, μ"}
#: Why adding the A100 lowers the best plan's cost more than in OpWeave.
A100_BANDWIDTH = ("docs/serving.md §Fig. 13 both ways: long-context decode is "
                  "KV-bandwidth bound in this cost model and the A100 has 1.22x the H100's "
                  "memory bandwidth per dollar (2039 GB/s at $1.74 vs 3350 GB/s at $3.49, "
                  "OpWeave Table 1), so plans on A100s gain more")
#: Fig. 13's best-baseline / OpWeave maxima and OpWeave's heterogeneous / homogeneous ratios.
FIG13_MAX = {("H100+L40S", "gemma-3-27b"): 1.54, ("H100+L40S", "qwen3-next-80b-a3b"): 1.59,
             ("H100+A100", "gemma-3-27b"): 1.89, ("H100+A100", "qwen3-next-80b-a3b"): 1.66}
FIG13_VS_HOM = {"H100+L40S": (1.04, 1.11), "H100+A100": (1.14, 1.28)}
FIG9_MAX = {"gemma-3-27b": 1.78, "qwen3-next-80b-a3b": 1.76}
#: Why reading (b) of Fig. 13 is smaller than reading (a).
FIG13_READING_B = ("docs/serving.md §Fig. 13 both ways: a heterogeneous plan on the partner "
                   "type only is that type's best single-type plan, so (b) = 1 there while "
                   "(a) is H100's cost over the partner's")


def _cost(recs: dict[str, dict[str, Any]], method: str) -> float | None:
    r = recs.get(method)
    return None if r is None else r.get("cost_usd_per_mtok")


def advantage(recs: dict[str, dict[str, Any]]) -> float | None:
    """Best feasible baseline / B&B of one cell (None: no B&B plan or no feasible baseline)."""
    base = [c for c in (_cost(recs, m) for m in BASELINES) if c is not None]
    bnb = _cost(recs, "bnb")
    return min(base) / bnb if base and bnb else None


def _select(cells: Cells, gpus: str, model: str | None = None,
            slo: dict[str, float] | None = None) -> list[tuple[tuple, dict]]:
    return [(k, v) for k, v in sorted(cells.items()) if k[1] == gpus
            and (model is None or k[0] == model) and (slo is None or k[3] == slo[k[0]])]


def fig9_checks(cells: Cells) -> list[Check]:
    """Fig. 9 (H100, both SLOs): OpWeave's maximum advantage per model, the settings where it is
    cheapest, the infeasible baseline configurations."""
    src = SOURCE.format(fig="Fig. 9")
    out = []
    for model, paper in FIG9_MAX.items():
        adv = [a for _, v in _select(cells, "H100", model) if (a := advantage(v)) is not None]
        out.append(paper_figure(f"Fig. 9 {MODELS[model]} H100: max best baseline / B&B {KIND}",
                                max(adv) if adv else None, paper, RATIO, src,
                                STRONG_BASELINES))
    h100 = _select(cells, "H100")
    cheapest = sum((a := advantage(v)) is not None and a > 1 + 1e-9 for _, v in h100)
    out.append(paper_figure(f"Fig. 9 H100: settings where B&B is strictly cheapest (of "
                            f"{len(h100)}; paper: 11 of 12) {KIND}", float(cheapest), 11.0, EXACT,
                            src, COLOCATED_WINS))
    infeasible = sum(_cost(v, m) is None for _, v in h100 for m in BASELINES)
    out.append(paper_figure(f"Fig. 9 H100: infeasible baseline configurations (of "
                            f"{3 * len(h100)}; paper: 8 of 36) {KIND}", float(infeasible), 8.0, EXACT,
                            src, NO_INFEASIBLE))
    return out


def fig13_checks(cells: Cells) -> list[Check]:
    """Fig. 13 (relaxed SLOs, H100 + L40S and H100 + A100): the maximum advantage over the best
    baseline per mix and model, the settings where B&B is cheapest, and heterogeneous B&B
    against homogeneous OpWeave both ways (:mod:`opt.app.reproduction.opweave_fig13`): (a)
    against H100 B&B, the default verdict, and (b) against the best single-type B&B, beside
    it; mean and maximum each."""
    src = SOURCE.format(fig="Fig. 13")
    out = []
    for (gpus, model), paper in FIG13_MAX.items():
        adv = [a for _, v in _select(cells, gpus, model, RELAXED_SLO_MS)
               if (a := advantage(v)) is not None]
        out.append(paper_figure(f"Fig. 13 {MODELS[model]} {gpus}: max best baseline / B&B",
                                max(adv) if adv else None, paper, RATIO, src,
                                MIX_REASON[gpus]))
    mixed = [v for g in FIG13_VS_HOM for _, v in _select(cells, g, slo=RELAXED_SLO_MS)]
    cheapest = sum((a := advantage(v)) is not None and a > 1 + 1e-9 for v in mixed)
    out.append(paper_figure(f"Fig. 13: settings where heterogeneous B&B is strictly cheapest "
                            f"(of {len(mixed)}; paper: all 12)", float(cheapest), 12.0, EXACT,
                            src, COLOCATED_WINS))
    both = f13.fig13_cells(cells)
    for gpus, (paper_mean, paper_max) in FIG13_VS_HOM.items():
        partner = gpus.split("+")[1]
        mine = [c for c in both if c.partner == partner]
        split = sum(len(c.gpus) == 2 for c in mine)
        for reading, label, reason in (
                ("a", "homogeneous H100 B&B / heterogeneous B&B (default)",
                 f"{f13.WHY_A}; " + (MIX_REASON[gpus] if gpus == "H100+L40S"
                                      else A100_BANDWIDTH)),
                ("b", "best single-type B&B / heterogeneous B&B (§3.3 G_het, beside)",
                 f"{FIG13_READING_B}; het plans using both types: {split} of {len(mine)}")):
            mu, mx, n, _ = f13.reading_stats(mine, partner, reading)
            for stat, ours, paper in (("mean", mu, paper_mean), ("max", mx, paper_max)):
                out.append(paper_figure(f"Fig. 13 {gpus}: {label}, {stat} of {n}", ours, paper,
                                        GAIN_NEAR_ONE, src, reason))
    return out


def opweave_checks(cells: Cells) -> list[Check]:
    """Every OpWeave figure the cost table can be compared with."""
    return fig9_checks(cells) + fig13_checks(cells)
