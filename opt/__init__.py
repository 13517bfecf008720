"""hetopt core: cost library, model cards, hardware catalog, closed-form bounds and formats.

The core never imports ``models``, ``solvers`` or ``heuristics``; those packages build on it.
"""

__version__ = "0.1.0"
