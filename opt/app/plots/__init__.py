"""Plots (matplotlib, the `plot` extra): bounds curves, Gantt charts, sweep heatmaps."""
