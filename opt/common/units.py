"""Units and the one place where seconds become integer instance durations.

Conventions: time in seconds (``_s``), bytes as numbers of bytes (``_bytes``), bandwidth in bytes
per second (``_bytes_per_s``), compute in FLOP/s. Decimal prefixes for rates (GB/s = 1e9 B/s),
binary for memory sizes where the source says GiB/KiB.
"""

from __future__ import annotations

import numpy as np

from opt.common.errors import InputError, UnknownNameError

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3
US = 1e-6
MS = 1e-3
TFLOPS = 1e12

#: Seconds per one integer tick of each allowed instance ``time_unit`` ("unit" = bare integer).
TIME_UNITS: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "unit": 1.0}

#: Most ticks one converted duration may have (2**53: exact in a double, far from int64 overflow;
#: the placement instances' limit, opt.placement.instance.MAX_TICKS, is the same number)
MAX_TICKS = 2**53

#: Bytes per element for each precision; int4 carries a per-group fp16 scale (group 128).
INT4_GROUP = 128
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 2.0 / INT4_GROUP,
    "mxfp4": 4.25 / 8.0,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (scale overhead included for grouped formats)."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise UnknownNameError("dtype", dtype, DTYPE_BYTES) from None


def seconds_to_ticks(t_s, time_unit: str = "ns"):
    """Convert seconds to non-negative integer ticks of ``time_unit``, rounding half up; NaN,
    ±inf and more than :data:`MAX_TICKS` ticks are InputErrors (field ``duration``).

    Accepts scalars or numpy arrays; returns ``int`` for scalars and ``int64`` arrays otherwise.
    """
    if time_unit not in TIME_UNITS:
        raise InputError(f"unknown time_unit '{time_unit}'; known: {', '.join(TIME_UNITS)}",
                         field="time_unit")
    seconds = np.asarray(t_s, dtype=np.float64)
    if not np.isfinite(seconds).all():
        bad = float(seconds[~np.isfinite(seconds)].flat[0])
        raise InputError(f"duration must be a finite number of seconds, got {bad}",
                         field="duration")
    with np.errstate(over="ignore"):  # an overflow to inf is caught below
        ticks = np.floor(seconds / TIME_UNITS[time_unit] + 0.5)
    if np.any(ticks < 0):
        raise InputError(f"negative duration {float(np.min(t_s))} s", field="duration")
    if np.any(ticks > MAX_TICKS):
        raise InputError(f"duration {float(np.max(seconds)):g} s is more than {MAX_TICKS} "
                         f"ticks of {time_unit}", field="duration")
    ticks = ticks.astype(np.int64)
    return int(ticks) if ticks.ndim == 0 else ticks


def ms_to_ticks(ms: float, time_unit: str = "ns") -> float:
    """Milliseconds as (possibly fractional) ticks of ``time_unit``, with the binary rounding
    noise of the division removed (12 significant digits): 1 ms is 1000000.0 ns, not
    999999.9999999999."""
    return float(f"{ms * MS / TIME_UNITS[time_unit]:.12g}")


def ticks_ms_text(ticks: float, time_unit: str = "ns") -> str:
    """``ticks`` of ``time_unit`` as the user's milliseconds, e.g. ``"1 ms"`` (6 significant
    digits; the CLI's SLOs are given in ms)."""
    return f"{ticks * TIME_UNITS[time_unit] / MS:.6g} ms"
