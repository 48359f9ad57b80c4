"""numba kernels of load shedding: per-pair utilities, the spread cap, yield observations.

Plain arrays in and out; :mod:`core.shedding.shedder` validates and names things.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core.routing._router_kernels import version_draw

# Salts of the draws that are not a split word's version choice (words are >= 0).
FRACTION_SALT = -1  # forward the last matcher of a fractional cap
EXEMPT_SALT = -2  # the post is an unbiased sample: processed in full
DROP_SALT = -3  # the random-drop baseline


@njit(cache=True)
def unit_draw(seed: int, post: int, salt: int) -> float:
    """A uniform [0, 1) draw per (seed, post, salt), order- and thread-independent."""
    h = version_draw(seed, post, np.uint64(np.int64(salt)))  # type: ignore[arg-type]
    return float(h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def pair_utilities(
    indptr: np.ndarray,
    word_ids: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    subscribed: np.ndarray,
    slot_weight: np.ndarray,
    routed_indptr: np.ndarray,
    routed_matchers: np.ndarray,
    n_matchers: int,
    seed: int,
) -> np.ndarray:
    """Utility of each routed (post, matcher) pair: the sum of ``slot_weight`` over the
    post's words routed to that matcher (a word's version drawn exactly as the router
    draws it; ``slot_weight`` is indexed like ``part_matchers``)."""
    n_posts = indptr.shape[0] - 1
    out = np.zeros(routed_matchers.shape[0], dtype=np.float64)
    where = np.full(n_matchers, -1, dtype=np.int64)
    for p in range(n_posts):
        for e in range(routed_indptr[p], routed_indptr[p + 1]):
            where[routed_matchers[e]] = e
        for e in range(indptr[p], indptr[p + 1]):
            w = word_ids[e]
            if not subscribed[w]:
                continue
            k = part_count[w]
            slot = part_start[w]
            if k > 1:
                slot += np.int64(version_draw(seed, p, w) % np.uint64(k))
            pair = where[part_matchers[slot]]
            if pair >= 0:
                out[pair] += slot_weight[slot]
        for e in range(routed_indptr[p], routed_indptr[p + 1]):
            where[routed_matchers[e]] = -1
    return out


@njit(cache=True)
def cap_pairs(
    routed_indptr: np.ndarray,
    routed_matchers: np.ndarray,
    utility: np.ndarray,
    m_whole: int,
    m_fraction: float,
    exempt: np.ndarray,
    seed: int,
) -> np.ndarray:
    """Keep, per post, its ``m_whole`` pairs of highest utility (ties: lower matcher id),
    plus the next one with probability ``m_fraction``; exempt posts keep every pair."""
    n_pairs = routed_matchers.shape[0]
    keep = np.ones(n_pairs, dtype=np.bool_)
    n_posts = routed_indptr.shape[0] - 1
    order = np.empty(64, dtype=np.int64)
    for p in range(n_posts):
        start = routed_indptr[p]
        size = routed_indptr[p + 1] - start
        if size <= m_whole or exempt[p]:
            continue
        if size > order.shape[0]:
            order = np.empty(2 * size, dtype=np.int64)
        for i in range(size):  # insertion sort: utility desc, matcher asc
            e = start + i
            j = i
            while j > 0:
                f = order[j - 1]
                if utility[f] > utility[e] or (
                    utility[f] == utility[e] and routed_matchers[f] < routed_matchers[e]
                ):
                    break
                order[j] = f
                j -= 1
            order[j] = e
        kept = m_whole
        if m_fraction > 0.0 and unit_draw(seed, p, FRACTION_SALT) < m_fraction:
            kept += 1
        for i in range(kept, size):
            keep[order[i]] = False
    return keep


@njit(cache=True)
def exempt_posts(n_posts: int, fraction: float, seed: int) -> np.ndarray:
    out = np.zeros(n_posts, dtype=np.bool_)
    if fraction <= 0.0:
        return out
    for p in range(n_posts):
        out[p] = unit_draw(seed, p, EXEMPT_SALT) < fraction
    return out


@njit(cache=True)
def keep_posts(n_posts: int, drop_fraction: float, seed: int) -> np.ndarray:
    out = np.ones(n_posts, dtype=np.bool_)
    for p in range(n_posts):
        out[p] = unit_draw(seed, p, DROP_SALT) >= drop_fraction
    return out


@njit(cache=True)
def slots_on_matcher(
    word_ids: np.ndarray,
    matcher: int,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
) -> np.ndarray:
    """Per word id, its version slot on ``matcher`` (-1: no version of it there)."""
    out = np.full(word_ids.shape[0], -1, dtype=np.int64)
    for e in range(word_ids.shape[0]):
        w = word_ids[e]
        if w < 0 or w >= part_start.shape[0]:
            continue
        for s in range(part_start[w], part_start[w] + part_count[w]):
            if part_matchers[s] == matcher:
                out[e] = s
                break
    return out
