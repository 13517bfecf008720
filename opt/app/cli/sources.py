"""The hardware catalog and the model cards a command reads: the bundled ones, with the files
of ``--catalog`` and ``--models-file`` merged over them."""

from __future__ import annotations

import argparse

from opt.costlib.hardware import Catalog, load_catalog
from opt.costlib.modelcard import CardSet, load_cards


def catalog(args: argparse.Namespace) -> Catalog:
    """The hardware catalog of ``--catalog`` (merged over the bundled one)."""
    return load_catalog(args.catalog)


def cards(args: argparse.Namespace) -> CardSet:
    """The model cards of ``--models-file`` (added to the bundled ones)."""
    return load_cards(args.models_file)
