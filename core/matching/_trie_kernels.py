"""numba kernels of the trie matcher (paper 001, Sect. 4.1) on flat arrays.

Edges live in ONE open-addressing hash table keyed by ``parent * 2^31 + word`` (linear
probing; key -1 empty, -2 deleted); key and child id sit side by side (``table[2h]``,
``table[2h + 1]``) so a probe costs one cache line. Each node also keeps its children in a
sibling list and its subscription slots in a linked list (identical word sets share one
node). Nodes are never reused; the Python wrapper tracks garbage.

The root's children are direct-mapped (``root_child[word]``): every post probes the root once
per word, and a dense array keeps those probes in cache. After bulk loads the wrapper
renumbers nodes breadth-first (:func:`compact`) so that siblings are adjacent in memory.

Scoped traversal (Sect. 4.1): the root probes ``root_child`` with every post word. Another
visited node walks its child list when it has at most 4x as many children as the post has
remaining words (adjacent siblings cost less than random hash probes), looking each child's
word up among the post's remaining sorted words (a short scan in L1); otherwise it probes the
hash table with the remaining post words. Every probe or child test counts one operation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1
DELETED = -2
KEY_SHIFT = np.int64(1) << np.int64(31)
NODE = 5  # record fields: 0 head slot, 1 child count, 2 first child, 3 word, 4 next sibling
HEAD, COUNT, FIRST, WORD, NEXT = 0, 1, 2, 3, 4


@njit(cache=True, inline="always")
def _slot_of(key: np.int64, mask: np.int64) -> np.int64:
    x = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return np.int64(x & np.uint64(mask))


@njit(cache=True)
def table_find(table: np.ndarray, key: np.int64) -> int | np.int64:
    """Child id stored under ``key``, or -1."""
    mask = np.int64(table.shape[0] // 2 - 1)
    h = _slot_of(key, mask)
    while True:
        k = table[2 * h]
        if k == key:
            child: np.int64 = table[2 * h + 1]
            return child
        if k == EMPTY:
            return -1
        h = (h + 1) & mask


@njit(cache=True)
def table_remove(table: np.ndarray, key: np.int64) -> None:
    mask = np.int64(table.shape[0] // 2 - 1)
    h = _slot_of(key, mask)
    while table[2 * h] != key:
        h = (h + 1) & mask
    table[2 * h] = DELETED


@njit(cache=True)
def table_insert(table: np.ndarray, key: np.int64, val: np.int64) -> None:
    """Insert a key known to be absent (reuses the first deleted slot on its probe path)."""
    mask = np.int64(table.shape[0] // 2 - 1)
    h = _slot_of(key, mask)
    while table[2 * h] >= 0:
        h = (h + 1) & mask
    table[2 * h] = key
    table[2 * h + 1] = val


@njit(cache=True)
def rehash(table: np.ndarray, capacity: int) -> np.ndarray:
    """A new table of ``capacity`` slots (a power of two) with the live entries only."""
    new = np.full(2 * capacity, EMPTY, dtype=np.int64)
    for h in range(table.shape[0] // 2):
        if table[2 * h] >= 0:
            table_insert(new, table[2 * h], table[2 * h + 1])
    return new


@njit(cache=True)
def insert_subscriptions(
    table: np.ndarray,
    root_child: np.ndarray,
    nodes: np.ndarray,
    node_parent: np.ndarray,
    n_nodes: int,
    slot_node: np.ndarray,
    slot_next: np.ndarray,
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    sub_slots: np.ndarray,
) -> tuple[int, int]:
    """Insert subscriptions (sorted distinct word ids). The caller guarantees capacity.

    Returns ``(n_nodes, edges_added)``.
    """
    added = 0
    for s in range(sub_indptr.shape[0] - 1):
        node = 0
        for e in range(sub_indptr[s], sub_indptr[s + 1]):
            word = sub_words[e]
            key = np.int64(node) * KEY_SHIFT + np.int64(word)
            child = root_child[word] if node == 0 else table_find(table, key)
            if child < 0:
                child = n_nodes
                n_nodes += 1
                rec = NODE * child
                nodes[rec + HEAD] = -1
                nodes[rec + COUNT] = 0
                nodes[rec + FIRST] = -1
                nodes[rec + WORD] = word
                nodes[rec + NEXT] = -1
                nodes[NODE * node + COUNT] += 1
                node_parent[child] = node
                if node == 0:
                    root_child[word] = child
                else:
                    nodes[rec + NEXT] = nodes[NODE * node + FIRST]
                    nodes[NODE * node + FIRST] = child
                    table_insert(table, key, np.int64(child))
                added += 1
            node = child  # type: ignore[assignment]
        slot = sub_slots[s]
        slot_node[slot] = node
        slot_next[slot] = nodes[NODE * node + HEAD]
        nodes[NODE * node + HEAD] = slot
    return n_nodes, added


@njit(cache=True)
def delete_subscription(
    table: np.ndarray,
    root_child: np.ndarray,
    nodes: np.ndarray,
    node_parent: np.ndarray,
    slot_node: np.ndarray,
    slot_next: np.ndarray,
    slot: int,
) -> int:
    """Unlink a slot and prune the branch it leaves empty; returns edges removed."""
    node = slot_node[slot]
    prev = -1
    cur = nodes[NODE * node + HEAD]
    while cur != slot:
        prev = cur
        cur = slot_next[cur]
    if prev < 0:
        nodes[NODE * node + HEAD] = slot_next[slot]
    else:
        slot_next[prev] = slot_next[slot]
    slot_node[slot] = -1
    removed = 0
    while node != 0 and nodes[NODE * node + HEAD] == -1 and nodes[NODE * node + COUNT] == 0:
        parent = node_parent[node]
        if parent == 0:
            root_child[nodes[NODE * node + WORD]] = -1
        else:
            table_remove(table, np.int64(parent) * KEY_SHIFT + nodes[NODE * node + WORD])
            before = -1
            cur = nodes[NODE * parent + FIRST]
            while cur != node:
                before = cur
                cur = nodes[NODE * cur + NEXT]
            if before < 0:
                nodes[NODE * parent + FIRST] = nodes[NODE * node + NEXT]
            else:
                nodes[NODE * before + NEXT] = nodes[NODE * node + NEXT]
        nodes[NODE * parent + COUNT] -= 1
        removed += 1
        node = parent
    return removed


@njit(cache=True)
def match_posts(
    post_indptr: np.ndarray,
    post_words: np.ndarray,
    word_map: np.ndarray,
    table: np.ndarray,
    root_child: np.ndarray,
    nodes: np.ndarray,
    slot_next: np.ndarray,
    slot_sub: np.ndarray,
    node_hits: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.int64, np.ndarray]:
    """Scoped traversal of the trie for every post.

    Args:
        post_indptr, post_words: posts as CSR of caller word ids.
        word_map: caller word id -> matcher word id (-1: in no subscription).
        table, root_child, nodes, slot_next, slot_sub: the trie.
        node_hits: empty: emit the matches; else ``(n_nodes,)`` int64 counting mode: a
            node holding subscriptions adds one per post that reaches it (a word set's
            path is unique, so once per post) and nothing is emitted: counts without
            listing billions of matches.

    Returns:
        ``(match_indptr int64, matched_sub_ids int64, operations, post_operations int64)``:
        operations counts hash probes and child-word tests (the lookups of Fig. 3), in total
        and per post.
    """
    n_posts = post_indptr.shape[0] - 1
    out_indptr = np.zeros(n_posts + 1, dtype=np.int64)
    out = np.empty(max(16, n_posts), dtype=np.int64)
    n_out = 0
    ops = np.int64(0)
    post_ops = np.zeros(n_posts, dtype=np.int64)
    buf = np.empty(64, dtype=np.int64)
    stack_node = np.empty(64, dtype=np.int64)
    stack_pos = np.empty(64, dtype=np.int64)
    n_root = root_child.shape[0]  # larger word ids are in no subscription of this trie
    counting = node_hits.shape[0] > 0
    for p in range(n_posts):
        post_ops_before = ops
        start = post_indptr[p]
        stop = post_indptr[p + 1]
        if stop - start > buf.shape[0]:
            buf = np.empty(2 * (stop - start), dtype=np.int64)
        m = 0
        for e in range(start, stop):
            w = word_map[post_words[e]]
            if w >= 0 and w < n_root:
                j = m
                while j > 0 and buf[j - 1] > w:  # insertion sort: posts are short
                    buf[j] = buf[j - 1]
                    j -= 1
                buf[j] = w
                m += 1
        stack_node[0] = 0
        stack_pos[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = stack_node[top]
            first = stack_pos[top]
            n_children = nodes[NODE * node + COUNT]
            if n_children == 0 or first >= m:
                continue
            direct = node == 0
            use_list = not direct and n_children <= 4 * (
                m - first
            )  # sequential siblings beat random probes
            child = nodes[NODE * node + FIRST] if use_list else -1
            j = first
            while True:
                if direct:
                    if j >= m:
                        break
                    ops += 1
                    found = root_child[buf[j]]
                    j += 1
                    if found < 0:
                        continue
                    next_pos = j
                    rec = NODE * found
                elif use_list:
                    if child < 0:
                        break
                    found = child
                    rec = NODE * found
                    child = nodes[rec + NEXT]
                    ops += 1
                    w = nodes[rec + WORD]
                    k = first
                    while k < m and buf[k] < w:
                        k += 1
                    if k == m or buf[k] != w:
                        continue
                    next_pos = k + 1
                else:
                    if j >= m:
                        break
                    ops += 1
                    found = table_find(table, np.int64(node) * KEY_SHIFT + buf[j])
                    j += 1
                    if found < 0:
                        continue
                    next_pos = j
                    rec = NODE * found
                slot = nodes[rec + HEAD]
                if counting and slot >= 0:
                    node_hits[found] += 1
                    slot = -1
                while slot >= 0:
                    if n_out == out.shape[0]:
                        grown = np.empty(2 * out.shape[0], dtype=np.int64)
                        grown[:n_out] = out[:n_out]
                        out = grown
                    out[n_out] = slot_sub[slot]
                    n_out += 1
                    slot = slot_next[slot]
                if next_pos < m and nodes[rec + COUNT] > 0:
                    if top == stack_node.shape[0]:
                        grown_n = np.empty(2 * top, dtype=np.int64)
                        grown_p = np.empty(2 * top, dtype=np.int64)
                        grown_n[:top] = stack_node[:top]
                        grown_p[:top] = stack_pos[:top]
                        stack_node = grown_n
                        stack_pos = grown_p
                    stack_node[top] = found
                    stack_pos[top] = next_pos
                    top += 1
        out_indptr[p + 1] = n_out
        post_ops[p] = ops - post_ops_before
    return out_indptr, out[:n_out].copy(), ops, post_ops


@njit(cache=True)
def compact(
    table_capacity: int,
    root_child: np.ndarray,
    nodes: np.ndarray,
    node_parent: np.ndarray,
    n_nodes: int,
    slot_node: np.ndarray,
    n_slots: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Renumber live nodes breadth-first so each node's children are adjacent.

    Returns ``(table, nodes, node_parent, n_nodes)`` new arrays; updates ``root_child`` and
    ``slot_node`` in place.
    """
    order = np.empty(n_nodes, dtype=np.int64)
    new_id = np.full(n_nodes, -1, dtype=np.int64)
    order[0] = 0
    new_id[0] = 0
    count = 1
    for w in range(root_child.shape[0]):
        c = root_child[w]
        if c >= 0:
            new_id[c] = count
            order[count] = c
            count += 1
    head = 1
    while head < count:
        old = order[head]
        head += 1
        c = nodes[NODE * old + FIRST]
        while c >= 0:
            new_id[c] = count
            order[count] = c
            count += 1
            c = nodes[NODE * c + NEXT]
    new_nodes = np.full(nodes.shape[0], -1, dtype=np.int64)
    new_parent = np.zeros(node_parent.shape[0], dtype=np.int64)
    table = np.full(2 * table_capacity, EMPTY, dtype=np.int64)
    for i in range(count):
        old = order[i]
        rec_old = NODE * old
        rec = NODE * i
        new_nodes[rec + HEAD] = nodes[rec_old + HEAD]
        new_nodes[rec + COUNT] = nodes[rec_old + COUNT]
        new_nodes[rec + WORD] = nodes[rec_old + WORD]
        first = nodes[rec_old + FIRST]
        new_nodes[rec + FIRST] = new_id[first] if first >= 0 else -1
        nxt = nodes[rec_old + NEXT]
        new_nodes[rec + NEXT] = new_id[nxt] if nxt >= 0 else -1
        if i > 0:
            parent = new_id[node_parent[old]]
            new_parent[i] = parent
            if parent == 0:
                root_child[nodes[rec_old + WORD]] = i
            else:
                table_insert(
                    table, np.int64(parent) * KEY_SHIFT + nodes[rec_old + WORD], np.int64(i)
                )
    for s in range(n_slots):
        if slot_node[s] >= 0:
            slot_node[s] = new_id[slot_node[s]]
    return table, new_nodes, new_parent, count
