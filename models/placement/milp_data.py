"""Data of the P1 MILP (models.placement.milp): the instance preprocessed into plain lists,
schedules in index form (:class:`Decisions`), their conversion from and to problems.md §1.2a
solutions and the left-justified integer retiming of the MILP's decisions."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from models.placement.overlap import overlap_relaxation
from opt.placement.group_bound import group_bounds
from opt.placement.instance import PlacementInstance
from opt.placement.lower_bounds import device_heads_tails, heads_tails
from opt.placement.schedule_error import ScheduleError
from opt.placement.solution import make_solution
from opt.placement.validator import validate_placement

# ---------------------------------------------------------------------------------------------
# instance preprocessing

@dataclass
class MilpPrep:
    """Derived data shared by the model and the retiming pass."""

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
    at_use: bool = False              # problems.md §1.2 rule 5 load_timing
    overlap: bool = False             # load_timing overlap: ``load`` is the relaxation's
    full_load: list[list[int]] | None = None  # overlap: the real load durations

    @property
    def port_load(self) -> list[list[int]]:
        """The load durations on the ports (overlap: the real ones; ``load`` then holds the
        shortened loads of ``models.placement.overlap``, which bound the users' starts)."""
        return self.full_load if self.full_load is not None else self.load

    def slot_lead(self, b: int, d: int, t: int) -> int:
        """How long before task t's start its slot on d begins when t is the user the load
        of block b there serves: at_use the load; overlap the part of the load t's compute
        does not cover, max(0, t_load − p_t) (the load then starts with the slot and ends by
        t's end); 0 under prefetch."""
        if self.overlap:
            return max(0, self.port_load[b][d] - self.dur[t][d])
        return self.load[b][d] if self.at_use else 0


def prepare(inst: PlacementInstance) -> MilpPrep:
    """The model's data; under ``overlap`` the loads, heads and tails of its prefetch
    relaxation (``models.placement.overlap``) and the real loads in ``full_load``."""
    full_load = inst.load_duration.tolist() if inst.load_timing == "overlap" else None
    inst = overlap_relaxation(inst)
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
    return MilpPrep(legal, cost, pmin, head, tail, topo, topo_pos, reach, src, dst, nbytes, trans,
                 dict(block_tasks), load, load_devices, crit, work, dev_head, dev_tail,
                 inst.load_timing == "at_use", full_load is not None, full_load)


def serial_horizon(inst: PlacementInstance, prep: MilpPrep) -> int:
    """Makespan bound of a serial schedule (all loads, then tasks and transfers one by one)."""
    loads = sum(prep.port_load[b][d] for b, ds in prep.load_devices.items() for d in ds)
    work = sum(max(prep.dur[t][d] for d in prep.legal[t]) for t in range(inst.n_tasks))
    comm = sum(max(tr.values(), default=0) for tr in prep.trans)
    return int(loads + work + comm)


# ---------------------------------------------------------------------------------------------
# decisions ↔ schedules

@dataclass
class Decisions:
    """A schedule in index form: device and start per task, transfer start per cross edge,
    load start per needed (block, device)."""

    device: list[int]
    start: list[int]
    transfer: dict[int, int] = field(default_factory=dict)
    loads: dict[tuple[int, int], int] = field(default_factory=dict)

    def makespan(self, prep: MilpPrep) -> int:
        return max((s + prep.dur[t][self.device[t]] for t, s in enumerate(self.start)),
                   default=0)

    def to_solution(self, inst: PlacementInstance) -> dict[str, Any]:
        return make_solution(inst, self.device, self.start, self.transfer,
                             [(b, d, s) for (b, d), s in sorted(self.loads.items())])


def retime(inst: PlacementInstance, prep: MilpPrep, device: list[int], start: list[float],
           transfer: dict[int, float], loads: dict[tuple[int, int], float]) -> Decisions:
    """Left-justified integer schedule that keeps the given devices and the orders implied by
    the (possibly fractional) times on every device, channel and load port (at_use: each load
    in the slot of its first user, :func:`_retime_at_use`)."""
    if prep.at_use or prep.overlap:
        return _retime_at_use(inst, prep, device, start, transfer)
    n = inst.n_tasks
    tblock = inst.task_block.tolist()
    dur = [prep.dur[t][device[t]] for t in range(n)]
    load_start = _port_schedule(prep, tblock, device, loads)
    # event graph: tasks 0..n-1, cross-edge transfers n..; arcs a → b: t_b ≥ t_a + lag_a
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
    chains = _chains(inst, prep, device, start, transfer, dur, cross, node_of, lag_of,
                     lambda t: dur[t] > 0)
    for items in chains.values():
        for (_, _, a), (_, _, b) in zip(items, items[1:]):
            arcs[a].append(b)
    time_of = _earliest_times(release, lag_of, arcs)
    return Decisions(list(device), time_of[:n], {e: time_of[node_of[e]] for e in cross},
                     load_start)


def _chains(inst: PlacementInstance, prep: MilpPrep, device: list[int], start: list[float],
            transfer: dict[int, float], dur: list[int], cross: list[int],
            node_of: dict[int, int], lag_of: list[int], on_device: Callable[[int], bool]
            ) -> dict[Any, list[tuple[float, int, int]]]:
    """The order the given times put on each resource, shared by the two retimings: per
    device the tasks ``on_device`` keeps, as (start, topological position, task); per
    contended channel the transfers with a duration, as (start, edge, transfer node)."""
    chains: dict[Any, list[tuple[float, int, int]]] = defaultdict(list)
    for t in range(inst.n_tasks):
        if on_device(t):
            chains[("dev", device[t])].append((start[t], prep.topo_pos[t], t))
    if inst.links.contention:
        for e in cross:
            k = node_of[e]
            if lag_of[k] > 0:
                u = prep.src[e]
                t0 = transfer.get(e, start[u] + dur[u])
                for c in inst.links.channels(device[u], device[prep.dst[e]]):
                    chains[c].append((t0, e, k))
    for items in chains.values():
        items.sort()
    return chains


def _retime_at_use(inst: PlacementInstance, prep: MilpPrep, device: list[int],
                   start: list[float], transfer: dict[int, float]) -> Decisions:
    """:func:`retime` under problems.md §1.2 rule 5 at_use and overlap: per (block, device)
    one load node before the block's first user there (by the given starts), after that
    user's inputs and after the previous task on the device; the device's order runs through
    it. The node leads the user by :meth:`MilpPrep.slot_lead` (at_use: the load; overlap: the
    part of the load the user's compute does not cover, so the load ends by its end); the
    other users follow the load's end (overlap: the served user's end)."""
    n = inst.n_tasks
    tblock = inst.task_block.tolist()
    dur = [prep.dur[t][device[t]] for t in range(n)]
    served: dict[tuple[int, int], int] = {}
    for t in sorted(range(n), key=lambda t: (start[t], prep.topo_pos[t])):
        if tblock[t] >= 0:
            served.setdefault((tblock[t], device[t]), t)
    cross = [e for e in range(len(prep.src)) if device[prep.src[e]] != device[prep.dst[e]]]
    node_of = {e: n + k for k, e in enumerate(cross)}
    load_node = {key: n + len(cross) + k for k, key in enumerate(sorted(served))}
    slot_of = {t: load_node[key] for key, t in served.items()}
    size = n + len(cross) + len(load_node)
    lag_of = dur + [0] * (size - n)
    for (b, d), k in load_node.items():
        lag_of[k] = prep.slot_lead(b, d, served[(b, d)])
    arcs: list[list[int]] = [[] for _ in range(size)]

    def into(a: int, t: int) -> None:  # a precedes t, and t's load when t is served
        arcs[a].append(slot_of.get(t, t))

    for e in range(len(prep.src)):
        u, v = prep.src[e], prep.dst[e]
        if e in node_of:
            k = node_of[e]
            lag_of[k] = prep.trans[e][(device[u], device[v])]
            arcs[u].append(k)
            into(k, v)
        else:
            into(u, v)
    for t in range(n):  # every user of a loaded block there after its load
        if tblock[t] >= 0:
            key = (tblock[t], device[t])
            after = served[key] if prep.overlap and served[key] != t else load_node[key]
            arcs[after].append(t)
    chains = _chains(inst, prep, device, start, transfer, dur, cross, node_of, lag_of,
                     lambda t: dur[t] > 0 or lag_of[slot_of.get(t, t)] > 0)
    for key, items in chains.items():
        for (_, _, a), (_, _, b) in zip(items, items[1:]):
            if isinstance(key, tuple):  # a device: b's slot (its load) after a
                into(a, b)
            else:
                arcs[a].append(b)
    time_of = _earliest_times([0] * size, lag_of, arcs)
    return Decisions(list(device), time_of[:n], {e: time_of[node_of[e]] for e in cross},
                     {key: time_of[k] for key, k in load_node.items()})


def _port_schedule(prep: MilpPrep, tblock: list[int], device: list[int],
                   loads: dict[tuple[int, int], float]) -> dict[tuple[int, int], int]:
    """Load starts: the needed loads of every device back to back on its port in the order
    of the given (possibly fractional) starts; zero-length loads at 0."""
    need = sorted({(tblock[t], device[t]) for t in range(len(device)) if tblock[t] >= 0})
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
    return load_start


def _earliest_times(release: list[int], lag_of: list[int], arcs: list[list[int]]) -> list[int]:
    """Earliest event times of the acyclic event graph (t_b ≥ t_a + lag_a along every arc,
    t ≥ release); RuntimeError when the orders are cyclic."""
    size = len(release)
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
    return time_of


def canonical(dec: Decisions, groups: list[list[int]]) -> Decisions:
    """Relabel interchangeable devices so that a group's devices open in order of their lowest
    task index (the model's symmetry breaking); the schedule stays valid."""
    relabel = {}
    for g in groups:
        first = {d: min((t for t, dd in enumerate(dec.device) if dd == d), default=math.inf)
                 for d in g}
        relabel.update(dict(zip(sorted(g, key=lambda d: (first[d], d)), g)))
    if not relabel:
        return dec
    return Decisions([relabel.get(d, d) for d in dec.device], list(dec.start),
                     dict(dec.transfer),
                      {(b, relabel.get(d, d)): s for (b, d), s in dec.loads.items()})


def decode_solution(inst: PlacementInstance, solution: dict[str, Any]) -> Decisions:
    """Index form of a valid problems.md §1.2a solution (raises ValueError when it uses evictions or
    reloads, which this model cannot represent)."""
    if solution.get("evictions"):
        raise ValueError("the initial solution evicts blocks")
    tix, dix, bix = inst.task_index, inst.device_index, inst.block_index
    n = inst.n_tasks
    dec = Decisions([-1] * n, [0] * n)
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


def lift_group_energy(inst: PlacementInstance, prep: MilpPrep) -> tuple[MilpPrep, int | None]:
    """``prep`` with the heads and tails lifted by the identical-device group bounds of
    ``opt.placement.group_bound`` (tighter start windows and big-Ms) and that makespan bound
    (None without a group; ``prep`` then unchanged)."""
    gb = group_bounds(inst, np.asarray(prep.head, np.int64), np.asarray(prep.tail, np.int64))
    if gb is None:
        return prep, None
    head = [max(a, int(b)) for a, b in zip(prep.head, gb.head.tolist())]
    tail = [max(a, int(b)) for a, b in zip(prep.tail, gb.tail.tolist())]
    return replace(prep, head=head, tail=tail), gb.cmax_lb


def initial_decisions(inst: PlacementInstance, solution: dict[str, Any] | None,
                       ws: dict[str, Any]) -> Decisions | None:
    """The initial solution in index form, None when none is given or it is rejected (why
    goes to ``ws["initial_rejected"]``)."""
    if solution is None:
        return None
    try:
        validate_placement(inst, solution)
        return decode_solution(inst, solution)
    except (ScheduleError, ValueError, KeyError) as exc:
        ws["initial_rejected"] = str(exc)
        return None
