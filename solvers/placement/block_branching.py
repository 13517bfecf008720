"""Exact P1 placement by branching on where each weight block is held (``cpsat-blocks``).

Every eviction-free schedule holds each weight block ``b`` on a set ``A_b`` of devices: the
devices that run a task of ``b`` (a copy that no task uses can be dropped without lengthening
the schedule). The search fixes ``A_b`` one block at a time, longest loads first. A node is
the CP-SAT model of ``models.placement.cpsat`` built on the instance restricted to the decided
sets — the tasks of ``b`` may only run on ``A_b``, and ``b`` is loaded (and used) on every
device of ``A_b`` — with the makespan capped one tick below the incumbent's.

Why it proves what the monolithic model cannot: on weight-load-dominated LLM slices the
makespan is decided jointly by the load ports and by the decode chain that has to run where
the blocks are. Restricting legality sharpens the model's device heads and tails
(``opt.placement.lower_bounds.device_heads_tails``) at every node, so CP-SAT's presolve refutes most
nodes in a fraction of a second, while one model over every placement of the blocks leaves
that reasoning to search.

Before the tree, a heuristic configuration search (``search_configurations``): one device per
block, least busy load ports first, Bifocal and HEFT on the restricted instance. Its best
configuration is the first dive's path and its schedule the first cap. Nodes do not rebuild the
model: one model of the whole instance is cloned and restricted (``PlacementCpSat.restrict``).

Search: best-first on the nodes' proven bounds, with dives — after a node is expanded its
first child (the preferred set: the configuration search's, later the incumbent's) is solved
next. Time per solve: ``node_time_limit`` for inner nodes (default 0.5 s; a tenth of it on the
incumbent's path, where a refutation means proving the incumbent optimal for the subtree),
``leaf_time_limit`` for a leaf's first attempt (default 8 s, doubled at each retry),
``root_time_limit`` for the root (default 10 % of the time limit, or the path time when the
configuration search beat the warm start), ``config_time_limit`` for the configuration search
(default 5 %; ``config_search=false`` skips it). Outcomes: infeasible under the cap → the
subtree cannot beat the incumbent (pruned); optimal → a new incumbent, subtree done;
otherwise the children are queued with the node's bound (a leaf goes back into the queue).
The result is OPTIMAL when no open node's bound is below the incumbent; at the time limit it
carries the incumbent and the smallest bound of the open nodes. Interchangeable devices
(``opt.placement.device_symmetry.interchangeable_devices``) are opened in order across the blocks, so
mirror-image sets are explored once (the node models break no symmetry themselves).

Parallelism: ``parallel_nodes`` nodes (default: ``num_workers``) are solved at once in
threads, each CP-SAT solve with ``num_workers // parallel_nodes`` workers; the root gets all
of them. The refutations are mostly single-threaded presolve, so two one-worker nodes beat one
two-worker node (measured before the configuration search: L2D1 proven in 22 s instead of
~40 s).

Alongside the tree, the whole model (capped below the incumbent, one worker) runs in one more
thread for the whole time (``portfolio``, default true). If it proves the optimum, or that
nothing beats the incumbent, the search ends. Small, compute-dominated instances are proven
this way: a 1-layer Mixtral slice in ~10 s, which the tree alone left open after 30 s. It costs
the load-dominated ones about a quarter (L2D2: ~9.6 s instead of ~7.7 s).

Parameters (``params``): the time limits above (seconds), ``config_search``, ``portfolio``,
``parallel_nodes``, ``redundant`` (false: the plain model, rebuilt per node, with
``symmetry_breaking``); every other name is a CP-SAT parameter applied to each node solve.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from models.interrupt import interruptible
from models.options import SolveOptions
from models.placement.cpsat import PlacementCpSat
from models.placement.cpsat_run import make_solver, ortools_version
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.device_symmetry import interchangeable_devices
from opt.placement.instance import PlacementInstance
from opt.placement.validator import validate_placement
from solvers.placement.warm_start import warm_start_schedule

#: default seconds per inner node
NODE_TIME_LIMIT_S = 0.5
#: default seconds for a leaf's first attempt (doubling per retry): leaves solved to optimality
#: are where the good incumbents come from, and the incumbent is what prunes the tree
LEAF_TIME_LIMIT_S = 8.0
#: default share of the time limit the root (the whole model) gets to find a good incumbent
ROOT_SHARE = 0.1


@dataclasses.dataclass(frozen=True)
class Node:
    """A set of decided blocks (``sets[i]`` holds the block ``order[i]``) and the best proven
    lower bound (time units) of its subtree so far."""

    sets: tuple[tuple[int, ...], ...]
    bound: float


@dataclasses.dataclass(frozen=True)
class NodeSolve:
    """One node's CP-SAT outcome: status code, proven bound of the node (inf when settled),
    its best schedule (or None), build and solve seconds."""

    code: int
    bound: float
    solution: dict[str, Any] | None
    build_s: float
    solve_s: float


def block_device_sets(inst: PlacementInstance) -> dict[int, list[tuple[int, ...]]]:
    """Per block the candidate sets of devices that may hold it: non-empty subsets of the
    devices that can load it and run one of its tasks, leaving every task a legal device."""
    out: dict[int, list[tuple[int, ...]]] = {}
    legal = inst.cost >= 0
    for b in range(len(inst.block_ids)):
        users = np.flatnonzero(inst.task_block == b)
        if not len(users):
            continue
        devs = [d for d in range(inst.n_devices)
                if legal[users, d].any() and inst.load_duration[b, d] >= 0]
        out[b] = [s for k in range(1, len(devs) + 1) for s in itertools.combinations(devs, k)
                  if legal[np.ix_(users, list(s))].any(axis=1).all()]
    return out


#: at most this many one-device-per-block configurations are ranked for the heuristic
#: configuration search (else only the greedy port-balanced one is tried)
CONFIG_ENUMERATION = 200_000
#: default share of the time limit for the heuristic configuration search
CONFIG_SHARE = 0.05


def restricted(inst: PlacementInstance, order: Sequence[int],
               sets: Sequence[tuple[int, ...]]) -> PlacementInstance:
    """``inst`` with the tasks of block ``order[i]`` legal only on the devices ``sets[i]``."""
    cost = inst.cost.copy()
    for b, s in zip(order, sets):
        mask = inst.task_block == b
        for d in range(inst.n_devices):
            if d not in s:
                cost[mask, d] = -1
    return dataclasses.replace(inst, cost=cost)


def single_device_configs(inst: PlacementInstance, sets: dict[int, list[tuple[int, ...]]],
                          order: list[int]) -> np.ndarray:
    """One-device-per-block configurations (rows: the device of ``order[i]`` in column i),
    least busy load port first (then least total load). Weight loads dominate the instances
    this search is for; the busiest port's load is also a lower bound on the makespan of
    every schedule with that configuration. Too many to enumerate: the greedy port-balanced
    configuration (longest loads first) alone."""
    loads = inst.load_duration
    single = [[s[0] for s in sets[b] if len(s) == 1] for b in order]
    if not all(single):
        return np.zeros((0, len(order)), dtype=np.int64)
    if math.prod(len(v) for v in single) <= CONFIG_ENUMERATION:
        combos = np.array(list(itertools.product(*single)), dtype=np.int64).reshape(
            -1, len(order))
    else:
        port = np.zeros(inst.n_devices, dtype=np.int64)
        row = []
        for b, devs in zip(order, single):
            d = min(devs, key=lambda d: (max(port.max(), port[d] + loads[b, d]), loads[b, d]))
            port[d] += loads[b, d]
            row.append(d)
        combos = np.array([row], dtype=np.int64)
    port = np.zeros((len(combos), inst.n_devices), dtype=np.int64)
    rows = np.arange(len(combos))
    for j, b in enumerate(order):
        np.add.at(port, (rows, combos[:, j]), loads[b, combos[:, j]])
    return combos[np.lexsort((port.sum(axis=1), port.max(axis=1)))]


class BlockBranching:
    """The search state: instance, block order, candidate sets, incumbent and counters."""

    def __init__(self, inst: PlacementInstance, options: SolveOptions):
        self.inst, self.options = inst, options
        self.t0 = time.perf_counter()
        params = dict(options.params)
        total = options.time_limit
        self.node_time = self._seconds(params, "node_time_limit", NODE_TIME_LIMIT_S)
        self.leaf_time = self._seconds(params, "leaf_time_limit", LEAF_TIME_LIMIT_S)
        # inner nodes on the incumbent's path: a tenth of that
        self.path_time = self.node_time / 10
        self.config_search = bool(params.pop("config_search", True))
        self.config_time = self._seconds(params, "config_time_limit",
                                         CONFIG_SHARE * (total if total is not None else 60.0))
        self.root_given = "root_time_limit" in params
        self.root_time = self._seconds(params, "root_time_limit", max(
            self.node_time, ROOT_SHARE * (total if total is not None else 60.0)))
        self.portfolio = bool(params.pop("portfolio", True))
        workers = int(options.num_workers)
        self.parallel = int(params.pop("parallel_nodes", workers))
        if not 1 <= self.parallel:
            raise InputError(f"parallel_nodes must be ≥ 1, got {self.parallel}",
                             field="parallel_nodes")
        # the root (the whole model) gets every worker; the other nodes share them
        self.node_options = dataclasses.replace(options,
                                                num_workers=max(1, workers // self.parallel))
        self.model_flags = {"redundant": bool(params.pop("redundant", True)),
                            "symmetry_breaking": bool(params.pop("symmetry_breaking", True))}
        self.cp_params = params
        # one model of the whole instance, cloned and restricted per node (no symmetry
        # breaking inside it: the tree opens interchangeable devices in order); the plain
        # model (redundant=False) is rebuilt per node
        self.base = PlacementCpSat(inst, symmetry_breaking=False) \
            if self.model_flags["redundant"] else None
        self.sets = block_device_sets(inst)
        loads = inst.load_duration
        # longest cheapest load first: the big blocks decide the most
        self.order = sorted(self.sets, key=lambda b: (-int(loads[b][loads[b] >= 0].min()), b))
        self.groups = interchangeable_devices(inst)
        self.best: dict[str, Any] | None = None
        self.best_span: int | None = None
        self.best_sets: dict[int, tuple[int, ...]] = {}
        # the sets the dives take first: the configuration search's best, then (once a leaf
        # has been solved) the incumbent's
        self.prefer: dict[int, tuple[int, ...]] = {}
        self.guided = False  # True once a leaf has been solved (the first dive's, normally)
        self.found = False  # the search (not the warm start) has found an incumbent
        self.stats = {"nodes": 0, "refuted": 0, "solved": 0, "retries": 0, "incumbents": 0,
                      "build_s": 0.0, "solve_s": 0.0,
                      "by_depth": {}, "incumbent_trace": []}  # [s, makespan, nodes]
        # the node solvers running in the pool's threads, stopped together at Ctrl-C
        self.running: set[cp_model.CpSolver] = set()
        self.halted = False
        self.running_lock = threading.Lock()
        initial = options.initial_solution
        if initial is not None and not initial.get("evictions"):
            self._offer(initial, from_search=False)  # (the search is eviction-free)

    @staticmethod
    def _seconds(params: dict[str, Any], name: str, default: float) -> float:
        value = float(params.pop(name, default))
        if not value > 0:
            raise InputError(f"{name} must be > 0 seconds, got {value}", field=name)
        return value

    # ---- incumbent --------------------------------------------------------------------------
    def _offer(self, solution: dict[str, Any], from_search: bool = True) -> None:
        """Keep ``solution`` if its validated makespan beats the incumbent's (a schedule the
        search found also steers the dives)."""
        span = validate_placement(self.inst, solution).makespan
        if self.best_span is None or span < self.best_span:
            self.best, self.best_span = solution, span
            self.stats["incumbents"] += 1
            self.stats["incumbent_trace"].append(
                [round(time.perf_counter() - self.t0, 3), int(span), self.stats["nodes"]])
            where: dict[int, set[int]] = {}
            names = self.inst.device_index
            for ev in solution["compute"]:
                b = int(self.inst.task_block[self.inst.task_index[ev["task"]]])
                if b >= 0:
                    where.setdefault(b, set()).add(names[ev["device"]])
            self.best_sets = {b: tuple(sorted(s)) for b, s in where.items()}
            self.found |= from_search
            if from_search and self.guided:
                self.prefer = self.best_sets

    # ---- children ---------------------------------------------------------------------------
    def children(self, node: Node) -> list[Node]:
        """The node's children: the preferred set first (``prefer``), then smaller sets."""
        depth = len(node.sets)
        b = self.order[depth]
        opened = set().union(*node.sets) if node.sets else set()
        kids = []
        for s in self.sets[b]:
            if self._canonical(opened, set(s)):
                kids.append(s)
        mine = self.prefer.get(b)
        kids.sort(key=lambda s: (s != mine, len(s), s))
        return [Node(node.sets + (s,), node.bound) for s in kids]

    def _canonical(self, opened: set[int], new: set[int]) -> bool:
        """Interchangeable devices are opened in index order (one of each mirror image)."""
        for g in self.groups:
            for prev, d in zip(g, g[1:]):
                if d in new and prev not in opened and prev not in new:
                    return False
        return True

    # ---- one node ---------------------------------------------------------------------------
    def solve_node(self, node: Node, time_limit: float | None, deadline: float | None
                   ) -> tuple[str, float]:
        """Solve ``node`` under the incumbent cap for ``time_limit`` (None = no limit), and
        not past ``deadline`` (perf_counter seconds, building included): ("refuted" | "solved"
        | "open", bound)."""
        return self._record(node, self._run_node(node, time_limit, deadline,
                                                 *self._cap_and_hint(node)))

    def _on_incumbent_path(self, node: Node) -> bool:
        """Does the subtree of ``node`` hold the incumbent's configuration? (It can only be
        refuted by proving the incumbent optimal for the whole subtree: rarely quick.)"""
        return self.best_span is not None and all(
            self.best_sets.get(b) == s for b, s in zip(self.order, node.sets))

    def _cap_and_hint(self, node: Node) -> tuple[int | None, dict[str, Any] | None]:
        """The makespan cap (one below the incumbent) and the incumbent as a hint when its
        block sets agree with the node's."""
        if self.best_span is None:
            return None, None
        return self.best_span - 1, (self.best if self._on_incumbent_path(node) else None)

    def _run_node(self, node: Node, time_limit: float | None, deadline: float | None,
                  cap: int | None, hint: dict[str, Any] | None,
                  options: SolveOptions | None = None) -> NodeSolve:
        """Build and solve one node (reads the search's fixed data only: safe in a thread)."""
        t0 = time.perf_counter()
        sub = restricted(self.inst, self.order, node.sets)
        loaded = [(b, d) for b, s in zip(self.order, node.sets) for d in s]
        if self.base is not None:  # clone the model, add the restriction's cuts
            model = self.base.restrict(sub, loaded, cap)
        else:
            model = PlacementCpSat(sub, **self.model_flags)
            for key in loaded:
                model.model.add(model.load_lit[key] == 1)
            if cap is not None:
                model.model.add(model.cmax <= cap)
        if hint is not None:
            model.add_hint(hint)
        t1 = time.perf_counter()
        if deadline is not None:
            time_limit = max(0.0, min(deadline - t1, time_limit or math.inf))
        solver = make_solver(self.cp_params, options or self.node_options, time_limit)
        with self.running_lock:
            if self.halted:  # the search was interrupted while this node was being built
                raise KeyboardInterrupt
            self.running.add(solver)
        try:
            code = solver.solve(model.model)
        finally:
            with self.running_lock:
                self.running.discard(solver)
        if code == cp_model.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected a node model: {model.model.validate()}")
        solution = model.extract(solver) if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) \
            else None
        bound = math.inf if code in (cp_model.OPTIMAL, cp_model.INFEASIBLE) else \
            max(node.bound, model.cmax_lb, math.ceil(solver.best_objective_bound - 1e-6))
        return NodeSolve(code, bound, solution, t1 - t0, time.perf_counter() - t1)

    def _record(self, node: Node, res: NodeSolve) -> tuple[str, float]:
        """Count a node's solve and keep its schedule if it beats the incumbent."""
        self.stats["build_s"] += res.build_s
        self.stats["solve_s"] += res.solve_s
        self.stats["nodes"] += 1
        if res.solution is not None:
            self._offer(res.solution)
        if len(node.sets) == len(self.order) and not self.guided:
            self.guided = True  # the dives now follow the incumbent
            if self.found:
                self.prefer = self.best_sets
        outcome = {cp_model.INFEASIBLE: "refuted", cp_model.OPTIMAL: "solved"}.get(res.code,
                                                                                 "open")
        if outcome != "open":
            self.stats[outcome] += 1
        row = self.stats["by_depth"].setdefault(str(len(node.sets)), {})  # JSON keys
        row[outcome] = row.get(outcome, 0) + 1
        return outcome, res.bound

    def halt(self) -> None:
        """Ctrl-C (called by :func:`models.interrupt.interruptible`'s watcher, again and again
        until the search returns): no node starts any more, every running node solver and the
        whole model stop."""
        with self.running_lock:
            self.halted = True
            solvers = list(self.running)
        for solver in solvers:
            solver.stop_search()

    # ---- the whole model, alongside the tree -------------------------------------------------
    def _start_whole(self, pool: ThreadPoolExecutor, deadline: float | None):
        """Start the whole model (capped below the incumbent, one worker) in ``pool`` for the
        whole time: some instances (small, compute-dominated) it proves faster than the tree."""
        cap, hint = self._cap_and_hint(Node((), 0.0))
        model = self.base.restrict(self.inst, (), cap)
        if hint is not None:
            model.add_hint(hint)
        left = None if deadline is None else max(0.0, deadline - time.perf_counter())
        solver = make_solver(self.cp_params, dataclasses.replace(self.options, num_workers=1),
                             left)
        with self.running_lock:
            self.running.add(solver)  # (never removed: a finished solver ignores a stop)
        return pool.submit(solver.solve, model.model), solver, model, cap

    def _finish_whole(self, whole) -> bool:
        """Take the whole model's outcome: True when it settles the search (optimal, or no
        schedule below the cap it started with)."""
        fut, solver, model, cap = whole
        code = fut.result()
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self._offer(model.extract(solver))
        settled = code == cp_model.OPTIMAL or (code == cp_model.INFEASIBLE and cap is not None)
        self.stats["whole_model"] = ("optimal" if code == cp_model.OPTIMAL else
                                     "refuted" if settled else "open")
        return settled

    # ---- heuristic configurations --------------------------------------------------------------
    def search_configurations(self, time_limit: float) -> None:
        """Incumbents before the tree: for one-device-per-block configurations whose busiest
        load port ends before the incumbent (least busy first), Bifocal's and HEFT's schedules
        of the restricted instance (milliseconds each). The best configuration found is the
        first dive's path. Llama-2-7B on HP32, 2 layers: Bifocal on the optimum's
        configuration gives the optimum, while on the whole instance it is 4 % above it."""
        t_end = time.perf_counter() + time_limit
        configs = single_device_configs(self.inst, self.sets, self.order)
        loads = self.inst.load_duration
        tried = 0
        for row in configs:
            if time.perf_counter() >= t_end:
                break
            port = np.bincount(row, weights=loads[self.order, row],
                               minlength=self.inst.n_devices)
            if self.best_span is not None and port.max() >= self.best_span:
                break  # sorted: no later configuration can beat the incumbent
            sub = restricted(self.inst, self.order, [(int(d),) for d in row])
            tried += 1
            start = warm_start_schedule(sub, "best")  # eviction-free HEFT / Bifocal
            if start is not None:
                self._offer(start.solution)
        self.stats["configurations"] = tried
        if self.found:
            self.prefer = dict(self.best_sets)
        elif len(configs):
            self.prefer = {b: (int(d),) for b, d in zip(self.order, configs[0])}

    # ---- search -----------------------------------------------------------------------------
    def run(self) -> tuple[str, float | None]:
        """Best-first search (lowest bound first, deeper first among equals) with dives: after
        a node is expanded its first child (the incumbent's set, else the smallest) is solved
        next, so leaves — and incumbents — come early. Up to ``parallel_nodes`` nodes are
        solved at once (threads; CP-SAT releases the GIL), each under the incumbent's cap when
        it started. Stops when no open node's bound is below the incumbent or the time runs
        out: (status, lower bound). A leaf left open goes back with twice the time for its
        next attempt."""
        total = self.options.time_limit
        deadline = None if total is None else time.perf_counter() + float(total)
        if self.order and self.config_search:
            self.search_configurations(self.config_time)
            if self.found and not self.root_given:
                # a configuration beat the warm start: the root (on the incumbent's path) has
                # little left to find, the tree proves it
                self.root_time = self.path_time
        nodes = _OpenNodes()
        pool = ThreadPoolExecutor(max_workers=self.parallel + 1)
        # Ctrl-C: the solvers stop, the loop ends, KeyboardInterrupt after the pool is done
        with contextlib.ExitStack() as stack:
            stack.enter_context(interruptible(self.halt))
            stack.callback(pool.shutdown, wait=True)  # (first out: the watcher still stops)
            self._search(pool, nodes, deadline)
        return self._outcome(nodes)

    def _search(self, pool: ThreadPoolExecutor, nodes: _OpenNodes, deadline: float | None
                ) -> None:
        """Solve open nodes, ``parallel_nodes`` at a time, beside the whole model (with
        ``portfolio``), until none is left below the incumbent, the time is up or the whole
        model settled everything (the queue is then emptied)."""
        whole = self._start_whole(pool, deadline) if self.portfolio and self.order else None
        inflight: dict[Future, tuple[Node, int]] = {}
        stopped = settled = False
        while True:
            if whole is not None and whole[0].done():
                settled = self._finish_whole(whole)
                whole = None
                if settled:
                    nodes.clear()
            if not (stopped or settled):
                stopped = self._submit(pool, nodes, inflight, deadline)
            if not inflight:  # the queue is empty, or the time is up, or it is settled
                break
            waiting = list(inflight) + ([whole[0]] if whole is not None else [])
            done, _ = wait(waiting, return_when=FIRST_COMPLETED)
            self._collect(done, inflight, nodes, settled)
        if whole is not None:  # the tree finished first (or the time ran out)
            whole[1].stop_search()
            if self._finish_whole(whole) or settled:
                nodes.clear()

    def _submit(self, pool: ThreadPoolExecutor, nodes: _OpenNodes,
                inflight: dict[Future, tuple[Node, int]], deadline: float | None) -> bool:
        """Start the next open nodes until ``parallel_nodes`` run (or none is left below the
        incumbent, or the search was halted). True when the time is up: the node picked last
        goes back to the queue."""
        while not self.halted and len(inflight) < self.parallel:
            picked = nodes.next_below(self.best_span)
            if picked is None:
                return False
            node, attempts = picked
            left = None if deadline is None else deadline - time.perf_counter()
            if left is not None and left <= 0:
                nodes.push(node, attempts)
                return True
            limit = self._node_limit(node, attempts, left)
            fut = pool.submit(self._run_node, node, limit, deadline, *self._cap_and_hint(node),
                              self.options if not node.sets else self.node_options)
            inflight[fut] = (node, attempts)
        return False

    def _node_limit(self, node: Node, attempts: int, left: float | None) -> float | None:
        """Seconds for one node: the root's, a leaf's (doubled per earlier attempt), the
        incumbent path's or an inner node's, within ``left`` (None = no limit)."""
        if not self.order:  # no weight blocks: the root is the only node
            return left
        depth = len(node.sets)
        limit = (self.root_time if depth == 0 else
                 self.leaf_time * 2 ** attempts if depth == len(self.order)
                 else self.path_time if self._on_incumbent_path(node)
                 else self.node_time)
        return limit if left is None else min(limit, left)

    def _collect(self, done: set[Future], inflight: dict[Future, tuple[Node, int]],
                 nodes: _OpenNodes, settled: bool) -> None:
        """Record the nodes whose solves are ``done``; an open node goes back: a leaf for
        another attempt, an inner node as its children (the first one dived into)."""
        for fut in done:
            if fut not in inflight:
                continue  # the whole model: handled at the top of the search loop
            node, attempts = inflight.pop(fut)
            outcome, bound = self._record(node, fut.result())
            if outcome != "open" or settled:
                continue
            node = dataclasses.replace(node, bound=bound)
            if len(node.sets) == len(self.order):
                self.stats["retries"] += 1
                nodes.push(node, attempts + 1)
                continue
            kids = self.children(node)
            nodes.dive.extend(kids[:1])
            for kid in kids[1:]:
                nodes.push(kid, 0)

    def _outcome(self, nodes: _OpenNodes) -> tuple[str, float | None]:
        """(status, lower bound) from the incumbent and the open nodes below it."""
        open_bounds = nodes.bounds()
        if self.best_span is not None:
            open_bounds = [b for b in open_bounds if b < self.best_span]
        self.stats["open_nodes"] = len(open_bounds)
        if not open_bounds:
            return ("OPTIMAL", float(self.best_span)) if self.best is not None \
                else ("INFEASIBLE", None)
        return ("FEASIBLE" if self.best is not None else "TIME_LIMIT_NO_SOLUTION",
                float(min(open_bounds)))


class _OpenNodes:
    """The open nodes of the search: a dive stack, taken first, and a best-first heap (lowest
    bound, then deepest, then first pushed), each node with its number of earlier attempts."""

    def __init__(self) -> None:
        self.dive: list[Node] = [Node((), 0.0)]
        self.heap: list[tuple[float, int, int, Node, int]] = []
        self._tie = itertools.count()

    def push(self, node: Node, attempts: int) -> None:
        """Queue ``node`` on the heap."""
        heapq.heappush(self.heap, (node.bound, -len(node.sets), next(self._tie), node, attempts))

    def next_below(self, best_span: float | None) -> tuple[Node, int] | None:
        """The next node whose bound is below ``best_span`` (None = no incumbent) and its
        attempts; None when there is none (the heap is emptied once the incumbent bounds every
        queued node)."""
        while self.dive or self.heap:
            node, attempts = (self.dive.pop(), 0) if self.dive else heapq.heappop(self.heap)[3:]
            if best_span is None or node.bound < best_span:
                return node, attempts
            if not self.dive and not (self.heap and self.heap[0][0] < best_span):
                self.heap.clear()  # every queued node is bounded by the incumbent
        return None

    def clear(self) -> None:
        """Drop every open node (the whole model settled the search)."""
        self.heap.clear()
        self.dive.clear()

    def bounds(self) -> list[float]:
        """The bounds of the open nodes."""
        return [entry[0] for entry in self.heap] + [n.bound for n in self.dive]


def solve_placement_blocks(inst: PlacementInstance, options: SolveOptions,
                           method: str = "cpsat-blocks") -> Result:
    """Solve P1 exactly (without evictions) by branching on the devices that hold each weight
    block, with a CP-SAT model per node (module docstring)."""
    t0 = time.perf_counter()
    search = BlockBranching(inst, options)
    status, lb = search.run()
    return Result(
        problem="placement", method=method, status=status,
        objective=None if search.best_span is None else float(search.best_span),
        lower_bound=lb, runtime_s=time.perf_counter() - t0, seed=options.seed,
        params={"time_limit": options.time_limit, "num_workers": options.num_workers,
                **options.params},
        solution=search.best,
        stats={"no_evictions": True, **search.stats,
               "block_order": [inst.block_ids[b] for b in search.order],
               "symmetry_groups": [[inst.devices[d].name for d in g] for g in search.groups],
               "solver": f"ortools {ortools_version()}",
               "warm_start": options.initial_solution is not None})
