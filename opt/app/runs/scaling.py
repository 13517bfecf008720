"""Hardware scaling (DOPS Figs. 14 and 15): how much PIM to buy for a workload.

One method (Bifocal by default) is run on every workload of a grid (model × prefill × decode ×
batch) on a ladder of platforms (default HP0 → HP32 → HP64 → HP128). For each workload:

* speedup over the first platform ``S_p = T_HP0 / T_p`` (T = makespan, prefill + all decode
  steps), the heatmap of Fig. 14;
* the marginal return of each PIM increment k (platform k−1 → k), in speedup gained per 32 GB
  of PIM added: ``m_k = (S_k − S_{k−1}) / (ΔPIM GB / 32)``. With the DOPS ladder the increments
  are +32 GB, +32 GB, +64 GB, so HP64 → HP128 is charged for two 32 GB units;
* the *highest-payoff point*: the platform at the end of the increment with the largest m_k
  (Fig. 15's marker; the first platform when no increment has m_k > 0: buying PIM does not
  pay), and the *saturation point*: the smallest platform whose speedup is within 5 % of the
  best on the ladder.

Runs are resumable: one JSON record per (workload, platform) under
``<out>/<model>/<platform>/p<prefill>-d<decode>-b<batch>/<method>.json`` (the layout and record
format of :mod:`opt.app.runs.sweep`, whose grid, records, cache checks and progress bar are reused). Each workload
is scheduled by :func:`opt.app.runs.replay_schedules.validated_heuristic` unless the caller passes
another ``solve(instance, method) -> Result``.

Reduced instances: ``layers`` builds only the first k layers (as ``hetopt sweep placement
--layers``). Alone that removes the memory pressure that decides where PIM pays off (k layers'
weights fit anywhere), so ``scale_capacity`` (default on with ``layers``) multiplies every
device's weight capacity by k / L (L = the card's layers): the weights-to-capacity ratio of
the full model is kept, so whether weights must be streamed over PCIe (HP0 with Llama-2-13B)
or stay resident is the same as at full size. What still changes: per step, embedding and LM
head weigh k/L times more against the layers, and all absolute times are smaller.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.app.plots.common import _pyplot, _save
from opt.app.runs.replay_schedules import validated_heuristic
from opt.app.runs.sweep import (
    Progress,
    SolveFn,
    _Failed,
    aborting,
    build_failed_record,
    check_workloads,
    grid,
    make_record,
    placement_slot,
    precision_tag,
    record_path,
    same_settings,
    solve_settings,
    trusted_record,
    workload_precision,
)
from opt.common.errors import InputError
from opt.common.fingerprint import seal
from opt.common.jsonio import write_json_atomic
from opt.common.report import table
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement

DEFAULT_PLATFORMS = ("HP0", "HP32", "HP64", "HP128")
#: The DOPS grid (Fig. 14): batch, prefill, decode.
PAPER_BATCH, PAPER_PREFILL, PAPER_DECODE = (1, 4, 8, 16), (128, 512, 1024, 2048), \
    (128, 256, 512, 1024)
#: PIM capacity unit of the marginal return (GB), one AiM pair.
UNIT_GB = 32.0
#: Saturation: the smallest platform within this fraction of the best speedup.
SATURATION = 0.05


def pim_gb(catalog, platform: str) -> float:
    """Total PIM memory of ``platform`` in GB (decimal, as the platform names)."""
    spec = catalog.platform(platform)
    total = 0.0
    for _, kind in spec.device_names():
        dev = catalog.device(kind)
        if dev.device_class == "pim" and dev.memory_bytes is not None:
            total += dev.memory_bytes
    return total / 1e9


def scaled_capacity(inst, fraction: float):
    """``inst`` with every finite device memory multiplied by ``fraction``: the weight capacity
    becomes memory × fraction minus the KV share the builder reserved (``meta.kv_reserved_bytes``,
    already that of the instance's layers)."""
    kv = (inst.meta or {}).get("kv_reserved_bytes") or {}

    def cap(d):
        held = kv.get(d.name, 0)
        return max(0, int((d.weight_capacity + held) * fraction) - held)

    devices = tuple(dataclasses.replace(d, weight_capacity=cap(d))
                    if d.weight_capacity is not None else d for d in inst.devices)
    meta = {**inst.meta, "capacity_scale": fraction}
    return dataclasses.replace(inst, devices=devices, meta=meta)


def _reusable(rec: Any, layers: int | None, scale: bool, method: str) -> bool:
    return isinstance(rec, dict) and rec.get("layers") == layers and rec.get("method") == method \
        and bool(rec.get("capacity_scaled", False)) == scale and "makespan" in rec \
        and rec.get("kv_reserved") is True \
        and rec.get("status") not in (None, "ERROR")


@dataclass(frozen=True)
class ScalingOptions:
    """How :func:`run_scaling` builds, caches and runs its records.

    ``method``: the placement method; ``layers``: transformer layers per instance (None: the
    model's all); ``scale_capacity``: scale NPU/PIM capacity with ``layers`` (None: yes when
    ``layers`` is given); ``paper_precision``: each model in DOPS' precision
    (:func:`opt.app.runs.sweep.workload_precision`); ``resume``: reuse trusted records;
    ``progress``: the bar on stderr (None: silent)."""

    method: str = "bifocal"
    layers: int | None = None
    scale_capacity: bool | None = None
    paper_precision: bool = False
    resume: bool = True
    progress: Progress | None = None


def run_scaling(models: Sequence[str], platforms: Sequence[str], prefill: Sequence[int],
                decode: Sequence[int], batch: Sequence[int], out: str | Path,
                solve: SolveFn | None = None, *, catalog: Any, cards: Any,
                options: ScalingOptions | None = None) -> list[tuple[dict[str, Any], bool]]:
    """Solve every (workload, platform) with the method of ``options``; (record, was_cached)
    in grid order. Each record is written as soon as it finishes; a rerun reuses records of
    the same build (layers, capacity scaling, method, precision)."""
    opts = options or ScalingOptions()
    solve = validated_heuristic if solve is None else solve
    if len(set(platforms)) < 2:
        raise InputError("scaling needs at least two platforms", field="platforms")
    # capacity scaling only means something for reduced (--layers) builds
    scale = opts.layers is not None and (True if opts.scale_capacity is None
                                         else bool(opts.scale_capacity))
    wls = grid(models, platforms, prefill, decode, batch)
    check_workloads(wls, catalog=catalog, cards=cards, layers=opts.layers)
    run = _Scaling(Path(out), solve, catalog, cards, opts, scale,
                   solve_settings(solve, opts.method))
    progress = opts.progress
    done: list[tuple[dict[str, Any], bool]] = []
    with aborting(progress):
        for wl in wls:
            if progress is not None:
                progress.start(f"{wl.label()} {opts.method}")
            rec, seconds = run.record(wl)
            done.append((rec, seconds is None))
            if progress is not None:
                progress.finish_item(seconds)
    return done


@dataclass(frozen=True)
class _Scaling:
    """One scaling run's fixed inputs; :meth:`record` makes or reuses one workload's record."""

    out: Path
    solve: SolveFn
    catalog: Any
    cards: Any
    opts: ScalingOptions
    scale: bool
    settings: dict[str, Any] | None

    def cached(self, wl: Any) -> dict[str, Any] | None:
        """The trusted record of ``wl`` under this build, if any (None: compute it)."""
        if not self.opts.resume:
            return None
        layers, method = self.opts.layers, self.opts.method
        tag = precision_tag(workload_precision(wl.model, self.opts.paper_precision))
        return trusted_record(record_path(self.out, wl, method),
                              lambda r: _reusable(r, layers, self.scale, method)
                              and r.get("precision", "fp16/fp16/fp16") == tag
                              and same_settings(r, self.settings),
                              slot=placement_slot(wl, method))

    def record(self, wl: Any) -> tuple[dict[str, Any], float | None]:
        """``wl``'s record and the seconds it took (None: reused from the cache)."""
        rec = self.cached(wl)
        if rec is not None:
            return rec, None
        t0 = time.perf_counter()
        layers, method = self.opts.layers, self.opts.method
        path = record_path(self.out, wl, method)
        card = self.cards[wl.model]
        prec = workload_precision(wl.model, self.opts.paper_precision)
        try:
            inst = build_placement(card, self.catalog.platform(wl.platform), self.catalog,
                                   Workload(wl.prefill, wl.decode, wl.batch),
                                   BuildOptions(layers=layers, precision=prec))
        except InputError as exc:  # e.g. the KV cache does not fit HP0's NPU
            rec = build_failed_record(wl, method, str(exc), layers=layers, tp=1,
                                      precision=precision_tag(prec),
                                      wall_s=time.perf_counter() - t0)
            write_json_atomic(seal(rec), path)
            return rec, time.perf_counter() - t0
        if self.scale:
            inst = scaled_capacity(inst, layers / card.layers)
        try:
            result = self.solve(inst, method)
        except InputError as exc:
            result = _Failed(str(exc))
        rec = make_record(wl, method, result, inst, layers=layers, tp=1,
                          wall_s=time.perf_counter() - t0, settings=self.settings)
        rec["capacity_scaled"] = self.scale
        if isinstance(result, _Failed):
            rec["error"] = result.error
        rec = seal(rec)
        write_json_atomic(rec, path)
        return rec, time.perf_counter() - t0


# ---- summaries ----------------------------------------------------------------------------------

def summarise(records: Sequence[dict[str, Any]], platforms: Sequence[str], catalog
              ) -> list[dict[str, Any]]:
    """Per (model, prefill, decode, batch): makespan per platform (ticks), speedup over the
    first platform, marginal return per increment (speedup per 32 GB), highest-payoff and
    saturation platforms. Workloads missing a platform's makespan get None entries."""
    plats = list(dict.fromkeys(platforms))
    gb = {p: pim_gb(catalog, p) for p in plats}
    by_wl: dict[tuple, dict[str, Any]] = {}
    for r in records:
        key = (r["model"], r["prefill"], r["decode"], r["batch"])
        by_wl.setdefault(key, {})[r["platform"]] = r.get("makespan")
    rows = []
    for (model, p, d, b), ms in by_wl.items():
        base = ms.get(plats[0])
        speed = {pl: (base / ms[pl] if base and ms.get(pl) else None) for pl in plats}
        marg = {}
        for a, c in zip(plats, plats[1:]):
            units = (gb[c] - gb[a]) / UNIT_GB
            sa, sc = speed[a], speed[c]
            marg[f"{a}->{c}"] = (sc - sa) / units if sa is not None and sc is not None \
                and units > 0 else None
        valid = {k: v for k, v in marg.items() if v is not None}
        best_inc = max(valid, key=valid.get) if valid else None
        if best_inc is not None and valid[best_inc] <= 0:
            best_inc = None  # no increment pays: stay on the first platform
        sp_valid = {pl: s for pl, s in speed.items() if s is not None}
        top = max(sp_valid.values()) if sp_valid else None
        sat = next((pl for pl in plats if pl in sp_valid
                    and sp_valid[pl] >= (1 - SATURATION) * top), None) if top else None
        rows.append({"model": model, "prefill": p, "decode": d, "batch": b,
                     "makespan": {pl: ms.get(pl) for pl in plats}, "speedup": speed,
                     "marginal": marg, "best_increment": best_inc,
                     "payoff_platform": best_inc.split("->")[1] if best_inc
                     else (plats[0] if valid else None),
                     "saturation_platform": sat})
    rows.sort(key=lambda r: (r["model"], r["batch"], r["prefill"], r["decode"]))
    return rows


def render(summary: Sequence[dict[str, Any]], platforms: Sequence[str]) -> str:
    """Speedup heatmap (as a table) and marginal returns with the payoff increment marked."""
    plats = list(dict.fromkeys(platforms))
    incs = [f"{a}->{c}" for a, c in zip(plats, plats[1:])]
    heads = ["model", "batch", "prefill", "decode"] + [f"S {p}" for p in plats[1:]] + \
        [f"m {i}" for i in incs] + ["payoff", "saturates"]
    rows = []
    for r in summary:
        marks = [("*" if i == r["best_increment"] else "") for i in incs]
        rows.append([r["model"], r["batch"], r["prefill"], r["decode"],
                     *[r["speedup"][p] for p in plats[1:]],
                     *[(f"{r['marginal'][i]:.3f}{m}" if r["marginal"][i] is not None else None)
                       for i, m in zip(incs, marks)],
                     r["payoff_platform"], r["saturation_platform"]])
    note = (f"S = makespan on {plats[0]} / makespan on the platform; m = speedup gained per "
            f"{UNIT_GB:g} GB of PIM added by the increment; * = highest-payoff increment; "
            f"saturates = smallest platform within {SATURATION:.0%} of the best speedup")
    return table(heads, rows) + "\n" + note


def insight_table(summary: Sequence[dict[str, Any]], platforms: Sequence[str]
                  ) -> list[dict[str, Any]]:
    """For each factor (prefill, decode, batch, model): mean position of the payoff point and
    of the saturation point (0 = first platform … n−1) at each level of the factor, averaged
    over the other factors — the data behind DOPS' four scaling insights."""
    plats = list(dict.fromkeys(platforms))
    pos = {p: i for i, p in enumerate(plats)}
    out = []
    for factor in ("prefill", "decode", "batch", "model"):
        levels: dict[Any, list[dict[str, Any]]] = {}
        for r in summary:
            levels.setdefault(r[factor], []).append(r)
        for level, rs in sorted(levels.items(), key=lambda kv: str(kv[0]).zfill(8)):
            pay = [pos[r["payoff_platform"]] for r in rs if r["payoff_platform"]]
            sat = [pos[r["saturation_platform"]] for r in rs if r["saturation_platform"]]
            top = [r["speedup"][plats[-1]] for r in rs if r["speedup"][plats[-1]] is not None]
            out.append({"factor": factor, "level": level, "workloads": len(rs),
                        "mean_payoff_index": sum(pay) / len(pay) if pay else None,
                        "mean_saturation_index": sum(sat) / len(sat) if sat else None,
                        f"mean_speedup_{plats[-1]}": sum(top) / len(top) if top else None})
    return out


def plot_scaling(summary: Sequence[dict[str, Any]], platforms: Sequence[str],
                 out_dir: str | Path) -> list[str]:
    """Per model: ``scaling-<model>.png`` (Fig. 14-like heatmaps of speedup over the first
    platform, one panel per larger platform, rows = batch × prefill, columns = decode) and
    ``marginal-<model>.png`` (Fig. 15-like marginal return per increment for every workload,
    the highest-payoff increment marked). matplotlib is imported lazily (``plot`` extra)."""

    plt = _pyplot()
    import numpy as np

    plats = list(dict.fromkeys(platforms))
    incs = [f"{a}->{c}" for a, c in zip(plats, plats[1:])]
    paths = []
    for model in sorted({r["model"] for r in summary}):
        rs = [r for r in summary if r["model"] == model]
        rows_k = sorted({(r["batch"], r["prefill"]) for r in rs})
        cols = sorted({r["decode"] for r in rs})
        fig, axes = plt.subplots(1, len(plats) - 1, figsize=(4 * (len(plats) - 1), 0.35 *
                                                             len(rows_k) + 2), squeeze=False,
                                 constrained_layout=True)
        vals = [r["speedup"][p] for r in rs for p in plats[1:] if r["speedup"][p]]
        vmax = max(vals) if vals else 1.0
        for ax, pl in zip(axes[0], plats[1:]):
            grid_v = np.full((len(rows_k), len(cols)), np.nan)
            for r in rs:
                if r["speedup"][pl] is not None:
                    grid_v[rows_k.index((r["batch"], r["prefill"])), cols.index(r["decode"])] = \
                        r["speedup"][pl]
            im = ax.imshow(grid_v, cmap="viridis", vmin=1.0 if vmax > 1 else None, vmax=vmax,
                           aspect="auto")
            for (i, j), v in np.ndenumerate(grid_v):
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.6 * vmax else "black")
            ax.set_xticks(range(len(cols)), [str(c) for c in cols])
            ax.set_yticks(range(len(rows_k)), [f"b{b} p{p}" for b, p in rows_k]
                          if ax is axes[0][0] else [])
            ax.set_xlabel("decode steps")
            ax.set_title(f"{pl} speedup over {plats[0]}")
        fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
        fig.suptitle(model)
        paths.append(_save(fig, Path(out_dir) / f"scaling-{model}.png"))

        fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
        x = np.arange(len(incs))
        for r in rs:
            y = [r["marginal"][i] if r["marginal"][i] is not None else np.nan for i in incs]
            ax.plot(x, y, color="0.6", lw=0.8, alpha=0.7)
            if r["best_increment"]:
                k = incs.index(r["best_increment"])
                ax.plot([k], [y[k]], "r*", ms=7)
        ax.set_xticks(x, incs)
        ax.set_ylabel(f"speedup gained per {UNIT_GB:g} GB PIM")
        ax.set_title(f"{model}: marginal return per PIM increment (* = highest payoff)")
        ax.axhline(0, color="k", lw=0.5)
        paths.append(_save(fig, Path(out_dir) / f"marginal-{model}.png"))
    return paths
