"""P3 plan search: the regularity-aware branch-and-bound (OpWeave §5), exhaustive enumeration,
and the fixed-boundary baselines COL / AFD / CAD (problems.md §3.2, §6).

Every search runs over *owner sequences*: the owner of each op of the partition block, cyclic,
changing only to the next owner (mod K) — exactly the plans a round-robin template can express
(``opt.serving.plan.template_from_sequence`` turns one back into a template). Owner 0 is, by
convention, the owner of the block's first op (this removes the K rotations of each plan).

Spaces:
- *full*: every owner sequence over the block (exhaustive enumeration; tiny instances only);
- *structured* (regularity-aware): the sequence of one sub-block of ``sub_block_layers`` layers
  tiled over the block (default 1 layer: every layer of the block is cut the same way);
- *fixed*: one given per-layer pattern (COL: K = 1; AFD: attention module | FFN/MoE;
  CAD: core attention | the rest).

For a fixed sequence and μ, an owner's choice (configuration c, per-replica batch b) affects the
plan only through: its ops' durations, the transfers it sends (fixed by b̂ = b/μ), its price
per request c/b, its GPUs per replica and b (replicas). The objective's T_rtt is the exact
period of the plan's periodic schedule (:mod:`opt.serving.period`), a maximum cycle mean of
the durations, hence non-decreasing in each of them. Hence

- **network-safe Pareto frontier** per owner: among choices with the same b (same b̂, so the
  same transfer sizes and replica counts) keep those not dominated in (every op's duration,
  price, GPUs, and the network tables of every crossing it takes part in: a crossing's
  network follows both endpoints' GPU types, problems.md §3.1) and, for an owner taking part
  in a crossing that redistributes (:mod:`opt.serving.crossing`: a boundary whose
  redistribution tables are not all zero), of the same TP degree with no larger
  redistribution tables (whether such a crossing redistributes depends on both TP degrees:
  OpWeave §5.2 compares points of one TP degree only; an owner whose crossings never
  redistribute leaves every crossing's cost independent of its TP degree); dropping a
  dominated choice never loses the
  optimum (swap it for its dominator: the period, the cost rate and the GPU count stay or
  drop);
- with several networks, or crossings that redistribute, a candidate's transfer terms are
  their minimum over the partner's GPU type and TP degree (the send/recv alone, without
  redistribution: a lower bound under every partner layout, used by the bounds below) and
  are made exact at the leaves, once every owner's configuration is known;
- **bounds** (OpWeave App. C.1 in this model): with owners 1..d chosen,
  ``T_rtt ≥ Σ_chosen (busy + sent transfers) + Σ_rest min(busy + sent)`` (compute + network
  along the path), ``T_rtt ≥ μ·busy`` and ``μ·NIC load`` of each chosen owner, and
  ``cost rate ≥ Σ_chosen c/b + Σ_rest min c/b``; a node is cut when ``T_LB > SLO``, when
  ``T_LB · rate_LB ≥ incumbent``, or when the GPUs / replicas already committed exceed the grid.

The bounds use the old T_rtt formula, a lower bound on the exact period. At the leaves the
plans are taken in the order of their formula value and evaluated exactly (the role OpWeave
gives its simulator) until the formula value cannot beat the incumbent.

Both switches only prune; ``--no-frontier`` / ``--no-bounds`` find the same optimum (tested).
Counts reported: ``space`` (owner choices × sequences × μ before any pruning), ``candidates``
(after memory feasibility and frontiers), ``nodes`` (search-tree nodes), ``evaluations`` (full
plans scored by the formula at the leaves), ``exact_evaluations`` (exact periods computed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from heuristics.serving.net_terms import NetTerms
from opt.serving.chain import owner_chain
from opt.serving.instance import ServingInstance, lcm_all, microbatch_counts
from opt.serving.period import chain_period
from opt.serving.plan import Owner, ServingPlan, crossings, resident_bytes, template_from_sequence

#: What the leaves optimise: the exact period (problems.md §3.2) or its lower-bound formula.
PERIODS = ("exact", "formula")

#: Per-layer owner patterns of the baselines over the builder's five ops per layer
#: (qkv, attn, o_proj, ffn_in, ffn_out).
BASELINE_PATTERNS = {"col": (0, 0, 0, 0, 0), "afd": (0, 0, 0, 1, 1), "cad": (0, 1, 0, 0, 0)}


# ---- owner sequences -------------------------------------------------------------------------

def owner_patterns(length: int, k: int, max_stages: int | None = None
                   ) -> Iterator[np.ndarray]:
    """Every cyclic round-robin owner sequence of ``length`` ops that starts with owner 0 and
    uses all ``k`` owners (with at most ``max_stages`` stages, i.e. owner changes around the
    cycle, when given)."""
    if k == 1:
        yield np.zeros(length, dtype=np.int64)
        return
    seq = [0] * length
    cap = length if max_stages is None else min(length, max_stages)

    def rec(pos: int, cur: int, changes: int) -> Iterator[np.ndarray]:
        if pos == length:
            wrap = 0 if cur == 0 else 1
            if (cur + wrap) % k == 0 and (changes + wrap) % k == 0 and \
                    k <= changes + wrap <= cap:
                yield np.array(seq, dtype=np.int64)
            return
        for nxt in (cur, (cur + 1) % k):
            if nxt != cur and changes + 1 > cap:
                continue
            seq[pos] = nxt
            yield from rec(pos + 1, nxt, changes + (nxt != cur))

    yield from rec(1, 0, 0)


def tile(inst: ServingInstance, sub_block_layers: int, pattern: np.ndarray) -> np.ndarray:
    """Repeat a sub-block's owner pattern over the block."""
    reps = inst.block_layers // sub_block_layers
    return np.tile(pattern, reps)


def sub_block_length(inst: ServingInstance, sub_block_layers: int) -> int:
    """Ops in a sub-block of ``sub_block_layers`` layers; raises ValueError when the block is
    not a whole number of identical-length sub-blocks."""
    if sub_block_layers < 1 or inst.block_layers % sub_block_layers:
        raise ValueError(f"sub-block of {sub_block_layers} layers does not divide the block of "
                         f"{inst.block_layers} layers")
    per_layer = [sum(1 for o in inst.ops if o.layer == l) for l in range(inst.block_layers)]
    if len(set(per_layer)) != 1:
        raise ValueError(f"layers of the block have different op counts {per_layer}: "
                         f"templates cannot be tiled; use the full space")
    return per_layer[0] * sub_block_layers


# ---- per-sequence owner data ---------------------------------------------------------------

@dataclass
class _Role:
    """One owner of a fixed owner sequence: its op mask and what its choices cost."""

    busy: np.ndarray      # [C, MB] ticks per token
    send: np.ndarray      # [G, MB] transfer durations it sends along the path per token
    out: np.ndarray       # [G, MB] busier NIC direction (out / in at its own b̂) per token
    weights: float        # resident bytes per replica
    kv: float             # KV bytes per request
    times: np.ndarray     # [C, MB, n] its ops' durations (block order), heads appended
    net: NetTerms             # its network terms per crossing network (exact at the leaves)
    redistributes: bool = False  # some boundary it sends or receives has a redistribution
    _dominance: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def dominance(self) -> tuple[np.ndarray, np.ndarray]:
        """``(le, lt)``, bool [MB, C, C]: ``le[mb, j, i]`` every op of configuration j at
        microbatch index mb takes at most as long as on i, ``lt[mb, j, i]`` some op strictly
        less (the duration part of the frontier's dominance; computed once per owner, shared
        by every μ)."""
        if self._dominance is None:
            t = np.swapaxes(self.times, 0, 1)                  # [MB, C, n]
            self._dominance = (np.asarray((t[:, :, None, :] <= t[:, None, :, :]).all(axis=3)),
                               np.asarray((t[:, :, None, :] < t[:, None, :, :]).any(axis=3)))
        return self._dominance


@dataclass
class _Seq:
    owner: np.ndarray
    roles: list[_Role]
    key: bytes = b""  # the owner sequence's bytes (cache key)


def _sequence_data(inst: ServingInstance, owner: np.ndarray, dur_cnt: np.ndarray) -> _Seq:
    """Per owner of ``owner``: busy time for every (config, microbatch), the transfers it
    sends and receives per network and microbatch size, and its resident bytes
    (``opt.serving.plan``'s crossing and memory rules, vectorised over the tables)."""
    k = int(owner.max()) + 1
    first, last = int(owner[0]), int(owner[inst.last_op])
    shape = (k, inst.n_networks, len(inst.microbatch_sizes))
    send, out, inn = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    tsend, tout, tin = (np.zeros(shape, dtype=np.int64) for _ in range(3))
    rshape = (k, *inst.reshard_out.shape[:2])
    r_out, r_in = np.zeros(rshape, dtype=np.int64), np.zeros(rshape, dtype=np.int64)
    redis = np.zeros(k, dtype=bool)   # owner m takes part in a crossing that redistributes
    if k > 1:
        for i, snd, rcv, occ in crossings(inst, owner):
            assert rcv == (snd + 1) % k  # round robin: changes go to the next owner
            send[snd] += occ * inst.transfer_duration[:, :, i]
            out[snd] += occ * inst.transfer_busy[:, :, i]
            inn[rcv] += occ * inst.transfer_busy[:, :, i]
            if inst.has_reshard:
                r_out[snd] += occ * inst.reshard_out[:, :, i]
                r_in[rcv] += occ * inst.reshard_in[:, :, i]
                if inst.reshard_out[:, :, i].any() or inst.reshard_in[:, :, i].any():
                    redis[[snd, rcv]] = True
        if last != first:
            tsend[last] += inst.token_transfer_duration
            tout[last] += inst.token_transfer_busy
            tin[first] += inst.token_transfer_busy
    weights, kv = resident_bytes(inst, owner, k)
    cross = inst.crossing_network
    roles = []
    for m in range(k):
        busy = dur_cnt[:, :, owner == m].sum(axis=2)
        times = [inst.op_duration[:, :, owner == m]]
        if m == first:
            busy = busy + inst.head_duration[:, :, 0]
            times.append(inst.head_duration[:, :, :1])
        if m == last:
            busy = busy + inst.head_duration[:, :, 1]
            times.append(inst.head_duration[:, :, 1:2])
        net = NetTerms(send[m], out[m], tsend[m], tout[m], inn[m], tin[m],
                       *((r_out[m], r_in[m]) if inst.has_reshard else (None, None)))
        lb_send, lb_out = net.optimistic(cross)
        roles.append(_Role(busy, lb_send, lb_out, float(weights[m]), float(kv[m]),
                           np.concatenate(times, axis=2), net, bool(redis[m])))
    return _Seq(owner, roles, owner.tobytes())


@dataclass
class _Cands:
    """The choices of one owner for a fixed sequence and μ (parallel arrays)."""

    cfg: np.ndarray
    batch: np.ndarray
    mb: np.ndarray
    busy: np.ndarray
    send: np.ndarray
    out: np.ndarray       # busier NIC direction of one replica per token
    rate: np.ndarray      # $/s per request of one replica: price / b
    tp: np.ndarray
    times: np.ndarray     # [n, ops] per-op durations (the frontier's dominance vector)

    def __len__(self) -> int:
        return len(self.cfg)

    def take(self, idx: np.ndarray) -> _Cands:
        return _Cands(*(getattr(self, f)[idx] for f in
                        ("cfg", "batch", "mb", "busy", "send", "out", "rate", "tp", "times")))


@dataclass(frozen=True)
class _Configs:
    """Per configuration: replica price ($/s), usable memory (bytes), GPUs; the GPU-count part
    of the frontier's dominance (``tp_le[j, i]``: tp_j ≤ tp_i, ``tp_lt`` strictly) and the
    tie rule (``earlier[j, i]``: j < i, of equal choices the first is kept)."""

    price: np.ndarray
    cap: np.ndarray
    tp: np.ndarray
    tp_le: np.ndarray
    tp_lt: np.ndarray
    earlier: np.ndarray
    gpu: np.ndarray       # [C] GPU type index
    net_le: np.ndarray    # [C, C] j's crossings never cost more than i's (problems.md §3.1)
    static_le: np.ndarray  # [C, C] tp_le & net_le (choice-independent ``le``)
    redis_le: np.ndarray  # [C, C] static_le & reshard_le: for an owner whose crossings
    #                       redistribute

    @classmethod
    def of(cls, inst: ServingInstance) -> _Configs:
        tp = np.array([c.tp for c in inst.configs])
        idx = np.arange(len(tp))
        g = inst.config_gpu
        tp_le = tp[:, None] <= tp[None, :]
        net_le = inst.gpu_network_dominates[g[:, None], g[None, :]]
        return cls(np.array([inst.replica_price_usd_per_s(c) for c in inst.configs]),
                   np.array([inst.replica_memory_bytes(c) for c in inst.configs]), tp,
                   tp_le, tp[:, None] < tp[None, :], idx[:, None] < idx[None, :], g, net_le,
                   tp_le & net_le, tp_le & net_le & _reshard_le(inst))


def _reshard_le(inst: ServingInstance) -> np.ndarray:
    """bool [C, C]: configuration j's crossings never redistribute more than i's against any
    partner — same TP degree (whether a crossing redistributes depends on it, OpWeave §5.2's
    "same tensor-parallel degree") and no larger redistribution table; all True when no
    crossing redistributes."""
    nc = len(inst.configs)
    if not inst.has_reshard:
        return np.ones((nc, nc), dtype=bool)
    tp = np.array([c.tp for c in inst.configs])
    tabs = np.concatenate([inst.reshard_out[:nc].reshape(nc, -1),
                           inst.reshard_in[:nc].reshape(nc, -1)], axis=1)
    le = (tabs[:, None, :] <= tabs[None, :, :]).all(axis=2)
    return le & (tp[:, None] == tp[None, :])


def _candidates(inst: ServingInstance, cfgs: _Configs, role: _Role, mu: int, frontier: bool
                ) -> tuple[_Cands, int]:
    """Memory-feasible choices (config, batch) of one owner, in batch then configuration
    order, on the frontier when ``frontier`` (:func:`_frontier_mask`), cheapest-looking first;
    returns them and the raw count (vectorised over batches and configurations)."""
    bs = [b for b in inst.batches if not b % mu and (b // mu) in inst.microbatch_sizes]
    raw = len(bs) * len(inst.configs)
    if not bs:
        empty = np.zeros(0, dtype=np.int64)
        return _Cands(empty, empty, empty, empty, empty, empty, np.zeros(0), empty,
                      np.zeros((0, role.times.shape[2]), dtype=np.int64)), raw
    b_arr = np.array(bs, dtype=np.int64)
    mb_arr = np.array([inst.mb_index(b // mu) for b in bs], dtype=np.int64)
    ok = ((role.weights + b_arr[:, None] * role.kv <= cfgs.cap[None, :])
          & (cfgs.tp <= inst.grid.max_gpus)[None, :])         # [batch, config]
    rate_bc = cfgs.price[None, :] / b_arr[:, None]            # $/s per request
    keep = _frontier_mask(cfgs, role, mb_arr, rate_bc, ok) if frontier else ok
    bi, ci = np.nonzero(keep)
    mb = mb_arr[bi]
    if len(role.send) == 1:   # one GPU type
        send, out = role.send[0][mb], role.out[0][mb]
    else:
        g = cfgs.gpu[ci]
        send, out = role.send[g, mb], role.out[g, mb]
    cands = _Cands(ci.astype(np.int64), b_arr[bi], mb, role.busy[ci, mb].astype(np.int64),
                   send.astype(np.int64), out.astype(np.int64), rate_bc[bi, ci],
                   cfgs.tp[ci].astype(np.int64), role.times[ci, mb].astype(np.int64))
    # cheapest-looking first, so good incumbents come early
    order = np.argsort(cands.rate * (cands.busy + cands.send), kind="stable")
    return cands.take(order), raw


def _frontier_mask(cfgs: _Configs, role: _Role, mb_arr: np.ndarray, rate_bc: np.ndarray,
                   ok: np.ndarray) -> np.ndarray:
    """bool [batch, config]: the feasible choices (``ok``) not dominated by another feasible
    choice of the same batch in (every op's duration, rate, tp, and — configurations of
    different GPU types — every crossing's network tables); of equal vectors the first
    configuration is kept. Per-op dominance (not just the total busy time) keeps the exact
    period safe: it is a maximum cycle mean, non-decreasing in every duration (problems.md
    §3.2)."""
    t_le, t_lt = role.dominance()
    r_j, r_i = rate_bc[:, :, None], rate_bc[:, None, :]
    # le[b, j, i]: j at least as good as i; lt: strictly better somewhere
    le = t_le[mb_arr] & (r_j <= r_i) & \
        (cfgs.redis_le if role.redistributes else cfgs.static_le)[None]
    lt = t_lt[mb_arr] | (r_j < r_i) | cfgs.tp_lt[None]
    dominated = (le & (lt | cfgs.earlier[None]) & ok[:, :, None]).any(axis=1)
    return ok & ~dominated


#: Owner sequences bounded at once by :func:`sequence_cost_bounds` (its arrays are
#: sequences × owners × configurations × microbatch sizes).
BOUND_CHUNK = 4096


def sequence_cost_bounds(inst: ServingInstance, sequences: Sequence[np.ndarray],
                         mus: Sequence[int], deadline: float | None = None
                         ) -> np.ndarray | None:
    """:func:`_chunk_cost_bounds` of ``sequences``, :data:`BOUND_CHUNK` at a time (bounded
    memory); None when ``deadline`` (perf_counter seconds) passes first."""
    parts = []
    for lo in range(0, len(sequences), BOUND_CHUNK):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        parts.append(_chunk_cost_bounds(inst, sequences[lo:lo + BOUND_CHUNK], mus))
    return np.concatenate(parts) if parts else np.zeros(0)


def _chunk_cost_bounds(inst: ServingInstance, sequences: Sequence[np.ndarray],
                       mus: Sequence[int]) -> np.ndarray:
    """A lower bound on the cost per token ($) of every plan over each owner sequence,
    vectorised over the sequences: ``CPT = T·Σ_m c_m/b_m ≥ Σ_m μ·busy_m·c_m/b_m`` (T ≥ μ·busy_m
    for every owner, the exact period included) ``= Σ_m busy_m(c, b̂)·c/b̂``, each owner at its
    cheapest (configuration, microbatch size) that some μ allows: b = μ·b̂ a grid batch, its
    weights + b·KV within the configuration's memory, μ·busy_m within the SLO."""
    owner = np.asarray(sequences, dtype=np.int64)              # [s, n]
    k = int(owner.max()) + 1
    cnt = inst.op_count.astype(np.float64)
    dur_cnt = inst.op_duration * cnt[None, None, :]            # [c, b, n]
    masks = (owner[:, None, :] == np.arange(k)[None, :, None]).astype(np.float64)  # [s, m, n]
    busy = np.einsum("smn,cbn->smcb", masks, dur_cnt)
    rows = np.arange(len(owner))
    first, last = owner[:, 0], owner[:, inst.last_op]
    busy[rows, first] += inst.head_duration[None, :, :, 0]
    busy[rows, last] += inst.head_duration[None, :, :, 1]
    # resident bytes by the checker's own rule (opt.serving.plan.resident_bytes)
    res = [resident_bytes(inst, o, k) for o in owner]
    weights = np.array([w for w, _ in res])                   # [s, m]
    kv = np.array([v for _, v in res])
    price = np.array([inst.replica_price_usd_per_s(c) for c in inst.configs])
    cap = np.array([inst.replica_memory_bytes(c) for c in inst.configs])
    tp_ok = np.array([c.tp <= inst.grid.max_gpus for c in inst.configs])
    mb = np.array(inst.microbatch_sizes, dtype=np.float64)
    unit = price[:, None] / mb[None, :]                        # [c, b] $/s per request
    best = np.full(len(owner), np.inf)
    for mu in mus:
        valid = np.array([mu * b in inst.batches for b in inst.microbatch_sizes])
        if not valid.any():
            continue
        fits = (weights[:, :, None, None] + mu * mb[None, None, None, :] * kv[:, :, None, None]
                <= cap[None, None, :, None])                  # [s, m, c, b]
        ok = fits & (tp_ok[:, None] & valid[None, :])[None, None] & \
            (mu * busy <= inst.tpot_slo)
        per_owner = np.where(ok, busy * unit[None, None], np.inf)
        best = np.minimum(best, per_owner.reshape(len(owner), k, -1).min(axis=2).sum(axis=1))
    return best * inst.seconds(1)


# ---- the search ------------------------------------------------------------------------------

@dataclass
class SearchStats:
    space: int = 0
    candidates: int = 0
    nodes: int = 0
    evaluations: int = 0
    sequences: int = 0
    exact_evaluations: int = 0        # exact periods computed (distinct plans up to batch)
    sequences_pruned: int = 0         # owner sequences cut by their cost lower bound
    tightest_t_rtt_formula: int | None = None  # lower bound on the tightest T_rtt that fits
    runtime_s: float = 0.0
    timed_out: bool = False

    def to_dict(self) -> dict:
        return {"space": self.space, "candidates": self.candidates, "nodes": self.nodes,
                "evaluations": self.evaluations, "sequences": self.sequences,
                "exact_evaluations": self.exact_evaluations,
                "sequences_pruned": self.sequences_pruned,
                "tightest_t_rtt_formula": self.tightest_t_rtt_formula,
                "runtime_s": self.runtime_s,
                "timed_out": self.timed_out}


@dataclass
class SearchOutcome:
    plan: ServingPlan | None
    cost_usd_per_token: float | None
    t_rtt: Fraction | None  # the exact period (ticks)
    stats: SearchStats = field(default_factory=SearchStats)


class _Searcher:
    def __init__(self, inst: ServingInstance, *, frontier: bool, bounds: bool,
                 objective: str, time_limit: float | None, period: str = "exact"):
        if period not in PERIODS:
            raise ValueError(f"period must be one of {PERIODS}, got {period!r}")
        self.period = period
        self.inst = inst
        self.frontier = frontier
        self.bounds = bounds
        self.objective = objective  # "cost" or "t_rtt" (the tightest T_rtt, SLO ignored)
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.tick_s = inst.seconds(1)
        self.best = math.inf
        self.best_key: tuple | None = None
        self.stats = SearchStats()
        self.dur_cnt = inst.op_duration * inst.op_count[None, None, :]
        self.cfgs = _Configs.of(inst)
        # exact network terms at the leaves: the candidates' are lower bounds over partners
        self.multi_net = inst.n_networks > 1 or inst.has_reshard
        self.periods: dict[tuple, Fraction] = {}

    def _value(self, t: np.ndarray, rate: np.ndarray) -> np.ndarray:
        return t * self.tick_s * rate if self.objective == "cost" else t.astype(np.float64)

    def expired(self) -> bool:
        """Whether the time limit has run out (then ``stats.timed_out`` is set)."""
        if not self.stats.timed_out and self.deadline is not None and \
                time.perf_counter() > self.deadline:
            self.stats.timed_out = True
        return self.stats.timed_out

    def run(self, sequences: Sequence[np.ndarray], mus: Sequence[int]) -> None:
        if self.expired():
            return
        lbs = None
        if self.bounds and self.objective == "cost" and len(sequences) > 1:
            lbs = sequence_cost_bounds(self.inst, sequences, mus, self.deadline)
            if lbs is None:
                self.stats.timed_out = True
                return
        order = (np.argsort(lbs, kind="stable") if lbs is not None
                 else np.arange(len(sequences)))
        for pos, i in enumerate(order):
            if lbs is not None and not lbs[i] < self.best:
                self.stats.sequences_pruned += len(order) - pos  # sorted: the rest cannot win
                return
            owner = sequences[int(i)]
            seq = _sequence_data(self.inst, owner, self.dur_cnt)
            self.stats.sequences += 1
            for mu in mus:
                if self.expired():
                    return
                cands = []
                raw_prod = 1
                prod = 1
                for role in seq.roles:
                    c, raw = _candidates(self.inst, self.cfgs, role, mu, self.frontier)
                    cands.append(c)
                    raw_prod *= raw
                    prod *= len(c)
                self.stats.space += raw_prod
                self.stats.candidates += prod
                if prod == 0:
                    continue
                min_path = [int((c.busy + c.send).min()) for c in cands]
                min_rate = [float(c.rate.min()) for c in cands]
                min_tp = [int(c.tp.min()) for c in cands]
                self._dfs(seq, mu, cands, [], min_path, min_rate, min_tp)

    def _dfs(self, seq: _Seq, mu: int, cands: list[_Cands], chosen: list[int],
             min_path: list[int], min_rate: list[float], min_tp: list[int]) -> None:
        d = len(chosen)
        k = len(cands)
        if self.expired():  # the tree of one sequence can be large: look at every node
            return
        self.stats.nodes += 1
        if d == k - 1:
            self._leaves(seq, mu, cands, chosen)
            return
        if not self.bounds:
            for j in range(len(cands[d])):
                if self.stats.timed_out:
                    return
                self._dfs(seq, mu, cands, chosen + [j], min_path, min_rate, min_tp)
            return
        viable, val = self._node_bounds(mu, cands, chosen, min_path, min_rate, min_tp)
        for j in np.flatnonzero(viable).tolist():
            if self.stats.timed_out:
                return
            if val[j] >= self.best:  # the incumbent improves during the loop
                continue
            self._dfs(seq, mu, cands, chosen + [j], min_path, min_rate, min_tp)

    def _node_bounds(self, mu: int, cands: list[_Cands], chosen: list[int],
                     min_path: list[int], min_rate: list[float], min_tp: list[int]
                     ) -> tuple[np.ndarray, list[float]]:
        """For each choice j of the next owner (d = len(chosen)): whether it passes the
        incumbent-independent cuts (T_LB within the SLO, replicas and GPUs within the grid)
        and its bound value (T_LB × rate_LB, or T_LB), vectorised over j."""
        d = len(chosen)
        c = cands[d]
        rest_path = sum(min_path[d + 1:])
        rest_rate = sum(min_rate[d + 1:])
        rest_tp = sum(min_tp[d + 1:])
        base_path = sum(int(cands[m].busy[j] + cands[m].send[j]) for m, j in enumerate(chosen))
        base_rate = sum(float(cands[m].rate[j]) for m, j in enumerate(chosen))
        base_busy = max([int(cands[m].busy[j]) for m, j in enumerate(chosen)], default=0)
        base_out = max([int(cands[m].out[j]) for m, j in enumerate(chosen)], default=0)
        t_lb = np.maximum.reduce([base_path + (c.busy + c.send) + rest_path,
                                  mu * np.maximum(base_busy, c.busy),
                                  mu * np.maximum(base_out, c.out)])
        cost = self.objective == "cost"
        viable = t_lb <= self.inst.tpot_slo if cost else np.ones(len(c), dtype=bool)
        val = (t_lb * self.tick_s * ((base_rate + c.rate) + rest_rate) if cost
               else t_lb.astype(np.float64))
        lcm = np.lcm(lcm_all(int(cands[m].batch[j]) for m, j in enumerate(chosen)), c.batch)
        max_rep = self.inst.grid.max_replicas
        viable &= lcm // c.batch <= max_rep
        gpus = c.tp * lcm // c.batch
        for m, jj in enumerate(chosen):
            b = int(cands[m].batch[jj])
            viable &= lcm // b <= max_rep
            gpus = gpus + int(cands[m].tp[jj]) * lcm // b
        viable &= gpus + rest_tp <= self.inst.grid.max_gpus
        return viable, val.tolist()

    def _leaves(self, seq: _Seq, mu: int, cands: list[_Cands], chosen: list[int]) -> None:
        inst = self.inst
        k = len(cands)
        last = cands[k - 1]
        nl = len(last)
        self.stats.evaluations += nl
        path = np.full(nl, 0, dtype=np.int64)
        busy_max = np.zeros(nl, dtype=np.int64)
        out_max = np.zeros(nl, dtype=np.int64)
        rate = np.zeros(nl)
        for m, j in enumerate(chosen):
            c = cands[m]
            path += int(c.busy[j] + c.send[j])
            busy_max = np.maximum(busy_max, int(c.busy[j]))
            out_max = np.maximum(out_max, int(c.out[j]))
            rate += float(c.rate[j])
        path += last.busy + last.send
        busy_max = np.maximum(busy_max, last.busy)
        out_max = np.maximum(out_max, last.out)
        rate += last.rate
        if self.multi_net:  # the candidates' network terms were lower bounds: make them exact
            # (each crossing on its endpoints' network, redistributed when their TP differs)
            path, out_max = self._exact_network(seq, cands, chosen, path)
        t = np.maximum.reduce([path, mu * busy_max, mu * out_max])
        # replicas and GPUs with the global batch B = lcm of the owners' batches
        lcm = np.lcm(lcm_all(int(cands[m].batch[j]) for m, j in enumerate(chosen)),
                     last.batch)
        ok = (lcm // last.batch <= inst.grid.max_replicas)
        gpus = last.tp * (lcm // last.batch)
        for m, j in enumerate(chosen):
            reps = lcm // int(cands[m].batch[j])
            ok &= reps <= inst.grid.max_replicas
            gpus = gpus + int(cands[m].tp[j]) * reps
        ok &= gpus <= inst.grid.max_gpus
        if not ok.any():
            return
        tight = int(t[ok].min())
        if self.stats.tightest_t_rtt_formula is None or tight < self.stats.tightest_t_rtt_formula:
            self.stats.tightest_t_rtt_formula = tight
        if self.objective == "cost":
            ok &= t <= inst.tpot_slo  # the formula is a lower bound: beyond the SLO for sure
            if not ok.any():
                return
        # the formula's value is a lower bound: evaluate exact periods in its order until it
        # cannot beat the incumbent
        lb = np.where(ok, self._value(t, rate), np.inf)
        if self.period == "formula":  # optimise the lower-bound formula itself
            j = int(np.argmin(lb))
            if lb[j] < self.best:
                self._improve(seq, mu, cands, chosen, j, float(lb[j]), Fraction(int(t[j])))
            return
        picks = [(int(cands[m].cfg[jj]), int(cands[m].mb[jj])) for m, jj in enumerate(chosen)]
        for j in np.argsort(lb, kind="stable"):
            if not lb[j] < self.best or self.expired():
                break
            period = self._period(seq, mu, picks + [(int(last.cfg[j]), int(last.mb[j]))])
            if self.objective == "cost" and period > inst.tpot_slo:
                continue
            val = (float(period) * self.tick_s * float(rate[j]) if self.objective == "cost"
                   else float(period))
            if val < self.best:
                self._improve(seq, mu, cands, chosen, int(j), val, period)

    def _exact_network(self, seq: _Seq, cands: list[_Cands], chosen: list[int],
                       path: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(path, busier NIC) of every leaf with each crossing on the network of its two
        endpoints' GPU types (problems.md §3.1): the optimistic network terms of the path
        are replaced by the exact ones, and the NIC term is recomputed (vectorised over the
        last owner's choices)."""
        k = len(cands)
        last = cands[k - 1]
        gpu = self.cfgs.gpu
        cfg = [int(cands[m].cfg[j]) for m, j in enumerate(chosen)] + [last.cfg]
        g = [int(gpu[cands[m].cfg[j]]) for m, j in enumerate(chosen)] + [gpu[last.cfg]]
        mb = [int(cands[m].mb[j]) for m, j in enumerate(chosen)] + [last.mb]
        differ = self.inst.config_reshard
        lb_send = sum(int(cands[m].send[j]) for m, j in enumerate(chosen)) + last.send
        first, end = int(seq.owner[0]), int(seq.owner[self.inst.last_op])
        cross = self.inst.crossing_network
        send_sum = np.zeros(len(last), dtype=np.int64)
        nic = np.zeros(len(last), dtype=np.int64)
        for m, role in enumerate(seq.roles):
            reshard = role.net.reshard_ticks(differ, cfg[m], cfg[(m + 1) % k],
                                             cfg[(m - 1) % k], mb[m])
            send, busier = role.net.exact(cross, g[m], g[(m + 1) % k], g[(m - 1) % k],
                                          g[first], g[end], mb[m], reshard)
            send_sum = send_sum + send
            nic = np.maximum(nic, busier)
        return path - lb_send + send_sum, nic

    def _improve(self, seq: _Seq, mu: int, cands: list[_Cands], chosen: list[int], j: int,
                 value: float, period: Fraction) -> None:
        """A new incumbent: the chosen owners plus the last owner's choice ``j``."""
        picks = [(int(cands[m].cfg[jj]), int(cands[m].batch[jj])) for m, jj in enumerate(chosen)]
        last = cands[-1]
        picks.append((int(last.cfg[j]), int(last.batch[j])))
        self.best = value
        self.best_key = (seq.owner.copy(), picks, mu, period)

    def _period(self, seq: _Seq, mu: int, picks: list[tuple[int, int]]) -> Fraction:
        """Exact T_rtt (ticks) of ``seq`` with owner m on (configuration, microbatch index)
        ``picks[m]`` and μ microbatches (cached: it does not depend on the batch beyond b̂)."""
        key = (seq.key, mu, tuple(picks))
        got = self.periods.get(key)
        if got is None:
            cfg = np.array([c for c, _ in picks], dtype=np.int64)
            mb = np.array([b for _, b in picks], dtype=np.int64)
            got = chain_period(owner_chain(self.inst, seq.owner, cfg, mb), mu).t_rtt
            self.periods[key] = got
            self.stats.exact_evaluations += 1
        return got


def _plan_from(inst: ServingInstance, owner: np.ndarray, picks: list[tuple[int, int]],
               mu: int) -> ServingPlan:
    k = len(picks)
    template, perm = template_from_sequence(owner, k)
    owners = tuple(Owner(inst.configs[picks[p][0]].id, picks[p][1]) for p in perm)
    return ServingPlan(template, owners, mu)


def _microbatches(inst: ServingInstance, microbatches: Sequence[int] | None) -> list[int]:
    return list(microbatches) if microbatches else microbatch_counts(inst.grid)


def _owner_counts(inst: ServingInstance, owners: Sequence[int] | None) -> list[int]:
    return list(owners) if owners else list(range(1, inst.grid.max_owners + 1))


def search(inst: ServingInstance, sequences_by_k: dict[int, list[np.ndarray]], *,
           frontier: bool = True, bounds: bool = True, objective: str = "cost",
           microbatches: Sequence[int] | None = None, time_limit: float | None = None,
           incumbent: float | None = None, period: str = "exact") -> SearchOutcome:
    """Minimise cost per token (or, with ``objective="t_rtt"``, T_rtt ignoring the SLO) over
    the given owner sequences, every owner choice and μ.

    incumbent: the objective value of a known plan ($ per token, or ticks); only strictly
    better plans are then returned (``plan`` None means none is better).
    period: ``"exact"`` (the problem's T_rtt) or ``"formula"`` (optimise the old formula, its
    lower bound: the optimum is then a lower bound on the exact one, and the plan a heuristic).
    time_limit: seconds; on expiry the best plan so far is returned with
    ``stats.timed_out``."""
    t0 = time.perf_counter()
    s = _Searcher(inst, frontier=frontier, bounds=bounds, objective=objective,
                  time_limit=time_limit, period=period)
    if incumbent is not None:
        s.best = float(incumbent)
    mus = _microbatches(inst, microbatches)
    for k in sorted(sequences_by_k):
        s.run(sequences_by_k[k], mus)
    s.stats.runtime_s = time.perf_counter() - t0
    if s.best_key is None:
        return SearchOutcome(None, None, None, s.stats)
    owner, picks, mu, t = s.best_key
    plan = _plan_from(inst, owner, picks, mu)
    cost = s.best if objective == "cost" else None
    return SearchOutcome(plan, cost, t, s.stats)


#: The structured space caps the stages of a multi-layer sub-block's template (a stated
#: modelling choice: that space is exponential in the sub-block's ops). Default: K, one stage
#: per owner per sub-block — OpWeave's plans for hybrid models (the full-attention layer's
#: attention on its own group: 2 stages per block). One-layer templates are never capped.
def default_max_stages(k: int) -> int:
    """The default stage cap of a multi-layer sub-block template with ``k`` owners."""
    return k


def sub_block_lengths(inst: ServingInstance) -> list[int]:
    """Every sub-block length (layers) that divides the block, ascending (the whole block
    included): problems.md §6."""
    return [d for d in range(1, inst.block_layers + 1) if inst.block_layers % d == 0]


#: The most owner sequences a space holds (each an int64 array over the block's ops, some
#: hundred bytes): a larger space is enumerated in part (:class:`Space`), and a search over it
#: proves nothing over the whole space.
MAX_SEQUENCES = 200_000
#: Sequences enumerated between two looks at the clock.
_CLOCK_EVERY = 256


@dataclass
class Space:
    """Owner sequences by owner count; ``cut`` None when they are the whole space, else why
    they are a part of it (the time limit, or more than :data:`MAX_SEQUENCES`)."""

    sequences: dict[int, list[np.ndarray]]
    cut: str | None = None

    @property
    def complete(self) -> bool:
        return self.cut is None


def _gather(patterns: Iterator[tuple[int, np.ndarray]], deadline: float | None,
            max_sequences: int | None) -> Space:
    """The distinct sequences of ``patterns`` ((owner count, sequence) pairs, in order) by
    owner count, until the patterns end, ``deadline`` (perf_counter seconds) passes or
    ``max_sequences`` are held."""
    out: dict[int, list[np.ndarray]] = {}
    seen: set[bytes] = set()
    n = 0
    for k, t in patterns:
        out.setdefault(k, [])
        key = t.tobytes()
        if key in seen:
            continue
        if max_sequences is not None and n >= max_sequences:
            return Space(out, f"more than {max_sequences:,} owner sequences (the first "
                              f"{max_sequences:,} searched)")
        n += 1
        if deadline is not None and n % _CLOCK_EVERY == 0 and time.perf_counter() > deadline:
            return Space(out, f"the time limit ran out while enumerating owner sequences "
                              f"({n:,} enumerated)")
        seen.add(key)
        out[k].append(t)
    return Space(out)


def structured_space(inst: ServingInstance, sub_block_layers: int | None = None,
                     owners: Sequence[int] | None = None, max_stages: int | None = None, *,
                     deadline: float | None = None, max_sequences: int | None = None
                     ) -> Space:
    """The regularity-aware space: a sub-block's owner sequences tiled over the block, for one
    sub-block length or (None) every length that divides the block, each sequence once (a
    1-layer pattern tiled is also a 2-layer pattern). Templates of multi-layer sub-blocks have
    at most ``max_stages`` stages (default :func:`default_max_stages`; one-layer templates are
    complete). Shorter sub-blocks come first (cheap incumbents), fewer owners first.
    Enumeration stops at ``deadline`` (perf_counter seconds) or at ``max_sequences``
    sequences (:class:`Space` says so)."""
    lengths = [sub_block_layers] if sub_block_layers is not None else sub_block_lengths(inst)
    sizes = [(lsub, sub_block_length(inst, lsub)) for lsub in lengths]  # ValueError first

    def patterns() -> Iterator[tuple[int, np.ndarray]]:
        for k in _owner_counts(inst, owners):
            for lsub, length in sizes:
                cap = (None if lsub == 1 else
                       max(max_stages if max_stages is not None else default_max_stages(k), k))
                for p in owner_patterns(length, k, cap):
                    yield k, tile(inst, lsub, p)

    space = _gather(patterns(), deadline, max_sequences)
    for k in _owner_counts(inst, owners):
        space.sequences.setdefault(k, [])
    return space


def structured_sequences(inst: ServingInstance, sub_block_layers: int | None = None,
                         owners: Sequence[int] | None = None,
                         max_stages: int | None = None) -> dict[int, list[np.ndarray]]:
    """The whole of :func:`structured_space` (no time or size limit)."""
    return structured_space(inst, sub_block_layers, owners, max_stages).sequences


def full_space(inst: ServingInstance, owners: Sequence[int] | None = None, *,
               deadline: float | None = None, max_sequences: int | None = None) -> Space:
    """Every owner sequence over the whole block (exponential: tiny instances only), until
    ``deadline`` or ``max_sequences`` (:class:`Space`)."""
    space = _gather(((k, p) for k in _owner_counts(inst, owners)
                     for p in owner_patterns(inst.n_ops, k)), deadline, max_sequences)
    for k in _owner_counts(inst, owners):
        space.sequences.setdefault(k, [])
    return space


def full_sequences(inst: ServingInstance, owners: Sequence[int] | None = None
                   ) -> dict[int, list[np.ndarray]]:
    """Every owner sequence over the whole block (exponential: tiny instances only)."""
    return full_space(inst, owners).sequences


def baseline_sequences(inst: ServingInstance, name: str) -> dict[int, list[np.ndarray]]:
    """COL / AFD / CAD: their fixed per-layer pattern tiled over the block."""
    pattern = np.array(BASELINE_PATTERNS[name], dtype=np.int64)
    length = sub_block_length(inst, 1)
    if length != len(pattern):
        raise ValueError(f"baseline '{name}' needs the builder's {len(pattern)} ops per layer "
                         f"(qkv, attn, o_proj, ffn_in, ffn_out); the instance has {length}")
    k = int(pattern.max()) + 1
    return {k: [tile(inst, 1, pattern)]}
