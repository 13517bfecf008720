"""Exact formulations (CP-SAT and Pyomo MILP). Built on ``opt``; see docs/architecture.md."""
