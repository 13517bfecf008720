"""Lists given as text or as sequences: :func:`positive_ints` reads ``"1,2,4"`` (a command-line
option, a keyword of the API) or a sequence of integers as a tuple of positive integers."""

from __future__ import annotations

from collections.abc import Sequence

from opt.common.errors import InputError


def positive_ints(value: str | Sequence[int], field: str, source: str | None = None
                  ) -> tuple[int, ...]:
    """``value`` (comma-separated integers, e.g. ``"1,2,4"``, or a sequence of integers) as a
    tuple of one or more integers ≥ 1; InputError naming ``field`` (and ``source``, e.g.
    ``"<argument>"`` on the command line) and the value."""
    text = value if isinstance(value, str) else ",".join(str(v) for v in value)
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", source=source,
                         field=field) from None
    if not values or min(values) < 1:
        raise InputError(f"expected positive integers, got {text!r}", source=source,
                         field=field)
    return values
