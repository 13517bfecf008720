"""Exact P2 models: joint placement + format, and format-only (CP-SAT)."""
