"""P3 plans (problems.md §3.2): their structure — owners, the cyclic stage template and the owner
sequence it induces, boundary crossings, resident bytes — and their solution objects.
Evaluation and checking are in :mod:`opt.serving.checker`.

A plan ``(template q_0 < … < q_S, owners m = 1..K, μ)`` cuts the block's op sequence cyclically
into S stages (stage j covers block positions q_{j−1} … q_j − 1, positions ≥ N wrapping into
the next block) owned round-robin by ``σ(j) = ((j − 1) mod K) + 1``. The ops before q_0 in the
first block belong to stage S of the (absent) previous block. Over a token the op sequence is
``embed, block 1, …, block B, final norm + LM head``: the embedding gather runs on the owner of
the first op, the LM head on the owner of the last op, and when those differ the sampled token
ids travel back over the network (one more transfer in the round trip).

A truncated last block (layers not a multiple of the block period, e.g. Gemma-3's 62 = 10·6 + 2)
runs the template's first ops only; every quantity counts each op's real executions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.serving.instance import ServingInstance


class PlanError(ValueError):
    """A plan that breaks a rule of problems.md §3.2 (message names the rule, owner and numbers)."""


@dataclass(frozen=True)
class Owner:
    """One device-group type of a plan: its configuration, per-replica batch and replicas."""

    config: str
    batch: int
    replicas: int = 0  # 0: derive the smallest consistent count (lcm of the batches / batch)


@dataclass(frozen=True)
class ServingPlan:
    """A P3 plan (problems.md §3.2; a serving result's ``result.plan(instance)``): the cyclic
    stage ``template`` q_0 < … < q_S (block op positions), the ``owners`` (device-group
    types) in stage order and the ``microbatches`` μ. Its period, cost, replicas and GPUs are
    the plan checker's (``result.plan_metrics(instance)``,
    :func:`opt.serving.checker.evaluate_plan`)."""

    template: tuple[int, ...]
    owners: tuple[Owner, ...]
    microbatches: int

    @property
    def stages_per_block(self) -> int:
        return len(self.template) - 1

    @property
    def owners_count(self) -> int:
        return len(self.owners)


def boundary_occurrences(inst: ServingInstance, i: int) -> int:
    """How many times per token the boundary after block op i is crossed: the times op i + 1
    runs, and for the block boundary (i = N − 1) the times op 0 runs after a previous block."""
    cnt = inst.op_count
    return int(cnt[i + 1]) if i < inst.n_ops - 1 else int(cnt[0]) - 1


def crossings(inst: ServingInstance, owner: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Every stage boundary a token crosses under the owner sequence ``owner``: (block op i
    after which it falls, sender, receiver, occurrences per token). The token-id return from
    the LM-head owner to the embedding owner is not included (see the module docstring)."""
    n = inst.n_ops
    out = []
    for i in range(n):
        nxt = (i + 1) % n
        if owner[i] == owner[nxt]:
            continue
        occ = boundary_occurrences(inst, i)
        if occ > 0:
            out.append((i, int(owner[i]), int(owner[nxt]), occ))
    return out


def resident_bytes(inst: ServingInstance, owner: np.ndarray, k: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(weights [k], KV per request [k]) each owner holds per replica: its ops' weights and KV
    in every block they run in, the embedding on the first op's owner and the LM head on the
    last op's owner (stored once when tied and both are the same owner)."""
    cnt = inst.op_count
    weights = np.zeros(k, dtype=np.float64)
    kv = np.zeros(k, dtype=np.float64)
    np.add.at(weights, owner, cnt * np.array([o.weight_bytes for o in inst.ops], dtype=np.float64))
    np.add.at(kv, owner, cnt * np.array([o.kv_bytes_per_request for o in inst.ops],
                                        dtype=np.float64))
    first, last = int(owner[0]), int(owner[inst.last_op])
    weights[first] += inst.embed_weight_bytes
    if not (inst.tied_embeddings and last == first):
        weights[last] += inst.lm_head_weight_bytes
    return weights, kv


def owner_sequence(n_ops: int, template: tuple[int, ...], k: int) -> np.ndarray:
    """int64 [i]: 0-based owner of block op i under the cyclic template (rules in the module
    docstring). Raises PlanError on a malformed template."""
    q = [int(x) for x in template]
    s = len(q) - 1
    if s < 1:
        raise PlanError(f"template {q}: needs at least two entries (q_0 < … < q_S)")
    if not 0 <= q[0] < n_ops:
        raise PlanError(f"template {q}: q_0 = {q[0]} must be in 0..{n_ops - 1}")
    if any(b <= a for a, b in zip(q, q[1:])):
        raise PlanError(f"template {q}: entries must increase strictly")
    if q[-1] != q[0] + n_ops:
        raise PlanError(f"template {q}: q_S − q_0 = {q[-1] - q[0]} must equal the block's "
                        f"{n_ops} ops")
    if k > 1 and s % k:
        raise PlanError(f"template {q}: S = {s} stages is not a multiple of K = {k} owners")
    owner = np.empty(n_ops, dtype=np.int64)
    for j in range(s):
        for p in range(q[j], q[j + 1]):
            owner[p % n_ops] = j % k
    return owner


def template_from_sequence(owner: np.ndarray, k: int) -> tuple[tuple[int, ...], list[int]]:
    """Inverse of :func:`owner_sequence` for a cyclic owner sequence whose changes go to the next
    owner (mod k): returns the template and ``perm`` with ``perm[j]`` = the input label of the
    owner of stage j + 1 (so owners can be listed in problems.md §3.2 order)."""
    n = len(owner)
    cuts = [i for i in range(n) if owner[i] != owner[i - 1]]
    if not cuts:
        return (0, n), [int(owner[0])]
    for i in cuts:
        if owner[i] != (owner[i - 1] + 1) % k:
            raise PlanError(f"owner sequence {owner.tolist()}: change at op {i} from owner "
                            f"{owner[i - 1]} to {owner[i]} is not round-robin")
    template = tuple(cuts) + (cuts[0] + n,)
    first = int(owner[cuts[0]])
    return template, [(first + j) % k for j in range(k)]


def _count(value: Any, what: str, minimum: int) -> int:
    """An integer ≥ ``minimum`` from a solution (integral floats accepted; bools, strings,
    fractions and out-of-range values are a :class:`PlanError` naming ``what``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer)) or \
            (isinstance(value, float) and not value.is_integer()):
        raise PlanError(f"{what} must be an integer, got {value!r}")
    if not minimum <= value <= 2 ** 62:
        raise PlanError(f"{what} must be an integer ≥ {minimum}, got {value!r}")
    return int(value)


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{what} must be an object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise PlanError(f"{what} must be a list, got {type(value).__name__}")
    return value


def _owner(inst: ServingInstance, k: int, o: Any) -> Owner:
    """owners[k] of a solution: its configuration (by id, or by gpu/tp/ep), batch ≥ 1 and
    replicas (≥ 1; missing, null or 0: derived from the batches); reported gpu/tp/ep must be
    those of the configuration."""
    o = _object(o, f"owners[{k}]")
    cid = o.get("config")
    ep = _count(o.get("ep", 1), f"owners[{k}].ep", 1)
    if cid is None:
        gpu, tp = o.get("gpu"), _count(o.get("tp"), f"owners[{k}].tp", 1)
        match = [c.id for c in inst.configs if c.gpu == gpu and c.tp == tp and c.ep == ep]
        if not match:
            raise PlanError(f"owners[{k}]: no configuration {gpu} tp={tp} ep={ep} in the "
                            f"instance")
        cid = match[0]
    if not isinstance(cid, str):
        raise PlanError(f"owners[{k}].config must be a string, got {cid!r}")
    try:
        cfg = inst.configs[inst.config_index(cid)]
    except ValueError as exc:
        raise PlanError(f"owners[{k}]: {exc}") from None
    for key in ("gpu", "tp", "ep"):
        if key in o and o[key] != getattr(cfg, key):
            raise PlanError(f"owners[{k}] reports {key} = {o[key]!r} but configuration "
                            f"'{cfg.id}' has {getattr(cfg, key)!r}")
    replicas = o.get("replicas")
    return Owner(cid, _count(o.get("batch"), f"owners[{k}].batch", 1),
                 0 if replicas in (None, 0) else _count(replicas, f"owners[{k}].replicas", 1))


def plan_from_solution(inst: ServingInstance, solution: dict[str, Any]) -> ServingPlan:
    """The :class:`ServingPlan` of a problems.md §3.2 solution object (owners by config id or by
    gpu/tp/ep); PlanError naming the field when malformed."""
    sol = _object(solution, "solution")
    for key in ("template", "owners", "microbatches"):
        if key not in sol:
            raise PlanError(f"malformed plan: missing field '{key}'")
    template = tuple(_count(x, f"template[{i}]", 0)
                     for i, x in enumerate(_list(sol["template"], "template")))
    owners = tuple(_owner(inst, k, o) for k, o in enumerate(_list(sol["owners"], "owners")))
    return ServingPlan(template, owners, _count(sol["microbatches"], "microbatches", 1))
