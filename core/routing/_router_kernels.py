"""numba kernel of the router: posts (CSR) -> distinct matchers per post (CSR)."""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(cache=True)
def _splitmix64(x: np.uint64) -> np.uint64:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def version_draw(seed: int, post: int, word: int) -> np.uint64:
    """A counter-based uniform draw per (seed, post, word): order- and thread-independent."""
    h = _splitmix64(np.uint64(seed))
    h = _splitmix64(h ^ np.uint64(post))
    return _splitmix64(h ^ np.uint64(word))


@njit(cache=True)
def route_posts(
    indptr: np.ndarray,
    indices: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    subscribed: np.ndarray,
    n_matchers: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Route every post to the distinct matchers of its subscribed words.

    Args:
        indptr, indices: post -> word ids CSR (int64, int32).
        part_start, part_count: per word id, its versions' slice of ``part_matchers``.
        part_matchers: int32 matcher of each version.
        subscribed: per word id, whether the word routes posts.
        n_matchers: N.
        seed: seeds the uniform choice of a split word's version.

    Returns:
        ``(routed_indptr int64, routed_matchers int32)``, matchers in first-seen order.
    """
    n_posts = indptr.shape[0] - 1
    stamp = np.zeros(n_matchers, dtype=np.int64)
    out_indptr = np.zeros(n_posts + 1, dtype=np.int64)
    out = np.empty(indices.shape[0], dtype=np.int32)
    pos = 0
    for p in range(n_posts):
        for e in range(indptr[p], indptr[p + 1]):
            w = indices[e]
            if not subscribed[w]:
                continue
            k = part_count[w]
            if k == 1:
                m = part_matchers[part_start[w]]
            else:
                v = version_draw(seed, p, w) % np.uint64(k)
                m = part_matchers[part_start[w] + np.int64(v)]
            if stamp[m] != p + 1:
                stamp[m] = p + 1
                out[pos] = m
                pos += 1
        out_indptr[p + 1] = pos
    return out_indptr, out[:pos].copy()
