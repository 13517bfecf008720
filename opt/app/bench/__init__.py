"""``hetopt bench``: its runner, checks, reports and suites (the installed benchmark).

The runner (:mod:`opt.app.bench.runner`) runs cases and caches their verdicts, the checks
(:mod:`opt.app.bench.checks`) judge invariants and paper figures, the report
(:mod:`opt.app.bench.report`) writes ``results.jsonl``, ``checks.csv`` and ``report.md``; the
suites (:mod:`opt.app.bench.suites`) gather the cases of the core
(:mod:`opt.app.bench.core_cases`), placement, serving, OpWeave and DOPS. Standalone developer
scripts (not installed) live in the repository's ``benchmarks/`` folder (docs/bench.md)."""
