"""The three problems and their names (docs/problems.md): :class:`Problem` and
:data:`PROBLEMS`, the one list every reader of instance, result and index files and the
method registry check a problem name against."""

from __future__ import annotations

from opt.common.enums import TextEnum


class Problem(TextEnum):
    """The three problems (docs/problems.md); a ``str``, equal to its JSON name."""

    PLACEMENT = "placement"  # P1: operator placement and scheduling (§1)
    LAYOUT = "layout"        # P2: P1 plus each weight block's storage format under a budget (§2)
    SERVING = "serving"      # P3: serving plans on heterogeneous GPUs (§3)


#: The problem names, in the order of :class:`Problem`.
PROBLEMS: tuple[str, ...] = tuple(p.value for p in Problem)
#: Another spelling of a problem's name, read in instance, result and index files.
LEGACY_NAMES = {"serving_plan": "serving"}


def problem_name(name: str) -> str:
    """``name`` with a legacy spelling replaced (``serving_plan`` → ``serving``)."""
    return LEGACY_NAMES.get(name, name)
