"""Optional dependencies (the ``plot`` and ``dist`` extras), checked before a command does any
work: a missing one is an :class:`~opt.common.errors.InputError` naming the option and the
install command, at once rather than after minutes of solving."""

from __future__ import annotations

import importlib.util

from opt.common.errors import InputError

#: Extra → the modules it provides.
EXTRAS = {"plot": ("matplotlib",), "dist": ("distributed",)}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    out = []
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(module)
    return out


def require(extra: str, option: str) -> None:
    """InputError naming ``option`` (e.g. ``--plot``) when ``extra`` is not installed."""
    lost = missing(extra)
    if lost:
        raise InputError(f"needs {', '.join(lost)} (not installed): pip install "
                         f"'hetopt[{extra}]'", source="<argument>", field=option.lstrip("-"))
