"""numba kernel of dispatch: a batch's per-matcher match lists -> each (post, subscription)
once, in (post, subscriber, sub id) order. Plain arrays in and out; see ``dispatch.py``."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def dedupe_by_post(
    row_post: np.ndarray,  # int64 per row: the post's code, 0..n_posts-1
    row_matcher: np.ndarray,  # int64 per row: the matcher that found the row's matches
    row_level: np.ndarray,  # int32 per row: the post's shedding level on that row
    offsets: np.ndarray,  # int64, rows + 1: the row's matches are ranks[a:b]
    ranks: np.ndarray,  # int64 per match: the subscription's rank by (subscriber, sub id)
    n_posts: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each (post, rank) once, kept on the lowest matcher, sorted by (post code, rank).

    Returns ``(post, rank, matcher, level)`` per kept match.
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
    width = np.int64(1)
    for r in range(n_rows):
        while row_matcher[r] >= width:
            width *= 2
    total = offsets[n_rows] - offsets[0]
    out_post = np.empty(total, dtype=np.int64)
    out_rank = np.empty(total, dtype=np.int64)
    out_matcher = np.empty(total, dtype=np.int64)
    out_level = np.empty(total, dtype=np.int32)
    keys = np.empty(total, dtype=np.int64)
    levels = np.empty(total, dtype=np.int32)
    kept = 0
    for p in range(n_posts):
        size = 0
        for i in range(starts[p], starts[p + 1]):
            r = rows_of_post[i]
            for j in range(offsets[r], offsets[r + 1]):
                # one key orders by rank, then matcher: the first of a rank is its lowest
                keys[size] = ranks[j] * width + row_matcher[r]
                levels[size] = row_level[r]
                size += 1
        if size == 0:
            continue
        order = np.argsort(keys[:size], kind="mergesort")
        last = np.int64(-1)
        for i in range(size):
            key = keys[order[i]]
            rank = key // width
            if rank == last:
                continue
            last = rank
            out_post[kept] = p
            out_rank[kept] = rank
            out_matcher[kept] = key - rank * width
            out_level[kept] = levels[order[i]]
            kept += 1
    return out_post[:kept], out_rank[:kept], out_matcher[:kept], out_level[:kept]
