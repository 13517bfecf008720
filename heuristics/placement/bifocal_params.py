"""Bifocal's parameters (docs/problems.md §6 "Bifocal" defines each): the switches and weights
of :class:`BifocalParams`, each declared once (:data:`BIFOCAL_PARAMS`), their choices, the ``auto`` values per ``load_timing`` and the named
sets of switches (:data:`EXTENSIONS_OFF`, :data:`EFT_ONLY`)."""

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
#: The token term's horizon R_i: ``steps`` (the remaining decode steps, i.e. L_out − i + 1),
#: ``uses`` (the remaining uses of the task's block: the steps times the block's uses per step),
#: ``auto`` (default) ``uses`` on ``load_timing: at_use`` and ``overlap`` instances, else ``steps``.
TOKEN_HORIZONS = ("auto", "steps", "uses")
#: λ of ``lam: auto`` per ``load_timing`` (problems.md §6; DOPS §5.1 gives no value): under
#: ``at_use`` (Eq. 1) the reload a class change costs is already in the task's EFT, and λ = 3
#: on top kept decode on the class that ran the prefill (dops-qwen-1.8b HP32 128/256/1: 1.94 ×
#: PD's makespan, 1.008 × with λ = 0); under ``prefetch`` the penalty falls on the exposed part
#: of a load only, where λ = 3 was calibrated.
AUTO_LAM = {"at_use": 0.0, "overlap": 0.0, "prefetch": 3.0}
#: ``token_cap: auto`` per ``load_timing``: the cap (an extension) on under ``prefetch``, where it
#: was introduced; off, DOPS Eq. 4 as written, under ``at_use`` (problems.md §6 "λ and the token cap under at_use":
#: capped, the token credit of the block's first use scored — a task that saves little — kept
#: decode GEMMs off the PIMs at batch 4: dops-qwen-1.8b HP32 128/128/4 1.064 × PD, 0.984 uncapped).
AUTO_TOKEN_CAP = {"at_use": False, "overlap": False, "prefetch": True}
#: ρ of ``copy_cost: auto`` per ``load_timing`` (an extension beyond DOPS; problems.md §6 "The
#: copy cost under at_use"): under ``at_use`` the copy's load already sits in the copying task's
#: EFT (Eq. 3), and ρ = 1 on top kept a block on a busy PIM instead of copying it onto an idle
#: one (llama-2-7b HP64 128/128/1: 1.028 × PD's makespan, 1.007 × with ρ = 0; over the
#: dops-qwen-1.8b HP32 and llama-2-7b HP64 §6.2 grids ρ = 0 is never more than 1.1 % slower,
#: geomean 0.998 × ρ = 1's makespan); under ``prefetch`` ρ = 1, where it was calibrated.
AUTO_COPY_COST = {"at_use": 0.0, "overlap": 0.0, "prefetch": 1.0}
#: ``overlap`` (problems.md §1.2 rule 5) takes the ``at_use`` values of every ``auto`` table
#: (and ``token_horizon: auto`` = ``uses``): not calibrated under ``overlap``.
#: The parameters whose value may be ``auto`` (resolved per ``load_timing`` by
#: :func:`phase_weight`, :func:`capped` and :func:`copy_weight`).
AUTO_PARAMS = ("lam", "token_cap", "copy_cost", "siblings", "insertion")
#: The extensions beyond DOPS that are on by default, switched off (the eviction cost and the
#: load-port prior are off by default already).
EXTENSIONS_OFF: dict[str, Any] = {"copy_cost": 0.0, "siblings": False}
#: "EFT only" (problems.md §6): every far-focus term and extension off, in HEFT's order —
#: HEFT's schedule.
EFT_ONLY: dict[str, Any] = {"window": False, "phase": False, "token": False, **EXTENSIONS_OFF,
                            "ready_set": "rank"}


@dataclass(frozen=True)
class BifocalParams:
    """Switches and weights of Bifocal: each field declares its parameter once (default, check,
    help; problems.md §6 defines each), read back as :data:`BIFOCAL_PARAMS`."""

    window: bool = param(True, boolean, "switch: the DAG window T̂_H")
    phase: bool = param(True, boolean, "switch: the phase-reuse term B_phase")
    token: bool = param(True, boolean, "switch: the token-amortisation term B_token")
    gamma: float = param(0.4, number(0.0, 1.0), "weight γ of the DAG window")
    H: int = param(3, integer(0, 8), "lookahead depth: successors along the heaviest-payload "
                  "chain")
    lam: float | str = param("auto", auto_or(number()), "weight λ of B_phase's reload penalty, or "
                             "auto (0 under load_timing at_use and overlap, 3 under "
                             "prefetch)")
    eta: float = param(0.0, number(), "weight η of B_phase's prefill gain")
    alpha: float = param(1.0, number(), "weight α of B_token")
    r_min: float = param(1.0, number(), "least reuse count r_eff of B_token")
    p_reuse: float = param(1.0, number(), "factor of the horizon R_i in B_token's r_eff")
    prior: bool = param(False, boolean, "switch: the load-port prior θ (LPT over load ports)")
    evict_cost: float = param(0.0, number(), "weight of C_evict, the evicted blocks' future reloads")
    token_cap: bool | str = param("auto", auto_or(boolean), "token credit capped by the "
                                  "recurring saving, or auto (on under load_timing prefetch, "
                                  "off under at_use and overlap)")
    token_horizon: str = param("auto", choice(*TOKEN_HORIZONS), "token term's horizon: "
                               "remaining steps, the block's remaining uses, or auto (uses "
                               "under load_timing at_use and overlap)")
    copy_cost: float | str = param("auto", auto_or(number()), "weight ρ of a same-class "
                                   "copy's port time, or auto (1 under load_timing prefetch, "
                                   "0 under at_use and overlap)")
    siblings: bool | str = param("auto", auto_or(boolean), "sibling groups kept together in "
                                 "the static order, or auto (on under ready_set rank; rank "
                                 "only)")
    ready_set: str = param("score", choice(*READY_SETS), "ready-set order: score (DOPS "
                           "Algorithm 1: the ready task of least bifocal score first) or rank "
                           "(HEFT's static upward-rank order)")
    insertion: bool | str = param("auto", auto_or(boolean), "a task may start in an idle gap "
                                  "before its device's free time (HEFT), or auto (off under "
                                  "ready_set score, DOPS Eq. 1 and 3; on in a static order)")

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
