"""P1 back ends beyond the registry's direct calls: block branching, replay glue."""
