"""CP-SAT model of P1 placement (problems.md §1.2), restricted to schedules without evictions.

Per (task, legal device) an optional fixed-size interval sharing the task's start; no-overlap
per device; per cross-device edge and device pair a conditional delay and — when links have
contention — an optional transfer interval on the pair's channel (``full``) or on the source's
uplink and the destination's downlink (``star``); per (block, device) an optional load interval
on the device's load port that must end before any task of the block starts there; capacity as
a knapsack over loaded blocks (nothing is evicted, so loads stay resident). Under
``load_timing: at_use`` (problems.md §1.2 rule 5) a loaded (block, device) serves exactly one
user there, which starts when the load ends; the load starts after that user's inputs arrive
(a per-task arrival variable takes the precedences), and the user's interval on the device
runs from the load's start, so nothing else computes there in between (``_at_use_slots``).
Under ``load_timing: overlap`` a loaded (block, device) serves exactly one user t there: the
load starts after t's inputs arrive and ends by t's end (ls + t_load ≤ s_t + p_t), t's interval
on the device runs from min(ls, s_t) to its end, and the other users start after the load's end
(``_overlap_slots``); the bounds and redundant cuts come from the prefetch relaxation of
``models.placement.overlap`` (each load shortened by its longest user; P2: of its chosen format).

P2 (``formats`` given, problems.md §2): per block a format choice (exactly one of the allowed
formats; fixed blocks keep theirs), each load interval's length the chosen format's load
duration on its device, and the memory budget as a knapsack over the formats' storage. The
redundant constraints then use each block's cheapest allowed load per device (a relaxation).

Redundant constraints that make proofs fast: per-task heads and tails from the DAG with the
cheapest durations (S[t] ≥ head, S[t] + tail ≤ Cmax) and per (task, device) ones that count
forced transfers, per-device load releases and neighbours sharing a device
(``opt.placement.lower_bounds.device_heads_tails``: S[t] ≥ Σ_d head[t,d]·x[t,d],
S[t] + Σ_d tail[t,d]·x[t,d] ≤ Cmax); load-port energy and delivery-time cuts; the critical
path and the average-load bound on the makespan, per-device work ≤ Cmax; and lexicographic
symmetry breaking between interchangeable devices (same class, capacity, costs, loads and
links). Per group of devices with identical cost columns (``opt.placement.group_bound``;
loads, links and capacities may differ): a cumulative of capacity |group| over the tasks that
may run there (``group_cumulative``, solved with CP-SAT's timetable edge finding) and the
group energy bounds — lifted heads/tails, head–tail energy and energetic reasoning over the
tasks that can run only there (``group_energy``: start ≥ lifted head, end + lifted tail ≤
Cmax, Cmax ≥ the bound). (An edge-transportation cut — the MILP's z — was tried and left out: 5–7× slower
proofs on 1-layer LLM slices.) Zero-length tasks and loads stay out of the no-overlap
constraints: CP-SAT's no-overlap forbids a zero-size interval inside another one, problems.md §1.2 does not.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from models.options import SolveOptions
from models.placement.cpsat_run import run_cpsat
from models.placement.formats import add_storage_budget, format_literals, storage_milli
from models.placement.overlap import overlap_relaxation, shortened_loads
from opt.common.result import Result
from opt.placement.device_symmetry import interchangeable_devices
from opt.placement.group_bound import group_bounds, identical_groups
from opt.placement.instance import PlacementInstance
from opt.placement.layout import allowed_formats, relaxed_instance
from opt.placement.lower_bounds import BIG, device_heads_tails, heads_tails
from opt.placement.slo import decode_steps
from opt.placement.solution import make_solution


class PlacementCpSat:
    """The CP-SAT model and its variables (exposed for tests and warm starts), built one
    constraint family at a time (the ``add_*`` methods, in this order: the order of the
    constraints in the model is part of what makes runs reproducible)."""

    def __init__(self, inst: PlacementInstance, *, symmetry_breaking: bool = True,
                 redundant: bool = True, formats: Sequence[str] | None = None,
                 group_cumulative: bool = True, group_energy: bool = True):
        self.inst = inst
        # problems.md §1.2 rule 5 at_use: the served task's load sits in its slot on the device;
        # overlap: the served task's slot runs from min(load start, start) to its end
        self.at_use = inst.load_timing == "at_use"
        self.overlap = inst.load_timing == "overlap"
        self.model = cp_model.CpModel()
        self.constants: set[int] = set()
        # P1: the blocks' formats are given; P2: ``load_duration`` is the cheapest allowed load
        # per (block, device) (for the relaxations), the chosen format's duration is a variable
        self.formats = None if formats is None else allowed_formats(inst, formats)
        # overlap: the bounds come from its prefetch relaxation (models.placement.overlap)
        bound_inst = overlap_relaxation(inst if formats is None
                                        else relaxed_instance(inst, self.formats))
        self.load_duration: np.ndarray = bound_inst.load_duration
        head, tail_any = self._domains(bound_inst, redundant)
        self.horizon = self._serial_horizon()
        self.add_task_constraints(head, tail_any)
        self.add_transfer_constraints()
        self.add_load_constraints(redundant)
        if redundant:
            self.add_redundant_constraints(bound_inst)
        self.add_port_and_capacity_constraints()
        self.add_symmetry_breaking(symmetry_breaking)
        self.add_group_cumulative(group_cumulative)
        self.add_group_energy(group_energy, bound_inst)
        self.add_service_constraints()
        self.set_objective()

    # ---- domains --------------------------------------------------------------------------
    def _domains(self, bound_inst: PlacementInstance, redundant: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Heads and tails that bound the start variables (device-aware in the full model,
        computed once: the redundant cuts use them too; the plain model keeps device-agnostic
        ones); sets ``cmax_lb``, the makespan bound they give (the node's, restricted)."""
        self._bounds = self._heads_tails(bound_inst) if redundant else None
        if self._bounds is None:
            head, tail_any = heads_tails(bound_inst)
            self.cmax_lb = int(tail_any.max(initial=0))
            return head, tail_any
        self.cmax_lb = self._bounds["cmax_lb"]
        return self._bounds["head"], self._bounds["tail_any"]

    def _serial_horizon(self) -> int:
        """Ticks of a serial schedule of everything (every task at its slowest, every edge at
        the slowest transfer, every load at its longest format): a valid upper bound on an
        eviction-free optimum."""
        inst, links = self.inst, self.inst.links
        load_max = inst.load_duration if self.formats is None else np.max(
            [inst.block_load[f] for f in self.formats], axis=0)
        max_tr = int(links.latency.max() + math.ceil(float(inst.edge_bytes.max(initial=0))
                                                      / float(links.bandwidth.min())))
        return int(inst.cost.max(axis=1).sum() + max_tr * inst.n_edges
                   + load_max.clip(0).sum() + 1)

    # ---- constraint families --------------------------------------------------------------
    def add_task_constraints(self, head: np.ndarray, tail_any: np.ndarray) -> None:
        """Start, end and device choice of every task (exactly one legal device, end = start +
        the chosen duration), its optional interval per device, one task at a time per device
        and Cmax ≥ the end of every sink."""
        inst, m, horizon = self.inst, self.model, self.horizon
        n, cost = inst.n_tasks, inst.cost
        self.cmax = m.new_int_var(self.cmax_lb, horizon, "cmax")
        self.start = [m.new_int_var(int(head[t]), horizon - int(tail_any[t]), f"s{t}")
                      for t in range(n)]
        self.end = [m.new_int_var(0, horizon, f"e{t}") for t in range(n)]
        self.pres: dict[tuple[int, int], Any] = {}
        dev_intervals: list[list[Any]] = [[] for _ in range(inst.n_devices)]
        # at_use: a task with a block occupies its device from its load's start (when it is
        # the load's first user) to its end; those intervals come with the loads
        # (_at_use_slots), and the per-device no-overlap after them
        self.dev_intervals = dev_intervals
        self.arrive: dict[int, Any] = {}
        for t in range(n):
            legal = np.flatnonzero(cost[t] >= 0).tolist()
            lits = []
            slot = (self.at_use or self.overlap) and inst.task_block[t] >= 0
            if slot:
                self.arrive[t] = m.new_int_var(0, horizon, f"a{t}")
                m.add(self.start[t] >= self.arrive[t])
            for d in legal:
                lit = self._const(1) if len(legal) == 1 else m.new_bool_var(f"x{t}_{d}")
                self.pres[(t, d)] = lit
                lits.append(lit)
                c = int(cost[t, d])
                if c > 0 and not slot:  # CP-SAT's no-overlap forbids a zero-size interval inside another
                    dev_intervals[d].append(m.new_optional_fixed_size_interval_var(
                        self.start[t], c, lit, f"iv{t}_{d}"))
            m.add_exactly_one(lits)
            m.add(self.end[t] == self.start[t] + sum(int(cost[t, d]) * self.pres[(t, d)]
                                                     for d in legal))
        if not (self.at_use or self.overlap):
            self._device_no_overlap()
        sinks = np.flatnonzero(np.bincount(inst.edge_src, minlength=n) == 0)
        for t in sinks.tolist():
            m.add(self.cmax >= self.end[t])

    def _device_no_overlap(self) -> None:
        """One task (at_use: one task's slot) at a time per device."""
        for ivs in self.dev_intervals:
            if len(ivs) > 1:
                self.model.add_no_overlap(ivs)

    def add_transfer_constraints(self) -> None:
        """Precedence along every edge; per cross-device pair of legal devices a conditional
        delay, or — with link contention — an optional transfer interval after the edge's
        transfer start on the channels of ``Links.channels`` (one transfer at a time each)."""
        inst, m, links = self.inst, self.model, self.inst.links
        cost = inst.cost
        self.transfer_start: dict[int, Any] = {}
        self.transfer_pair: dict[tuple[int, int, int], Any] = {}
        channels: dict[int, list[Any]] = {}
        for e in range(inst.n_edges):
            u, v, nb = int(inst.edge_src[e]), int(inst.edge_dst[e]), int(inst.edge_bytes[e])
            sv = self.arrive.get(v, self.start[v])  # at_use: v's inputs' arrival ≤ its start
            m.add(sv >= self.end[u])
            du = np.flatnonzero(cost[u] >= 0).tolist()
            dv = np.flatnonzero(cost[v] >= 0).tolist()
            pairs = [(a, b, links.transfer(a, b, nb)) for a in du for b in dv if a != b]
            pairs = [p for p in pairs if p[2] > 0]
            if not pairs:
                continue
            if links.contention:
                ts = m.new_int_var(0, self.horizon, f"ts{e}")
                self.transfer_start[e] = ts
                m.add(ts >= self.end[u])
            for a, b, tr in pairs:
                both = [self.pres[(u, a)], self.pres[(v, b)]]
                if not links.contention:
                    m.add(sv >= self.end[u] + tr).only_enforce_if(both)
                    continue
                q = m.new_bool_var(f"q{e}_{a}_{b}")
                m.add_bool_and(both).only_enforce_if(q)
                m.add_bool_or([both[0].negated(), both[1].negated(), q])
                self.transfer_pair[(e, a, b)] = q
                iv = m.new_optional_fixed_size_interval_var(ts, tr, q, f"tr{e}_{a}_{b}")
                m.add(sv >= ts + tr).only_enforce_if(q)
                for c in links.channels(a, b):
                    channels.setdefault(c, []).append(iv)
        for ivs in channels.values():
            if len(ivs) > 1:
                m.add_no_overlap(ivs)

    def add_load_constraints(self, redundant: bool) -> None:
        """Per (block, device) that may run one of the block's tasks: whether the block is
        loaded there (iff some user runs there) and the load's start and end, which precede
        every user on that device (P2: the format choice first; the load lasts the chosen
        format's duration). With ``redundant`` also start ≥ the load's (cheapest) duration.
        Under ``overlap`` the users wait for the load's end in the prefetch relaxation
        (``load_end`` = start + the shortened load, models.placement.overlap), the served one
        for the load's real end only through its end (:meth:`_overlap_slots`).
        The load intervals go on the device's port (:meth:`add_port_and_capacity_constraints`)."""
        inst, m, horizon = self.inst, self.model, self.horizon
        users: dict[tuple[int, int], list[int]] = {}
        for t in np.flatnonzero(inst.task_block >= 0).tolist():
            b = int(inst.task_block[t])
            for d in np.flatnonzero(inst.cost[t] >= 0).tolist():
                users.setdefault((b, d), []).append(t)
        self.fmt_lit: dict[tuple[int, str], Any] = {}
        if self.formats is not None:
            self._format_choice(sorted({b for b, _ in users}), users)
        self.load_lit: dict[tuple[int, int], Any] = {}
        self.load_start: dict[tuple[int, int], Any] = {}
        self.load_end: dict[tuple[int, int], Any] = {}
        self.load_interval: dict[tuple[int, int], Any] = {}  # positive-length loads only (P1)
        for (b, d), ts_ in users.items():
            dur = int(self.load_duration[b, d])
            lit = m.new_bool_var(f"L{b}_{d}")
            ls = m.new_int_var(0, horizon, f"ls{b}_{d}")
            self.load_lit[(b, d)] = lit
            self.load_start[(b, d)] = ls
            full = int(inst.load_duration[b, d]) if self.formats is None else dur
            finish = self.load_end[(b, d)] = self._load_interval(b, d, lit, ls, full)
            if self.overlap:  # the relaxation's (shortened) load
                self.load_end[(b, d)] = self._shortened_end(b, d, ls, dur)
            for t in ts_:
                m.add_implication(self.pres[(t, d)], lit)
                m.add(self.start[t] >= self.load_end[(b, d)]).only_enforce_if(self.pres[(t, d)])
                if redundant:
                    m.add(self.start[t] >= dur).only_enforce_if(self.pres[(t, d)])
            m.add_bool_or([self.pres[(t, d)] for t in ts_]).only_enforce_if(lit)
            if self.at_use:
                self._at_use_slots(b, d, ts_)
            if self.overlap:
                self._overlap_slots(b, d, ts_, finish)
        if self.at_use or self.overlap:
            self._device_no_overlap()
        self.users = users
        self.avail: dict[int, Any] = {}  # first copies' ready times (add_redundant_constraints)

    def _at_use_slots(self, b: int, d: int, ts_: list[int]) -> None:
        """problems.md §1.2 rule 5 at_use for block b on device d: when loaded, the load serves
        exactly one user t (``f``), which starts when the load ends, and the load starts after
        t's inputs arrive; t's interval on d runs from the load's start (else from t's start)
        to t's end, so nothing else computes on d in between (Eq. 1). Ending the load at t's
        start loses nothing: a served load that ends earlier can be moved later within t's
        slot (no compute there, other loads of d lie in other slots)."""
        inst, m, horizon = self.inst, self.model, self.horizon
        ls, le, lit = self.load_start[(b, d)], self.load_end[(b, d)], self.load_lit[(b, d)]
        p1_zero = self.formats is None and int(self.load_duration[b, d]) == 0
        fs = []
        for t in ts_:
            f = m.new_bool_var(f"f{t}_{d}")
            fs.append(f)
            m.add_implication(f, self.pres[(t, d)])
            m.add(self.start[t] == le).only_enforce_if(f)
            m.add(ls >= self.arrive[t]).only_enforce_if(f)
            c = int(inst.cost[t, d])
            if c == 0 and p1_zero:
                continue
            occ = m.new_int_var(0, horizon, f"o{t}_{d}")
            m.add(occ == ls).only_enforce_if(f)
            m.add(occ == self.start[t]).only_enforce_if(f.negated())
            size = m.new_int_var(0, horizon, f"os{t}_{d}")
            self.dev_intervals[d].append(m.new_optional_interval_var(
                occ, size, self.start[t] + c, self.pres[(t, d)] if c > 0 else f, f"io{t}_{d}"))
        m.add(sum(fs) == lit)

    def _overlap_slots(self, b: int, d: int, ts_: list[int], finish: Any) -> None:
        """problems.md §1.2 rule 5 overlap for block b on device d (P1), the load [ls,
        ``finish``): when loaded, the load serves exactly one user t (``f``); it starts after
        t's inputs arrive and ends by t's end; t's interval on d runs from min(ls, t's start)
        (a variable at most both; lower only widens it) to t's end, so nothing else computes
        on d between the load's start and t's end; the other users start after the load's
        end (the no-overlap puts them after t's end)."""
        inst, m, horizon = self.inst, self.model, self.horizon
        ls, lit = self.load_start[(b, d)], self.load_lit[(b, d)]
        p1_zero = self.formats is None and int(inst.load_duration[b, d]) == 0
        fs = []
        for t in ts_:
            f = m.new_bool_var(f"f{t}_{d}")
            fs.append(f)
            pres = self.pres[(t, d)]
            m.add_implication(f, pres)
            m.add(ls >= self.arrive[t]).only_enforce_if(f)
            m.add(finish <= self.end[t]).only_enforce_if(f)
            m.add(self.start[t] >= finish).only_enforce_if([pres, f.negated()])
            c = int(inst.cost[t, d])
            if c == 0 and p1_zero:
                continue
            occ = m.new_int_var(0, horizon, f"o{t}_{d}")
            m.add(occ <= self.start[t])
            m.add(occ <= ls).only_enforce_if(f)
            m.add(occ == self.start[t]).only_enforce_if(f.negated())
            size = m.new_int_var(0, horizon, f"os{t}_{d}")
            self.dev_intervals[d].append(m.new_optional_interval_var(
                occ, size, self.start[t] + c, pres if c > 0 else f, f"io{t}_{d}"))
        m.add(sum(fs) == lit)

    def _shortened_end(self, b: int, d: int, ls: Any, dur: int) -> Any:
        """Under ``overlap``, the end of the load of block b on d in the prefetch relaxation
        (models.placement.overlap), which every user starts after: ls + ``dur`` (P1: the
        shortened load), or ls + the chosen format's shortened load (P2)."""
        if self.formats is None:
            return ls + dur
        inst = self.inst
        short = {f: shortened_loads(inst, inst.block_load[f]) for _, f in self.fmt_lit}
        return ls + sum(int(short[f][b, d]) * lit for (bb, f), lit in self.fmt_lit.items()
                        if bb == b)

    def _load_interval(self, b: int, d: int, lit: Any, ls: Any, dur: int) -> Any:
        """The load interval of block b on device d (P1: ``dur`` long, none when 0; P2: the
        chosen format's duration); returns the load's end (an expression in P1)."""
        inst, m = self.inst, self.model
        if self.formats is None:
            if dur > 0:
                self.load_interval[(b, d)] = m.new_optional_fixed_size_interval_var(
                    ls, dur, lit, f"ld{b}_{d}")
            return ls + dur
        opts = [(f, int(inst.block_load[f][b, d])) for f in self.formats
                if (b, f) in self.fmt_lit]
        size = m.new_int_var(min(v for _, v in opts), max(v for _, v in opts), f"ldur{b}_{d}")
        m.add(size == sum(v * self.fmt_lit[(b, f)] for f, v in opts))
        le = m.new_int_var(0, self.horizon, f"le{b}_{d}")
        self.load_interval[(b, d)] = m.new_optional_interval_var(ls, size, le, lit, f"ld{b}_{d}")
        return le

    def add_port_and_capacity_constraints(self) -> None:
        """Per device: one load at a time on its port, and the blocks loaded there fit its
        weight capacity (nothing is evicted, so loads stay resident)."""
        inst, m = self.inst, self.model
        for d in range(inst.n_devices):
            port = [iv for (_, dd), iv in self.load_interval.items() if dd == d]
            if len(port) > 1:
                m.add_no_overlap(port)
            cap = inst.devices[d].weight_capacity
            if cap is not None:
                items = [(int(inst.block_bytes[b]), lit) for (b, dd), lit in self.load_lit.items()
                         if dd == d]
                if sum(w for w, _ in items) > cap:
                    m.add(sum(w * lit for w, lit in items) <= cap)

    def add_redundant_constraints(self, bound_inst: PlacementInstance) -> None:
        """Cuts that make proofs fast: every used block is loaded somewhere and no user
        precedes its first copy (``avail``), per-device load and work energies ≤ Cmax, and
        the cuts of the heads and tails of ``bound_inst`` (:meth:`_bound_cuts`)."""
        inst, m, horizon = self.inst, self.model, self.horizon
        cost, loads, users = inst.cost, self.load_duration, self.users
        for b in sorted({b for b, _ in users}):
            devs = [d for (bb, d) in self.load_lit if bb == b]
            m.add_bool_or([self.load_lit[(b, d)] for d in devs])
            ready = []
            for d in devs:
                r = m.new_int_var(0, horizon, f"ready{b}_{d}")
                m.add(r == self.load_end[(b, d)]).only_enforce_if(self.load_lit[(b, d)])
                m.add(r == horizon).only_enforce_if(self.load_lit[(b, d)].negated())
                ready.append(r)
            avail = self.avail[b] = m.new_int_var(int(loads[b, devs].min()), horizon,
                                                  f"avail{b}")
            m.add_min_equality(avail, ready)
            for d in devs:
                # the users of b on d run one at a time after b is ready there
                m.add(self.cmax >= self.load_end[(b, d)]
                      + sum(int(cost[t, d]) * self.pres[(t, d)] for t in users[(b, d)])
                      ).only_enforce_if(self.load_lit[(b, d)])
            for t in sorted({t for d in devs for t in users[(b, d)]}):
                m.add(self.start[t] >= avail)
        for d in range(inst.n_devices):
            items = [(int(loads[b, dd]), lit) for (b, dd), lit in self.load_lit.items()
                     if dd == d]
            if items:
                m.add(sum(w * lit for w, lit in items) <= self.cmax)
            work = [(lit, int(cost[t, d])) for (t, dd), lit in self.pres.items() if dd == d]
            if work:
                m.add(sum(c * lit for lit, c in work) <= self.cmax)
        self._bound_cuts(bound_inst, base=True)

    def add_symmetry_breaking(self, enabled: bool) -> None:
        """Lexicographic symmetry breaking between interchangeable devices (same class,
        capacity, costs, loads — P2: of every format — and links): the devices of a group
        are opened in order of their first task (topological index)."""
        inst, m = self.inst, self.model
        self.symmetry_groups = interchangeable_devices(inst) if enabled else []
        if self.formats is not None:  # devices must also agree on every format's loads
            self.symmetry_groups = [
                g for g in self.symmetry_groups
                if all(np.array_equal(inst.block_load[f][:, g[0]], inst.block_load[f][:, x])
                       for f in self.formats for x in g[1:])]
        order = inst.topological_order.tolist()
        for group in self.symmetry_groups:
            opened = {d: self._const(0) for d in group}
            for t in order:
                for j in range(1, len(group)):
                    d, prev = group[j], group[j - 1]
                    if (t, d) in self.pres:
                        m.add_implication(self.pres[(t, d)], opened[prev])
                nxt = {}
                for d in group:
                    if (t, d) in self.pres:
                        o = m.new_bool_var(f"open{t}_{d}")
                        m.add_bool_or([opened[d], self.pres[(t, d)]]).only_enforce_if(o)
                        m.add_implication(opened[d], o)
                        m.add_implication(self.pres[(t, d)], o)
                        nxt[d] = o
                opened.update(nxt)

    def add_group_cumulative(self, enabled: bool) -> None:
        """Per group of devices with identical cost columns (``opt.placement.group_bound``):
        a cumulative of capacity |group| over one interval per task that may run there, of
        its (common) duration on the group — fixed when the task can run nowhere else, else
        optional and present iff the task is placed on the group. A relaxation of the
        per-device no-overlaps that lets CP-SAT reason on the group's energy (the solve
        turns on CP-SAT's timetable edge finding for it: ``CUMULATIVE_EDGE_FINDING``)."""
        inst, m = self.inst, self.model
        self.cumulative_groups = identical_groups(inst.cost) if enabled else []
        for k, group in enumerate(self.cumulative_groups):
            ivs = []
            for t in np.flatnonzero(inst.cost[:, group[0]] > 0).tolist():
                legal = np.flatnonzero(inst.cost[t] >= 0).tolist()
                c = int(inst.cost[t, group[0]])
                if set(legal) <= set(group):
                    ivs.append(m.new_fixed_size_interval_var(self.start[t], c, f"g{k}_{t}"))
                    continue
                on = m.new_bool_var(f"on{k}_{t}")
                m.add(on == sum(self.pres[(t, d)] for d in group))
                ivs.append(m.new_optional_fixed_size_interval_var(self.start[t], c, on,
                                                                  f"g{k}_{t}"))
            if len(ivs) > len(group):
                m.add_cumulative(ivs, [1] * len(ivs), len(group))

    def add_group_energy(self, enabled: bool, bound_inst: PlacementInstance) -> None:
        """The energy bounds of ``opt.placement.group_bound`` over the identical-device groups
        (lifted heads and tails, head–tail energy, energetic reasoning), from the model's
        heads and tails: start ≥ lifted head, end + lifted tail ≤ cmax, cmax ≥ the bound.
        Sets ``group_bound`` (None when off or without a group)."""
        self.group_bound: int | None = None
        if not enabled:
            return
        ok = bound_inst.cost >= 0
        pmin = np.where(ok, bound_inst.cost, BIG).min(axis=1)
        if self._bounds is not None:
            head, tail_any = self._bounds["head"], self._bounds["tail_any"]
        else:
            head, tail_any = heads_tails(bound_inst)
        gb = group_bounds(bound_inst, head, tail_any - pmin)
        if gb is None:
            return
        m = self.model
        for t in np.flatnonzero(gb.head > head).tolist():
            m.add(self.start[t] >= int(gb.head[t]))
        for t in np.flatnonzero(gb.tail > tail_any - pmin).tolist():
            m.add(self.end[t] + int(gb.tail[t]) <= self.cmax)
        self.group_bound = gb.cmax_lb
        if gb.cmax_lb > self.cmax_lb:
            m.add(self.cmax >= gb.cmax_lb)

    def add_service_constraints(self) -> None:
        """TTFT (the latest prefill end, exactly) when the objective or an SLO needs it, and
        the SLO's limits (opt.placement.slo): cmax ≤ e2e, TTFT ≤ ttft and
        cmax − TTFT ≤ ⌊mean_tpot · decode steps⌋ (cmax ≥ the makespan, so each is exact or
        stricter)."""
        inst, m, slo = self.inst, self.model, self.inst.slo
        self.ttft = None
        if inst.objective == "makespan" and (slo is None or (slo.ttft is None
                                                             and slo.mean_tpot is None)):
            if slo is not None and slo.e2e is not None:
                m.add(self.cmax <= slo.e2e)
            return
        pre = np.flatnonzero(inst.is_prefill()).tolist()
        self.ttft = m.new_int_var(0, self.horizon, "ttft")
        m.add_max_equality(self.ttft, [self.end[t] for t in pre])
        if slo is None:
            return
        if slo.e2e is not None:
            m.add(self.cmax <= slo.e2e)
        if slo.ttft is not None:
            m.add(self.ttft <= slo.ttft)
        steps = decode_steps(inst)
        if slo.mean_tpot is not None and steps:
            m.add(self.cmax - self.ttft <= math.floor(slo.mean_tpot * steps))

    def set_objective(self) -> None:
        """Minimise the instance's objective: the makespan, TTFT, or the decode time
        cmax − TTFT (opt.placement.slo)."""
        objective, ttft = self.inst.objective, self.ttft
        if objective == "makespan" or ttft is None:
            self.model.minimize(self.cmax)
        elif objective == "ttft":
            self.model.minimize(ttft)
        else:
            self.model.minimize(self.cmax - ttft)

    # ---- heads, tails and their cuts ------------------------------------------------------
    @staticmethod
    def _heads_tails(bound_inst: PlacementInstance) -> dict[str, Any]:
        """Device-agnostic and device-aware heads and tails of ``bound_inst`` (forced transfers
        count: ``opt.placement.lower_bounds.device_heads_tails``) and the makespan bound they give."""
        ok = bound_inst.cost >= 0
        head, tail = heads_tails(bound_inst)
        dev_head, dev_tail = device_heads_tails(bound_inst, max_assignments=256)
        head = np.maximum(head, np.where(ok, dev_head, BIG).min(axis=1))
        tail_any = np.maximum(tail, np.where(ok, dev_tail, BIG).min(axis=1))
        cmax_lb = int(max((head + tail_any).max(initial=0),
                          np.where(ok, dev_head + dev_tail, BIG).min(axis=1).max(initial=0)))
        return {"head": head, "tail": tail, "tail_any": tail_any, "dev_head": dev_head,
                "dev_tail": dev_tail, "cmax_lb": cmax_lb}

    def _bound_cuts(self, bound_inst: PlacementInstance, *, base: bool) -> None:
        """The redundant constraints that come from the heads and tails of ``bound_inst``: the
        model's own instance (``base``; heads are then variable domains), or a restriction of
        it to fewer legal devices (a node of ``solvers.placement.block_branching``)."""
        m, nd = self.model, bound_inst.n_devices
        bounds = self._bounds if base else self._heads_tails(bound_inst)
        head, tail = bounds["head"], bounds["tail"]
        dev_head, dev_tail = bounds["dev_head"], bounds["dev_tail"]
        cost = bound_inst.cost
        if not base:  # (the base model has it as cmax's domain)
            self.cmax_lb = bounds["cmax_lb"]
            m.add(self.cmax >= self.cmax_lb)
        for t in range(bound_inst.n_tasks):
            legal = np.flatnonzero(cost[t] >= 0).tolist()
            if not base:
                m.add(self.start[t] >= int(head[t]))
            m.add(self.end[t] + int(tail[t]) - int(cost[t, legal].min()) <= self.cmax)
            if len(legal) > 1:  # per device: start ≥ head[t, d], start + tail[t, d] ≤ cmax
                m.add(self.start[t] >= sum(int(dev_head[t, d]) * self.pres[(t, d)]
                                           for d in legal))
                m.add(self.start[t] + sum(int(dev_tail[t, d]) * self.pres[(t, d)]
                                          for d in legal) <= self.cmax)
            else:
                m.add(self.start[t] + int(dev_tail[t, legal[0]]) <= self.cmax)
        dmin = np.where(cost >= 0, cost, np.iinfo(np.int64).max).min(axis=1)
        m.add(nd * self.cmax >= int(dmin.sum()))
        users = {k: [t for t in ts if cost[t, k[1]] >= 0] for k, ts in self.users.items()}
        self._delivery_cuts(bound_inst, {k: ts for k, ts in users.items() if ts}, bounds)

    def _delivery_cuts(self, bound_inst: PlacementInstance,
                       users: dict[tuple[int, int], list[int]], bounds: dict[str, Any]) -> None:
        """Load-port energy and delivery-time cuts: after a block is ready on a device some
        user runs there with its tail (``users``: the users still legal on each device)."""
        m, nd, loads = self.model, bound_inst.n_devices, bound_inst.load_duration
        tail_any, dev_tail = bounds["tail_any"], bounds["dev_tail"]
        # port energy: the loads on d's port run one at a time, and after the last one some
        # user of its block runs with its tail: cmax ≥ Σ loads on d + the smallest such tail,
        # when d loads anything (a device without a load owes no tail: the cut held
        # unconditionally once and cut off a makespan-0 optimum, hypothesis)
        for d in range(nd):
            keys = [k for k in users if k[1] == d]
            if len(keys) < 2 or self.formats is not None:
                continue
            q_min = min(int(dev_tail[t, d]) for k in keys for t in users[k])
            loads_on_d = m.new_bool_var(f"loads_on{d}")
            for k in keys:
                m.add_implication(self.load_lit[k], loads_on_d)
            m.add(self.cmax >= sum(int(loads[b, d]) * self.load_lit[(b, d)]
                                   for b, _ in keys) + q_min).only_enforce_if(loads_on_d)
        for b in sorted({b for b, _ in users}):
            devs = [d for (bb, d) in users if bb == b]
            for d in devs:
                # delivery time: after b is ready on d, some user runs there and its tail
                q = min(int(dev_tail[t, d]) for t in users[(b, d)])
                m.add(self.load_end[(b, d)] + q <= self.cmax
                      ).only_enforce_if(self.load_lit[(b, d)])
            # no user precedes the first copy: cmax ≥ avail[b] + longest tail of a user
            block_users = {t for d in devs for t in users[(b, d)]}
            m.add(self.cmax >= self.avail[b] + int(max(tail_any[t] for t in block_users)))
        for d in range(nd):
            # one load port with delivery times: if block k is loaded on d, the loads of all
            # blocks whose users need at least as long afterwards (q ≥ q_k) precede the end of
            # the last of them, which is followed by at least q_k
            q = {b: min(int(dev_tail[t, d]) for t in users[(b, d)])
                 for (b, dd) in users if dd == d}
            for bk, qk in q.items():
                group = [b for b, qb in q.items() if qb >= qk]
                if len(group) > 1:
                    m.add(sum(int(loads[b, d]) * self.load_lit[(b, d)] for b in group) + qk
                          <= self.cmax).only_enforce_if(self.load_lit[(bk, d)])

    def restrict(self, sub: PlacementInstance, loaded: Sequence[tuple[int, int]] = (),
                 cap: int | None = None) -> PlacementCpSat:
        """A copy of this model (P1, with redundant constraints) for ``sub``, the same instance
        with fewer legal (task, device) pairs: a clone of the CP-SAT model (no rebuild) with
        the pairs ``sub`` forbids fixed to 0, the (block, device) pairs ``loaded`` loaded, the
        makespan at most ``cap``, and the redundant constraints of ``sub``'s heads and tails
        added — those are what restricting buys (solvers.placement.block_branching)."""
        if self._bounds is None or self.formats is not None:
            raise ValueError("restrict() needs a P1 model built with redundant constraints")
        node = copy.copy(self)
        node.inst, node.model = sub, self.model.clone()
        m = node.model
        for (t, d), lit in self.pres.items():
            if sub.cost[t, d] < 0:
                m.add(lit == 0)
        for key in loaded:
            m.add(self.load_lit[key] == 1)
        if cap is not None:
            m.add(self.cmax <= cap)
        node._bound_cuts(overlap_relaxation(sub), base=False)
        return node

    def _format_choice(self, blocks: list[int], users: dict[tuple[int, int], list[int]]
                       ) -> None:
        """One format per block among the allowed ones it can be loaded in on every device
        that may run one of its tasks (fixed blocks: their format); the memory budget."""
        inst, m = self.inst, self.model
        devs: dict[int, list[int]] = {}
        for b, d in users:
            devs.setdefault(b, []).append(d)
        self.fmt_lit.update(format_literals(m, inst, self.formats, devs, blocks,
                                            lambda: self._const(1),
                                            "on every device of its tasks"))
        # unused blocks take their cheapest allowed storage
        unused = 0
        for b, bid in enumerate(inst.block_ids):
            if b not in devs:
                fm = [inst.layout.fixed[bid]] if bid in inst.layout.fixed else self.formats
                unused += min(storage_milli(inst, b, f) for f in fm)
        add_storage_budget(m, inst, self.fmt_lit, unused)

    def block_formats(self, solver: cp_model.CpSolver) -> dict[str, str]:
        """The chosen format of every block (P2), or the instance's P1 formats."""
        inst = self.inst
        out = dict(zip(inst.block_ids, inst.block_format))
        for (b, f), lit in self.fmt_lit.items():
            if solver.boolean_value(lit):
                out[inst.block_ids[b]] = f
        return out

    def _const(self, value: int):
        var = self.model.new_constant(value)
        self.constants.add(var.index)
        return var

    # ---- warm start ---------------------------------------------------------------------------
    def add_hint(self, solution: dict[str, Any]) -> None:
        """Hint the primary decisions of a problems.md §1.2a solution: device and start of every task,
        which blocks are loaded where and when. (Hinting the derived transfer variables as well
        crashed OR-Tools 9.15 in our tests; CP-SAT completes the rest itself.)"""
        inst = self.inst
        names = inst.device_index
        hinted: set[int] = set()

        def hint(var, value: int) -> None:
            # one hint per variable (constants are shared); never hint the fixed constants
            idx = var.index
            if idx in hinted or idx in self.constants:
                return
            hinted.add(idx)
            self.model.add_hint(var, value)

        tdev = {}
        for ev in solution.get("compute", ()):
            t, d = inst.task_index[ev["task"]], names[ev["device"]]
            tdev[t] = d
            hint(self.start[t], int(ev["start"]))
        for (t, d), lit in self.pres.items():
            hint(lit, int(tdev.get(t) == d))
        loaded = {(inst.block_index[ev["block"]], names[ev["device"]]): int(ev["start"])
                  for ev in solution.get("loads", ())}
        for key, lit in self.load_lit.items():
            hint(lit, int(key in loaded))
            if key in loaded:
                hint(self.load_start[key], loaded[key])
        chosen = dict(zip(inst.block_ids, inst.block_format))
        chosen.update(solution.get("formats") or {})
        for (b, f), lit in self.fmt_lit.items():
            hint(lit, int(chosen[inst.block_ids[b]] == f))

    # ---- solution ------------------------------------------------------------------------------
    def extract(self, solver: cp_model.CpSolver) -> dict[str, Any]:
        inst = self.inst
        dev = np.zeros(inst.n_tasks, dtype=np.int64)
        for (t, d), lit in self.pres.items():
            if solver.boolean_value(lit):
                dev[t] = d
        start = [solver.value(s) for s in self.start]
        end = np.asarray(start) + inst.cost[np.arange(inst.n_tasks), dev]
        transfer = {}
        for e in np.flatnonzero(dev[inst.edge_src] != dev[inst.edge_dst]).tolist():
            u, v = int(inst.edge_src[e]), int(inst.edge_dst[e])
            # only transfers of positive length have a constrained start in the model
            modelled = (e, int(dev[u]), int(dev[v])) in self.transfer_pair
            ts = self.transfer_start.get(e)
            transfer[e] = solver.value(ts) if (ts is not None and modelled) else int(end[u])
        loads = [(b, d, solver.value(self.load_start[(b, d)]))
                 for (b, d), lit in self.load_lit.items() if solver.boolean_value(lit)]
        return make_solution(inst, dev, start, transfer, loads,
                             formats=self.block_formats(solver) if self.formats else None)


#: the model switches among ``options.params`` (all on by default)
MODEL_SWITCHES = ("symmetry_breaking", "redundant", "group_cumulative", "group_energy")
#: CP-SAT's timetable edge finding in cumulatives (off by default in CP-SAT), switched on with
#: the group cumulatives: without it they never changed a proof in our runs (on STG
#: 50/rand0001 on 4 processors it proves 94 in < 1 s, without it the bound stays at 90)
CUMULATIVE_EDGE_FINDING = "use_timetable_edge_finding_in_cumulative"

def solve_placement_cpsat(inst: PlacementInstance, options: SolveOptions, *,
                          formats: Sequence[str] | None = None, method: str = "cpsat") -> Result:
    """Solve P1 exactly with CP-SAT (P2 when ``formats`` is given: the formats are decided
    too). ``options.params`` are CP-SAT parameters (by field name) except
    ``symmetry_breaking`` / ``redundant`` / ``group_cumulative`` / ``group_energy`` (bool)
    which switch model features."""
    params = dict(options.params)
    t0 = time.perf_counter()
    switches = {k: bool(params.pop(k, True)) for k in MODEL_SWITCHES}
    model = PlacementCpSat(inst, formats=formats, **switches)
    if model.cumulative_groups:  # the group cumulatives' energy reasoning (unless overridden)
        params.setdefault(CUMULATIVE_EDGE_FINDING, True)
    if options.initial_solution is not None:
        model.add_hint(options.initial_solution)
    extra = {"no_evictions": True,
             "symmetry_groups": [[inst.devices[d].name for d in g]
                                 for g in model.symmetry_groups],
             "cumulative_groups": [[inst.devices[d].name for d in g]
                                   for g in model.cumulative_groups],
             "group_bound": model.group_bound}
    if model.formats is not None:
        extra["formats_allowed"] = list(model.formats)
    return run_cpsat(model.model, params, options, t0, method, model.extract, extra)
