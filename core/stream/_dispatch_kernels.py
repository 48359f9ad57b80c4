"""numba kernel of dispatch: a batch's per-matcher match lists -> each (post, subscription)
once, in (post, subscriber, sub id) order. Plain arrays in and out; see ``dispatch.py``."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _sort_keys(keys: np.ndarray, spare: np.ndarray, count: np.ndarray, bits: int) -> None:
    """Sort ``keys`` (non-negative, below ``2**bits``) in place: a least-significant-digit
    radix sort by bytes (``spare``: as long as ``keys``; ``count``: 257 slots), insertion
    sort for a few keys. A post's keys are a few hundred at most: three linear passes beat
    a comparison sort's ~8 levels of branches."""
    n = keys.shape[0]
    if n <= 32:
        for i in range(1, n):
            x = keys[i]
            j = i
            while j > 0 and keys[j - 1] > x:
                keys[j] = keys[j - 1]
                j -= 1
            keys[j] = x
        return
    src, dst = keys, spare
    in_spare = False
    for shift in range(0, bits, 8):
        count[:] = 0
        for i in range(n):
            count[((src[i] >> shift) & 255) + 1] += 1
        if count[((src[0] >> shift) & 255) + 1] == n:
            continue  # every key has this byte alike
        for d in range(256):
            count[d + 1] += count[d]
        for i in range(n):
            d = (src[i] >> shift) & 255
            dst[count[d]] = src[i]
            count[d] += 1
        src, dst = dst, src
        in_spare = not in_spare
    if in_spare:
        keys[:] = src


@numba.njit(cache=True, nogil=True)
def dedupe_by_post(
    row_post: np.ndarray,  # int64 per row: the post's code, 0..n_posts-1
    row_matcher: np.ndarray,  # int64 per row: the matcher that found the row's matches
    row_level: np.ndarray,  # int32 per row: the post's shedding level on that row
    offsets: np.ndarray,  # int64, rows + 1: the row's matches are ranks[a:b]
    ranks: np.ndarray,  # int64 per match: the subscription's rank by (subscriber, sub id)
    n_posts: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each (post, rank) once, kept on the lowest matcher (of equal matchers, the first
    row), sorted by (post code, rank).

    Returns ``(post int32, rank int64, matcher int32, level int32)`` per kept match.
    """
    n_rows = row_post.shape[0]
    # the rows of each post, by a counting sort on the post code
    starts = np.zeros(n_posts + 1, dtype=np.int64)
    for r in range(n_rows):
        starts[row_post[r] + 1] += 1
    for p in range(n_posts):
        starts[p + 1] += starts[p]
    fill = starts[:-1].copy()
    rows_of_post = np.empty(n_rows, dtype=np.int64)
    for r in range(n_rows):
        rows_of_post[fill[row_post[r]]] = r
        fill[row_post[r]] += 1
    total = offsets[n_rows] - offsets[0]
    out_post = np.empty(total, dtype=np.int32)
    out_rank = np.empty(total, dtype=np.int64)
    out_matcher = np.empty(total, dtype=np.int32)
    out_level = np.empty(total, dtype=np.int32)
    keys = np.empty(total, dtype=np.int64)
    local = np.empty(max(n_rows, 1), dtype=np.int64)
    spare = np.empty(total, dtype=np.int64)
    count = np.empty(257, dtype=np.int64)
    rank_bits = 0
    top = np.int64(0)
    for j in range(total):
        top = max(top, ranks[offsets[0] + j])
    while (np.int64(1) << rank_bits) <= top:
        rank_bits += 1
    kept = 0
    for p in range(n_posts):
        first = starts[p]
        n_local = starts[p + 1] - first
        # the post's rows by (matcher, row): an insertion sort (a post has a few rows), so
        # that a key's low bits, the row's place here, order equal ranks as wanted
        for i in range(n_local):
            r = rows_of_post[first + i]
            j = i
            while j > 0 and row_matcher[local[j - 1]] > row_matcher[r]:
                local[j] = local[j - 1]
                j -= 1
            local[j] = r
        shift = 0
        while (np.int64(1) << shift) < n_local:
            shift += 1
        mask = (np.int64(1) << shift) - 1
        size = 0
        for i in range(n_local):
            r = local[i]
            for j in range(offsets[r], offsets[r + 1]):
                keys[size] = (ranks[j] << shift) | i
                size += 1
        if size == 0:
            continue
        # the keys alone are sorted (no argsort): the first of a rank is its lowest matcher
        block = keys[:size]
        _sort_keys(block, spare[:size], count, rank_bits + shift)
        last = np.int64(-1)
        for i in range(size):
            key = block[i]
            rank = key >> shift
            if rank == last:
                continue
            last = rank
            r = local[key & mask]
            out_post[kept] = p
            out_rank[kept] = rank
            out_matcher[kept] = row_matcher[r]
            out_level[kept] = row_level[r]
            kept += 1
    return out_post[:kept], out_rank[:kept], out_matcher[:kept], out_level[:kept]


@numba.njit(cache=True, nogil=True)
def delivery_runs(
    post: np.ndarray,  # int32 per kept match, sorted by (post, subscriber, sub)
    owner: np.ndarray,  # int32 per kept match: the subscriber's code
    level: np.ndarray,  # int32 per kept match: the shedding level of its row
) -> tuple[np.ndarray, np.ndarray]:
    """Each (post, subscriber) run is a delivery: ``(offsets int32, runs + 1; the highest
    level in each run)``, in one pass."""
    n = post.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    highest = np.empty(n, dtype=np.int32)
    m = 0
    for i in range(n):
        if i == 0 or post[i] != post[i - 1] or owner[i] != owner[i - 1]:
            offsets[m] = i
            highest[m] = level[i]
            m += 1
        elif level[i] > highest[m - 1]:
            highest[m - 1] = level[i]
    offsets[m] = n
    return offsets[: m + 1], highest[:m]
