"""The ``hetopt`` parser, composed from the command groups, and ``main``.

Commands: ``models``, ``hardware``, ``instances`` (:mod:`opt.cli.info`); ``theory het|hom|verify|
plot`` (:mod:`opt.cli.theory`); ``build placement|serving-plan``, ``import dot``, ``validate``,
``solve``, ``lower-bound`` (:mod:`opt.cli.placement`, :mod:`opt.cli.serving`); ``sweep
placement|layout|serving``, ``bench``, ``replay``, ``scaling`` (:mod:`opt.cli.runs`); ``plot
gantt|utilisation|sweep|serving`` (:mod:`opt.cli.plots`); ``view`` (:mod:`opt.cli.view`). Bad input prints one line naming the
file, field and value and exits 2; ``--json`` prints machine-readable output.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from opt.cli import info, measure, placement, plots, runs, serving, theory, view
from opt.cli.common import EXIT_CODES_HELP, common_parser, run_command


def build_parser() -> argparse.ArgumentParser:
    """The full ``hetopt`` parser; every leaf command sets ``func``, its handler."""
    p = argparse.ArgumentParser(prog="hetopt",
                                description="The hetopt command line (also python -m opt).",
                                epilog=EXIT_CODES_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common = common_parser()
    sub = p.add_subparsers(dest="command", required=True)
    info.add_parsers(sub, common)
    theory.add_parsers(sub, common)
    build = sub.add_parser("build", help="build an instance from a model, platform and workload")
    bsub = build.add_subparsers(dest="problem", required=True)
    placement.add_build_parsers(bsub, common)
    serving.add_build_parsers(bsub, common)
    placement.add_parsers(sub, common)
    runs.add_parsers(sub, common)
    plots.add_parsers(sub, common)
    view.add_parsers(sub, common)
    measure.add_parsers(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``hetopt`` (and ``python -m opt``): parse ``argv`` and run the command; its exit code."""
    return run_command(build_parser().parse_args(argv))
