"""Exact P2 weight-layout models (problems.md §2) with CP-SAT.

Joint placement + format (:func:`solve_layout_cpsat`)
    The P1 model of :mod:`models.placement.cpsat` with a format decision per block: each load
    interval lasts the chosen format's load duration on its device, and the memory budget is a
    knapsack over the formats' storage. Exact over schedules without evictions (as the P1
    model); small instances only.

Format-only for a fixed placement and orders (:func:`solve_format_only`)
    Given a base schedule (the ``initial_solution``, else the Bifocal/Linear schedule, or the
    one of the heuristic named by parameter ``base``, which the caller computes), keep every task's device, the order of
    the tasks on each device, of the transfers on each channel and of the load events and
    evictions on each device, and choose the formats and all start times to minimise the
    makespan. What remains is a precedence network whose load arcs have format-dependent
    lengths, plus the budget knapsack: no disjunctions, so it scales to instances of thousands
    of tasks. Exact *for the fixed placement and orders* (not for P2); the base schedule with
    its own formats is a feasible point, so the optimum is never worse than the base.

    Keeping the per-device order of load starts and evictions (an eviction may not move after
    a later load, nor a load before an earlier eviction) keeps the sequence of resident sets,
    so capacities hold; every task stays served by the residency that served it in the base
    (loaded before its start, evicted strictly after it). Zero-length tasks and transfers
    occupy nothing (problems.md §1.2) and are left out of the orders. Under ``load_timing:
    at_use`` every load also starts after the dispatch of the task it serves in the base
    (problems.md §1.2 rule 5); under ``load_timing: overlap`` too, and the task a load serves in
    the base (the first user ending at or after the load's end) may compute while it loads: its
    end, not its start, comes after the load's end (every other user, a hit, starts after it).
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from models.options import SolveOptions
from models.placement.cpsat import solve_placement_cpsat
from models.placement.cpsat_run import run_cpsat
from models.placement.formats import add_storage_budget, format_literals
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from opt.placement.layout import allowed_formats, relaxed_instance
from opt.placement.load_timing import overlap_ready_by, served_by_rule
from opt.placement.lower_bounds import placement_lower_bound
from opt.placement.solution import make_solution
from opt.placement.validator import validate_placement


def solve_layout_cpsat(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Joint placement + format optimum (CP-SAT, no evictions). Parameter ``formats``: the
    allowed formats (list; default all of ``layout.formats``); other params go to CP-SAT."""
    params = dict(options.params)
    formats = allowed_formats(inst, params.pop("formats", None))
    opts = dataclasses.replace(options, params=params)  # (deterministic, log... kept)
    res = solve_placement_cpsat(inst, opts, formats=formats, method="cpsat-layout")
    res.params = {**res.params, "formats": list(formats)}
    return res


class FormatOnlyCpSat:
    """The format-only model over a base schedule (see the module docstring), built one
    constraint family at a time (the ``add_*`` methods, in this order)."""

    def __init__(self, inst: PlacementInstance, base: dict[str, Any],
                 formats: tuple[str, ...]):
        validate_placement(inst, base)  # the base must be a valid schedule of inst
        self.inst = inst
        self.model = cp_model.CpModel()
        self.constants: set[int] = set()
        n, names, tix = inst.n_tasks, inst.device_index, inst.task_index
        dev = np.zeros(n, dtype=np.int64)
        s0 = np.zeros(n, dtype=np.int64)
        for ev in base["compute"]:
            t = tix[ev["task"]]
            dev[t], s0[t] = names[ev["device"]], int(ev["start"])
        self.dev = dev
        self.dur = inst.cost[np.arange(n), dev]
        # horizon: the base makespan plus the largest possible growth of every load
        fmax = np.max([inst.block_load[f] for f in formats], axis=0)
        self.horizon = int((s0 + self.dur).max(initial=0) + fmax.clip(0).sum() * 2
                           + sum(int(e["end"]) - int(e["start"]) for e in base.get("loads", ()))
                           + 1)
        self.add_task_constraints(s0)
        self.add_transfer_constraints(base)
        self.add_format_constraints(base, formats)
        resid = self.add_load_constraints(base, formats)
        stops = self.add_eviction_constraints(base, resid)
        served = self.base_served(s0, base)
        self.add_residency_constraints(s0, resid, stops, served)
        if inst.load_timing in ("at_use", "overlap"):
            self.add_dispatch_constraints(served)
        self.set_objective()
        self.add_base_hint(s0, base)

    def add_task_constraints(self, s0: np.ndarray) -> None:
        """Start of every task, Cmax ≥ every end, and the base's task order on every device
        (positive durations only)."""
        inst, m, dur = self.inst, self.model, self.dur
        self.start = [m.new_int_var(0, self.horizon, f"s{t}") for t in range(inst.n_tasks)]
        self.cmax = m.new_int_var(0, self.horizon, "cmax")
        S = self.start
        for t in range(inst.n_tasks):
            m.add(self.cmax >= S[t] + int(dur[t]))
        self.prev_on_device: dict[int, int] = {}  # task -> the task before it on its device
        for d in range(inst.n_devices):
            ts = [t for t in np.flatnonzero((self.dev == d) & (dur > 0)).tolist()]
            ts.sort(key=lambda t: (s0[t], t))
            for a, b in zip(ts, ts[1:]):
                m.add(S[b] >= S[a] + int(dur[a]))
                self.prev_on_device[b] = a

    def add_transfer_constraints(self, base: dict[str, Any]) -> None:
        """Precedence along every edge, through a transfer start when it crosses devices;
        with contention the base's transfer order on every channel (``Links.channels``)."""
        inst, m, links, dev, dur, S = (self.inst, self.model, self.inst.links, self.dev,
                                       self.dur, self.start)
        tix = inst.task_index
        tstart0 = {(tix[e["src"]], tix[e["dst"]]): int(e["start"])
                   for e in base.get("transfers", ())}
        self.transfer: dict[int, Any] = {}
        channels: dict[int, list[tuple[int, int, Any, int]]] = {}
        for e in range(inst.n_edges):
            u, v = int(inst.edge_src[e]), int(inst.edge_dst[e])
            if dev[u] == dev[v]:
                m.add(S[v] >= S[u] + int(dur[u]))
                continue
            tr = links.transfer(int(dev[u]), int(dev[v]), int(inst.edge_bytes[e]))
            ts = m.new_int_var(0, self.horizon, f"ts{e}")
            self.transfer[e] = ts
            m.add(ts >= S[u] + int(dur[u]))
            m.add(S[v] >= ts + tr)
            if links.contention and tr > 0:
                for c in links.channels(int(dev[u]), int(dev[v])):
                    channels.setdefault(c, []).append((tstart0[(u, v)], e, ts, tr))
        for items in channels.values():
            items.sort(key=lambda x: (x[0], x[1]))
            for (_, _, ta, da), (_, _, tb, _) in zip(items, items[1:]):
                m.add(tb >= ta + da)

    def add_format_constraints(self, base: dict[str, Any], formats: tuple[str, ...]) -> None:
        """One allowed format per block, loadable wherever the base loads it; the memory
        budget over the chosen formats' storage."""
        inst, m, names, bix = self.inst, self.model, self.inst.device_index, self.inst.block_index
        used_dev: dict[int, set[int]] = {}
        for ev in base.get("loads", ()):
            used_dev.setdefault(bix[ev["block"]], set()).add(names[ev["device"]])

        def constant():
            lit = m.new_constant(1)
            self.constants.add(lit.index)
            return lit

        self.fmt_lit: dict[tuple[int, str], Any] = format_literals(
            m, inst, formats, used_dev, range(len(inst.block_ids)), constant,
            "where the base schedule loads it")
        add_storage_budget(m, inst, self.fmt_lit)

    def add_load_constraints(self, base: dict[str, Any], formats: tuple[str, ...]
                             ) -> dict[tuple[int, int], list[tuple[int, int, Any, Any]]]:
        """Every load event of the base (start, end = start + the chosen format's duration),
        in base order on each device's port. Returns the residencies per (block, device):
        (base start, base end, load start, load end), in load order."""
        inst, m, names, bix = self.inst, self.model, self.inst.device_index, self.inst.block_index
        self.loads: list[tuple[int, int, Any]] = []
        resid: dict[tuple[int, int], list[tuple[int, int, Any, Any]]] = {}
        port_events: dict[int, list[tuple[int, int, int, Any]]] = {}
        loads = sorted(base.get("loads", ()), key=lambda e: (int(e["start"]), e["block"]))
        for k, ev in enumerate(loads):
            b, d = bix[ev["block"]], names[ev["device"]]
            ls = m.new_int_var(0, self.horizon, f"ls{k}")
            opts = [(f, int(inst.block_load[f][b, d])) for f in formats if (b, f) in self.fmt_lit]
            le = m.new_int_var(0, self.horizon, f"le{k}")
            m.add(le == ls + sum(v * self.fmt_lit[(b, f)] for f, v in opts))
            self.loads.append((b, d, ls))
            resid.setdefault((b, d), []).append((int(ev["start"]), int(ev["end"]), ls, le))
            port_events.setdefault(d, []).append((int(ev["start"]), 1, k, (ls, le)))
        for d, evs in port_events.items():
            evs.sort(key=lambda x: (x[0], x[2]))
            for (_, _, _, (_, la)), (_, _, _, (lb, _)) in zip(evs, evs[1:]):
                m.add(lb >= la)  # one load port: the next load starts after this one ends
        return resid

    def base_served(self, s0: np.ndarray, base: dict[str, Any]) -> np.ndarray:
        """int64 [loads]: the task each load of the base serves under the instance's rule
        (problems.md §1.2 rule 5; −1 for none), loads in :attr:`loads` order."""
        inst = self.inst
        order = sorted(base.get("loads", ()), key=lambda e: (int(e["start"]), e["block"]))
        ld_b = np.array([b for b, _, _ in self.loads], dtype=np.int64)
        ld_d = np.array([d for _, d, _ in self.loads], dtype=np.int64)
        ld_e = np.array([int(e["end"]) for e in order], dtype=np.int64)
        self.base_ready = (overlap_ready_by(inst, self.dev, s0, s0 + self.dur, ld_b, ld_d, ld_e)
                           if inst.load_timing == "overlap" else s0)
        return served_by_rule(inst, self.dev, s0, s0 + self.dur, ld_b, ld_d, ld_e)

    def add_dispatch_constraints(self, served: np.ndarray) -> None:
        """problems.md §1.2 rule 5 (at_use, overlap): every load starts after the dispatch of
        the task it serves in the base (its inputs' arrival, the end of the task before it on
        the device); the residency constraints already end (overlap) or start (at_use) that
        task after the load."""
        inst, m, S, dur, dev = self.inst, self.model, self.start, self.dur, self.dev
        p_off, p_idx = inst.predecessors
        for (_, _, ls), v in zip(self.loads, served.tolist()):
            if v < 0:
                continue
            for e in p_idx[p_off[v]:p_off[v + 1]].tolist():
                u = int(inst.edge_src[e])
                m.add(ls >= (self.transfer[e] + inst.links.transfer(
                    int(dev[u]), int(dev[v]), int(inst.edge_bytes[e]))
                    if e in self.transfer else S[u] + int(dur[u])))
            if v in self.prev_on_device:
                a = self.prev_on_device[v]
                m.add(ls >= S[a] + int(dur[a]))

    def add_eviction_constraints(self, base: dict[str, Any],
                                 resid: dict[tuple[int, int], list[tuple[int, int, Any, Any]]]
                                 ) -> dict[tuple[int, int], list[Any]]:
        """Every eviction of the base ends its residency (after the load), and per device
        the base order of evictions and load starts (evictions first at equal times) keeps
        the sequence of resident sets. Returns each residency's eviction (None: stays)."""
        m, names, bix = self.model, self.inst.device_index, self.inst.block_index
        self.evictions: list[tuple[int, int, Any]] = []
        ev_times: dict[tuple[int, int], list[tuple[int, Any]]] = {}
        for j, ev in enumerate(base.get("evictions", ())):
            b, d = bix[ev["block"]], names[ev["device"]]
            x = m.new_int_var(0, self.horizon, f"ev{j}")
            self.evictions.append((b, d, x))
            ev_times.setdefault((b, d), []).append((int(ev["time"]), x))
        stops: dict[tuple[int, int], list[Any]] = {}
        for key, spans in resid.items():
            spans.sort(key=lambda x: x[0])
            evs = sorted(ev_times.get(key, ()), key=lambda x: x[0])
            stops[key] = []
            for i, (_, _, ls, le) in enumerate(spans):
                stop = evs[i][1] if i < len(evs) else None
                if stop is not None:
                    m.add(stop >= le)
                stops[key].append(stop)
        order_events: dict[int, list[tuple[int, int, Any]]] = {}
        for (b, d), evs in ev_times.items():
            for t0_, x in evs:
                order_events.setdefault(d, []).append((t0_, 0, x))
        for (b, d), spans in resid.items():
            for s_, _, ls, _ in spans:
                order_events.setdefault(d, []).append((s_, 1, ls))
        for d, evs in order_events.items():
            evs.sort(key=lambda x: (x[0], x[1]))  # evictions before loads at equal times
            for (_, _, a), (_, _, b_) in zip(evs, evs[1:]):
                m.add(b_ >= a)
        return stops

    def add_residency_constraints(self, s0: np.ndarray,
                                  resid: dict[tuple[int, int], list[tuple[int, int, Any, Any]]],
                                  stops: dict[tuple[int, int], list[Any]],
                                  served: np.ndarray) -> None:
        """Each task with a block is served by the base residency that served it: after that
        load ends (under ``overlap`` the task the load serves only ends after it), strictly
        before its eviction."""
        inst, m, S, ready = self.inst, self.model, self.start, self.base_ready
        serving = np.zeros(inst.n_tasks, dtype=bool)
        if inst.load_timing == "overlap":
            serving[served[served >= 0]] = True
        for t in np.flatnonzero(inst.task_block >= 0).tolist():
            key = (int(inst.task_block[t]), int(self.dev[t]))
            spans = resid[key]
            i = bisect.bisect_right([sp[1] for sp in spans], int(ready[t])) - 1
            while i >= 0 and spans[i][1] > ready[t]:
                i -= 1
            _, _, _, le = spans[i]
            m.add((S[t] + int(self.dur[t]) if serving[t] else S[t]) >= le)
            stop = stops[key][i]
            if stop is not None:
                m.add(stop >= S[t] + 1)

    def set_objective(self) -> None:
        """Minimise the makespan."""
        self.model.minimize(self.cmax)

    def add_base_hint(self, s0: np.ndarray, base: dict[str, Any]) -> None:
        """Hint the base schedule itself: its starts and formats."""
        inst, m = self.inst, self.model
        for t in range(inst.n_tasks):
            m.add_hint(self.start[t], int(s0[t]))
        base_fmt = dict(zip(inst.block_ids, inst.block_format))
        base_fmt.update(base.get("formats") or {})
        for (b, f), lit in self.fmt_lit.items():
            if lit.index not in self.constants:
                m.add_hint(lit, int(base_fmt[inst.block_ids[b]] == f))

    def extract(self, solver: cp_model.CpSolver) -> dict[str, Any]:
        inst = self.inst
        start = [solver.value(s) for s in self.start]
        formats = {inst.block_ids[b]: f for (b, f), lit in self.fmt_lit.items()
                   if solver.boolean_value(lit)}
        loads = [(b, d, solver.value(ls)) for b, d, ls in self.loads]
        evictions = [(b, d, solver.value(x)) for b, d, x in self.evictions]
        transfer = {e: solver.value(ts) for e, ts in self.transfer.items()}
        return make_solution(inst, self.dev, start, transfer, loads, evictions, formats=formats)


def solve_format_only(inst: PlacementInstance, options: SolveOptions,
                      base: dict[str, Any] | None = None) -> Result:
    """Exact formats for a fixed placement and orders (CP-SAT). The base schedule is
    ``options.initial_solution``, else ``base``: the schedule of the heuristic named by
    parameter ``base`` (default ``bifocal``), which the caller computes
    (``solvers.layout.exact.base_schedule``). Params: ``base``, ``formats`` (allowed
    formats, default all); the rest go to CP-SAT."""
    params = dict(options.params)
    t0 = time.perf_counter()
    formats = allowed_formats(inst, params.pop("formats", None))
    base_name = params.pop("base", "bifocal")
    if options.initial_solution is not None:
        base, base_name = options.initial_solution, "initial_solution"
    elif base is None:
        raise InputError("the format-only model needs a base schedule: an initial solution "
                         f"or the schedule of '{base_name}'", field="initial_solution")
    model = FormatOnlyCpSat(inst, base, formats)
    base_ms = max((int(c["end"]) for c in base["compute"]), default=0)
    res = run_cpsat(model.model, params, options, t0, "cpsat-formats", model.extract,
                    {"base": base_name, "base_makespan": base_ms, "formats_allowed":
                     list(formats), "scope": "optimal for the base schedule's placement and "
                                             "task/transfer/load orders, not for P2"})
    # the proven bound holds for the fixed placement only; for P2 report the analytic one
    res.stats["fixed_placement_bound"] = res.lower_bound
    res.stats["fixed_placement_status"] = res.status
    if res.status == "OPTIMAL":  # optimal for the fixed placement, not proven for P2
        res.status = "FEASIBLE"
    res.lower_bound = float(placement_lower_bound(relaxed_instance(inst, formats)))
    res.params = {**res.params, "base": base_name, "formats": list(formats)}
    return res
