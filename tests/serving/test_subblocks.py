"""The B&B's space of every sub-block length (problems.md §6): the sequences, the sequence cost
bound, the sub-block mechanism changing the optimum, and the four pruning settings agreeing."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from heuristics.serving.search import (
    owner_patterns,
    search,
    sequence_cost_bounds,
    structured_sequences,
    sub_block_lengths,
)
from opt.serving.plan import template_from_sequence

sys.path.insert(0, str(Path(__file__).parent))
from test_serving_milp import _exhaustive, _instance  # noqa: E402


def test_every_length_once_and_capped() -> None:
    inst = _instance("gemma-4L-block2")  # 2-layer block of 5-op layers
    assert sub_block_lengths(inst) == [1, 2]
    one = structured_sequences(inst, 1)
    every = structured_sequences(inst)
    for k, seqs in every.items():
        keys = [s.tobytes() for s in seqs]
        assert len(keys) == len(set(keys))  # each sequence once
        assert {s.tobytes() for s in one[k]} <= set(keys)  # the 1-layer space is included
        for s in seqs:
            template, _ = template_from_sequence(s, k)  # a round-robin template
            if s.tobytes() not in {x.tobytes() for x in one[k]}:  # from the 2-layer templates
                assert len(template) - 1 <= k  # default cap: one stage per owner
    # the cap counts stages around the cycle
    assert all(np.count_nonzero(p != np.roll(p, 1)) <= 4
               for p in owner_patterns(10, 2, max_stages=4))


@pytest.mark.parametrize("name", ["random-truncated", "mixtral-2L-moe"])
def test_sequence_bound_never_exceeds_the_sequence_optimum(name: str) -> None:
    inst = _instance(name)
    mus = list(range(1, inst.grid.max_microbatches + 1))
    for k, seqs in structured_sequences(inst).items():
        lbs = sequence_cost_bounds(inst, seqs, mus)
        for seq, lb in zip(seqs, lbs):
            best = search(inst, {k: [seq]}, bounds=False)
            if best.cost_usd_per_token is not None:
                assert lb <= best.cost_usd_per_token * (1 + 1e-12)


def test_longer_sub_blocks_change_the_optimum() -> None:
    """random-truncated: the 2-layer templates beat every tiled 1-layer one — already with the
    default cap of K stages — and, uncapped, reach the exhaustive optimum of the full space."""
    inst = _instance("random-truncated")
    one = search(inst, structured_sequences(inst, 1))
    default = search(inst, structured_sequences(inst))  # multi-layer templates ≤ K stages
    assert default.cost_usd_per_token < one.cost_usd_per_token * 0.97
    every = search(inst, structured_sequences(inst, max_stages=inst.n_ops))
    assert every.cost_usd_per_token <= default.cost_usd_per_token * (1 + 1e-12)
    assert every.cost_usd_per_token < one.cost_usd_per_token * 0.95
    assert every.cost_usd_per_token == pytest.approx(_exhaustive("random-truncated")
                                                     .cost_usd_per_token, rel=1e-12)


@pytest.mark.parametrize("name", ["random-truncated", "gemma-4L-block2"])
def test_pruning_settings_agree_and_prune(name: str) -> None:
    inst = _instance(name)
    seqs = structured_sequences(inst)
    runs = {(fr, bd): search(inst, seqs, frontier=fr, bounds=bd)
            for fr in (True, False) for bd in (True, False)}
    costs = {key: r.cost_usd_per_token for key, r in runs.items()}
    ref = costs[(False, False)]
    assert all(c == pytest.approx(ref, rel=1e-12) for c in costs.values())
    plain, full = runs[(False, False)].stats, runs[(True, True)].stats
    assert full.nodes + full.evaluations < plain.nodes + plain.evaluations


@pytest.mark.parametrize("name", ["random-truncated", "mixtral-2L-moe"])
def test_sequence_bound_cuts_sequences_without_losing_the_optimum(name: str) -> None:
    """The sequence-level cost bound acts: whole owner sequences are skipped (their DFS never
    starts) and the optimum is the one found without any bound."""
    inst = _instance(name)
    seqs = structured_sequences(inst, max_stages=inst.n_ops)
    on = search(inst, seqs)
    off = search(inst, seqs, bounds=False)
    assert on.stats.sequences_pruned > 0 and off.stats.sequences_pruned == 0
    assert on.stats.sequences + on.stats.sequences_pruned == off.stats.sequences
    assert on.cost_usd_per_token == pytest.approx(off.cost_usd_per_token, rel=1e-12)
