"""numba kernels of the streaming matcher: expand routed posts into (matcher, post) rows."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def expand_pairs(routed_indptr: np.ndarray) -> np.ndarray:
    """The post index of every (post, matcher) pair of a routed CSR."""
    n_posts = routed_indptr.shape[0] - 1
    out = np.empty(routed_indptr[n_posts], dtype=np.int64)
    for p in range(n_posts):
        for j in range(routed_indptr[p], routed_indptr[p + 1]):
            out[j] = p
    return out


@njit(cache=True)
def gather_sets(
    indptr: np.ndarray, words: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of ``rows`` taken from a CSR (a row may be taken several times)."""
    out_indptr = np.zeros(rows.shape[0] + 1, dtype=np.int32)
    for r in range(rows.shape[0]):
        p = rows[r]
        out_indptr[r + 1] = out_indptr[r] + (indptr[p + 1] - indptr[p])
    out = np.empty(out_indptr[rows.shape[0]], dtype=np.int32)
    for r in range(rows.shape[0]):
        p = rows[r]
        start = out_indptr[r]
        for e in range(indptr[p], indptr[p + 1]):
            out[start + e - indptr[p]] = words[e]
    return out_indptr, out
