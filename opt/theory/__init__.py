"""OpWeave's closed-form cost model (Theorems 3.1/3.2, CAD feasibility), gains and their numerical verification."""
