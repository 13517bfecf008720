"""The parameters of ``bifocal-grid`` (:mod:`heuristics.placement.bifocal_grid`): the grid's
axes, each a list of values of one Bifocal hyperparameter, and every other Bifocal parameter
passed through (one value for all members), declared once in :data:`BIFOCAL_GRID_PARAMS`.
The ``lam`` axis also sets the lookahead's consistency weight ``consist`` unless it is given
(:data:`TIED`: the authors' one key weighs both).

The default grid is the one the DOPS authors list for the §6.2 evaluation: H = 3,
γ ∈ {0.05, 0.2, 0.4}, λ ∈ {1, 4}, η ∈ {0.02, 0.1, 2.0}, α = 1, r_min = 1, p_reuse = 1
(YIAI-02/TriForm ``docs/EXPERIMENT_HYPERPARAMETERS.md`` at e6ac318, column "Sec. 6.2 value";
docs/dops_reproduction.md §1): 3 × 2 × 3 = 18 members.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from heuristics.placement.bifocal_params import BIFOCAL_PARAMS
from opt.common.params import Check, Param, ParamSpec


class Axis(tuple):
    """The values of one grid axis, in grid order (a tuple shown as ``a, b, c``)."""

    def __str__(self) -> str:
        return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in self)

    def json_value(self) -> list:
        """The values as a JSON list (:func:`opt.common.jsonio.json_default`)."""
        return list(self)


#: The §6.2 grid of the DOPS authors, axis → values in grid order (the unit of each is the
#: Bifocal parameter's: H in operators, the weights dimensionless).
PAPER_GRID: Mapping[str, Axis] = {
    "H": Axis((3,)),
    "gamma": Axis((0.05, 0.2, 0.4)),
    "lam": Axis((1.0, 4.0)),
    "eta": Axis((0.02, 0.1, 2.0)),
    "alpha": Axis((1.0,)),
    "r_min": Axis((1.0,)),
    "p_reuse": Axis((1.0,)),
}
#: The axes in grid order (the first axis varies slowest).
AXES = tuple(PAPER_GRID)
#: Bifocal parameters that take an axis's value unless given: the authors' one key
#: ``SCHED_JOINT_LK_CONSIST_LAMBDA`` weighs both B_phase's penalty (``lam``) and the
#: lookahead's consistency penalty (``consist``; heuristics.placement.bifocal_params).
TIED: Mapping[str, tuple[str, ...]] = {"lam": ("consist",)}


def axis_of(check: Check) -> Check:
    """A non-empty list of distinct values, each accepted by ``check`` (a single value is a
    one-member list), returned as an :class:`Axis`."""
    def convert(value: Any) -> Axis:
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values:
            raise ValueError
        typed = [check.convert(v) for v in values]
        if len(set(map(repr, typed))) != len(typed):
            raise ValueError
        return Axis(typed)
    return Check(f"a non-empty list of distinct values, each {check.what}", convert,
                 f"a list, each {check.label}")


def _grid_spec() -> ParamSpec:
    """The axes (Bifocal's check of each, applied to every value), then Bifocal's other
    parameters as Bifocal declares them."""
    bifocal = {p.name: p for p in BIFOCAL_PARAMS.params}
    axes = tuple(Param(name, axis_of(bifocal[name].check),
                       f"grid axis: {bifocal[name].help}", PAPER_GRID[name])
                 for name in AXES)
    rest = tuple(p for p in BIFOCAL_PARAMS.params if p.name not in PAPER_GRID)
    return ParamSpec(axes + rest)


#: bifocal-grid's parameters: the axes (default :data:`PAPER_GRID`), then every other Bifocal
#: parameter, passed to every member.
BIFOCAL_GRID_PARAMS = _grid_spec()


@dataclass(frozen=True)
class GridParams:
    """A parsed grid: ``axes`` (axis → values, every axis of :data:`AXES`) and ``fixed`` (the
    other Bifocal parameters given, the same for every member)."""

    axes: Mapping[str, Axis]
    fixed: Mapping[str, Any]

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None, method: str = "bifocal-grid"
                  ) -> GridParams:
        """``params`` checked against :data:`BIFOCAL_GRID_PARAMS`: InputError naming
        ``method`` and ``params.<name>`` for an unknown name, a bad value or an empty axis."""
        typed = BIFOCAL_GRID_PARAMS.parse(method, params or {})
        axes = {name: typed.get(name, PAPER_GRID[name]) for name in AXES}
        fixed = {k: v for k, v in typed.items() if k not in PAPER_GRID}
        return cls(axes, fixed)

    def members(self) -> Iterator[dict[str, Any]]:
        """Each member's axis values, in grid order (the first axis varies slowest)."""
        for values in itertools.product(*(self.axes[name] for name in AXES)):
            yield dict(zip(AXES, values))

    def bifocal_params(self, member: Mapping[str, Any]) -> dict[str, Any]:
        """The Bifocal parameters of ``member`` (its axis values): the fixed ones, the axis
        values, and each :data:`TIED` parameter Bifocal declares and the grid does not fix
        set to its axis's value."""
        declared = set(BIFOCAL_PARAMS.names)
        tied = {t: member[axis] for axis, names in TIED.items() for t in names
                if t in declared and t not in self.fixed}
        return {**self.fixed, **tied, **member}

    def size(self) -> int:
        """The number of members."""
        n = 1
        for name in AXES:
            n *= len(self.axes[name])
        return n

    def settings(self) -> dict[str, Any]:
        """The axes (as lists) and the fixed parameters: a run's settings."""
        return {**{name: list(self.axes[name]) for name in AXES}, **self.fixed}
