"""The `hetopt` command line (also `python -m opt`): one handler module per command group, imported
when its command runs; every argument is defined in :mod:`opt.cli.parser`."""

from opt.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
