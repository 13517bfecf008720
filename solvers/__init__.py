"""Solver back ends and the single ``solve`` entry point. Built on ``opt`` and ``models``."""

from solvers.api import PLACEMENT_METHODS, solve

__all__ = ["PLACEMENT_METHODS", "solve"]
