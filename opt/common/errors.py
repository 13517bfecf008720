"""Errors for bad input: one line naming the file, the field and the value."""

from __future__ import annotations

from collections.abc import Iterable


class InputError(ValueError):
    """Bad user input (a file, a name, a value). The CLI prints it as one line and exits 2.

    ``source`` is the file (or "<argument>"), ``field`` the dotted path of the offending field.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        self.detail = message
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class UnknownNameError(InputError, KeyError):
    """A model, device, platform or GPU name that is not in the catalog."""

    def __init__(self, what: str, name: str, known: Iterable[str], *, source: str | None = None):
        known_sorted = sorted(known, key=str.lower)
        super().__init__(
            f"unknown {what} '{name}'; known: {', '.join(known_sorted)}", source=source
        )
        self.name = name
        self.known = tuple(known_sorted)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return ValueError.__str__(self)
