"""P3 back ends: the serving methods and the detailed theorem check."""
