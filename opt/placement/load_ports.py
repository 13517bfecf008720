"""The ``load_port`` and ``load_chain`` components of the certified P1 lower bound
(:mod:`opt.placement.certified_bounds`): the first useful loads of the blocks pass through the
devices' load ports before their users' tails. Durations in ticks.
"""

from __future__ import annotations

import math

import numpy as np

from opt.placement.instance import PlacementInstance
from opt.placement.overlap_bound import bound_instance
from opt.placement.work_bound import BIG, lp_weights


def load_port_bound(inst: PlacementInstance, tail: np.ndarray) -> tuple[int, int]:
    """(bound, k): max over k of ⌈Σ top-k min loads / ports⌉ + k-th largest user tail (under
    ``load_timing: overlap`` on :func:`opt.placement.overlap_bound.bound_instance`)."""
    inst = bound_instance(inst)
    users = np.flatnonzero(inst.task_block >= 0)
    if not len(users):
        return 0, 0
    nb = len(inst.block_ids)
    blk = inst.task_block[users]
    q = np.full(nb, -1, dtype=np.int64)
    np.maximum.at(q, blk, tail[users])
    # devices where some user of b may run
    usable = np.zeros((nb, inst.n_devices), dtype=bool)
    np.logical_or.at(usable, blk, inst.legal[users])
    ld = inst.load_duration
    ok = usable & (ld >= 0)
    used = np.flatnonzero((q >= 0) & ok.any(axis=1))
    if not len(used):
        return 0, 0
    minload = np.where(ok[used], ld[used], BIG).min(axis=1)
    rows = np.where(ok[used], ld[used], -1)
    # weighted ports (weak duality as in work_lp): Σ_b min_d y_d load[b, d] ≤ max port busy
    y = np.full(inst.n_devices, 1.0 / inst.n_devices)
    try:
        y = lp_weights(rows, np.ones(len(used)))
    except (ImportError, ValueError, RuntimeError):
        pass
    y = np.clip(y, 0.0, None)
    y = y / y.sum() if y.sum() > 0 else np.full(inst.n_devices, 1.0 / inst.n_devices)
    weighted = np.where(rows >= 0, rows * y[None, :], np.inf).min(axis=1)
    order = np.argsort(-q[used], kind="stable")
    best, best_k = 0, 0
    csum = 0
    wsum = 0.0
    ports = np.zeros(inst.n_devices, dtype=bool)
    for k, i in enumerate(order.tolist(), start=1):
        csum += int(minload[i])
        wsum += float(weighted[i])
        ports |= ok[used[i]]
        busy = max(-(-csum // int(ports.sum())), math.ceil(wsum - 1e-9 * max(1.0, wsum)))
        val = busy + int(q[used[i]])
        if val > best:
            best, best_k = val, k
    return best, best_k
