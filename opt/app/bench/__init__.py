"""Benchmark cases that need solvers, and the suites of `hetopt bench`."""
