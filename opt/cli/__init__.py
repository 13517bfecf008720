"""The `hetopt` command line (also `python -m opt`): one module per command group, composed in
:mod:`opt.cli.parser`."""

from opt.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
