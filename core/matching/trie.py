"""The trie matcher of paper 001 (Sect. 4.1): a Python API over the kernels in
``_trie_kernels``. Subscriptions are sorted word-id sets; a post matches a subscription when
it contains all of its words."""

from __future__ import annotations

import numpy as np

from core.errors import InvalidArgumentError
from core.matching import _trie_kernels as K
from core.matching.matches import Matches


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


class TrieMatcher:
    """Subscriptions in a trie of sorted word ids; exact subset matching of posts."""

    def __init__(self, capacity: int = 1024) -> None:
        cap = 1 << max(4, int(capacity - 1).bit_length())
        self._keys = np.full(2 * cap, K.EMPTY, dtype=np.int64)
        self._vals = np.zeros(2 * cap, dtype=np.int32)
        self._live_edges = 0
        self._deleted_edges = 0
        self._node_parent = np.zeros(cap, dtype=np.int32)
        self._node_word = np.full(cap, -1, dtype=np.int32)
        self._node_children = np.zeros(cap, dtype=np.int32)
        self._node_head = np.full(cap, -1, dtype=np.int32)
        self._n_nodes = 1  # node 0 is the root
        self._slot_node = np.full(cap, -1, dtype=np.int32)
        self._slot_next = np.full(cap, -1, dtype=np.int32)
        self._slot_sub = np.zeros(cap, dtype=np.int64)
        self._n_slots = 0
        self._free_slots: list[int] = []
        self._slot_of: dict[int, int] = {}

    @property
    def n_subscriptions(self) -> int:
        return len(self._slot_of)

    @property
    def n_nodes(self) -> int:
        """Live trie nodes, root excluded (= live edges)."""
        return self._live_edges

    def __contains__(self, sub_id: object) -> bool:
        return sub_id in self._slot_of

    def _grow_nodes(self, needed: int) -> None:
        size = self._node_parent.shape[0]
        if needed <= size:
            return
        new = max(needed, 2 * size)
        for name, fill in (
            ("_node_parent", 0),
            ("_node_word", -1),
            ("_node_children", 0),
            ("_node_head", -1),
        ):
            old = getattr(self, name)
            grown = np.full(new, fill, dtype=old.dtype)
            grown[: old.shape[0]] = old
            setattr(self, name, grown)

    def _grow_slots(self, needed: int) -> None:
        size = self._slot_node.shape[0]
        if needed <= size:
            return
        new = max(needed, 2 * size)
        for name, fill in (("_slot_node", -1), ("_slot_next", -1), ("_slot_sub", 0)):
            old = getattr(self, name)
            grown = np.full(new, fill, dtype=old.dtype)
            grown[: old.shape[0]] = old
            setattr(self, name, grown)

    def _reserve_edges(self, extra: int) -> None:
        # Keep the table at most half full counting deleted markers, so probes stay short.
        needed = 2 * (self._live_edges + self._deleted_edges + extra)
        if needed <= self._keys.shape[0]:
            return
        capacity = 1 << max(4, int(2 * (self._live_edges + extra) - 1).bit_length())
        capacity = max(capacity, self._keys.shape[0])
        self._keys, self._vals = K.rehash(self._keys, self._vals, capacity)
        self._deleted_edges = 0

    def insert_many(self, sub_ids: np.ndarray, indptr: np.ndarray, word_ids: np.ndarray) -> None:
        """Insert subscriptions given as CSR of sorted distinct word ids.

        Raises:
            InvalidArgumentError: on malformed sets, or a sub id already present or repeated.
        """
        ids = np.ascontiguousarray(sub_ids, dtype=np.int64)
        ptr = np.ascontiguousarray(indptr, dtype=np.int64)
        words = np.ascontiguousarray(word_ids, dtype=np.int32)
        if ids.shape[0] != ptr.shape[0] - 1:
            raise InvalidArgumentError("one sub id per subscription is required")
        _validate_sets(ptr, words, "insert")
        if len(set(ids.tolist())) != ids.shape[0] or any(int(s) in self._slot_of for s in ids):
            raise InvalidArgumentError("subscription ids must be new and distinct")
        slots = np.empty(ids.shape[0], dtype=np.int32)
        for i, sub in enumerate(ids.tolist()):
            slot = self._free_slots.pop() if self._free_slots else self._n_slots
            if slot == self._n_slots:
                self._n_slots += 1
            slots[i] = slot
            self._slot_of[sub] = slot
        self._grow_slots(self._n_slots)
        self._slot_sub[slots] = ids
        self._grow_nodes(self._n_nodes + words.shape[0])
        self._reserve_edges(words.shape[0])
        self._n_nodes, added = K.insert_subscriptions(
            self._keys,
            self._vals,
            self._node_parent,
            self._node_word,
            self._node_children,
            self._node_head,
            self._n_nodes,
            self._slot_node,
            self._slot_next,
            ptr,
            words,
            slots,
        )
        self._live_edges += added

    def insert(self, sub_id: int, word_ids: np.ndarray) -> None:
        """Insert one subscription (sorted distinct word ids)."""
        words = np.asarray(word_ids, dtype=np.int32)
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
            self._keys,
            self._vals,
            self._node_parent,
            self._node_word,
            self._node_children,
            self._node_head,
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
        ptr = np.ascontiguousarray(post_indptr, dtype=np.int64)
        words = np.ascontiguousarray(post_words, dtype=np.int32)
        if ptr.ndim != 1 or ptr.shape[0] < 1 or ptr[0] != 0 or ptr[-1] != words.shape[0]:
            raise InvalidArgumentError("post_indptr must run from 0 to len(post_words)")
        if word_map is None:
            top = int(words.max()) + 1 if words.size else 0
            mapping = np.arange(top, dtype=np.int32)
        else:
            mapping = np.ascontiguousarray(word_map, dtype=np.int32)
        if words.size and (words.min() < 0 or words.max() >= mapping.shape[0]):
            raise InvalidArgumentError("post word ids must index word_map")
        indptr, subs, ops = K.match_posts(
            ptr,
            words,
            mapping,
            self._keys,
            self._vals,
            self._node_head,
            self._node_children,
            self._slot_next,
            self._slot_sub,
        )
        return Matches(indptr, subs, int(ops))

    def unique_words(self) -> int:
        """|H|: distinct words over the subscriptions held (for LASP's cost model)."""
        live = self._node_word[1 : self._n_nodes][self._node_live_mask()]
        return int(np.unique(live).shape[0])

    def _node_live_mask(self) -> np.ndarray:
        live = np.zeros(self._n_nodes - 1, dtype=bool)
        keys = self._keys[self._keys >= 0]
        live[self._vals[self._keys >= 0] - 1] = True
        del keys
        return live
