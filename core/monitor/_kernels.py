"""numba kernels of the word-frequency sketch (plain arrays in, plain arrays out)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _mix(x: np.uint64) -> np.uint64:
    # splitmix64's finaliser: a good 64-bit mixer, so one key gives independent rows
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def add(counts: np.ndarray, row_seeds: np.ndarray, keys: np.ndarray, weights: np.ndarray) -> None:
    """Count-min update: ``counts[r, h_r(key)] += weight`` for every row ``r``."""
    depth, width = counts.shape
    w = np.uint64(width)
    for i in range(keys.shape[0]):
        for r in range(depth):
            counts[r, np.int64(_mix(keys[i] ^ row_seeds[r]) % w)] += weights[i]


@njit(cache=True)
def estimate(counts: np.ndarray, row_seeds: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Count-min estimate of each key: the least of its rows' counters (never below truth)."""
    depth, width = counts.shape
    w = np.uint64(width)
    out = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        least = counts[0, np.int64(_mix(keys[i] ^ row_seeds[0]) % w)]
        for r in range(1, depth):
            value = counts[r, np.int64(_mix(keys[i] ^ row_seeds[r]) % w)]
            if value < least:
                least = value
        out[i] = least
    return out
