"""Paper reproduction: the published figures and the DOPS / OpWeave tables computed from sweep records.

:mod:`~opt.app.reproduction.reference` holds published figures with their sources;
:mod:`~opt.app.reproduction.dops_tables`, :mod:`~opt.app.reproduction.opweave_tables` and
:mod:`~opt.app.reproduction.opweave_summary` lay the papers' tables and figures beside ours;
:mod:`~opt.app.reproduction.detailed_gains` re-checks OpWeave's theorems with the detailed cost
model. ``hetopt bench``, ``hetopt theory`` and the scripts in ``benchmarks/`` read them."""
