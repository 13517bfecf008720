"""Runs: executors, resumable sweeps, the benchmark runner and its core cases, replay and scaling studies."""
