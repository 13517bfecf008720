"""P3 heuristics: owner-sequence spaces, regularity-aware B&B, fixed-boundary baselines."""
