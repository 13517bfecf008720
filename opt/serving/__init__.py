"""P3 serving plans: instance, builder, plan evaluation and checking, simulator."""
