"""Seeded families of small LLM placement instances (1-layer slices of real model cards) that
the exact models can still prove, used by the agreement tests, the gap report and the bench.

Each draw is an :class:`LlmCase` (a workload description); :meth:`LlmCase.build` turns it into a
:class:`~opt.placement.instance.PlacementInstance` with the bundled catalog and cards.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from opt.costlib.hardware import Catalog, bundled_catalog
from opt.costlib.modelcard import CardSet, bundled_cards
from opt.placement.build_options import BuildOptions, Workload, paper_precision
from opt.placement.builder import build_placement
from opt.placement.instance import PlacementInstance

#: Dense, DOPS-variant, Qwen1 and MoE cards.
SMALL_LLM_MODELS = ("llama-2-7b", "dops-qwen-1.8b", "mixtral-8x7b", "qwen-1.8b")


@dataclass(frozen=True)
class LlmCase:
    """A small workload: ``layers`` first layers of ``model`` on ``platform``."""

    model: str
    platform: str
    prefill: int
    decode: int
    batch: int
    layers: int = 1
    tp: int = 1
    kv_layout: str = "heads"
    load_timing: str = "overlap"   # the builder's default (problems.md §1.2 rule 5)
    paper_precision: bool = False  # DOPS' precision of the model (INT8 for Llama-2-70B, Mixtral)

    def build(self, catalog: Catalog | None = None, cards: CardSet | None = None
              ) -> PlacementInstance:
        catalog = catalog or bundled_catalog()
        cards = cards or bundled_cards()
        return build_placement(cards[self.model], catalog.platform(self.platform), catalog,
                               Workload(self.prefill, self.decode, self.batch),
                               BuildOptions(layers=self.layers, tp=self.tp,
                                            kv_layout=self.kv_layout,
                                            load_timing=self.load_timing,
                                            precision=paper_precision(self.model)
                                            if self.paper_precision else None))

    def to_dict(self) -> dict:
        return asdict(self)


def agreement_case(seed: int) -> LlmCase:
    """Sizes both exact models can usually prove (≈ 30–55 tasks): tp shards only on a
    prefill-only step, two decode steps only on the single-device HP0."""
    rng = random.Random(seed)
    platform = rng.choice(("HP0", "HP32", "HP32"))
    tp = rng.choice((1, 1, 2))
    decode = 0 if tp == 2 else rng.choice((1, 2) if platform == "HP0" else (1,))
    return LlmCase(model=rng.choice(SMALL_LLM_MODELS), platform=platform,
                   prefill=rng.choice((8, 16, 32)), decode=decode,
                   batch=rng.choice((1, 2, 4)), tp=tp)


def gap_case(seed: int) -> LlmCase:
    """Gap-report instances (19–57 tasks, most 38–50): HP32 with at most one decode step (two
    already take CP-SAT minutes on some cards), HP0 (one device) with two (one for MoE)."""
    rng = random.Random(seed)
    model = rng.choice(("llama-2-7b", "dops-qwen-1.8b", "qwen-1.8b", "mixtral-8x7b"))
    platform = rng.choice(("HP32", "HP32", "HP32", "HP32", "HP0"))
    if platform == "HP32":
        decode = rng.choice((0, 1, 1, 1))
    else:
        decode = 1 if model == "mixtral-8x7b" else 2
    return LlmCase(model=model, platform=platform, prefill=rng.choice((8, 16, 24, 32)),
                   decode=decode, batch=rng.randint(1, 4))
