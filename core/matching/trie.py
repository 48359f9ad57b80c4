"""The trie matcher of paper 001 (Sect. 4.1): a Python API over the kernels in
``_trie_kernels``. Subscriptions are sorted word-id sets; a post matches a subscription when
it contains all of its words."""

from __future__ import annotations

import numpy as np

from core.errors import InvalidArgumentError
from core.matching import _trie_kernels as K
from core.matching.matches import Matches, prepare_posts


def _validate_sets(indptr: np.ndarray, words: np.ndarray, what: str) -> None:
    if indptr.ndim != 1 or indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != words.shape[0]:
        raise InvalidArgumentError(f"{what}: indptr must run from 0 to len(words)")
    if np.any(np.diff(indptr) < 1):
        raise InvalidArgumentError(f"{what}: every subscription needs at least one word")
    if words.size and words.min() < 0:
        raise InvalidArgumentError(f"{what}: word ids must be >= 0")
    steps = np.diff(words.astype(np.int64))
    inside = np.ones(words.shape[0] - 1 if words.size else 0, dtype=bool)
    inside[indptr[1:-1] - 1] = False  # pairs that straddle two subscriptions
    if np.any(steps[inside] <= 0):
        raise InvalidArgumentError(f"{what}: each subscription's ids must be sorted and distinct")


def distinct_prefixes(indptr: np.ndarray, words: np.ndarray) -> int:
    """How many distinct non-empty prefixes the CSR word sets have: the nodes a trie of
    them holds, and at most the nodes they add to a trie that has some already.

    Counted depth by depth: a prefix's class is its parent's class and its last word.
    Sizing a trie by this instead of by its words keeps 10M subscriptions' tries (9 words
    each, 1 node in 10 new) from holding ten times the memory while they are built."""
    lengths = np.diff(indptr)
    if lengths.shape[0] <= 1:
        return int(words.shape[0])  # one set: each of its prefixes is distinct
    base = int(words.max()) + 1 if words.size else 1
    if lengths.shape[0] * base >= 1 << 62:  # classes times words would not fit int64
        return int(words.shape[0])
    active = np.flatnonzero(lengths > 0)
    parent = np.zeros(active.shape[0], dtype=np.int64)
    total, depth = 0, 0
    while active.size:
        keys = parent * base + words[indptr[active] + depth]
        classes, parent = np.unique(keys, return_inverse=True)
        total += int(classes.shape[0])
        depth += 1
        longer = lengths[active] > depth
        active, parent = active[longer], parent[longer]
    return total


def static_subscriptions(
    sub_ids: np.ndarray, indptr: np.ndarray, word_ids: np.ndarray, what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated contiguous ``(sub_ids int64, indptr int64, word_ids int32)`` for an index
    built once from CSR subscriptions (sorted distinct word ids per subscription)."""
    ids = np.ascontiguousarray(sub_ids, dtype=np.int64)
    ptr = np.ascontiguousarray(indptr, dtype=np.int64)
    words = np.ascontiguousarray(word_ids, dtype=np.int32)
    if ids.shape[0] != ptr.shape[0] - 1:
        raise InvalidArgumentError("one sub id per subscription is required")
    _validate_sets(ptr, words, what)
    return ids, ptr, words


class TrieMatcher:
    """Subscriptions in a trie of sorted word ids; exact subset matching of posts."""

    def __init__(self, capacity: int = 1024) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self._table = np.full(4 * cap, K.EMPTY, dtype=np.int64)  # 2 * cap slots
        self._live_edges = 0
        self._deleted_edges = 0
        self._nodes = np.full(K.NODE * cap, -1, dtype=np.int64)
        self._node_parent = np.zeros(cap, dtype=np.int64)
        self._nodes[K.COUNT] = 0  # root: no subscription, no child
        self._root_child = np.full(64, -1, dtype=np.int64)
        self._n_nodes = 1
        self._slot_node = np.full(cap, -1, dtype=np.int64)
        self._slot_next = np.full(cap, -1, dtype=np.int64)
        self._slot_sub = np.zeros(cap, dtype=np.int64)
        self._n_slots = 0
        self._free_slots: list[int] = []
        self._slot_of: dict[int, int] = {}
        self._since_compaction = 0

    @property
    def n_subscriptions(self) -> int:
        return len(self._slot_of)

    @property
    def nbytes(self) -> int:
        """Bytes held by the trie's arrays (capacity included: what a worker's memory holds)."""
        arrays = (self._table, self._nodes, self._node_parent, self._root_child,
                  self._slot_node, self._slot_next, self._slot_sub)  # fmt: skip
        return int(sum(a.nbytes for a in arrays))

    @property
    def n_nodes(self) -> int:
        """Live trie nodes, root excluded (= live edges)."""
        return self._live_edges

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._slot_of

    @staticmethod
    def _grown(old: np.ndarray, size: int, fill: int) -> np.ndarray:
        grown = np.full(size, fill, dtype=old.dtype)
        grown[: old.shape[0]] = old
        return grown

    def _grow_nodes(self, needed: int) -> None:
        size = self._node_parent.shape[0]
        if needed <= size:
            return
        new = max(needed, 2 * size)
        self._nodes = self._grown(self._nodes, K.NODE * new, -1)
        self._node_parent = self._grown(self._node_parent, new, 0)

    def _grow_slots(self, needed: int) -> None:
        size = self._slot_node.shape[0]
        if needed <= size:
            return
        new = max(needed, 2 * size)
        self._slot_node = self._grown(self._slot_node, new, -1)
        self._slot_next = self._grown(self._slot_next, new, -1)
        self._slot_sub = self._grown(self._slot_sub, new, 0)

    def _reserve_edges(self, extra: int) -> None:
        # Keep the table at most half full counting deleted markers, so probes stay short.
        slots = self._table.shape[0] // 2
        if 2 * (self._live_edges + self._deleted_edges + extra) <= slots:
            return
        capacity = 1 << max(4, int(2 * (self._live_edges + extra) - 1).bit_length())
        self._table = K.rehash(self._table, max(capacity, slots))
        self._deleted_edges = 0

    def insert_many(self, sub_ids: np.ndarray, indptr: np.ndarray, word_ids: np.ndarray) -> None:
        """Insert subscriptions given as CSR of sorted distinct word ids.

        Raises:
            InvalidArgumentError: on malformed sets, or a sub id already present or repeated.
        """
        ids = np.ascontiguousarray(sub_ids, dtype=np.int64)
        ptr = np.ascontiguousarray(indptr, dtype=np.int64)
        words = np.ascontiguousarray(word_ids, dtype=np.int64)
        if ids.shape[0] != ptr.shape[0] - 1:
            raise InvalidArgumentError("one sub id per subscription is required")
        _validate_sets(ptr, words, "insert")
        if np.unique(ids).shape[0] != ids.shape[0] or any(int(s) in self._slot_of for s in ids):
            raise InvalidArgumentError("subscription ids must be new and distinct")
        slots = np.empty(ids.shape[0], dtype=np.int64)
        for i, sub in enumerate(ids.tolist()):
            slot = self._free_slots.pop() if self._free_slots else self._n_slots
            if slot == self._n_slots:
                self._n_slots += 1
            slots[i] = slot
            self._slot_of[sub] = slot
        self._grow_slots(self._n_slots)
        self._slot_sub[slots] = ids
        new_nodes = distinct_prefixes(ptr, words)  # at most this many nodes are new
        self._grow_nodes(self._n_nodes + new_nodes)
        self._reserve_edges(new_nodes)
        if words.size and int(words.max()) >= self._root_child.shape[0]:
            self._root_child = self._grown(
                self._root_child, max(int(words.max()) + 1, 2 * self._root_child.shape[0]), -1
            )
        self._n_nodes, added = K.insert_subscriptions(
            self._table,
            self._root_child,
            self._nodes,
            self._node_parent,
            self._n_nodes,
            self._slot_node,
            self._slot_next,
            ptr,
            words,
            slots,
        )
        self._live_edges += added
        self._since_compaction += added
        if self._since_compaction > max(1024, self._live_edges // 4):
            self.compact()

    def compact(self) -> None:
        """Renumber nodes breadth-first (siblings adjacent) and drop deleted garbage.

        Done automatically after large inserts; matching is fastest right after it.
        """
        capacity = 1 << max(4, int(2 * self._live_edges + 1).bit_length())
        self._table, self._nodes, self._node_parent, self._n_nodes = K.compact(
            capacity,
            self._root_child,
            self._nodes,
            self._node_parent,
            self._n_nodes,
            self._slot_node,
            self._n_slots,
        )
        self._deleted_edges = 0
        self._since_compaction = 0

    def insert(self, sub_id: int, word_ids: np.ndarray) -> None:
        """Insert one subscription (sorted distinct word ids)."""
        words = np.asarray(word_ids, dtype=np.int64)
        self.insert_many(np.array([sub_id]), np.array([0, words.shape[0]]), words)

    def delete(self, sub_id: int) -> None:
        """Remove a subscription and the branch it alone used.

        Raises:
            InvalidArgumentError: if ``sub_id`` is not in the trie.
        """
        slot = self._slot_of.pop(int(sub_id), None)
        if slot is None:
            raise InvalidArgumentError(f"subscription {sub_id} is not in this matcher")
        removed = K.delete_subscription(
            self._table,
            self._root_child,
            self._nodes,
            self._node_parent,
            self._slot_node,
            self._slot_next,
            slot,
        )
        self._live_edges -= removed
        self._deleted_edges += removed
        self._free_slots.append(slot)

    def match(
        self, post_indptr: np.ndarray, post_words: np.ndarray, word_map: np.ndarray | None = None
    ) -> Matches:
        """Match posts (CSR of word ids; ``word_map`` maps them to this matcher's ids).

        Args:
            post_indptr: ``(n_posts + 1,)`` int64.
            post_words: word ids of the posts, in any order within a post, distinct.
            word_map: id -> matcher word id (-1: in no subscription); identity when None.
        """
        indptr, subs, ops, post_ops = self._traverse(
            post_indptr, post_words, word_map, np.empty(0, dtype=np.int64)
        )
        return Matches(indptr, subs, int(ops), post_ops)

    def _traverse(
        self,
        post_indptr: np.ndarray,
        post_words: np.ndarray,
        word_map: np.ndarray | None,
        node_hits: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.int64, np.ndarray]:
        """The scoped traversal (``K.match_posts``): listing, or counting into
        ``node_hits`` when it is not empty."""
        ptr, words, mapping = prepare_posts(post_indptr, post_words, word_map)
        return K.match_posts(
            ptr,
            words,
            mapping,
            self._table,
            self._root_child,
            self._nodes,
            self._slot_next,
            self._slot_sub,
            node_hits,
        )

    def count_traversal(
        self, post_indptr: np.ndarray, post_words: np.ndarray, word_map: np.ndarray | None = None
    ) -> tuple[int, np.ndarray]:
        """``(lookups, node_hits)``: the traversal of :meth:`match` without listing the
        matches: its lookups, and per trie node id how many of the posts reached it. The
        matches are ``node_hits @ subscriptions_per_node()``: counted without listing
        billions of them."""
        node_hits = np.zeros(self._nodes.shape[0] // K.NODE, dtype=np.int64)  # every node id
        _, _, ops, _ = self._traverse(post_indptr, post_words, word_map, node_hits)
        return int(ops), node_hits

    def subscriptions_per_node(self) -> np.ndarray:
        """``(node ids,)`` int64: how many subscriptions each trie node holds (a word set's
        path ends at one node; duplicates of a set share it)."""
        held = self._slot_node[: self._n_slots]
        held = held[held >= 0]  # freed slots hold -1
        counts: np.ndarray = np.bincount(held, minlength=self._nodes.shape[0] // K.NODE)
        return counts.astype(np.int64)

    def count_matches(
        self,
        post_indptr: np.ndarray,
        post_words: np.ndarray,
        n_ids: int,
        word_map: np.ndarray | None = None,
    ) -> np.ndarray:
        """``(n_ids,)`` int64: how many of the posts each subscription id matches (ids must
        lie in ``[0, n_ids)``), without listing the matches: the same traversal as
        :meth:`match`, counting per trie node.

        Raises:
            InvalidArgumentError: if a subscription id held is outside ``[0, n_ids)``.
        """
        _, node_hits = self.count_traversal(post_indptr, post_words, word_map)
        # each node's hits go to every subscription of its slot list
        nodes = np.arange(node_hits.shape[0])
        slots = self._nodes[K.NODE * nodes + K.HEAD]
        counts = np.zeros(n_ids, dtype=np.int64)
        live = slots >= 0
        slots, nodes = slots[live], nodes[live]
        while slots.size:
            ids = self._slot_sub[slots]
            if ids.size and (ids.min() < 0 or ids.max() >= n_ids):
                raise InvalidArgumentError(f"subscription ids must lie in [0, {n_ids})")
            np.add.at(counts, ids, node_hits[nodes])
            slots = self._slot_next[slots]
            live = slots >= 0
            slots, nodes = slots[live], nodes[live]
        return counts

    def unique_words(self) -> int:
        """|H|: distinct words over the subscriptions held (for LASP's cost model)."""
        live = self._table[0::2] >= 0
        children = np.concatenate(
            [self._table[1::2][live], self._root_child[self._root_child >= 0]]
        )
        return int(np.unique(self._nodes[K.NODE * children + K.WORD]).shape[0])
