"""Exact P1 models: CP-SAT and MILP (Pyomo + HiGHS)."""
