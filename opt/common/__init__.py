"""Shared foundations: errors, units, JSON I/O, text tables and the result record."""
