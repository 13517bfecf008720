"""Microbatch counts: the work of building and searching grows with the batches, never with
``max_microbatches`` (a count above the largest batch adds nothing: μ divides the batch)."""

from __future__ import annotations

from opt.serving.instance import ServingGrid, microbatch_counts, microbatch_sizes_for


def test_a_huge_max_microbatches_gives_what_the_largest_batch_allows():
    batches = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert microbatch_sizes_for(batches, 10**9) == microbatch_sizes_for(batches, 256)
    grid = ServingGrid(max_gpus=32, max_owners=3, max_replicas=4,
                       max_microbatches=2**31 - 1, batches=batches)
    assert microbatch_counts(grid) == list(range(1, 257))


def test_counts_below_the_largest_batch_are_kept():
    grid = ServingGrid(max_gpus=32, max_owners=3, max_replicas=4, max_microbatches=4,
                       batches=(1, 8))
    assert microbatch_counts(grid) == [1, 2, 3, 4]
    assert microbatch_sizes_for((1, 8), 4) == (1, 2, 4, 8)
