"""Bounded argument types of the ``hetopt`` parser: integers and finite numbers in a stated
range, refused at parse time with one line naming the option and the value (argparse adds
``argument --OPTION:``; :class:`OneLineParser` prints it as one line, exit 2).

Every numeric option of :mod:`opt.app.cli.parser` takes one of these types (tests/cli/
test_hostile_values.py walks the parser to check it), so no value reaches a library function
as ``inf``, NaN, a negative count or an integer too large for a 64-bit array. The library
functions behind the options check the same ranges themselves (InputError), so the API is
covered too; these types only make the command line say it before any work.

Nothing here imports more than the standard library: building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import NoReturn

#: largest integer an integer option accepts unless it states a smaller bound: 2³¹ − 1, far
#: beyond every count the tools can use and safely inside every int64 array
MAX_INT = 2 ** 31 - 1
#: largest random seed: numpy's and the replay generator's seeds are 32-bit unsigned here
MAX_SEED = 2 ** 32 - 1
#: largest magnitude of a real-valued option unless it states a smaller bound
MAX_REAL = 1e15


class BoundedInt:
    """argparse type: an integer literal in [``low``, ``high``]."""

    def __init__(self, low: int, high: int = MAX_INT) -> None:
        self.low, self.high = low, high
        self.__name__ = "int"  # argparse names the type in "invalid int value"

    def __repr__(self) -> str:
        return f"BoundedInt({self.low}, {self.high})"

    def __call__(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in {self.low}..{self.high}, "
                                             f"got {text!r}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"expected an integer in {self.low}..{self.high}, "
                                             f"got {text!r}")
        return value


class BoundedReal:
    """argparse type: a finite number in [``low``, ``high``] (``low_open`` / ``high_open``:
    the bound itself excluded)."""

    def __init__(self, low: float, high: float = MAX_REAL, *, low_open: bool = False,
                 high_open: bool = False) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.__name__ = "float"

    def __repr__(self) -> str:
        return f"BoundedReal({self.interval()})"

    def interval(self) -> str:
        """The accepted range in interval notation, e.g. ``(0, 1]``."""
        return (f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(f"expected a finite number in {self.interval()}, "
                                             f"got {text!r}")
        return value


#: the common kinds
COUNT = BoundedInt(1)           # a count of things: ≥ 1
NON_NEGATIVE_INT = BoundedInt(0)
SEED = BoundedInt(0, MAX_SEED)
POSITIVE = BoundedReal(0.0, low_open=True)   # a finite number > 0
NON_NEGATIVE = BoundedReal(0.0)              # a finite number ≥ 0
FRACTION = BoundedReal(0.0, 1.0, low_open=True)       # a share in (0, 1]
RATIO = BoundedReal(0.0, 1.0, high_open=True)         # a sparsity ratio in [0, 1)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, ``hetopt: error: COMMAND: MESSAGE``, and
    exit 2 (docs/cli.md "Exit codes and input limits"); ``--help`` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("hetopt").strip()
        where = f"{command}: " if command else ""
        hint = f" (hetopt {command} --help)" if command else " (hetopt --help)"
        sys.stderr.write(f"hetopt: error: {where}{message}{hint}\n")
        sys.exit(2)
