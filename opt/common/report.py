"""Plain-text tables for the CLI (no dependency): right-aligned numbers, left-aligned text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(value: Any, digits: int = 4) -> str:
    """Readable cell: None → '-', floats to ``digits`` significant digits, large ints grouped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value == 0 or 1e-3 <= abs(value) < 1e6:
            return f"{value:.{digits}g}"
        return f"{value:.{max(digits - 1, 1)}e}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 4) -> str:
    """Render ``rows`` under ``headers`` as an aligned text table."""
    cells = [[fmt(v, digits) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(headers))]

    def line(items):
        return "  ".join(s.rjust(w) if num else s.ljust(w)
                         for s, w, num in zip(items, widths, numeric)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 4) -> str:
    """``rows`` under ``headers`` as a Markdown table (cells as :func:`fmt` renders them, then
    :func:`md_text`: a cell's text, e.g. from a record file, stays text in the page)."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md_text(fmt(v, digits)) for v in row) + " |" for row in rows]
    return "\n".join(out)


def md_text(text: str) -> str:
    """``text`` as one Markdown table cell that renders as the text itself: a line break
    becomes a space, ``|`` (which would end the cell) is escaped and ``<`` (which would open
    an HTML tag) written as ``&lt;``."""
    return " ".join(text.splitlines()).replace("|", "\\|").replace("<", "&lt;")
