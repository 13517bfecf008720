"""The `hetopt` command line (also `python -m opt`)."""

from opt.cli.main import main

__all__ = ["main"]
