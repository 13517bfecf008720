"""P1/P2 placement: instance, builder, DOT import, solution, validator, layout views, lower bounds."""
