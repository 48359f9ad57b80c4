"""numba kernels of the access-predicate matcher (paper 000, Le Subscribe, adapted to word
sets): each distinct subscription set is indexed ONCE, under its access predicate, its
rarest word (dictionary ids are rarest first, so a sorted set's first id). The other words
(the residual) are stored after it, rarest first, so a failing set is usually rejected by
its first residual test.

Layout (all flat arrays, CSR style):
    acc_indptr (n_words + 1): the sets whose access word is ``w`` are
        ``acc_indptr[w]:acc_indptr[w+1]``, ordered by size (size-1 sets first: they match on
        the access word alone and need no test).
    res_ptr (n_sets + 1) / res_words: each set's residual words.
    sub_ptr (n_sets + 1) / subs: the subscription ids holding that set (duplicates share one
        set, as they share a trie node).

Matching a post: mark its words in ``mark`` (a per-matcher stamp array: no clearing between
posts), then for every post word walk the sets it is the access word of and test their
residual words against the marks. Every residual test and every set visited counts one
operation.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def word_bit(w: np.int64) -> np.uint64:
    """The word's bit in a 64-bit set signature (a one-hash Bloom filter)."""
    return np.uint64(1) << ((np.uint64(w) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(58))


@njit(cache=True)
def _row_hash(words: np.ndarray, start: int, stop: int) -> np.uint64:
    h = np.uint64(1469598103934665603)
    for e in range(start, stop):
        h = (h ^ np.uint64(words[e])) * np.uint64(1099511628211)
    return h


@njit(cache=True)
def build(
    indptr: np.ndarray, words: np.ndarray, sub_ids: np.ndarray, n_words: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Index CSR subscriptions (sorted, distinct word ids; every row non-empty).

    Returns ``(acc_indptr, res_ptr, res_words, sub_ptr, subs, res_sig)`` as described
    above.
    """
    n = indptr.shape[0] - 1
    access = np.empty(n, dtype=np.int64)
    size = np.empty(n, dtype=np.int64)
    hashes = np.empty(n, dtype=np.uint64)
    for s in range(n):
        access[s] = words[indptr[s]]
        size[s] = indptr[s + 1] - indptr[s]
        hashes[s] = _row_hash(words, indptr[s], indptr[s + 1])
    # by (access word, size, hash): identical sets become neighbours
    order = np.argsort(hashes, kind="mergesort")
    order = order[np.argsort(size[order], kind="mergesort")]
    order = order[np.argsort(access[order], kind="mergesort")]
    set_of = np.empty(n, dtype=np.int64)  # position in `order` -> set number
    n_sets = 0
    for i in range(n):
        s = order[i]
        same = False
        if i > 0:
            p = order[i - 1]
            if access[p] == access[s] and size[p] == size[s] and hashes[p] == hashes[s]:
                same = True
                for k in range(size[s]):
                    if words[indptr[p] + k] != words[indptr[s] + k]:
                        same = False
                        break
        if not same:
            n_sets += 1
        set_of[i] = n_sets - 1
    acc_indptr = np.zeros(n_words + 1, dtype=np.int64)
    res_ptr = np.zeros(n_sets + 1, dtype=np.int64)
    sub_ptr = np.zeros(n_sets + 1, dtype=np.int64)
    for i in range(n):
        s = order[i]
        k = set_of[i]
        sub_ptr[k + 1] += 1
        if i == 0 or set_of[i - 1] != k:
            res_ptr[k + 1] = size[s] - 1
            acc_indptr[access[s] + 1] += 1
    for k in range(n_sets):
        res_ptr[k + 1] += res_ptr[k]
        sub_ptr[k + 1] += sub_ptr[k]
    for w in range(n_words):
        acc_indptr[w + 1] += acc_indptr[w]
    res_words = np.empty(res_ptr[n_sets], dtype=np.int32)
    res_sig = np.zeros(n_sets, dtype=np.uint64)
    subs = np.empty(n, dtype=np.int64)
    cursor = sub_ptr[:-1].copy()
    for i in range(n):
        s = order[i]
        k = set_of[i]
        subs[cursor[k]] = sub_ids[s]
        cursor[k] += 1
        if i == 0 or set_of[i - 1] != k:
            r = res_ptr[k]
            for e in range(indptr[s] + 1, indptr[s + 1]):
                res_words[r] = words[e]
                res_sig[k] |= word_bit(np.int64(words[e]))
                r += 1
    return acc_indptr, res_ptr, res_words, sub_ptr, subs, res_sig


@njit(cache=True)
def match_posts(
    post_indptr: np.ndarray,
    post_words: np.ndarray,
    word_map: np.ndarray,
    acc_indptr: np.ndarray,
    res_ptr: np.ndarray,
    res_words: np.ndarray,
    sub_ptr: np.ndarray,
    subs: np.ndarray,
    res_sig: np.ndarray,
    mark: np.ndarray,
    stamp: np.int64,
) -> tuple[np.ndarray, np.ndarray, np.int64, np.ndarray, np.int64]:
    """Match every post; ``mark`` holds stamps below ``stamp`` (posts get ``stamp``,
    ``stamp + 1``, ...).

    Returns ``(match_indptr, matched_sub_ids, operations, post_operations, next_stamp)``.
    """
    n_posts = post_indptr.shape[0] - 1
    n_words = acc_indptr.shape[0] - 1
    out_indptr = np.zeros(n_posts + 1, dtype=np.int64)
    out = np.empty(max(16, n_posts), dtype=np.int64)
    n_out = 0
    ops = np.int64(0)
    post_ops = np.zeros(n_posts, dtype=np.int64)
    buf = np.empty(64, dtype=np.int64)
    for p in range(n_posts):
        before = ops
        start = post_indptr[p]
        stop = post_indptr[p + 1]
        if stop - start > buf.shape[0]:
            buf = np.empty(2 * (stop - start), dtype=np.int64)
        m = 0
        post_sig = np.uint64(0)
        for e in range(start, stop):
            w = word_map[post_words[e]]
            if w >= 0 and w < n_words:
                mark[w] = stamp
                post_sig |= word_bit(np.int64(w))
                if acc_indptr[w + 1] > acc_indptr[w]:
                    buf[m] = w
                    m += 1
        for j in range(m):
            w = buf[j]
            missing_bits = ~post_sig
            for k in range(acc_indptr[w], acc_indptr[w + 1]):
                ops += 1
                if res_sig[k] & missing_bits:  # a residual word is surely not in the post
                    continue
                hit = True
                for r in range(res_ptr[k], res_ptr[k + 1]):
                    ops += 1
                    if mark[res_words[r]] != stamp:
                        hit = False
                        break
                if hit:
                    need = n_out + sub_ptr[k + 1] - sub_ptr[k]
                    if need > out.shape[0]:
                        grown = np.empty(max(need, 2 * out.shape[0]), dtype=np.int64)
                        grown[:n_out] = out[:n_out]
                        out = grown
                    for t in range(sub_ptr[k], sub_ptr[k + 1]):
                        if subs[t] >= 0:  # a negative id: cancelled (set_cancelled)
                            out[n_out] = subs[t]
                            n_out += 1
        stamp += 1
        out_indptr[p + 1] = n_out
        post_ops[p] = ops - before
    return out_indptr, out[:n_out].copy(), ops, post_ops, stamp
