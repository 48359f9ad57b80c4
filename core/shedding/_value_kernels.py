"""numba kernels of the per-post value estimate: hashed word prefixes over raw bytes.

Plain arrays in and out; :mod:`core.shedding.post_value` validates and names things.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core.shedding._kernels import unit_draw

VALUE_SALT = -4  # breaks ties between posts of equal estimated value
_FNV_OFFSET = np.uint64(2166136261)
_FNV_PRIME = np.uint64(16777619)
_LOW32 = np.uint64(0xFFFFFFFF)
MAX_TOKENS = 128  # distinct tokens remembered per post (tweets hold far fewer)


@njit(cache=True, inline="always")
def _token_byte(b: int) -> int:
    """The byte lower-cased when it belongs to a token, else -1: ASCII letters and digits,
    and every byte of a multi-byte UTF-8 character (non-ASCII letters)."""
    if 97 <= b <= 122 or 48 <= b <= 57 or b >= 128:
        return b
    if 65 <= b <= 90:
        return b + 32
    return -1


@njit(cache=True)
def prefix_hashes(offsets: np.ndarray, data: np.ndarray, prefix: int) -> np.ndarray:
    """FNV-1a of the first ``prefix`` token bytes of each string (one token per string)."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = _FNV_OFFSET
        taken = 0
        for j in range(offsets[i], offsets[i + 1]):
            b = _token_byte(data[j])
            if b < 0:
                continue
            if taken < prefix:
                h = ((h ^ np.uint64(b)) * _FNV_PRIME) & _LOW32
                taken += 1
        out[i] = h
    return out


@njit(cache=True)
def line_values(
    offsets: np.ndarray, data: np.ndarray, table: np.ndarray, prefix: int
) -> np.ndarray:
    """Per line: the sum of ``table`` over its distinct tokens' prefix hashes."""
    n = offsets.shape[0] - 1
    mask = np.uint64(table.shape[0] - 1)
    out = np.zeros(n, dtype=np.float64)
    seen = np.empty(MAX_TOKENS, dtype=np.uint64)
    for i in range(n):
        n_seen = 0
        total = 0.0
        h = _FNV_OFFSET
        taken = 0
        stop = offsets[i + 1]
        for j in range(offsets[i], stop + 1):
            b = _token_byte(data[j]) if j < stop else -1
            if b >= 0:
                if taken < prefix:
                    h = ((h ^ np.uint64(b)) * _FNV_PRIME) & _LOW32
                taken += 1
                continue
            if taken > 0:  # a token ended
                new = True
                for k in range(n_seen):
                    if seen[k] == h:
                        new = False
                        break
                if new and n_seen < MAX_TOKENS:
                    seen[n_seen] = h
                    n_seen += 1
                    total += table[h & mask]
                h = _FNV_OFFSET
                taken = 0
        out[i] = total
    return out


@njit(cache=True)
def keep_most_valuable(
    values: np.ndarray, n_drop: int, exempt: np.ndarray, seed: int
) -> np.ndarray:
    """Keep-mask: the ``n_drop`` non-exempt posts of least value are dropped, ties broken by
    a seeded draw (so equal values drop at random, not by position)."""
    n = values.shape[0]
    keep = np.ones(n, dtype=np.bool_)
    if n_drop <= 0:
        return keep
    candidates = np.flatnonzero(~exempt)
    draws = np.empty(candidates.shape[0], dtype=np.float64)
    for i in range(candidates.shape[0]):
        draws[i] = unit_draw(seed, candidates[i], VALUE_SALT)
    # value first, the draw second: argsort of value, stable over the draw order
    by_draw = np.argsort(draws, kind="mergesort")
    by_value = np.argsort(values[candidates[by_draw]], kind="mergesort")
    order = candidates[by_draw[by_value]]
    for i in range(min(n_drop, order.shape[0])):
        keep[order[i]] = False
    return keep
