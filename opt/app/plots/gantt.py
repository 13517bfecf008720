"""Per-device Gantt charts of a P1 schedule (like DOPS Fig. 11) and its utilisation plot.

:func:`plot_gantt` draws one row per device with three lanes: compute (prefill and decode
operators in two colours), outgoing transfers, and the device's weight-load port (evictions as
ticks). Full-size schedules have ~500 k events, so bars are drawn with ``broken_barh`` (one
PolyCollection per lane and category) after merging, per lane and category, intervals closer
than one pixel (``resolution`` columns across the window): the picture is the same as drawing
every event, at a fraction of the cost. ``window=(start, end)`` (the instance's time unit)
zooms in; events are clipped to it.

:func:`plot_utilisation` draws the busy fraction over time of the NPU and PIM classes and their
co-utilisation (:mod:`opt.placement.utilisation`, DOPS Eq. 5), and per-device utilisation bars.

matplotlib is the optional ``plot`` extra, imported inside the functions. The schedule is
validated first (an invalid one raises :class:`opt.placement.schedule_error.ScheduleError`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from opt.app.plots.common import _pyplot, _save
from opt.common.errors import InputError
from opt.common.units import TIME_UNITS
from opt.placement.instance import MAX_TICKS, PlacementInstance
from opt.placement.utilisation import busy_profile, compute_events, utilisation
from opt.placement.validator import validate_placement

#: Lane order within a device row, top to bottom, and their colours per category.
LANES = ("compute", "transfer", "load")
COLOURS = {"prefill": "#1f77b4", "decode": "#ff7f0e", "other": "#7f7f7f",
           "transfer": "#d62728", "load": "#2ca02c"}


def parse_window(text: str | None) -> tuple[int, int] | None:
    """``"START:END"`` (integers in the instance's time unit; either side may be empty:
    ``":5000"``, ``"1000:"``) → (start, end) with None sides resolved later; None → None."""
    if text is None:
        return None
    lo, sep, hi = str(text).partition(":")
    try:
        start = float(lo) if lo.strip() else 0.0
        end = float(hi) if hi.strip() else -1.0
    except ValueError:
        raise InputError(f"expected START:END in the instance's time unit, got {text!r}",
                         field="window") from None
    if not (sep and math.isfinite(start) and math.isfinite(end)):
        raise InputError(f"expected START:END, finite numbers in the instance's time unit, "
                         f"got {text!r}", field="window")
    return check_window((int(start), int(end)))


def check_window(window: tuple[int, int] | None) -> tuple[int, int] | None:
    """``window`` = (start, end) in ticks (end < 0: the makespan) when it is two integers with
    0 ≤ start < end ≤ MAX_TICKS (or end < 0); else InputError naming ``window``."""
    if window is None:
        return None
    try:
        start, end = window
    except (TypeError, ValueError):
        raise InputError(f"expected (start, end), got {window!r}", field="window") from None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
               for v in (start, end)) or not 0 <= start <= MAX_TICKS or end > MAX_TICKS \
            or (end >= 0 and end <= start):
        raise InputError(f"expected integers 0 ≤ START < END ≤ 2^53 ticks (END < 0: the "
                         f"makespan), got {window!r}", field="window")
    return int(start), int(end)


def merge_close(start: np.ndarray, end: np.ndarray, gap: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals whose gap is at most ``gap`` (sorted, disjoint output)."""
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1] + gap
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def _events(inst: PlacementInstance, solution: dict[str, Any]) -> list[tuple[str, str, np.ndarray,
                                                                          np.ndarray, np.ndarray]]:
    """(lane, category, device, start, end) groups of every event of the solution."""
    dindex = inst.device_index
    dev, start, end, task = compute_events(inst, solution)
    phase = inst.phase[task] if inst.phase is not None else np.full(len(task), -1)
    groups = [("compute", name, dev[phase == code], start[phase == code], end[phase == code])
              for code, name in ((0, "prefill"), (1, "decode"), (-1, "other"))]
    for lane, key, events in (("transfer", "from", solution.get("transfers") or ()),
                              ("load", "device", solution.get("loads") or ())):
        arr = np.array([(dindex[ev[key]], ev["start"], ev["end"]) for ev in events],
                       dtype=np.int64).reshape(-1, 3)
        groups.append((lane, lane, arr[:, 0], arr[:, 1], arr[:, 2]))
    return groups


def _axis_scale(unit: str) -> tuple[float, str]:
    """Ticks → axis units: milliseconds for physical units, raw ticks for ``unit``."""
    if unit == "unit":
        return 1.0, "time (ticks)"
    return TIME_UNITS[unit] / 1e-3, "time (ms)"


def plot_gantt(inst: PlacementInstance, solution: dict[str, Any], path: str | Path, *,
               window: tuple[int, int] | None = None, resolution: int = 2000,
               title: str | None = None) -> dict[str, Any]:
    """:func:`figure_gantt` written to ``path`` (PNG); returns its numbers and the path."""
    fig, info = figure_gantt(inst, solution, window=window, resolution=resolution, title=title)
    return {"path": _save(fig, path), **info}


def figure_gantt(inst: PlacementInstance, solution: dict[str, Any], *,
                 window: tuple[int, int] | None = None, resolution: int = 2000,
                 title: str | None = None) -> tuple[Any, dict[str, Any]]:
    """Per-device Gantt chart of ``solution``: the matplotlib Figure and its numbers.

    window: (start, end) in the instance's time unit (end < 0: the makespan); resolution:
    pixel columns across the window (intervals closer than one column are merged per lane and
    category). The numbers: the events and bars drawn per lane, the window and the
    utilisation."""
    window = check_window(window)
    metrics = validate_placement(inst, solution)
    plt = _pyplot()
    makespan = metrics.makespan
    lo, hi = window if window is not None else (0, -1)
    hi = makespan if hi < 0 else hi
    if hi <= lo:
        hi = lo + 1
    gap = (hi - lo) / max(1, resolution)
    scale, xlabel = _axis_scale(inst.time_unit)
    n_dev = inst.n_devices
    fig, ax = plt.subplots(figsize=(12, 1.1 + 0.75 * n_dev))
    lane_h = 0.8 / len(LANES)
    counts: dict[str, dict[str, int]] = {lane: {"events": 0, "bars": 0} for lane in LANES}
    drawn = set()
    for lane, cat, dev, start, end in _events(inst, solution):
        keep = (end > lo) & (start < hi) & (end > start)
        dev, start, end = dev[keep], np.maximum(start[keep], lo), np.minimum(end[keep], hi)
        counts[lane]["events"] += int(keep.sum())
        for d in np.unique(dev):
            s, e = merge_close(start[dev == d], end[dev == d], gap)
            counts[lane]["bars"] += len(s)
            y = n_dev - 1 - d + 0.4 - (LANES.index(lane) + 1) * lane_h
            ax.broken_barh(np.column_stack([s * scale, (e - s) * scale]), (y, lane_h * 0.9),
                           facecolors=COLOURS[cat], edgecolors="none",
                           label=None if cat in drawn else cat)
            drawn.add(cat)
    ev = [(inst.device_index[x["device"]], x["time"]) for x in solution.get("evictions") or ()
          if lo <= x["time"] <= hi]
    if ev:
        d_ev, t_ev = np.array(ev).T
        y = n_dev - 1 - d_ev + 0.4 - len(LANES) * lane_h
        ax.vlines(t_ev * scale, y, y + lane_h * 0.9, colors="black", lw=0.6, label="eviction")
    ax.set_yticks(range(n_dev))
    ax.set_yticklabels([f"{d.name}\n({d.device_class})" for d in reversed(inst.devices)],
                       fontsize=8)
    ax.set_ylim(-0.6, n_dev - 0.4)
    ax.set_xlim(lo * scale, hi * scale)
    ax.set_xlabel(xlabel)
    util = metrics.utilisation
    ax.set_title(title or (f"schedule: makespan {makespan * scale:.4g} "
                           f"{xlabel.split('(')[1].rstrip(')')}; lanes per device: compute / "
                           f"transfers out / weight loads"), fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.45 / (1 + 0.7 * n_dev)),
              ncol=len(drawn) + bool(ev), frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig, {"window": [lo, hi], "makespan": makespan, "lanes": counts,
                 "evictions": len(ev), "utilisation": util}


def plot_utilisation(inst: PlacementInstance, solution: dict[str, Any], path: str | Path, *,
                     bins: int = 200, window: tuple[int, int] | None = None) -> dict[str, Any]:
    """:func:`figure_utilisation` written to ``path`` (PNG); returns its numbers and the
    path."""
    fig, info = figure_utilisation(inst, solution, bins=bins, window=window)
    return {"path": _save(fig, path), **info}


def figure_utilisation(inst: PlacementInstance, solution: dict[str, Any], *, bins: int = 200,
                       window: tuple[int, int] | None = None) -> tuple[Any, dict[str, Any]]:
    """NPU / PIM busy fraction per time bin with their co-utilisation (left) and per-device
    utilisation bars with the class and co-utilisation totals (right): the matplotlib Figure
    and the numbers of :func:`opt.placement.utilisation.utilisation`."""
    window = check_window(window)
    rep = utilisation(inst, solution)
    plt = _pyplot()
    if window is not None and window[1] < 0:
        window = (window[0], rep.makespan)
    prof = busy_profile(inst, solution, bins=bins, window=window)
    scale, xlabel = _axis_scale(inst.time_unit)
    mid = (prof["edges"][:-1] + prof["edges"][1:]) / 2 * scale
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 1.3]})
    for c in rep.class_busy:
        ax.plot(mid, prof[c], lw=1.2, label=f"{c} busy ({rep.class_busy[c]:.1%} overall)")
    if prof["co"] is not None:
        ax.fill_between(mid, 0, prof["co"], color="black", alpha=0.25,
                        label=f"NPU and PIM both busy ({rep.co_utilisation:.1%})")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("busy fraction per bin")
    ax.set_title("class busy fraction over time (≥ 1 device of the class computing)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, alpha=0.3)
    names = list(rep.device) + [f"all {c}" for c in rep.class_busy] + \
        (["NPU∧PIM"] if rep.co_utilisation is not None else [])
    values = list(rep.device.values()) + list(rep.class_busy.values()) + \
        ([rep.co_utilisation] if rep.co_utilisation is not None else [])
    colours = ["#1f77b4"] * len(rep.device) + ["#2ca02c"] * len(rep.class_busy) + ["black"]
    bx.barh(range(len(names)), values, color=colours[:len(names)])
    bx.set_yticks(range(len(names)))
    bx.set_yticklabels(names, fontsize=8)
    bx.invert_yaxis()
    bx.set_xlim(0, 1)
    bx.set_xlabel("fraction of the makespan")
    bx.set_title("utilisation (DOPS Eq. 5)", fontsize=10)
    for i, v in enumerate(values):
        bx.text(min(v + 0.02, 0.85), i, f"{v:.1%}", va="center", fontsize=7)
    fig.tight_layout()
    return fig, rep.to_dict()
