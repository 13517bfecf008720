"""The registered placement methods, for the help texts of ``solve --method`` and ``sweep
placement --methods``: loaded through the parser's :class:`~opt.app.cli.parser.Handler` only
when that help is printed, so building the parser imports no ``solvers``."""

from __future__ import annotations

from solvers.registry import names


def placement_method_names() -> list[str]:
    """The names of the registered placement and layout methods, in registration order."""
    return list(names(("placement", "layout")))
