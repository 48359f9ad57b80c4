"""numba kernel of the route tasks' payloads: each routed (post, matcher) pair's words, cut
to the words that matcher can use. Plain arrays in and out; see ``worker.py``."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def gather_kept(
    indptr: np.ndarray,  # int64, posts + 1: post p's words are word_ids[indptr[p]:indptr[p+1]]
    word_ids: np.ndarray,  # int32 dictionary ids
    rows: np.ndarray,  # int64 per pair: the post
    matchers: np.ndarray,  # int64 per pair: the matcher it goes to
    kept: np.ndarray,  # uint8 (n_words, ceil(N / 8)): bit m of word w: matcher m keeps w
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, the post's words whose bit for the pair's matcher is set, in their order:
    ``(offsets int32, values int32)``, the Arrow list layout."""
    n = rows.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int32)
    for i in range(n):
        byte = matchers[i] >> 3
        bit = np.uint8(1 << (matchers[i] & 7))
        count = 0
        for k in range(indptr[rows[i]], indptr[rows[i] + 1]):
            if kept[word_ids[k], byte] & bit:
                count += 1
        offsets[i + 1] = offsets[i] + count
    values = np.empty(offsets[n], dtype=np.int32)
    for i in range(n):
        byte = matchers[i] >> 3
        bit = np.uint8(1 << (matchers[i] & 7))
        at = offsets[i]
        for k in range(indptr[rows[i]], indptr[rows[i] + 1]):
            if kept[word_ids[k], byte] & bit:
                values[at] = word_ids[k]
                at += 1
    return offsets, values
