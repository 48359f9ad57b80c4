"""The SALB kernel (paper 001, Alg. 1) in O(|E| k + |W| N).

Why it is exact and cheap: with S = sum of loads and Q = sum of squared loads, the spread is
S / |P| and the coefficient of variation is sqrt(N Q - S^2) / S, so Alg. 1's utility
-spread x CV equals -sqrt(N Q' - S'^2) / |P| for the loads after the candidate move. The
kernel therefore picks the matcher minimising the integer N Q' - S'^2, updating S and Q
incrementally: no floating point, no ties broken by rounding (the first matcher wins a tie,
as in Alg. 1's strict ``u > u*``).

The extra load of word w on matcher i is f(w) minus the number of w's posts already routed
to i. Each post keeps the distinct matchers routing it in a row of its own (its count, then
one (matcher, tokens) pair per matcher: a post has at most as many matchers as words), so
counting them costs O(k) per (word, post) edge and one cache miss. Each pair also counts
the post's tokens on its matcher: SALB does not need the counts, the refinement that
``salb2`` runs after it does (a token may leave a matcher, and the post stays there while
another of its tokens does).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core._prefetch import PREFETCH_DISTANCE, prefetch


@njit(cache=True)
def fill_edge_rows(token_posts: np.ndarray, post_indptr: np.ndarray, edge_row: np.ndarray) -> None:
    """``edge_row[e]``: where edge e's post row starts in the routing state: post p's row
    is ``2 * post_indptr[p] + p`` (its count, then two entries per token it holds)."""
    n_edges = token_posts.shape[0]
    for e in range(n_edges):
        if e + PREFETCH_DISTANCE < n_edges:
            prefetch(post_indptr, token_posts[e + PREFETCH_DISTANCE])
        p = token_posts[e]
        edge_row[e] = 2 * post_indptr[p] + p


@njit(cache=True)
def place_token(
    start: int,
    stop: int,
    matcher: int,
    edge_row: np.ndarray,
    rows: np.ndarray,
    loads: np.ndarray,
) -> np.int64:
    """Put one token (edges ``start:stop``) on ``matcher``: each of its posts' rows counts it
    there (``[n, (matcher, count) x n]``), and ``loads[matcher]`` grows by the posts it did
    not reach yet, which are returned."""
    reached = np.int64(0)
    for e in range(start, stop):
        if e + PREFETCH_DISTANCE < stop:
            prefetch(rows, edge_row[e + PREFETCH_DISTANCE])
        r = edge_row[e]
        count = rows[r]
        seen = False
        for j in range(count):
            if rows[r + 1 + 2 * j] == matcher:
                rows[r + 2 + 2 * j] += 1
                seen = True
                break
        if not seen:
            rows[r + 1 + 2 * count] = matcher
            rows[r + 2 + 2 * count] = 1
            rows[r] = count + 1
            reached += 1
    loads[matcher] += reached
    return reached


@njit(cache=True)
def salb_assign(
    token_indptr: np.ndarray,
    edge_row: np.ndarray,
    n_row_entries: int,
    order: np.ndarray,
    n_matchers: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Assign ``order``'s tokens one by one.

    Args:
        token_indptr: token -> edges CSR row pointers (int64).
        edge_row: per (token, post) edge, the start of its post's row (:func:`fill_edge_rows`).
        n_row_entries: the state's length (two entries per edge, one per post).
        order: int64 token ids, in the order SALB considers them.
        n_matchers: N.

    Returns:
        ``(chosen, extra_load, loads, rows)``: the matcher of each ``order`` entry (int32),
        the load it added (int64), the final per-matcher loads (int64, posts routed), and
        the routing state: post p's row starts at ``2 * post_indptr[p] + p`` and holds its
        number of distinct matchers c, then c (matcher, tokens on it) pairs (int32; see
        :func:`unpack_rows`).
    """
    # One row per post, so an edge costs one cache miss (the row) instead of three
    # (row pointer, count, matchers): at 10M posts the state outgrows every cache. The
    # rows of the edges a few ahead are prefetched, so their misses overlap.
    rows = np.zeros(n_row_entries, dtype=np.int32)
    loads = np.zeros(n_matchers, dtype=np.int64)
    covered = np.zeros(n_matchers, dtype=np.int64)
    chosen = np.empty(order.shape[0], dtype=np.int32)
    extra_load = np.empty(order.shape[0], dtype=np.int64)
    total = np.int64(0)
    total_sq = np.int64(0)
    n = np.int64(n_matchers)
    for step in range(order.shape[0]):
        token = order[step]
        start = token_indptr[token]
        stop = token_indptr[token + 1]
        freq = stop - start
        for e in range(start, stop):
            if e + PREFETCH_DISTANCE < stop:
                prefetch(rows, edge_row[e + PREFETCH_DISTANCE])
            r = edge_row[e]
            for j in range(rows[r]):
                covered[rows[r + 1 + 2 * j]] += 1
        best = 0
        best_key = np.int64(0)
        for i in range(n_matchers):
            extra = freq - covered[i]
            new_total = total + extra
            new_sq = total_sq + extra * (2 * loads[i] + extra)
            key = n * new_sq - new_total * new_total
            if i == 0 or key < best_key:
                best_key = key
                best = i
            covered[i] = 0
        before = loads[best]
        extra = place_token(start, stop, best, edge_row, rows, loads)
        total_sq += extra * (2 * before + extra)
        total += extra
        chosen[step] = best
        extra_load[step] = extra
    return chosen, extra_load, loads, rows


@njit(cache=True)
def unpack_rows(
    rows: np.ndarray, post_indptr: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``salb_assign``'s rows as ``(slot_matcher, slot_tokens, post_slots)``: post p's
    distinct matchers are ``slot_matcher[post_indptr[p]:][:post_slots[p]]``, with
    ``slot_tokens`` of its tokens on each (unused slots hold -1 and 0)."""
    n_posts = post_indptr.shape[0] - 1
    slot_matcher = np.full(post_indptr[-1], -1, dtype=np.int32)
    slot_tokens = np.zeros(post_indptr[-1], dtype=np.int32)
    post_slots = np.empty(n_posts, dtype=np.int32)
    for p in range(n_posts):
        base = post_indptr[p]
        r = 2 * base + p
        count = rows[r]
        post_slots[p] = count
        for j in range(count):
            slot_matcher[base + j] = rows[r + 1 + 2 * j]
            slot_tokens[base + j] = rows[r + 2 + 2 * j]
    return slot_matcher, slot_tokens, post_slots
