"""hetopt's application layer: the command line (:mod:`opt.app.cli`), sweeps, replays and runs
(:mod:`opt.app.runs`), the bench (:mod:`opt.app.bench`), the papers' tables
(:mod:`opt.app.reproduction`), plots (:mod:`opt.app.plots`) and the HTML viewer
(:mod:`opt.app.viewer`).

It sits at the top of the layering: it imports the core (``opt`` outside ``opt.app``),
``models``, ``heuristics`` and ``solvers``; nothing but tests and benchmarks imports it.
"""
