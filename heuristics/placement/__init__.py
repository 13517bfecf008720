"""P1 heuristics: list scheduling and HEFT, Bifocal, static policies, policy search."""
