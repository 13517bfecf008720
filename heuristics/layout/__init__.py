"""P2 heuristics: the Weight Layout Arbiter (WLA)."""
