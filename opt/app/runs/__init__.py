"""Runs: executors, resumable sweeps, replay and scaling studies."""
