"""What the P3 serving back ends (:mod:`solvers.serving.methods`, :mod:`solvers.serving.milp`)
share: the deadline of a solve's time limit and the ``INFEASIBLE`` result that says why no plan
meets the SLO (the tightest T_rtt of a plan that fits, or why nothing fits)."""

from __future__ import annotations

import time
from typing import Any

from heuristics.serving import search as ss
from models.options import SolveOptions
from opt.common.result import Result
from opt.serving.instance import ServingInstance


def deadline(options: SolveOptions) -> float | None:
    """The perf_counter time (s) at which ``options.time_limit`` runs out (None: no limit)."""
    return None if options.time_limit is None else time.perf_counter() + options.time_limit


def seconds_left(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (at least 1 ms; None: no limit)."""
    return None if deadline is None else max(1e-3, deadline - time.perf_counter())


def infeasible(inst: ServingInstance, method: str, sequences: Any, mus: Any,
               stats: dict[str, Any], deadline: float | None = None) -> Result:
    """No plan in the space (owner ``sequences``, microbatch counts ``mus``) meets the SLO:
    the ``INFEASIBLE`` result of ``method`` with the tightest T_rtt (ms) of a plan that fits,
    found within what is left of the time limit (a search cut short reports what it saw), or
    why nothing fits; ``stats`` is extended in place."""
    tight = ss.search(inst, sequences, objective="t_rtt", microbatches=mus,
                      time_limit=seconds_left(deadline))
    if tight.stats.timed_out:
        stats["tightest_search"] = "stopped at the time limit"
    if tight.t_rtt is None and tight.stats.timed_out:
        stats["message"] = (f"no plan meets the TPOT SLO of "
                            f"{inst.seconds(inst.tpot_slo) * 1e3:.3f} ms; the time limit ran "
                            f"out before a plan that fits was found")
        return Result(problem="serving", method=method, status="INFEASIBLE", stats=stats)
    if tight.t_rtt is None:
        weights = sum(o.weight_bytes * int(c) for o, c in zip(inst.ops, inst.op_count))
        weights += inst.embed_weight_bytes
        best_mem = max(inst.replica_memory_bytes(c) for c in inst.configs)
        k = inst.grid.max_owners
        msg = (f"the model fits on no configuration: {weights / 1e9:.1f} GB of weights "
               f"(+ KV at {inst.context_tokens} tokens) against at most {k} owner(s) of "
               f"{best_mem / 1e9:.1f} GB per replica in this space")
    else:
        stats["tightest_t_rtt_ms"] = inst.seconds(float(tight.t_rtt)) * 1e3
        msg = (f"no plan meets the TPOT SLO of {inst.seconds(inst.tpot_slo) * 1e3:.3f} ms; "
               f"the tightest T_rtt of a plan that fits is "
               f"{inst.seconds(float(tight.t_rtt)) * 1e3:.3f} ms")
    stats["message"] = msg
    return Result(problem="serving", method=method, status="INFEASIBLE", stats=stats)
