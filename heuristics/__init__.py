"""Scheduling and planning heuristics (HEFT, static policies, Bifocal, WLA, B&B). Built on ``opt``."""
