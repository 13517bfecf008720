"""The closest measured card of a GPU type: which measured GPU's fitted kernel classes a GPU
without measurements takes (problems.md §5.3b "Unmeasured GPUs", docs/measurements.md "The
closest measured card").

The rule, from the catalog (opt/costlib/data/hardware.json) alone: among the measured cards,
first those of the same memory technology (HBM / GDDR) **and** interconnect (NVLink / PCIe),
then the same memory technology, then the same interconnect, then any; within a tier the
nearest in log peaks, ``hypot(ln(F_card / F), ln(β_card / β))`` (peak FLOP/s ``F``, memory
bandwidth ``β``: the two datasheet numbers the kernel model scales by); ties by name. A card
without a stated memory technology or interconnect matches nothing on that axis. Memory
technology leads because it decides the memory-bound kernels (decode) that serving plans are
made of; the interconnect marks the server class (SXM with NVLink vs PCIe cards).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opt.common.errors import InputError
from opt.costlib.hardware import DeviceSpec

#: The tiers of the rule, best first: (same memory technology, same interconnect).
TIERS = ((True, True), (True, False), (False, True), (False, False))


@dataclass(frozen=True)
class CardMatch:
    """The measured ``card`` a GPU type ``gpu`` takes: the tier of the rule (0: same memory
    technology and interconnect … 3: neither), the log-peak distance and the reason in words."""

    gpu: str
    card: str
    tier: int
    distance: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"card": self.card, "tier": self.tier, "log_peak_distance": self.distance,
                "why": self.why}


def log_peak_distance(a: DeviceSpec, b: DeviceSpec) -> float:
    """``hypot(ln(F_a/F_b), ln(β_a/β_b))``: distance in log peak FLOP/s and bandwidth."""
    return math.hypot(math.log(a.peak_flops / b.peak_flops),
                      math.log(a.mem_bw_bytes_per_s / b.mem_bw_bytes_per_s))


def _same(a: str | None, b: str | None) -> bool:
    return a is not None and a == b


def _tier(gpu: DeviceSpec, card: DeviceSpec) -> int:
    key = (_same(gpu.memory_technology, card.memory_technology),
           _same(gpu.interconnect, card.interconnect))
    return TIERS.index(key)


def _why(gpu: DeviceSpec, card: DeviceSpec, tier: int, distance: float) -> str:
    kind = {0: f"same memory ({card.memory_technology}) and interconnect ({card.interconnect})",
            1: f"same memory ({card.memory_technology}), interconnect {card.interconnect} "
               f"vs {gpu.interconnect}",
            2: f"same interconnect ({card.interconnect}), memory {card.memory_technology} "
               f"vs {gpu.memory_technology}",
            3: f"no measured card shares memory ({gpu.memory_technology}) or interconnect "
               f"({gpu.interconnect})"}[tier]
    return (f"{kind}; nearest in log peaks (distance {distance:.3f}: FLOP/s ×"
            f"{card.peak_flops / gpu.peak_flops:.3g}, bandwidth ×"
            f"{card.mem_bw_bytes_per_s / gpu.mem_bw_bytes_per_s:.3g})")


def closest_measured(gpu: DeviceSpec, measured: Iterable[DeviceSpec]) -> CardMatch:
    """The card of ``measured`` that ``gpu`` takes (itself when measured; the module's rule).
    :class:`InputError` when ``measured`` is empty."""
    cards = sorted(measured, key=lambda d: d.name)
    if not cards:
        raise InputError("no measured GPU to take kernel classes from", field="gpu_calibration")
    own = next((d for d in cards if d.name == gpu.name), None)
    if own is not None:
        return CardMatch(gpu.name, own.name, 0, 0.0, "measured")
    best = min(cards, key=lambda d: (_tier(gpu, d), log_peak_distance(gpu, d)))
    tier, dist = _tier(gpu, best), log_peak_distance(gpu, best)
    return CardMatch(gpu.name, best.name, tier, dist, _why(gpu, best, tier, dist))


def closest_measured_cards(catalog: Any, measured: Iterable[str]) -> dict[str, CardMatch]:
    """:func:`closest_measured` of every GPU of ``catalog`` not in ``measured`` (names)."""
    cards = [catalog.device(n) for n in measured]
    names = {d.name for d in cards}
    return {d.name: closest_measured(d, cards) for d in catalog.gpus() if d.name not in names}
