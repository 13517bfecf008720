"""Solver back ends and the single ``solve`` entry point. Built on ``opt`` and ``models``."""
