"""A P3 serving plan → the viewer's payload: its steady-state pipeline (OpWeave Fig. 7).

The jobs are :func:`opt.serving.period.steady_round`'s — ``cycle`` rounds of the periodic
regime, ticks from the first start — repeated ``periods`` times (shifted by
``cycle · T_rtt``, exact as the regime is periodic) so the pipeline's steady state reads
across round boundaries. Lanes: each owner's replica (compute), then its NIC-out and NIC-in
endpoints; gaps on a lane are its idle slots. Jobs are coloured by microbatch (stream) and
labelled by stage: chain step j of :func:`opt.serving.simulator.token_chain` is a compute
segment (a run of consecutive block ops on one owner, named by its first and last op) or a
transfer between two owners' stages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opt.app.viewer.payload import Blob, segments
from opt.common.errors import InputError
from opt.serving.chain import token_chain
from opt.serving.instance import ServingInstance
from opt.serving.period import steady_round
from opt.serving.plan import ServingPlan, owner_sequence, plan_from_solution


def _segment_ops(inst: ServingInstance, plan: ServingPlan) -> list[tuple[int, int]]:
    """(first, last) op positions in the token's op sequence of each compute segment, in
    chain order (the runs of consecutive ops on one owner, as token_chain cuts them)."""
    owner = owner_sequence(inst.n_ops, plan.template, plan.owners_count)
    n = inst.n_ops
    seq = np.concatenate([np.tile(np.arange(n), inst.full_blocks),
                          np.arange(inst.partial_ops if inst.partial_layers else 0)])
    own = owner[seq]
    cuts = [0] + [p for p in range(1, len(seq)) if own[p] != own[p - 1]] + [len(seq)]
    return [(a, b - 1) for a, b in zip(cuts[:-1], cuts[1:])]


def step_labels(inst: ServingInstance, plan: ServingPlan) -> tuple[list[str], list[str]]:
    """(short, long) label of each chain step: ``S3`` / ``stage 3 on 1:A100x2: blk0 L0.qkv …
    blk0 L0.o_proj`` for segments, ``S3→S4`` / ``transfer stage 3 → 4 (owner 1 → 2)``."""
    chain = token_chain(inst, plan)
    ranges = _segment_ops(inst, plan)
    n = inst.n_ops
    names = [f"{m + 1}:{o.config}" for m, o in enumerate(plan.owners)]

    def op(p: int) -> str:
        return f"blk{p // n} {inst.ops[p % n].id}"

    short, long_ = [], []
    seg = 0
    for j, kind in enumerate(chain.kind):
        if kind == 0:
            a, b = ranges[seg]
            extra = (" + embed" if seg == 0 else "") + \
                (" + lm_head" if seg == len(ranges) - 1 else "")
            short.append(f"S{seg}")
            long_.append(f"stage {seg} on {names[chain.res[j]]}: {op(a)} … {op(b)}{extra}")
            seg += 1
        else:
            nxt = seg if seg < len(ranges) else 0
            short.append(f"S{seg - 1}→S{nxt}")
            long_.append(f"transfer stage {seg - 1} → {nxt} ({names[chain.src[j]]} → "
                         f"{names[chain.dst[j]]})")
    return short, long_


#: The most periods a page draws (each adds ``cycle`` period markers and a copy of the jobs).
MAX_PERIODS = 1000
#: The most jobs a page draws over all its periods (about 50 bytes each in the page, a few
#: hundred while it is built): the periods of a plan with many jobs per period are fewer.
MAX_DRAWN_JOBS = 1_000_000


def max_periods(jobs_per_period: int) -> int:
    """The most periods drawn of a plan with ``jobs_per_period`` jobs in one period:
    :data:`MAX_PERIODS`, fewer when they would draw more than :data:`MAX_DRAWN_JOBS` jobs
    (at least 1)."""
    return max(1, min(MAX_PERIODS, MAX_DRAWN_JOBS // max(1, jobs_per_period)))


def serving_payload(inst: ServingInstance, solution: dict[str, Any] | ServingPlan, *,
                    periods: int = 3, title: str | None = None) -> tuple[dict[str, Any], Blob]:
    """Header and blob of a plan's steady-state pipeline view (module docstring). Raises
    :class:`opt.serving.plan.PlanError` on a structurally invalid plan, InputError (field
    ``periods``) when ``periods`` is above :func:`max_periods` of the plan."""
    plan = plan_from_solution(inst, solution) if isinstance(solution, dict) else solution
    sr = steady_round(inst, plan)
    span = float(sr.cycle * sr.t_rtt)
    jobs = np.array(sr.jobs, dtype=np.int64).reshape(-1, 5)
    cap = max_periods(len(jobs))
    if int(periods) > cap:
        raise InputError(f"{periods} periods: at most {cap:,} periods are drawn of this plan "
                         f"({len(jobs):,} jobs per period; a page draws at most "
                         f"{MAX_PERIODS:,} periods and {MAX_DRAWN_JOBS:,} jobs)",
                         field="periods")
    reps = max(1, int(periods))
    res = np.tile(jobs[:, 0], reps)
    shift = np.repeat(np.arange(reps, dtype=np.float64) * span, len(jobs))
    start = np.tile(jobs[:, 3], reps) + shift
    end = np.tile(jobs[:, 4], reps) + shift
    stream = np.tile(jobs[:, 1], reps)
    step = np.tile(jobs[:, 2], reps)
    rnd = np.repeat(np.arange(reps), len(jobs)) * sr.cycle
    n_lanes = len(sr.resources)
    order = np.lexsort((start, res))
    blob = Blob()
    blob.ints("j.off", segments(res[order], n_lanes))
    blob.floats("j.start", start[order])
    blob.floats("j.end", end[order])
    blob.ints("j.stream", stream[order])
    blob.ints("j.step", step[order])
    blob.ints("j.round", rnd[order])
    short, long_ = step_labels(inst, plan)
    blob.strings("step.short", short)
    blob.strings("step.long", long_)
    k = plan.owners_count
    lanes = [{"label": name, "type": "job" if i < k else "nic", "owner": i % k}
             for i, name in enumerate(sr.resources)]
    busy = np.bincount(jobs[:, 0], weights=jobs[:, 4] - jobs[:, 3], minlength=n_lanes)
    header = {
        "kind": "serving", "title": title or f"{inst.model} serving plan",
        "time_unit": inst.time_unit, "seconds_per_tick": inst.seconds(1),
        "extent": [0.0, float(max(end.max(initial=0.0), reps * span))],
        "lanes": lanes, "t_rtt": float(sr.t_rtt),
        "t_rtt_exact": f"{sr.t_rtt.numerator}/{sr.t_rtt.denominator}",
        "cycle": sr.cycle, "periods": reps, "periodic": sr.periodic,
        "microbatches": plan.microbatches,
        "owners": [{"config": o.config, "batch": o.batch, "replicas": o.replicas}
                   for o in plan.owners],
        "template": list(plan.template),
        "busy": [float(b / span) if span else 0.0 for b in busy],
        "counts": {"jobs": int(len(jobs)), "drawn_jobs": int(len(order)),
                   "steps": len(short)},
    }
    return header, blob
