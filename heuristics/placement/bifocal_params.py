"""Bifocal's parameters (docs/problems.md §6 "Bifocal" defines each): the switches and weights
of :class:`BifocalParams`, each declared once (:data:`BIFOCAL_PARAMS`), their choices, the
authors' configuration the defaults follow (:data:`AUTHORS_CONFIG`) and the named sets of
switches (:data:`EXTENSIONS_OFF`, :data:`EFT_ONLY`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opt.common.errors import InputError
from opt.common.params import auto_or, boolean, choice, integer, number, param, spec_of

#: The ready-set order (problems.md §6 "Ready-set order"): ``score`` (default; DOPS §5.1.2 and
#: Algorithm 1) commits, at each iteration, the ready task whose best placement has the least
#: bifocal score, all ready tasks re-scored under the current partial schedule (ties: the
#: earlier in HEFT's order); ``rank`` commits in HEFT's static upward-rank order, the
#: ``siblings`` extension on by default.
READY_SETS = ("score", "rank")
#: The score terms whose flipped decisions ``stats["flipped_decisions"]`` counts.
FLIP_TERMS = ("window", "phase", "token", "evict", "copy")
#: The token term's horizon R_i: ``steps`` (default; DOPS Eq. 4: R_i = L_out − i + 1, the
#: remaining decode steps) or ``uses`` (an extension: the remaining uses of the task's block).
TOKEN_HORIZONS = ("steps", "uses")
#: The window's patterns (problems.md §6 "T̂_H"): ``types`` (default; DOPS §5.1.2: "enumerates
#: legal NPU/PIM device-type assignments", each class played by its representative device) or
#: ``devices`` (every legal device per window vertex, as the authors' released code enumerates).
WINDOW_PATTERNS = ("types", "devices")
#: ``plan_refresh_stride`` r: which decode steps Bifocal scores. 1 (default) scores every step:
#: DOPS §5.1.2 / Algorithm 1 (the paragraph that introduces it: "At each iteration, the
#: scheduler re-evaluates every ready task under the current partial schedule"). r > 1 and r = 0 are the authors' ``decode_plan_refresh_stride``
#: (YIAI-02/TriForm ``src/mainlib/simulator.py`` at 86e4aae4089,
#: ``simulate_decode_progressive``; docs/dops_reproduction.md §3): decode token t = step − 1 is
#: scored when t < 2 or (r > 0 and t mod r = 0); every other decode task is *replayed* — it
#: takes the device of its counterpart (the task at the same position) in the last scored
#: step and is committed in that step's order by the same list scheduler, unscored
#: (:func:`heuristics.placement.bifocal.replay_map`). r = 0 freezes the plan of t = 1. The
#: authors' §6.2 runs use r = 2 (Qwen) and 8 (Llama, Mixtral).
PLAN_REFRESH_DEFAULT = 1
#: The authors' released configuration of Bifocal, the defaults of :class:`BifocalParams`:
#: YIAI-02/TriForm ``src/config.py`` at d202d5a3b9edf0f3be19cf9f57ad21c527cc6322
#: (``SCHED_JOINT_LK_H = 3``, ``SCHED_JOINT_LK_GAMMA = 0.4``,
#: ``SCHED_JOINT_LK_CONSIST_LAMBDA = 3`` — the weight of both the phase penalty and the
#: lookahead's consistency penalty —, ``SCHED_JOINT_LK_PLAN_HINT_MAX = 3``,
#: ``SCHED_WEIGHT_BIAS_ETA = 0.0``, ``SCHED_DECODE_AMORT_ALPHA = 1``,
#: ``SCHED_DECODE_AMORT_RMIN = 1``, ``SCHED_DECODE_AMORT_REUSE_PROB = 1.0``).
AUTHORS_CONFIG: dict[str, Any] = {"H": 3, "gamma": 0.4, "lam": 3.0, "consist": 3.0,
                                  "hint_max": 3, "eta": 0.0, "alpha": 1.0, "r_min": 1.0,
                                  "p_reuse": 1.0}
#: The parameters whose value may be ``auto`` (structural: resolved by the ready-set order).
AUTO_PARAMS = ("siblings", "insertion")
#: The extensions beyond DOPS, switched off (every one is off by default but ``siblings``,
#: whose ``auto`` is on under ``ready_set: rank``).
EXTENSIONS_OFF: dict[str, Any] = {"copy_cost": 0.0, "siblings": False}
#: "EFT only" (problems.md §6): every far-focus term and extension off, in HEFT's order —
#: HEFT's schedule.
EFT_ONLY: dict[str, Any] = {"window": False, "phase": False, "token": False, **EXTENSIONS_OFF,
                            "ready_set": "rank"}


@dataclass(frozen=True)
class BifocalParams:
    """Switches and weights of Bifocal: each field declares its parameter once (default, check,
    help; problems.md §6 defines each), read back as :data:`BIFOCAL_PARAMS`."""

    window: bool = param(True, boolean, "switch: the DAG window T̂_H (the lookahead "
                         "simulation)")
    phase: bool = param(True, boolean, "switch: the phase-reuse term B_phase")
    token: bool = param(True, boolean, "switch: the token-amortisation term B_token")
    gamma: float = param(0.4, number(0.0, 1.0), "weight γ of the DAG window")
    H: int = param(3, integer(0, 8), "window size: vertices of the heaviest-payload chain, "
                   "the task included (≤ 1: no lookahead)")
    lam: float = param(3.0, number(), "weight λ of B_phase's reload penalty")
    consist: float = param(3.0, number(), "weight of the lookahead's consistency penalty "
                           "(per hinted window vertex moved off its hint)")
    window_patterns: str = param("types", choice(*WINDOW_PATTERNS), "the window's patterns: "
                                 "device classes, each played by its representative (DOPS "
                                 "§5.1.2), or devices (the authors' code)")
    hint_max: int = param(3, integer(0, 1 << 20), "most near-future hints kept (the oldest "
                          "dropped)")
    eta: float = param(0.0, number(), "weight η of B_phase's prefill gain")
    alpha: float = param(1.0, number(), "weight α of B_token")
    r_min: float = param(1.0, number(), "least reuse count r_eff of B_token")
    p_reuse: float = param(1.0, number(), "factor of the horizon R_i in B_token's r_eff")
    prior: bool = param(False, boolean, "switch: the load-port prior θ (LPT over load ports; "
                        "an extension)")
    evict_cost: float = param(0.0, number(), "weight of C_evict, the evicted blocks' future "
                              "reloads (an extension)")
    token_cap: bool = param(False, boolean, "token credit capped by the recurring saving (an "
                            "extension)")
    token_horizon: str = param("steps", choice(*TOKEN_HORIZONS), "token term's horizon: the "
                               "remaining decode steps (Eq. 4) or the block's remaining uses")
    copy_cost: float = param(0.0, number(), "weight ρ of a same-class copy's port time (an "
                             "extension)")
    siblings: bool | str = param("auto", auto_or(boolean), "sibling groups kept together in "
                                 "the static order, or auto (on under ready_set rank; rank "
                                 "only)")
    ready_set: str = param("score", choice(*READY_SETS), "ready-set order: score (DOPS "
                           "Algorithm 1: the ready task of least bifocal score first) or rank "
                           "(HEFT's static upward-rank order)")
    insertion: bool | str = param("auto", auto_or(boolean), "a task may start in an idle gap "
                                  "before its device's free time (HEFT), or auto (off under "
                                  "ready_set score, DOPS Eq. 1 and 3; on in a static order)")
    plan_refresh_stride: int = param(PLAN_REFRESH_DEFAULT, integer(0), "decode steps scored: "
                                     "every step (1, DOPS Algorithm 1), or, as the authors' "
                                     "decode_plan_refresh_stride r, the first two and every "
                                     "r-th (0: the first two), the others replaying the last "
                                     "scored step's order and devices")

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None, method: str = "bifocal"
                  ) -> BifocalParams:
        """The parameters ``params`` (defaults for the others), checked against
        :data:`BIFOCAL_PARAMS`: InputError naming ``method`` and ``params.<name>`` for an
        unknown name or a bad value."""
        return cls(**BIFOCAL_PARAMS.parse(method, params or {}))

    def __post_init__(self) -> None:
        if self.siblings is True and self.ready_set == "score":
            raise InputError("Bifocal parameter 'siblings' moves tasks in a static order and "
                             "needs ready_set: rank (the score order has none)",
                             field="params.siblings")


#: Bifocal's parameters (name, check, default, help), as :class:`BifocalParams` declares them.
BIFOCAL_PARAMS = spec_of(BifocalParams)
