"""The token -> posts CSR of a split problem, from the word -> posts CSR (kernel of
``core.learn.problem``).

A word's versions are consecutive tokens, so the token CSR is the word CSR with each hot
word's edges regrouped by version: a stable counting sort inside the word's own segment,
and a plain copy for every other word. One sequential pass instead of a counting sort of
all edges by token (the same arrays; ``tests/core/test_split.py`` checks them against it).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def split_word_posts(
    word_indptr: np.ndarray, word_posts: np.ndarray, n_parts: np.ndarray, versions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(token_indptr int64, token_posts int32)``: word w's tokens are ``n_parts[w]``
    consecutive ids; edge e of the word CSR goes to its word's version ``versions[e]``,
    posts kept in their order within each token."""
    n_words = word_indptr.shape[0] - 1
    n_tokens = 0
    for w in range(n_words):
        n_tokens += n_parts[w]
    token_indptr = np.zeros(n_tokens + 1, dtype=np.int64)
    token_posts = np.empty(word_posts.shape[0], dtype=np.int32)
    token = 0
    for w in range(n_words):
        start = word_indptr[w]
        stop = word_indptr[w + 1]
        k = n_parts[w]
        if k == 1:
            for e in range(start, stop):
                token_posts[e] = word_posts[e]
            token_indptr[token + 1] = stop
            token += 1
            continue
        cursor = np.zeros(k, dtype=np.int64)
        for e in range(start, stop):
            cursor[versions[e]] += 1
        base = start
        for v in range(k):
            count = cursor[v]
            cursor[v] = base
            base += count
            token_indptr[token + 1 + v] = base
        for e in range(start, stop):
            v = versions[e]
            token_posts[cursor[v]] = word_posts[e]
            cursor[v] += 1
        token += k
    return token_indptr, token_posts


@njit(cache=True)
def split_post_tokens(
    indptr: np.ndarray,
    indices: np.ndarray,
    token_base: np.ndarray,
    word_indptr: np.ndarray,
    word_posts: np.ndarray,
    n_parts: np.ndarray,
    versions: np.ndarray,
) -> np.ndarray:
    """The post -> tokens CSR's indices (the corpus' ``indptr`` is its row pointer): each
    word becomes its first token, then each edge of a hot word dealt to a later version is
    patched in its post's row. Rows keep the corpus' order (not sorted by token)."""
    post_tokens = np.empty(indices.shape[0], dtype=np.int32)
    for e in range(indices.shape[0]):
        post_tokens[e] = token_base[indices[e]]
    for w in range(n_parts.shape[0]):
        if n_parts[w] == 1:
            continue
        first = token_base[w]
        for e in range(word_indptr[w], word_indptr[w + 1]):
            v = versions[e]
            if v == 0:
                continue
            p = word_posts[e]
            # the word's first not yet patched place in the row (a row repeating a word
            # has one edge per repeat, each dealt its own version)
            for k in range(indptr[p], indptr[p + 1]):
                if indices[k] == w and post_tokens[k] == first:
                    post_tokens[k] = first + v
                    break
    return post_tokens
