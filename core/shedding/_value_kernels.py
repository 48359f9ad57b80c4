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


# _token_byte as a lookup table: one load per byte in the scan of every raw line
_TOKEN_BYTES = np.array([_token_byte.py_func(b) for b in range(256)], dtype=np.int16)


@njit(cache=True)
def line_values(
    offsets: np.ndarray, data: np.ndarray, table: np.ndarray, prefix: int
) -> np.ndarray:
    """Per line: the sum of ``table`` over its distinct tokens' prefix hashes."""
    n = offsets.shape[0] - 1
    mask = np.uint64(table.shape[0] - 1)
    token_bytes = _TOKEN_BYTES
    out = np.zeros(n, dtype=np.float64)
    seen = np.empty(MAX_TOKENS, dtype=np.uint64)
    # which line last met each bucket, and with which hash: a repeat is found in O(1);
    # only two hashes of one line in one bucket fall back to the line's list
    bucket_line = np.full(table.shape[0], -1, dtype=np.int64)
    bucket_hash = np.zeros(table.shape[0], dtype=np.uint64)
    for i in range(n):
        n_seen = 0
        total = 0.0
        h = _FNV_OFFSET
        taken = 0
        stop = offsets[i + 1]
        for j in range(offsets[i], stop + 1):
            b = token_bytes[data[j]] if j < stop else -1
            if b >= 0:
                if taken < prefix:
                    h = ((h ^ np.uint64(b)) * _FNV_PRIME) & _LOW32
                taken += 1
                continue
            if taken > 0:  # a token ended
                bucket = h & mask
                new = True
                if bucket_line[bucket] == i:
                    if bucket_hash[bucket] == h:
                        new = False
                    else:
                        for k in range(n_seen):
                            if seen[k] == h:
                                new = False
                                break
                if new and n_seen < MAX_TOKENS:
                    if bucket_line[bucket] != i:
                        bucket_line[bucket] = i
                        bucket_hash[bucket] = h
                    seen[n_seen] = h
                    n_seen += 1
                    total += table[bucket]
                h = _FNV_OFFSET
                taken = 0
        out[i] = total
    return out


@njit(cache=True)
def object_lines(offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Per line: does it start like a JSON object, ``{`` after white space (RE2's ``\\s``:
    tab, line feed, form feed, carriage return, space)?"""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        for j in range(offsets[i], offsets[i + 1]):
            b = data[j]
            if b == 32 or b == 9 or b == 10 or b == 12 or b == 13:
                continue
            out[i] = b == 123
            break
    return out


@njit(cache=True)
def keep_most_valuable(
    values: np.ndarray, n_drop: int, exempt: np.ndarray, seed: int
) -> np.ndarray:
    """Keep-mask: the ``n_drop`` non-exempt posts of least value are dropped, ties broken by
    a seeded draw (so equal values drop at random, not by position), then by position.

    A selection, not a sort: the ``n_drop``-th least value is found in linear time, every
    post below it goes, and only the posts tied at it are drawn and sorted (a drop runs
    on every raw line of an overloaded batch, millions of them)."""
    n = values.shape[0]
    keep = np.ones(n, dtype=np.bool_)
    if n_drop <= 0:
        return keep
    candidates = np.flatnonzero(~exempt)
    if n_drop >= candidates.shape[0]:
        for i in range(candidates.shape[0]):
            keep[candidates[i]] = False
        return keep
    pool = values[candidates]
    threshold = np.partition(pool, n_drop - 1)[n_drop - 1]
    below = 0
    tied = 0
    for i in range(pool.shape[0]):
        if pool[i] < threshold:
            keep[candidates[i]] = False
            below += 1
        elif pool[i] == threshold:
            tied += 1
    ties = np.empty(tied, dtype=np.int64)
    draws = np.empty(tied, dtype=np.float64)
    k = 0
    for i in range(pool.shape[0]):
        if pool[i] == threshold:
            ties[k] = candidates[i]
            draws[k] = unit_draw(seed, candidates[i], VALUE_SALT)
            k += 1
    order = np.argsort(draws, kind="mergesort")  # stable: equal draws by position
    for i in range(n_drop - below):
        keep[ties[order[i]]] = False
    return keep
