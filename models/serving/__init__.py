"""Exact P3 model: the MILP over the full template space."""
