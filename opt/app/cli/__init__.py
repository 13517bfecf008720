"""The `hetopt` command line (also `python -m opt`): one handler module per command group, imported
when its command runs; every argument is defined in :mod:`opt.app.cli.parser`."""

from opt.app.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
