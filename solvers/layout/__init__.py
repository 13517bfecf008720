"""P2 back ends: layout strategies."""
