"""String enumerations whose members read, print and format as the strings they equal (the
names of statuses and problems in JSON files, tables and reports)."""

from __future__ import annotations

from enum import Enum


class TextEnum(str, Enum):
    """A ``str`` enumeration shown as its value: ``str``, ``repr`` and ``format`` give the
    plain string, so tables and reports print it as they printed the string before."""

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
