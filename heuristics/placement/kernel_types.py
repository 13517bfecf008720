"""The named tuples the scheduling kernels take (numba compiles a ``collections.namedtuple`` of
arrays or scalars as a tuple whose fields it reads by name): the instance's graph and blocks,
the partial schedule's state, the configuration, and Bifocal's ready set, per-class data,
lookahead window, switches and weights. Built by :mod:`heuristics.placement.schedule_arrays`
and :mod:`heuristics.placement.bifocal`; read by :mod:`heuristics.placement.state_kernels`
and :mod:`heuristics.placement.bifocal_kernels`. Arrays are int64 unless stated; times in ns.
This module does not import numba.
"""

from __future__ import annotations

from collections import namedtuple

#: The task graph for the loops: predecessors in CSR by destination (``p_off`` [n + 1],
#: ``p_edge`` edge ids), each edge's source (``esrc``) and payload type (``etype``), the
#: transfer duration of each payload type per ordered device pair (``etab`` [types, nd·nd])
#: and the channels of each pair (``pchan`` [nd·nd, 3]: count, then up to two channel ids).
Graph = namedtuple("Graph", "p_off p_edge esrc etype etab pchan")

#: Weight blocks: each task's block (−1 none), each block's bytes, each block's load
#: duration per device (``loadd`` [nb, nd], −1 not loadable).
Blocks = namedtuple("Blocks", "block bbytes loadd")

#: The partial schedule (layout in :mod:`heuristics.placement.state_kernels`): ``sched``,
#: ``ev`` (loads, evictions), ``cnt``, ``dv``, ``rl``, ``chan``, ``lm``, ``tstart`` (each
#: edge's transfer start, −1 none), ``w`` (the current task's inputs) and ``victims``
#: (scratch of the eviction plan), and the device timelines: typed lists of each device's
#: sorted busy starts (``tls``) and ends (``tle``).
State = namedtuple("State", "sched ev cnt dv rl chan lm tstart w victims tls tle")

#: Task durations by cost type: each task's type (``ttype`` [n]) and each type's duration per
#: device (``type_dur`` [types, nd], −1 illegal).
Costs = namedtuple("Costs", "ttype type_dur")

#: Configuration (ints): devices, links with contention, insertion into idle gaps, LRU
#: eviction, the load rule (problems.md §1.2 rule 5; 0 ``prefetch``, 1 ``at_use``, 2 ``overlap``:
#: :data:`heuristics.placement.state_kernels.PREFETCH` …).
Config = namedtuple("Config", "nd contention insertion evict load_rule")

#: A candidates policy as arrays (:class:`heuristics.placement.list_scheduler.DeviceClasses`):
#: each task's class (``task_class`` [n], −1 every legal device; empty: no narrowing), the
#: members (``members`` uint8 [K, nd]), and each device's class code for ``device_choice:
#: fit_in_class`` (``fit_class`` [nd]; empty: plain earliest finish).
Candidates = namedtuple("Candidates", "task_class members fit_class")

#: Bifocal's ready set by score: each task's position in HEFT's order (ties), the in-degrees
#: (the loop's own copy), successors in CSR (``s_off``, ``s_idx``) and each edge's target.
#: All empty under a static order.
ReadySet = namedtuple("ReadySet", "prio indeg s_off s_idx edst")

#: Bifocal's per-class and per-block data: each device's class (``dcls``), the devices of
#: each class (``class_devs`` [K, nd] padded with −1) and their count (``class_n``), each
#: task's phase and step (−1 none), θ (each block's class of last use, −1 none; updated),
#: whether each class can hold every block (``holds_all``), each block's uses left (updated),
#: its preferred class (``pref``), per class the still-used blocks preferring it that no
#: device of it holds (``homeless``; updated), the copies per class and block
#: (``res_count`` [K, nb]; updated) and, per term of ``FLIP_TERMS``, the decisions that term
#: flipped (``flips`` [5]; counted).
BifocalData = namedtuple("BifocalData", "dcls class_devs class_n phase step theta holds_all "
                                        "uses_left pref homeless res_count flips")

#: Bifocal's lookahead window (DOPS §5.1.2, T̂_H): each task's heaviest-payload successor
#: (``hs``, −1 none) and that edge's payload type (``hetype``), the payload type of each
#: task's heaviest incident edge (``rtype``, −1 none: the consistency penalty's representative
#: activation), the near-future hint per task (``hint``: a device, −1 none; updated), the
#: iteration its hint last changed (``hstamp``; updated) and the hints in insertion order
#: (``hq``: tasks, ``hq_len`` [1]: their count; updated).
Window = namedtuple("Window", "hs hetype rtype hint hstamp hq hq_len")

#: Bifocal's score settings: switches (ints) — the phase and token terms, the token cap, the
#: window and its size ``H`` (vertices, the task included), the most hints kept
#: (``hint_max``), whether the window enumerates devices rather than device classes
#: (``by_device``), L_out (decode steps), whether uses left are tracked, whether the token term
#: amortises over the block's uses rather than the steps, whether the ready set by score
#: re-scores every ready task on every device at each iteration (``rescore_all``: Algorithm 1
#: literally, the oracle of the kept scores; 0: only the scores the last commit can change)
#: — and weights (floats) — γ (window), λ (phase), the consistency penalty's weight
#: (``consist``), η (prefill gain), α (token), κ (eviction cost), r_min and p_reuse (token
#: reuse), ρ (copy cost).
Terms = namedtuple("Terms", "phase token token_cap window H hint_max by_device l_out track_uses "
                            "by_uses rescore_all gamma lam consist eta alpha kappa r_min p_reuse "
                            "rho")
