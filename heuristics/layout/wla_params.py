"""WLA's own parameters (problems.md §6, DOPS §5.2), each declared once as a field of
:class:`WlaParams` (default, check, help; :data:`WLA_PARAMS`); the WLA strategies take
Bifocal's too (:class:`heuristics.placement.bifocal_params.BifocalParams`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from heuristics.placement.bifocal_params import BifocalParams
from opt.common.params import boolean, choice, integer, number, param, spec_of

#: WLA's pass rules: the paper's (§5.2) and the incremental one (a named deviation)
WLA_RULES = ("paper", "incremental")


@dataclass(frozen=True)
class WlaParams:
    """WLA's knobs (problems.md §6): each field declares its parameter once (default, check,
    help), read back as :data:`WLA_PARAMS`."""

    share: float = param(0.2, number(0.0, 1.0, lo_open=True),
                         "max fraction of blocks changed per pass (incremental rule)")
    eps: float = param(1e-3, number(), "relative makespan drop a refinement flip must "
                       "exceed, and pass-to-pass change at or below which the paper rule "
                       "stops")
    budget: int = param(40, integer(1), "max Bifocal evaluations (the all-linear one "
                        "included)")
    refine: int = param(4, integer(1), "max blocks tried per inner refinement")
    dual: bool = param(False, boolean, "allow the dual format (extension)")
    dual_ratio: float = param(0.5, number(0.0, 1.0, lo_open=True), "pressure balance "
                              "(min/max side) from which dual is favoured")
    wla_rule: str = param("paper", choice(*WLA_RULES), "pass rule (paper: DOPS §5.2; "
                          "incremental: share-capped passes, stop at the first slower one)")

    @classmethod
    def split(cls, params: Mapping[str, Any] | None, method: str = "bifocal/wla"
              ) -> tuple[WlaParams, BifocalParams]:
        """WLA's parameters and Bifocal's from one dict, checked against :data:`WLA_PARAMS`
        and Bifocal's declarations (InputError naming ``method`` and ``params.<name>``)."""
        params = dict(params or {})
        own = {f.name for f in fields(cls)}
        mine = {k: params.pop(k) for k in list(params) if k in own}
        return (cls(**WLA_PARAMS.parse(method, mine)),
                BifocalParams.from_dict(params, method))


#: WLA's own parameters (name, check, default, help), as :class:`WlaParams` declares them.
WLA_PARAMS = spec_of(WlaParams)
