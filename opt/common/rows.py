"""Row hashing shared by the schedulers and the bounds: the SplitMix64 mixer and
:func:`unique_rows`, the distinct rows of an integer matrix (task cost rows: a few thousand
distinct among a million) grouped through a checked 1-D hash instead of a sort of the rows."""

from __future__ import annotations

import numpy as np


def splitmix64(x: np.ndarray) -> np.ndarray:
    """uint64: the SplitMix64 finaliser of each value (wrapping arithmetic): a cheap, well-mixed
    hash of integers, used for row and set hashes (no ``numpy.random``, whose import costs
    ~8 ms of ``hetopt solve``'s startup)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def row_weights(k: int) -> np.ndarray:
    """int64 [k]: the odd column weights in [1, 2**61) of :func:`unique_rows`' row hash
    Σ a[i, j]·w[j] (wrapping)."""
    return ((splitmix64(np.arange(1, k + 1)) >> np.uint64(3)) | np.uint64(1)).astype(np.int64)


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows, inverse) of an int64 matrix; hashes rows first (much faster than
    ``np.unique(axis=0)`` on hundreds of thousands of rows), verifying there is no collision.
    The order of the unique rows is unspecified."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.ndim != 2 or a.shape[0] == 0:
        u, inv = np.unique(a if a.ndim == 2 else a.reshape(a.shape[0], -1), axis=0,
                           return_inverse=True)
        return u, inv.reshape(-1)
    w = row_weights(a.shape[1])
    with np.errstate(over="ignore"):
        key = (a * w[None, :]).sum(axis=1) if a.shape[1] else np.zeros(a.shape[0], np.int64)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    rows = a[first]
    if np.array_equal(rows[inv], a):
        return rows, inv
    u, inv = np.unique(a, axis=0, return_inverse=True)  # hash collision: exact fallback
    return u, inv.reshape(-1)
