"""numba kernels: Spark's ``xxhash64`` (``org.apache.spark.sql.catalyst.expressions.XxHash64``)
on plain arrays, bit for bit, so that a selection Spark makes with ``F.xxhash64`` can be
made without Spark.

Spark hashes its arguments left to right, each with the previous hash as its seed (the
first with 42): an int with ``hashInt``, a string with ``hashUnsafeBytes`` over its UTF-8
bytes. Both are XXH64 (Yann Collet's xxHash, 64-bit) as Spark's ``XXH64`` class writes it;
all arithmetic wraps modulo 2^64 (uint64 here; Java's signed longs have the same bits).
"""

from __future__ import annotations

import numpy as np
from numba import njit

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)


@njit(cache=True, inline="always")
def _rotl(x: np.uint64, r: int) -> np.uint64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix(h: np.uint64) -> np.uint64:
    h ^= h >> np.uint64(33)
    h *= P2
    h ^= h >> np.uint64(29)
    h *= P3
    h ^= h >> np.uint64(32)
    return h


@njit(cache=True, inline="always")
def _u64(data: np.ndarray, at: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(8):  # little-endian, as Spark's Platform.getLong on x86 and arm
        v |= np.uint64(data[at + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _u32(data: np.ndarray, at: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(4):
        v |= np.uint64(data[at + k]) << np.uint64(8 * k)
    return v


@njit(cache=True)
def hash_int(value: np.int64, seed: np.uint64) -> np.uint64:
    """Spark's ``XXH64.hashInt`` of a 32-bit int."""
    h = seed + P5 + np.uint64(4)
    h ^= (np.uint64(value) & np.uint64(0xFFFFFFFF)) * P1
    h = _rotl(h, 23) * P2 + P3
    return _fmix(h)


@njit(cache=True)
def hash_bytes(data: np.ndarray, start: int, stop: int, seed: np.uint64) -> np.uint64:
    """Spark's ``XXH64.hashUnsafeBytes`` of ``data[start:stop]`` (uint8)."""
    length = stop - start
    at = start
    if length >= 32:
        limit = stop - 32
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while at <= limit:
            v1 = _rotl(v1 + _u64(data, at) * P2, 31) * P1
            v2 = _rotl(v2 + _u64(data, at + 8) * P2, 31) * P1
            v3 = _rotl(v3 + _u64(data, at + 16) * P2, 31) * P1
            v4 = _rotl(v4 + _u64(data, at + 24) * P2, 31) * P1
            at += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        for v in (v1, v2, v3, v4):
            h ^= _rotl(v * P2, 31) * P1
            h = h * P1 + P4
    else:
        h = seed + P5
    h += np.uint64(length)
    while at <= stop - 8:
        h ^= _rotl(_u64(data, at) * P2, 31) * P1
        h = _rotl(h, 27) * P1 + P4
        at += 8
    if at + 4 <= stop:
        h ^= _u32(data, at) * P1
        h = _rotl(h, 23) * P2 + P3
        at += 4
    while at < stop:
        h ^= np.uint64(data[at]) * P5
        h = _rotl(h, 11) * P1
        at += 1
    return _fmix(h)


@njit(cache=True)
def hash_int_then_strings(
    value: np.int64, offsets: np.ndarray, data: np.ndarray, seed: np.uint64
) -> np.ndarray:
    """``xxhash64(lit(value), strings)`` for every string of an Arrow string column's
    ``offsets`` (n + 1) and UTF-8 ``data``: uint64 hashes (Spark's longs, same bits)."""
    first = hash_int(value, seed)
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = hash_bytes(data, offsets[i], offsets[i + 1], first)
    return out
