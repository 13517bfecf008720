"""Bifocal's parameters (docs/problems.md §6 "Bifocal" defines each): the switches and weights
of :class:`BifocalParams`, their choices, the ``auto`` values per ``load_timing`` and the named
sets of switches (:data:`EXTENSIONS_OFF`, :data:`EFT_ONLY`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from opt.common.errors import InputError

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
#: ``auto`` (default) ``uses`` on ``load_timing: at_use`` instances, else ``steps``.
TOKEN_HORIZONS = ("auto", "steps", "uses")
#: λ of ``lam: auto`` per ``load_timing`` (problems.md §6; DOPS §5.1 gives no value): under
#: ``at_use`` (Eq. 1) the reload a class change costs is already in the task's EFT, and λ = 3
#: on top kept decode on the class that ran the prefill (dops-qwen-1.8b HP32 128/256/1: 1.94 ×
#: PD's makespan, 1.008 × with λ = 0); under ``prefetch`` the penalty falls on the exposed part
#: of a load only, where λ = 3 was calibrated.
AUTO_LAM = {"at_use": 0.0, "prefetch": 3.0}
#: ``token_cap: auto`` per ``load_timing``: the cap (an extension) on under ``prefetch``, where it
#: was introduced; off, DOPS Eq. 4 as written, under ``at_use`` (problems.md §6 "λ and the token cap under at_use":
#: capped, the token credit of the block's first use scored — a task that saves little — kept
#: decode GEMMs off the PIMs at batch 4: dops-qwen-1.8b HP32 128/128/4 1.064 × PD, 0.984 uncapped).
AUTO_TOKEN_CAP = {"at_use": False, "prefetch": True}
#: ρ of ``copy_cost: auto`` per ``load_timing`` (an extension beyond DOPS; problems.md §6 "The
#: copy cost under at_use"): under ``at_use`` the copy's load already sits in the copying task's
#: EFT (Eq. 3), and ρ = 1 on top kept a block on a busy PIM instead of copying it onto an idle
#: one (llama-2-7b HP64 128/128/1: 1.028 × PD's makespan, 1.007 × with ρ = 0; over the
#: dops-qwen-1.8b HP32 and llama-2-7b HP64 §6.2 grids ρ = 0 is never more than 1.1 % slower,
#: geomean 0.998 × ρ = 1's makespan); under ``prefetch`` ρ = 1, where it was calibrated.
AUTO_COPY_COST = {"at_use": 0.0, "prefetch": 1.0}
#: The parameters whose value is one of a few names.
_CHOICES = {"ready_set": READY_SETS, "token_horizon": TOKEN_HORIZONS}
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
    """Switches and weights of Bifocal (problems.md §6 defaults)."""

    window: bool = True
    phase: bool = True
    token: bool = True
    gamma: float = 0.4
    H: int = 3
    lam: float | str = "auto"
    eta: float = 0.0
    alpha: float = 1.0
    r_min: float = 1.0
    p_reuse: float = 1.0
    prior: bool = False
    evict_cost: float = 0.0
    token_cap: bool | str = "auto"
    token_horizon: str = "auto"
    copy_cost: float | str = "auto"
    siblings: bool | str = "auto"
    ready_set: str = "score"
    insertion: bool | str = "auto"

    @classmethod
    def from_dict(cls, params: dict[str, Any] | None) -> BifocalParams:
        """Validated parameters; unknown names and bad values raise :class:`InputError`."""
        params = dict(params or {})
        known = list(cls.__dataclass_fields__)
        for name in params:
            if name not in known:
                raise InputError(f"unknown Bifocal parameter '{name}'; known: "
                                 f"{', '.join(known)}", field=f"params.{name}")
        out: dict[str, Any] = {}
        for name, value in params.items():
            if name in AUTO_PARAMS and value == "auto":
                out[name] = value
            elif name in ("window", "phase", "token", "prior", "token_cap", "siblings",
                          "insertion"):
                if not isinstance(value, (bool, np.bool_)):
                    raise InputError(f"Bifocal parameter '{name}' must be true or false, got "
                                     f"{value!r}", field=f"params.{name}")
                out[name] = bool(value)
            elif name in _CHOICES:
                if value not in _CHOICES[name]:
                    raise InputError(f"Bifocal parameter '{name}' must be one of "
                                     f"{', '.join(_CHOICES[name])}, got {value!r}",
                                     field=f"params.{name}")
                out[name] = value
            elif name == "H":
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                        or not 0 <= value <= 8:
                    raise InputError(f"Bifocal parameter 'H' must be an integer in 0..8, got "
                                     f"{value!r}", field="params.H")
                out[name] = int(value)
            else:
                if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                        or not math.isfinite(float(value)) or float(value) < 0:
                    raise InputError(f"Bifocal parameter '{name}' must be a finite number "
                                     f"≥ 0, got {value!r}", field=f"params.{name}")
                if name == "gamma" and float(value) > 1:
                    raise InputError(f"Bifocal parameter 'gamma' must be in [0, 1], got "
                                     f"{value!r}", field="params.gamma")
                out[name] = float(value)
        return cls(**out)

    def __post_init__(self) -> None:
        if self.siblings is True and self.ready_set == "score":
            raise InputError("Bifocal parameter 'siblings' moves tasks in a static order and "
                             "needs ready_set: rank (the score order has none)",
                             field="params.siblings")
