"""numba kernels of the trie matcher (paper 001, Sect. 4.1) on flat arrays.

Edges live in ONE open-addressing hash table keyed by ``parent * 2^31 + word`` (linear
probing; -1 empty, -2 deleted), so every node's children are "kept in a hash table". A node
has a linked list of subscription slots (identical word sets share one node). Nodes are
never reused; the Python wrapper compacts by rebuilding when garbage piles up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1
DELETED = -2
KEY_SHIFT = np.int64(1) << np.int64(31)


@njit(cache=True, inline="always")
def _slot_of(key: np.int64, mask: np.int64) -> np.int64:
    x = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return np.int64(x & np.uint64(mask))


@njit(cache=True)
def table_find(keys: np.ndarray, key: np.int64) -> int | np.int64:
    """Position of ``key`` in the table, or -1."""
    mask = np.int64(keys.shape[0] - 1)
    h = _slot_of(key, mask)
    while True:
        k = keys[h]
        if k == key:
            return h
        if k == EMPTY:
            return -1
        h = (h + 1) & mask


@njit(cache=True)
def table_insert(keys: np.ndarray, vals: np.ndarray, key: np.int64, val: np.int32) -> None:
    """Insert a key known to be absent (reuses the first deleted slot on its probe path)."""
    mask = np.int64(keys.shape[0] - 1)
    h = _slot_of(key, mask)
    while keys[h] >= 0:
        h = (h + 1) & mask
    keys[h] = key
    vals[h] = val


@njit(cache=True)
def rehash(keys: np.ndarray, vals: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """A new table of ``capacity`` (a power of two) with the live entries only."""
    new_keys = np.full(capacity, EMPTY, dtype=np.int64)
    new_vals = np.zeros(capacity, dtype=np.int32)
    for i in range(keys.shape[0]):
        if keys[i] >= 0:
            table_insert(new_keys, new_vals, keys[i], vals[i])
    return new_keys, new_vals


@njit(cache=True)
def insert_subscriptions(
    keys: np.ndarray,
    vals: np.ndarray,
    node_parent: np.ndarray,
    node_word: np.ndarray,
    node_children: np.ndarray,
    node_head: np.ndarray,
    n_nodes: int,
    slot_node: np.ndarray,
    slot_next: np.ndarray,
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    sub_slots: np.ndarray,
) -> tuple[int, int]:
    """Insert subscriptions (sorted distinct word ids) into the trie.

    The caller guarantees capacity: enough nodes for every word and a table at most half
    full after the insert. Returns ``(n_nodes, n_live_edges_added)``.
    """
    added = 0
    for s in range(sub_indptr.shape[0] - 1):
        node = 0
        for e in range(sub_indptr[s], sub_indptr[s + 1]):
            word = sub_words[e]
            key = np.int64(node) * KEY_SHIFT + np.int64(word)
            pos = table_find(keys, key)
            if pos >= 0:
                node = vals[pos]
            else:
                child = n_nodes
                n_nodes += 1
                node_parent[child] = node
                node_word[child] = word
                node_children[child] = 0
                node_head[child] = -1
                node_children[node] += 1
                table_insert(keys, vals, key, np.int32(child))
                added += 1
                node = child
        slot = sub_slots[s]
        slot_node[slot] = node
        slot_next[slot] = node_head[node]
        node_head[node] = slot
    return n_nodes, added


@njit(cache=True)
def delete_subscription(
    keys: np.ndarray,
    vals: np.ndarray,
    node_parent: np.ndarray,
    node_word: np.ndarray,
    node_children: np.ndarray,
    node_head: np.ndarray,
    slot_node: np.ndarray,
    slot_next: np.ndarray,
    slot: int,
) -> int:
    """Unlink a slot and prune the branch it leaves empty; returns edges removed."""
    node = slot_node[slot]
    prev = -1
    cur = node_head[node]
    while cur != slot:
        prev = cur
        cur = slot_next[cur]
    if prev < 0:
        node_head[node] = slot_next[slot]
    else:
        slot_next[prev] = slot_next[slot]
    slot_node[slot] = -1
    removed = 0
    while node != 0 and node_head[node] == -1 and node_children[node] == 0:
        parent = node_parent[node]
        pos = table_find(keys, np.int64(parent) * KEY_SHIFT + np.int64(node_word[node]))
        keys[pos] = DELETED
        node_children[parent] -= 1
        removed += 1
        node = parent
    return removed


@njit(cache=True)
def match_posts(
    post_indptr: np.ndarray,
    post_words: np.ndarray,
    word_map: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    node_head: np.ndarray,
    node_children: np.ndarray,
    slot_next: np.ndarray,
    slot_sub: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.int64]:
    """Scoped traversal of the trie for every post.

    Args:
        post_indptr, post_words: posts as CSR of *corpus* word ids.
        word_map: corpus word id -> matcher word id (-1: in no subscription).
        keys, vals, node_head, node_children, slot_next, slot_sub: the trie.

    Returns:
        ``(match_indptr int64, matched_sub_ids int64, lookups)``; ``lookups`` counts hash
        probes (the operations of Fig. 3).
    """
    n_posts = post_indptr.shape[0] - 1
    out_indptr = np.zeros(n_posts + 1, dtype=np.int64)
    out = np.empty(max(16, n_posts), dtype=np.int64)
    n_out = 0
    lookups = np.int64(0)
    buf = np.empty(64, dtype=np.int64)
    stack_node = np.empty(64, dtype=np.int64)
    stack_pos = np.empty(64, dtype=np.int64)
    for p in range(n_posts):
        start = post_indptr[p]
        stop = post_indptr[p + 1]
        if stop - start > buf.shape[0]:
            buf = np.empty(2 * (stop - start), dtype=np.int64)
        m = 0
        for e in range(start, stop):
            w = word_map[post_words[e]]
            if w >= 0:
                # insertion sort: posts are short
                j = m
                while j > 0 and buf[j - 1] > w:
                    buf[j] = buf[j - 1]
                    j -= 1
                buf[j] = w
                m += 1
        top = 0
        stack_node[0] = 0
        stack_pos[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = stack_node[top]
            base = np.int64(node) * KEY_SHIFT
            for j in range(stack_pos[top], m):
                lookups += 1
                pos = table_find(keys, base + buf[j])
                if pos < 0:
                    continue
                child = vals[pos]
                slot = node_head[child]
                while slot >= 0:
                    if n_out == out.shape[0]:
                        grown = np.empty(2 * out.shape[0], dtype=np.int64)
                        grown[:n_out] = out[:n_out]
                        out = grown
                    out[n_out] = slot_sub[slot]
                    n_out += 1
                    slot = slot_next[slot]
                if j + 1 < m and node_children[child] > 0:  # leaves need no probes
                    if top == stack_node.shape[0]:
                        grown_n = np.empty(2 * top, dtype=np.int64)
                        grown_p = np.empty(2 * top, dtype=np.int64)
                        grown_n[:top] = stack_node[:top]
                        grown_p[:top] = stack_pos[:top]
                        stack_node = grown_n
                        stack_pos = grown_p
                    stack_node[top] = child
                    stack_pos[top] = j + 1
                    top += 1
        out_indptr[p + 1] = n_out
    return out_indptr, out[:n_out].copy(), lookups
