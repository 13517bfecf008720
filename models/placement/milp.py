"""Pyomo MILP of P1 placement (problems.md §1.2) without evictions, solved with HiGHS.

Every block is loaded at most once per device and then stays resident to the end (results say
``"no_evictions": true``). All times are in the instance's integer time unit; ``H`` is a valid
horizon (makespan of a validated greedy schedule, of the warm start, or of a serial schedule).

Variables
- ``x[t,d]`` ∈ {0,1} over legal (t, d) only: task t runs on device d;
- ``S[t]`` continuous start in [head_t, H − tail_t] (DAG heads/tails with cheapest durations);
- ``z[e,a,b]`` ∈ [0,1] device pair of edge e = (u, v) in transportation form
  (Σ_b z = x[u,a], Σ_a z = x[v,b]), which is integral whenever x is; the edge's transfer
  duration is then the linear ``c_e = Σ_{a≠b} trans_e(a,b) z[e,a,b]``;
- ``T[e]`` transfer start (only with link contention), ``L[b,d]`` ∈ {0,1} block b loaded on d,
  ``Ls[b,d]`` load start, order binaries ``y`` (tasks), ``w`` (transfers), ``v`` (loads);
- ``Cmax`` makespan (the objective).

Constraints
- Σ_d x[t,d] = 1; precedence S[v] ≥ S[u] + p_u(x) + c_e (no big-M), or with contention
  T[e] ≥ S[u] + p_u(x) and S[v] ≥ T[e] + c_e;
- disjunctive no-overlap per device for task pairs not ordered by a DAG path (one y per pair,
  big-M per device from the time windows); zero-length events never conflict (problems.md §1.3);
- channel disjunctions between transfers that may share a channel (``full``: ordered device pair;
  ``star``: uplink of the source, downlink of the destination);
- loads: L[b,d] ≥ x[t,d] for the block's tasks, L[b,d] ≤ Σ_t x[t,d],
  S[t] ≥ Ls[b,d] + load_b,d − M(1 − x[t,d]), load-port disjunctions, capacity
  Σ_b bytes_b L[b,d] ≤ weight_capacity_d;
- Cmax ≥ S[t] + p_t(x) + tail'_t; per device (``opt.placement.lower_bounds.device_heads_tails``: forced
  transfers, per-device load releases, neighbours sharing a device)
  S[t] ≥ Σ_d head[t,d] x[t,d] and Cmax ≥ S[t] + Σ_d tail[t,d] x[t,d]; load-port delivery
  times; redundant cuts Cmax ≥ critical path, Cmax ≥ ⌈Σ min work / D⌉,
  Σ_t p_t,d x[t,d] ≤ Cmax and Σ_b load_b,d L[b,d] ≤ Cmax per device; lexicographic symmetry
  breaking between interchangeable devices.

The solve retimes the MILP's decisions (device, device order, channel order, load-port order) by
a left-justified integer pass, so reported schedules carry no floating-point fuzz.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyomo.environ as pyo
from pyomo.version import version as pyomo_version

from models.options import SolveOptions
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance, interchangeable_devices
from opt.placement.lower_bounds import device_heads_tails, heads_tails
from opt.common.result import Result
from opt.placement.solution import make_solution
from opt.placement.validator import ScheduleError, validate_placement

EXPORT_SUFFIXES = (".lp", ".mps")
#: Absolute MIP gap handed to HiGHS (time units). The optimum is integral (integer data, a
#: difference-constraint LP once binaries are fixed), so a gap below 1 is a proof.
INTEGRAL_ABS_GAP = 0.99
_TOL = 1e-6


# ---------------------------------------------------------------------------------------------
# instance preprocessing

@dataclass
class _Prep:
    """Derived data shared by the model, the horizon heuristic and the retiming pass."""

    legal: list[list[int]]            # legal devices per task
    dur: list[list[int]]              # cost[t][d] (-1 illegal)
    pmin: list[int]                   # cheapest duration per task
    head: list[int]                   # lower bound on S[t]
    tail: list[int]                   # longest cheapest path after t's end (excl. t)
    topo: list[int]                   # topological order
    topo_pos: list[int]
    reach: list[int]                  # bitset of strict descendants
    src: list[int]
    dst: list[int]
    nbytes: list[int]
    trans: list[dict[tuple[int, int], int]]  # per edge: (a, b) -> duration, a∈L_u, b∈L_v
    block_tasks: dict[int, list[int]]
    load: list[list[int]]             # load_duration[b][d]
    load_devices: dict[int, list[int]]  # devices where some task of the block may run
    critical_path: int
    work_bound: int
    dev_head: list[dict[int, int]]    # per task and legal device: head with placement
    dev_tail: list[dict[int, int]]    # per task and legal device: tail incl. t, transfers


def _prepare(inst: PlacementInstance) -> _Prep:
    n = inst.n_tasks
    cost = inst.cost.tolist()
    legal = [[d for d, c in enumerate(row) if c >= 0] for row in cost]
    pmin = [min(row[d] for d in lg) for row, lg in zip(cost, legal)]
    src, dst = inst.edge_src.tolist(), inst.edge_dst.tolist()
    nbytes = inst.edge_bytes.tolist()
    topo = inst.topological_order.tolist()
    topo_pos = [0] * n
    for k, t in enumerate(topo):
        topo_pos[t] = k
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src, dst):
        preds[v].append(u)
        succs[u].append(v)
    load = inst.load_duration.tolist()
    tblock = inst.task_block.tolist()
    block_tasks: dict[int, list[int]] = defaultdict(list)
    for t, b in enumerate(tblock):
        if b >= 0:
            block_tasks[b].append(t)
    load_devices = {b: sorted({d for t in ts for d in legal[t]}) for b, ts in block_tasks.items()}
    # the same heads/tails as every other bound (first-weight releases included); the MILP
    # uses tails that exclude the task itself
    head_a, tail_a = heads_tails(inst)
    # device-aware ones (forced transfers, per-device load releases; opt.placement.lower_bounds)
    dh, dt = device_heads_tails(inst, max_assignments=256)
    dev_head = [{d: int(dh[t, d]) for d in legal[t]} for t in range(n)]
    dev_tail = [{d: int(dt[t, d]) for d in legal[t]} for t in range(n)]
    head = [max(int(h), min(dev_head[t].values(), default=0))
            for t, h in enumerate(head_a.tolist())]
    tail = [int(x) - p for x, p in zip(tail_a.tolist(), pmin)]
    reach = [0] * n
    for t in reversed(topo):
        for v in succs[t]:
            reach[t] |= reach[v] | (1 << v)
    links = inst.links
    trans = [{(a, b): links.transfer(a, b, nb) for a in legal[u] for b in legal[v]}
             for u, v, nb in zip(src, dst, nbytes)]
    crit = max((head[t] + pmin[t] + tail[t] for t in range(n)), default=0)
    crit = max(crit, max((min(dev_head[t][d] + dev_tail[t][d] for d in legal[t])
                          for t in range(n)), default=0))
    work = math.ceil(sum(pmin) / inst.n_devices) if n else 0
    return _Prep(legal, cost, pmin, head, tail, topo, topo_pos, reach, src, dst, nbytes, trans,
                 dict(block_tasks), load, load_devices, crit, work, dev_head, dev_tail)


def _serial_horizon(inst: PlacementInstance, prep: _Prep) -> int:
    """Makespan bound of a serial schedule (all loads, then tasks and transfers one by one)."""
    loads = sum(prep.load[b][d] for b, ds in prep.load_devices.items() for d in ds)
    work = sum(max(prep.dur[t][d] for d in prep.legal[t]) for t in range(inst.n_tasks))
    comm = sum(max(tr.values(), default=0) for tr in prep.trans)
    return int(loads + work + comm)


# ---------------------------------------------------------------------------------------------
# decisions ↔ schedules

@dataclass
class _Decisions:
    """A schedule in index form: device and start per task, transfer start per cross edge,
    load start per needed (block, device)."""

    device: list[int]
    start: list[int]
    transfer: dict[int, int] = field(default_factory=dict)
    loads: dict[tuple[int, int], int] = field(default_factory=dict)

    def makespan(self, prep: _Prep) -> int:
        return max((s + prep.dur[t][self.device[t]] for t, s in enumerate(self.start)),
                   default=0)

    def to_solution(self, inst: PlacementInstance) -> dict[str, Any]:
        return make_solution(inst, self.device, self.start, self.transfer,
                             [(b, d, s) for (b, d), s in sorted(self.loads.items())])


def _channels(inst: PlacementInstance, a: int, b: int) -> list[tuple]:
    """Channels a transfer a→b occupies (rule 4)."""
    if inst.links.topology == "full":
        return [("pair", a, b)]
    return [("up", a), ("down", b)]


def _greedy(inst: PlacementInstance, prep: _Prep) -> _Decisions | None:
    """Append-only earliest-finish list schedule (priority: longest cheapest tail). Respects
    contention, load ports and capacity (no evictions); None when capacity blocks it."""
    n = inst.n_tasks
    tblock = inst.task_block.tolist()
    bbytes = inst.block_bytes.tolist()
    caps = [dv.weight_capacity for dv in inst.devices]
    preds: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        preds[v].append(e)
        indeg[v] += 1
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(prep.src, prep.dst):
        succs[u].append(v)
    dev_free = [0] * inst.n_devices
    port_free = [0] * inst.n_devices
    used = [0] * inst.n_devices
    chan_free: dict[tuple, int] = defaultdict(int)
    loaded: dict[tuple[int, int], int] = {}
    out = _Decisions([-1] * n, [0] * n)
    ready = [(-(prep.pmin[t] + prep.tail[t]), prep.topo_pos[t], t) for t in range(n)
             if indeg[t] == 0]
    heapq.heapify(ready)
    while ready:
        _, _, t = heapq.heappop(ready)
        best = None
        for d in prep.legal[t]:
            b = tblock[t]
            release = 0
            if b >= 0:
                if (b, d) in loaded:
                    release = loaded[(b, d)] + prep.load[b][d]
                elif caps[d] is not None and used[d] + bbytes[b] > caps[d]:
                    continue
                else:
                    release = port_free[d] + prep.load[b][d]
            local = {}
            tr_starts = {}
            for e in preds[t]:
                u = prep.src[e]
                end_u = out.start[u] + prep.dur[u][out.device[u]]
                if out.device[u] == d:
                    release = max(release, end_u)
                    continue
                dur = prep.trans[e][(out.device[u], d)]
                chans = _channels(inst, out.device[u], d) if inst.links.contention else []
                s = max([end_u] + [local.get(c, chan_free[c]) for c in chans])
                for c in chans:
                    local[c] = s + dur
                tr_starts[e] = s
                release = max(release, s + dur)
            s_t = max(release, dev_free[d])
            key = (s_t + prep.dur[t][d], d)
            if best is None or key < best[0]:
                best = (key, d, s_t, local, tr_starts)
        if best is None:
            return None
        _, d, s_t, local, tr_starts = best
        b = tblock[t]
        if b >= 0 and (b, d) not in loaded:
            loaded[(b, d)] = port_free[d]
            port_free[d] += prep.load[b][d]
            used[d] += bbytes[b]
        chan_free.update(local)
        out.transfer.update(tr_starts)
        out.device[t], out.start[t] = d, s_t
        dev_free[d] = s_t + prep.dur[t][d]
        for v in succs[t]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, (-(prep.pmin[v] + prep.tail[v]), prep.topo_pos[v], v))
    out.loads = {(b, d): s for (b, d), s in loaded.items()}
    return out


def _retime(inst: PlacementInstance, prep: _Prep, device: list[int], start: list[float],
            transfer: dict[int, float], loads: dict[tuple[int, int], float]) -> _Decisions:
    """Left-justified integer schedule that keeps the given devices and the orders implied by
    the (possibly fractional) times on every device, channel and load port."""
    n = inst.n_tasks
    tblock = inst.task_block.tolist()
    dur = [prep.dur[t][device[t]] for t in range(n)]
    # load ports: needed loads back to back in the given order (zero-length ones at 0)
    need = sorted({(tblock[t], device[t]) for t in range(n) if tblock[t] >= 0})
    load_start: dict[tuple[int, int], int] = {}
    port: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for b, d in need:
        port[d].append((loads.get((b, d), 0.0), b))
    for d, items in port.items():
        clock = 0
        for _, b in sorted(items):
            ld = prep.load[b][d]
            load_start[(b, d)] = clock if ld > 0 else 0
            clock += ld
    # event graph: tasks 0..n-1, cross-edge transfers n..; arcs (a, b, lag): t_b ≥ t_a + lag
    cross = [e for e in range(len(prep.src)) if device[prep.src[e]] != device[prep.dst[e]]]
    node_of = {e: n + k for k, e in enumerate(cross)}
    size = n + len(cross)
    release = [0] * size
    lag_of = [0] * size
    for t in range(n):
        lag_of[t] = dur[t]
        if tblock[t] >= 0:
            key = (tblock[t], device[t])
            release[t] = load_start[key] + prep.load[key[0]][key[1]]
    arcs: list[list[int]] = [[] for _ in range(size)]
    for e in range(len(prep.src)):
        u, v = prep.src[e], prep.dst[e]
        if e in node_of:
            k = node_of[e]
            lag_of[k] = prep.trans[e][(device[u], device[v])]
            arcs[u].append(k)
            arcs[k].append(v)
        else:
            arcs[u].append(v)
    chains: dict[tuple, list[tuple[float, int, int]]] = defaultdict(list)
    for t in range(n):
        if dur[t] > 0:
            chains[("dev", device[t])].append((start[t], prep.topo_pos[t], t))
    if inst.links.contention:
        for e in cross:
            k = node_of[e]
            if lag_of[k] > 0:
                u = prep.src[e]
                t0 = transfer.get(e, start[u] + dur[u])
                for c in _channels(inst, device[u], device[prep.dst[e]]):
                    chains[c].append((t0, e, k))
    for items in chains.values():
        items.sort()
        for (_, _, a), (_, _, b) in zip(items, items[1:]):
            arcs[a].append(b)
    indeg = [0] * size
    for a in range(size):
        for b in arcs[a]:
            indeg[b] += 1
    stack = [a for a in range(size) if indeg[a] == 0]
    time_of = list(release)
    done = 0
    while stack:
        a = stack.pop()
        done += 1
        fin = time_of[a] + lag_of[a]
        for b in arcs[a]:
            time_of[b] = max(time_of[b], fin)
            indeg[b] -= 1
            if indeg[b] == 0:
                stack.append(b)
    if done != size:
        raise RuntimeError("MILP orders are cyclic; cannot retime the schedule")
    return _Decisions(list(device), time_of[:n], {e: time_of[node_of[e]] for e in cross},
                      load_start)


def _canonical(dec: _Decisions, groups: list[list[int]]) -> _Decisions:
    """Relabel interchangeable devices so that a group's devices open in order of their lowest
    task index (the model's symmetry breaking); the schedule stays valid."""
    relabel = {}
    for g in groups:
        first = {d: min((t for t, dd in enumerate(dec.device) if dd == d), default=math.inf)
                 for d in g}
        relabel.update(dict(zip(sorted(g, key=lambda d: (first[d], d)), g)))
    if not relabel:
        return dec
    return _Decisions([relabel.get(d, d) for d in dec.device], list(dec.start),
                      dict(dec.transfer),
                      {(b, relabel.get(d, d)): s for (b, d), s in dec.loads.items()})


def _decode(inst: PlacementInstance, solution: dict[str, Any]) -> _Decisions:
    """Index form of a valid problems.md §1.2a solution (raises ValueError when it uses evictions or
    reloads, which this model cannot represent)."""
    if solution.get("evictions"):
        raise ValueError("the initial solution evicts blocks")
    tix, dix, bix = inst.task_index, inst.device_index, inst.block_index
    n = inst.n_tasks
    dec = _Decisions([-1] * n, [0] * n)
    for ev in solution["compute"]:
        t = tix[ev["task"]]
        dec.device[t], dec.start[t] = dix[ev["device"]], int(ev["start"])
    edge_of = {(u, v): e for e, (u, v) in enumerate(zip(inst.edge_src.tolist(),
                                                          inst.edge_dst.tolist()))}
    for ev in solution.get("transfers", ()):
        dec.transfer[edge_of[(tix[ev["src"]], tix[ev["dst"]])]] = int(ev["start"])
    for ev in solution.get("loads", ()):
        key = (bix[ev["block"]], dix[ev["device"]])
        if key in dec.loads:
            raise ValueError(f"the initial solution loads block '{ev['block']}' twice on "
                             f"'{ev['device']}'")
        dec.loads[key] = int(ev["start"])
    return dec


# ---------------------------------------------------------------------------------------------
# the model

@dataclass
class _ModelIndex:
    """What the solve needs to read back (kept on the model as ``model._placement``)."""

    prep: _Prep
    horizon: int
    task_pairs: dict[tuple[int, int], list[int]]
    edge_pairs: list[tuple[int, int]]
    load_pairs: list[tuple[int, int, int]]
    transfer_edges: list[int]
    symmetry_groups: list[list[int]]
    greedy: _Decisions | None  # validated list schedule (its makespan may set the horizon)


def build_placement_milp(inst: PlacementInstance, horizon: int | None = None
                         ) -> pyo.ConcreteModel:
    """MILP of problems.md §1.2 without evictions (module docstring). ``horizon``: a known makespan
    upper bound in time units (default: a validated greedy schedule or the serial bound)."""
    prep = _prepare(inst)
    H = _serial_horizon(inst, prep)
    greedy = _greedy(inst, prep)
    if greedy is not None:
        try:
            validate_placement(inst, greedy.to_solution(inst))
            H = min(H, greedy.makespan(prep))
        except ScheduleError:
            greedy = None  # a heuristic slip only costs a looser horizon
    if horizon is not None:
        H = min(H, int(horizon))
    lb0 = max(prep.critical_path, prep.work_bound)
    H = max(H, lb0)  # an infeasible instance may have no schedule at all; keep bounds sane
    n, nd = inst.n_tasks, inst.n_devices
    legal, dur, head, tail, pmin = prep.legal, prep.dur, prep.head, prep.tail, prep.pmin
    lo = head
    hi = [max(head[t], H - tail[t] - pmin[t]) for t in range(n)]
    contention = inst.links.contention

    m = pyo.ConcreteModel(name="placement_milp")
    xi = [(t, d) for t in range(n) for d in legal[t]]
    m.x = pyo.Var(xi, domain=pyo.Binary)
    m.S = pyo.Var(range(n), bounds=lambda _m, t: (lo[t], hi[t]))
    m.Cmax = pyo.Var(bounds=(lb0, H))
    zi = [(e, a, b) for e in range(len(prep.src)) for (a, b) in prep.trans[e]]
    m.z = pyo.Var(zi, bounds=(0, 1))

    def p_expr(t: int):
        return sum(dur[t][d] * m.x[t, d] for d in legal[t])

    def c_expr(e: int):
        return sum(tr * m.z[e, a, b] for (a, b), tr in prep.trans[e].items() if a != b and tr)

    m.assign = pyo.Constraint(range(n), rule=lambda _m, t: sum(m.x[t, d] for d in legal[t]) == 1)
    m.z_src = pyo.ConstraintList()
    m.z_dst = pyo.ConstraintList()
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        for a in legal[u]:
            m.z_src.add(sum(m.z[e, a, b] for b in legal[v]) == m.x[u, a])
        for b in legal[v]:
            m.z_dst.add(sum(m.z[e, a, b] for a in legal[u]) == m.x[v, b])

    # ---- precedence and transfers ---------------------------------------------------------
    transfer_edges = [e for e in range(len(prep.src)) if contention
                      and any(a != b and tr > 0 for (a, b), tr in prep.trans[e].items())]
    t_lo = {e: lo[prep.src[e]] + pmin[prep.src[e]] for e in transfer_edges}
    t_hi = {e: max(t_lo[e], hi[prep.dst[e]]) for e in transfer_edges}
    m.T = pyo.Var(transfer_edges, bounds=lambda _m, e: (t_lo[e], t_hi[e]))
    m.prec = pyo.ConstraintList()
    for e, (u, v) in enumerate(zip(prep.src, prep.dst)):
        if e in t_lo:
            m.prec.add(m.T[e] >= m.S[u] + p_expr(u))
            m.prec.add(m.S[v] >= m.T[e] + c_expr(e))
        else:
            m.prec.add(m.S[v] >= m.S[u] + p_expr(u) + c_expr(e))

    # ---- one task at a time per device --------------------------------------------------------
    task_pairs: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        for j in range(i + 1, n):
            if (prep.reach[i] >> j) & 1 or (prep.reach[j] >> i) & 1:
                continue  # a DAG path already separates them
            common = [d for d in legal[i] if dur[j][d] > 0 and dur[i][d] > 0 and d in legal[j]]
            if not common:
                continue
            if all(hi[i] + dur[i][d] <= lo[j] for d in common) or \
               all(hi[j] + dur[j][d] <= lo[i] for d in common):
                continue  # time windows already separate them
            task_pairs[(i, j)] = common
    m.y = pyo.Var(list(task_pairs), domain=pyo.Binary)
    m.no_overlap = pyo.ConstraintList()
    for (i, j), common in task_pairs.items():
        for d in common:
            mij = max(0, hi[i] + dur[i][d] - lo[j])
            mji = max(0, hi[j] + dur[j][d] - lo[i])
            both = m.x[i, d] + m.x[j, d]
            m.no_overlap.add(m.S[j] >= m.S[i] + dur[i][d] - mij * (3 - m.y[i, j] - both))
            m.no_overlap.add(m.S[i] >= m.S[j] + dur[j][d] - mji * (2 + m.y[i, j] - both))

    # ---- channel contention -------------------------------------------------------------------
    edge_pairs: list[tuple[int, int]] = []
    m.channel = pyo.ConstraintList()
    if transfer_edges:
        usage: dict[int, dict[tuple, list[tuple[int, int]]]] = {}
        for e in transfer_edges:
            uses: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
            for (a, b), tr in prep.trans[e].items():
                if a != b and tr > 0:
                    for c in _channels(inst, a, b):
                        uses[c].append((a, b))
            usage[e] = uses
        pair_chans: dict[tuple[int, int], list[tuple]] = {}
        for k, e in enumerate(transfer_edges):
            for f in transfer_edges[k + 1:]:
                ve, uf, vf, ue = prep.dst[e], prep.src[f], prep.dst[f], prep.src[e]
                if ve == uf or (prep.reach[ve] >> uf) & 1 or vf == ue or (prep.reach[vf] >> ue) & 1:
                    continue  # one transfer ends before the other can start
                shared = [c for c in usage[e] if c in usage[f]]
                if shared:
                    pair_chans[(e, f)] = shared
        edge_pairs = list(pair_chans)
        m.w = pyo.Var(edge_pairs, domain=pyo.Binary)
        for (e, f), shared in pair_chans.items():
            mef = max(0, t_hi[e] - t_lo[f])
            mfe = max(0, t_hi[f] - t_lo[e])
            ce, cf = c_expr(e), c_expr(f)
            for c in shared:
                ue_ = sum(m.z[e, a, b] for a, b in usage[e][c])
                uf_ = sum(m.z[f, a, b] for a, b in usage[f][c])
                m.channel.add(m.T[f] >= m.T[e] + ce - mef * (3 - m.w[e, f] - ue_ - uf_))
                m.channel.add(m.T[e] >= m.T[f] + cf - mfe * (2 + m.w[e, f] - ue_ - uf_))
    else:
        m.w = pyo.Var([], domain=pyo.Binary)

    # ---- weight loads and capacity ---------------------------------------------------------
    li = [(b, d) for b, ds in sorted(prep.load_devices.items()) for d in ds]
    ls_hi = {}
    for b, d in li:
        users = [t for t in prep.block_tasks[b] if d in legal[t]]
        ls_hi[(b, d)] = max(0, max(hi[t] for t in users) - prep.load[b][d])
    m.L = pyo.Var(li, domain=pyo.Binary)
    m.Ls = pyo.Var(li, bounds=lambda _m, b, d: (0, ls_hi[(b, d)]))
    m.load_use = pyo.ConstraintList()
    for b, d in li:
        users = [t for t in prep.block_tasks[b] if d in legal[t]]
        ld = prep.load[b][d]
        for t in users:
            m.load_use.add(m.L[b, d] >= m.x[t, d])
            big = max(0, ls_hi[(b, d)] + ld - lo[t])
            m.load_use.add(m.S[t] >= m.Ls[b, d] + ld - big * (1 - m.x[t, d]))
        m.load_use.add(m.L[b, d] <= sum(m.x[t, d] for t in users))
    load_pairs: list[tuple[int, int, int]] = []
    by_dev: dict[int, list[int]] = defaultdict(list)
    for b, d in li:
        if prep.load[b][d] > 0:
            by_dev[d].append(b)
    for d, bs in by_dev.items():
        load_pairs += [(b1, b2, d) for k, b1 in enumerate(bs) for b2 in bs[k + 1:]]
    m.v = pyo.Var(load_pairs, domain=pyo.Binary)
    m.load_port = pyo.ConstraintList()
    for b1, b2, d in load_pairs:
        l1, l2 = prep.load[b1][d], prep.load[b2][d]
        both = m.L[b1, d] + m.L[b2, d]
        m.load_port.add(m.Ls[b2, d] >= m.Ls[b1, d] + l1
                        - (ls_hi[(b1, d)] + l1) * (3 - m.v[b1, b2, d] - both))
        m.load_port.add(m.Ls[b1, d] >= m.Ls[b2, d] + l2
                        - (ls_hi[(b2, d)] + l2) * (2 + m.v[b1, b2, d] - both))
    m.capacity = pyo.ConstraintList()
    bbytes = inst.block_bytes.tolist()
    for d, dev in enumerate(inst.devices):
        cap = dev.weight_capacity
        items = [b for b, dd in li if dd == d]
        if cap is not None and sum(bbytes[b] for b in items) > cap:
            m.capacity.add(sum(bbytes[b] * m.L[b, d] for b in items) <= cap)

    # ---- makespan and redundant cuts --------------------------------------------------------
    m.makespan = pyo.Constraint(range(n),
                                rule=lambda _m, t: m.Cmax >= m.S[t] + p_expr(t) + tail[t])
    # per device: S[t] ≥ head[t, d] and S[t] + tail[t, d] ≤ Cmax when t runs on d
    multi = [t for t in range(n) if len(legal[t]) > 1]
    m.device_head = pyo.Constraint(multi, rule=lambda _m, t: m.S[t] >= sum(
        prep.dev_head[t][d] * m.x[t, d] for d in legal[t]))
    m.device_tail = pyo.Constraint(multi, rule=lambda _m, t: m.Cmax >= m.S[t] + sum(
        prep.dev_tail[t][d] * m.x[t, d] for d in legal[t]))
    m.device_work = pyo.ConstraintList()
    for d in range(nd):
        tasks_d = [t for t in range(n) if d in legal[t] and dur[t][d] > 0]
        if len(tasks_d) > 1:
            m.device_work.add(sum(dur[t][d] * m.x[t, d] for t in tasks_d) <= m.Cmax)
        loads_d = [b for b, dd in li if dd == d and prep.load[b][d] > 0]
        if len(loads_d) > 1:
            m.device_work.add(sum(prep.load[b][d] * m.L[b, d] for b in loads_d) <= m.Cmax)
        # one load port with delivery times: when block k is loaded on d, the loads of all
        # blocks whose users need at least q_k afterwards end no earlier than their total
        # duration, and the last of them is followed by at least q_k
        q = {b: min(prep.dev_tail[t][d] for t in prep.block_tasks[b] if d in legal[t])
             for b in loads_d}
        for bk, qk in q.items():
            group = [b for b, qb in q.items() if qb >= qk]
            if len(group) > 1:
                total = sum(prep.load[b][d] for b in group)
                m.device_work.add(sum(prep.load[b][d] * m.L[b, d] for b in group) + qk
                                  <= m.Cmax + (total + qk) * (1 - m.L[bk, d]))

    # ---- symmetry breaking: devices of a group open in order of their lowest task index ------
    groups = interchangeable_devices(inst)
    m.symmetry = pyo.ConstraintList()
    for g in groups:
        for a, b in zip(g, g[1:]):
            earlier = []
            for t in range(n):
                if b in legal[t]:
                    m.symmetry.add(m.x[t, b] <= sum(earlier))
                if a in legal[t]:
                    earlier.append(m.x[t, a])

    m.obj = pyo.Objective(expr=m.Cmax, sense=pyo.minimize)
    m._placement = _ModelIndex(prep, H, task_pairs, edge_pairs, load_pairs, transfer_edges,
                               groups, greedy)
    return m


def _set_warm_start(m: pyo.ConcreteModel, inst: PlacementInstance, dec: _Decisions) -> int:
    """Give every variable the value of a schedule; return how many constraints it violates
    in the model (0: HiGHS can take it as a MIP start)."""
    idx: _ModelIndex = m._placement
    prep = idx.prep
    dev, st = dec.device, dec.start
    tblock = inst.task_block.tolist()
    end = [st[t] + prep.dur[t][dev[t]] for t in range(inst.n_tasks)]
    for (t, d) in m.x:
        m.x[t, d].set_value(int(dev[t] == d))
    for t in m.S:
        m.S[t].set_value(st[t])
    for (e, a, b) in m.z:
        m.z[e, a, b].set_value(int(dev[prep.src[e]] == a and dev[prep.dst[e]] == b))
    tstart = {e: dec.transfer.get(e, end[prep.src[e]]) for e in idx.transfer_edges}
    for e in m.T:
        m.T[e].set_value(tstart[e])
    for (i, j) in m.y:
        m.y[i, j].set_value(int(st[i] <= st[j]))
    for (e, f) in m.w:
        m.w[e, f].set_value(int(tstart[e] <= tstart[f]))
    needed = {(tblock[t], dev[t]) for t in range(inst.n_tasks) if tblock[t] >= 0}
    for (b, d) in m.L:
        m.L[b, d].set_value(int((b, d) in needed))
        m.Ls[b, d].set_value(dec.loads.get((b, d), 0) if (b, d) in needed else 0)
    for (b1, b2, d) in m.v:
        m.v[b1, b2, d].set_value(int(m.Ls[b1, d].value <= m.Ls[b2, d].value))
    m.Cmax.set_value(dec.makespan(prep))
    bad = 0
    for v in m.component_data_objects(pyo.Var, active=True):
        if (v.lb is not None and v.value < v.lb - _TOL) or (v.ub is not None
                                                            and v.value > v.ub + _TOL):
            bad += 1
    for c in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(c.body)
        if (c.has_lb() and body < pyo.value(c.lower) - _TOL) or \
           (c.has_ub() and body > pyo.value(c.upper) + _TOL):
            bad += 1
    return bad


# ---------------------------------------------------------------------------------------------
# the solve

def _highs_solver() -> Any:
    from pyomo.contrib.appsi.solvers import Highs

    solver = Highs()
    if not solver.available():
        raise RuntimeError("HiGHS is not available to Pyomo (install highspy)")
    return solver


_SCHEDULER_CLASH = "scheduler has already been initialized"
_LOG = logging.getLogger(__name__)


class _LogCapture(logging.Handler):
    """Keeps HiGHS' log lines (and forwards them to this module's logger at DEBUG)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage().rstrip()
        if msg.strip():
            self.lines.append(msg)
            _LOG.debug("highs: %s", msg)


def _run_highs(model: pyo.ConcreteModel, highs_options: dict[str, Any], deadline: float | None,
               warmstart: bool) -> tuple[Any, Any, list[str]]:
    """One HiGHS run through Pyomo's appsi interface; returns (solver, results, log lines).
    ``deadline``: ``time.perf_counter()`` value by which to stop (the model hand-over to HiGHS
    counts against it)."""
    solver = _highs_solver()
    solver.set_instance(model)
    upd = solver.update_config  # the model does not change between hand-over and solve
    for key in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                "check_for_new_or_removed_params", "check_for_new_objective",
                "update_constraints", "update_vars", "update_params",
                "update_named_expressions", "update_objective"):
        setattr(upd, key, False)
    capture = _LogCapture()
    sink = logging.Logger("hetopt.highs", logging.INFO)  # private, unregistered: no propagation
    sink.addHandler(capture)
    cfg = solver.config
    cfg.load_solution = False
    cfg.stream_solver = False
    cfg.solver_output_logger = sink
    cfg.log_level = logging.INFO
    cfg.mip_gap = 0.0
    if deadline is not None:
        cfg.time_limit = max(0.0, deadline - time.perf_counter())
    cfg.warmstart = warmstart
    solver.highs_options = dict(highs_options)
    res = solver.solve(model)
    return solver, res, capture.lines


def _count_binaries(m: pyo.ConcreteModel) -> int:
    return sum(1 for v in m.component_data_objects(pyo.Var) if v.is_binary())


def _capacity_may_bind(inst: PlacementInstance, prep: _Prep) -> bool:
    """True when some device cannot hold every block it might load: then schedules with
    evictions may beat (or exist where there is no) eviction-free schedule."""
    per_dev: dict[int, int] = defaultdict(int)
    for b, ds in prep.load_devices.items():
        for d in ds:
            per_dev[d] += int(inst.block_bytes[b])
    return any(dv.weight_capacity is not None and per_dev[d] > dv.weight_capacity
               for d, dv in enumerate(inst.devices))


def _no_schedule_at_all(inst: PlacementInstance, prep: _Prep) -> bool:
    """True when some task has no legal device that can hold its block (even alone)."""
    tblock = inst.task_block.tolist()
    for t, b in enumerate(tblock):
        if b < 0:
            continue
        if all(inst.devices[d].weight_capacity is not None
               and int(inst.block_bytes[b]) > inst.devices[d].weight_capacity
               for d in prep.legal[t]):
            return True
    return False


def solve_placement_milp(inst: PlacementInstance, options: SolveOptions) -> Result:
    """Solve P1 exactly (no evictions) with the MILP and HiGHS; ``options.params`` are HiGHS
    option names passed through untouched. Times in the result are integer time units."""
    t0 = time.perf_counter()
    export = options.export_path
    if export is not None and Path(export).suffix.lower() not in EXPORT_SUFFIXES:
        raise InputError(f"cannot export the MILP to '{export}': the file name must end in "
                         f"{' or '.join(EXPORT_SUFFIXES)}", field="export_path")
    params_out = {"time_limit": options.time_limit, "num_workers": options.num_workers,
                  **options.params}
    stats: dict[str, Any] = {"no_evictions": True}

    warm: _Decisions | None = None
    ws: dict[str, Any] = {"used": False, "source": None}
    if options.initial_solution is not None:
        try:
            validate_placement(inst, options.initial_solution)
            warm = _decode(inst, options.initial_solution)
        except (ScheduleError, ValueError, KeyError) as exc:
            ws["initial_rejected"] = str(exc)
    prep_ms = None
    if warm is not None:
        prep_ms = max((warm.start[t] + int(inst.cost[t, warm.device[t]])
                       for t in range(inst.n_tasks)), default=0)
    model = build_placement_milp(inst, horizon=prep_ms)
    idx: _ModelIndex = model._placement
    prep = idx.prep
    build_s = time.perf_counter() - t0
    stats.update({"variables": model.nvariables(), "binaries": _count_binaries(model),
                  "constraints": model.nconstraints(), "horizon": idx.horizon,
                  "task_pairs": len(idx.task_pairs), "transfer_pairs": len(idx.edge_pairs),
                  "load_pairs": len(idx.load_pairs),
                  "symmetry_groups": [[inst.devices[d].name for d in g]
                                      for g in idx.symmetry_groups],
                  "capacity_may_bind": _capacity_may_bind(inst, prep), "build_s": build_s})
    # MIP start: the initial solution, or the model's greedy schedule when that is better
    # (the horizon is the better of the two) or when no usable initial solution was given
    start: _Decisions | None = None
    if warm is not None:
        ws["initial_objective"] = prep_ms
        if prep_ms <= idx.horizon:
            start, ws["source"] = warm, "initial_solution"
    if start is None and idx.greedy is not None:
        start, ws["source"] = idx.greedy, "greedy schedule"
    if start is not None:
        bad = _set_warm_start(model, inst, _canonical(start, idx.symmetry_groups))
        ws.update({"used": bad == 0, "objective": start.makespan(prep),
                   "violated_constraints": bad})
    stats["mip_start"] = ws  # ("warm_start" is the entry point's name for the source)
    if export is not None:
        Path(export).parent.mkdir(parents=True, exist_ok=True)
        model.write(str(export), io_options={"symbolic_solver_labels": True})
        stats["exported"] = str(export)

    deadline = None if options.time_limit is None else t0 + float(options.time_limit)
    highs_options = {"threads": int(options.num_workers), "random_seed": int(options.seed),
                     "mip_abs_gap": INTEGRAL_ABS_GAP, **options.params}
    t1 = time.perf_counter()
    run = _solve_and_extract(inst, model, highs_options, deadline, bool(ws["used"]))
    if ws["used"]:
        ws["highs_log"] = run.start_log
        ws["accepted_by_highs"] = any("MIP start solution is feasible" in ln
                                      or ln.endswith(": feasible") for ln in run.start_log)
    if run.inconsistent:
        # HiGHS sometimes returns the MIP start's column values together with a better
        # objective found in its presolved space; solve again without the start
        ws["discarded"] = (f"HiGHS reported objective {run.objective} but returned values "
                           f"with Cmax {run.cmax_value}; re-solved without the MIP start")
        again = _solve_and_extract(inst, model, highs_options, deadline, False)
        run = run.merge(again)
    stats.update({"solver": "highs", "solver_version": run.version,
                  "interface": "pyomo.contrib.appsi.solvers.Highs",
                  "pyomo_version": pyomo_version, "termination": run.termination,
                  "solve_s": time.perf_counter() - t1, "nodes": run.nodes,
                  "mip_abs_gap": INTEGRAL_ABS_GAP, "milp_objective": run.objective,
                  "dual_bound": run.bound})
    if run.scheduler_reset:
        stats["highs_scheduler_reset"] = True
    if stats["capacity_may_bind"]:
        stats["bound_scope"] = "no_evictions"
    lb = None
    if run.bound is not None and math.isfinite(run.bound):
        lb = float(max(math.ceil(run.bound - _TOL), 0))
    solution = None
    objective = None
    if run.infeasible:
        status, lb = "INFEASIBLE", None
        stats["infeasible_scope"] = ("all_schedules" if _no_schedule_at_all(inst, prep)
                                     or not stats["capacity_may_bind"] else "no_evictions")
    elif run.schedule is None:
        status = "TIME_LIMIT_NO_SOLUTION" if run.time_limited else "ERROR"
    else:
        solution = run.schedule.to_solution(inst)
        try:
            validate_placement(inst, solution)
        except ScheduleError as exc:
            return Result(problem="placement", method="milp", status="ERROR",
                          runtime_s=time.perf_counter() - t0, seed=options.seed,
                          params=params_out, solution=None,
                          stats={**stats, "error": f"retimed MILP schedule is invalid: {exc}"})
        objective = float(run.schedule.makespan(prep))
        status = "OPTIMAL" if lb is not None and lb >= objective else "FEASIBLE"
    return Result(problem="placement", method="milp", status=status, objective=objective,
                  lower_bound=lb, runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params=params_out, solution=solution, stats=stats)


@dataclass
class _Run:
    """Outcome of one HiGHS run: the retimed schedule (if any), bound and solver facts."""

    schedule: _Decisions | None
    makespan: int | None
    objective: float | None
    bound: float | None
    cmax_value: float | None
    infeasible: bool
    time_limited: bool
    inconsistent: bool
    termination: str
    nodes: int
    version: str
    start_log: list[str]
    scheduler_reset: bool

    def merge(self, other: _Run) -> _Run:
        """Best schedule and strongest bound of two runs on the same model."""
        best = self if other.makespan is None or (
            self.makespan is not None and self.makespan <= other.makespan) else other
        bounds = [b for b in (self.bound, other.bound) if b is not None and math.isfinite(b)]
        return replace(other, schedule=best.schedule, makespan=best.makespan,
                       bound=max(bounds) if bounds else None, inconsistent=False,
                       nodes=self.nodes + other.nodes, start_log=self.start_log,
                       scheduler_reset=self.scheduler_reset or other.scheduler_reset)


def _solve_and_extract(inst: PlacementInstance, model: pyo.ConcreteModel,
                       highs_options: dict[str, Any], deadline: float | None,
                       warmstart: bool) -> _Run:
    """Run HiGHS (resetting its thread pool if ``threads`` changed) and retime its incumbent."""
    from pyomo.contrib.appsi.base import TerminationCondition as TC

    solver, res, log = _run_highs(model, highs_options, deadline, warmstart)
    reset = any(_SCHEDULER_CLASH in line for line in log)
    if reset:
        # HiGHS keeps one thread pool per OS thread; a different `threads` needs a fresh pool
        import highspy

        highspy.Highs.resetGlobalScheduler(True)
        solver, res, log = _run_highs(model, highs_options, deadline, warmstart)
    tc = res.termination_condition
    info = solver._solver_model.getInfo()  # appsi exposes no public accessor for node counts
    prep = model._placement.prep
    schedule, cmax = None, None
    obj = res.best_feasible_objective
    infeasible = tc in (TC.infeasible, TC.infeasibleOrUnbounded)
    if obj is not None and not infeasible:
        solver.load_vars()
        cmax = float(model.Cmax.value)
        device = [0] * inst.n_tasks
        for (t, d), var in model.x.items():
            if var.value is not None and var.value > 0.5:
                device[t] = d
        schedule = _retime(inst, prep, device,
                           [float(model.S[t].value) for t in range(inst.n_tasks)],
                           {e: float(model.T[e].value) for e in model.T},
                           {k: float(model.Ls[k].value) for k in model.Ls})
    start_log = [ln.strip() for ln in log if "MIP start" in ln
                 or "feasibility of MIP solution" in ln]
    return _Run(schedule=schedule,
                makespan=schedule.makespan(prep) if schedule is not None else None,
                objective=obj, bound=res.best_objective_bound, cmax_value=cmax,
                infeasible=infeasible,
                time_limited=tc in (TC.maxTimeLimit, TC.maxIterations, TC.interrupted),
                inconsistent=(warmstart and cmax is not None and obj is not None
                              and cmax > obj + _TOL * max(1.0, abs(obj))),
                termination=str(tc.name), nodes=int(info.mip_node_count),
                version=".".join(map(str, solver.version())), start_log=start_log,
                scheduler_reset=reset)
