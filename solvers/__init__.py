"""Solver back ends, the method registry and the single ``solve`` entry point. Built on ``opt``
and ``models``; importing this package imports no back end (:mod:`solvers.registry`)."""

from solvers.api import solve
from solvers.registry import Method, default_method, get_method, methods

__all__ = ["Method", "default_method", "get_method", "methods", "solve"]
