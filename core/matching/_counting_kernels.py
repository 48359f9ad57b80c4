"""numba kernel of the counting matcher: inverted index word -> subscriptions, one hit
counter per subscription; a subscription matches when its counter reaches its size."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def count_match(
    post_indptr: np.ndarray,
    post_words: np.ndarray,
    word_map: np.ndarray,
    inv_indptr: np.ndarray,
    inv_subs: np.ndarray,
    sub_size: np.ndarray,
    sub_ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.int64]:
    """Returns ``(match_indptr, matched_sub_ids, counter_increments)``."""
    n_posts = post_indptr.shape[0] - 1
    counts = np.zeros(sub_size.shape[0], dtype=np.int32)
    touched = np.empty(sub_size.shape[0], dtype=np.int32)
    out_indptr = np.zeros(n_posts + 1, dtype=np.int64)
    out = np.empty(max(16, n_posts), dtype=np.int64)
    n_out = 0
    ops = np.int64(0)
    for p in range(n_posts):
        n_touched = 0
        for e in range(post_indptr[p], post_indptr[p + 1]):
            w = word_map[post_words[e]]
            if w < 0 or w + 1 >= inv_indptr.shape[0]:
                continue
            for k in range(inv_indptr[w], inv_indptr[w + 1]):
                s = inv_subs[k]
                ops += 1
                c = counts[s] + 1
                counts[s] = c
                if c == 1:
                    touched[n_touched] = s
                    n_touched += 1
                if c == sub_size[s]:
                    if n_out == out.shape[0]:
                        grown = np.empty(2 * out.shape[0], dtype=np.int64)
                        grown[:n_out] = out[:n_out]
                        out = grown
                    out[n_out] = sub_ids[s]
                    n_out += 1
        for t in range(n_touched):
            counts[touched[t]] = 0
        out_indptr[p + 1] = n_out
    return out_indptr, out[:n_out].copy(), ops
