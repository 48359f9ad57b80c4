"""The SALB kernel (paper 001, Alg. 1) in O(|E| k + |W| N).

Why it is exact and cheap: with S = sum of loads and Q = sum of squared loads, the spread is
S / |P| and the coefficient of variation is sqrt(N Q - S^2) / S, so Alg. 1's utility
-spread x CV equals -sqrt(N Q' - S'^2) / |P| for the loads after the candidate move. The
kernel therefore picks the matcher minimising the integer N Q' - S'^2, updating S and Q
incrementally: no floating point, no ties broken by rounding (the first matcher wins a tie,
as in Alg. 1's strict ``u > u*``).

The extra load of word w on matcher i is f(w) minus the number of w's posts already routed
to i. Each post keeps the distinct matchers routing it in slots of its own CSR row (a post
has at most as many matchers as words), so counting them costs O(k) per (word, post) edge.
Each slot also counts the post's tokens on its matcher: SALB does not need the counts, the
refinement that ``salb2`` runs after it does (a token may leave a matcher, and the post
stays there while another of its tokens does).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def salb_assign(
    token_indptr: np.ndarray,
    token_posts: np.ndarray,
    post_indptr: np.ndarray,
    order: np.ndarray,
    n_matchers: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Assign ``order``'s tokens one by one.

    Args:
        token_indptr, token_posts: token -> posts CSR (int64, int32).
        post_indptr: post -> tokens CSR row pointers (int64); only its row sizes are used.
        order: int64 token ids, in the order SALB considers them.
        n_matchers: N.

    Returns:
        ``(chosen, extra_load, loads, slot_matcher, slot_tokens, post_slots)``: the matcher
        of each ``order`` entry (int32), the load it added (int64), the final per-matcher
        loads (int64, posts routed), and the routing state: post p's distinct matchers are
        ``slot_matcher[post_indptr[p]:][:post_slots[p]]`` with ``slot_tokens`` of its
        tokens on each (int32).
    """
    n_posts = post_indptr.shape[0] - 1
    post_matchers = np.empty(post_indptr[-1], dtype=np.int32)
    slot_tokens = np.zeros(post_indptr[-1], dtype=np.int32)
    post_count = np.zeros(n_posts, dtype=np.int32)
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
            p = token_posts[e]
            base = post_indptr[p]
            for j in range(post_count[p]):
                covered[post_matchers[base + j]] += 1
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
        extra = np.int64(0)
        for e in range(start, stop):
            p = token_posts[e]
            base = post_indptr[p]
            seen = False
            for j in range(post_count[p]):
                if post_matchers[base + j] == best:
                    slot_tokens[base + j] += 1
                    seen = True
                    break
            if not seen:
                post_matchers[base + post_count[p]] = best
                slot_tokens[base + post_count[p]] = 1
                post_count[p] += 1
                extra += 1
        total_sq += extra * (2 * loads[best] + extra)
        total += extra
        loads[best] += extra
        chosen[step] = best
        extra_load[step] = extra
    return chosen, extra_load, loads, post_matchers, slot_tokens, post_count
