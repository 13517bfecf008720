"""Picklable ``solve(instance, method) -> Result`` callables for sweeps on any executor.

The sweeps of the core (:mod:`opt.app.runs.sweep`, :mod:`opt.app.runs.serving_sweep`) take the solve function as
an argument; on a process pool or a Dask cluster it travels to the workers, so it must be a
top-level object with plain fields rather than a closure. :class:`SolveCall` is that object for
``hetopt sweep placement | layout | serving``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opt.common.result import Result
from opt.placement.layout import budget_from, check_budget, with_budget
from solvers.api import check_options, solve
from solvers.registry import PROBLEMS, method_settings


@dataclass(frozen=True)
class SolveCall:
    """``solvers.solve(instance, method, time_limit=..., num_workers=..., seed=..., **params)``.

    time_limit: seconds per solve (None: no limit); num_workers: solver threads; seed;
    params: back-end parameters as (key, value) pairs, passed only to methods whose name starts
    with ``params_prefix`` (all methods when it is None);
    method_params: per method, (method, ((key, value), ...)) pairs: that method's own params
    (``hetopt sweep placement --param METHOD.KEY=VALUE``), added to ``params``;
    budget_gb / budget_factor: a P2 memory budget applied to the instance first (10^9 bytes, or
    a multiple of the blocks' linear bytes; :func:`opt.placement.layout.budget_from`)."""

    time_limit: float | None = 60.0
    num_workers: int = 1
    seed: int = 0
    params: tuple[tuple[str, Any], ...] = ()
    params_prefix: str | None = None
    method_params: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    budget_gb: float | None = None
    budget_factor: float | None = None

    def __post_init__(self) -> None:
        """The options checked on construction, before a sweep solves anything
        (:func:`solvers.api.check_options`, :func:`opt.placement.layout.check_budget`:
        InputError naming the option)."""

        check_options(self.time_limit, self.num_workers, self.seed)
        check_budget(self.budget_gb, self.budget_factor)

    def __call__(self, instance: Any, method: str) -> Result:
        if self.budget_gb is not None or self.budget_factor is not None:

            instance = with_budget(instance, budget_from(instance, gb=self.budget_gb,
                                                         factor=self.budget_factor))
        return solve(instance, method, time_limit=self.time_limit,
                     num_workers=self.num_workers, seed=self.seed, **self._params(method))

    def _params(self, method: str) -> dict[str, Any]:
        shared = dict(self.params) if (self.params_prefix is None
                                       or method.startswith(self.params_prefix)) else {}
        return {**shared, **dict(dict(self.method_params).get(method, ()))}

    def settings(self, method: str) -> dict[str, Any] | None:
        """The effective settings ``method`` runs with (None when it declares none):
        a sweep record made under other settings is recomputed."""

        return method_settings(method, PROBLEMS, self._params(method))
