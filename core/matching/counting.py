"""The counting-algorithm matcher: the classic baseline the trie is measured against."""

from __future__ import annotations

import numpy as np

from core.corpus import _kernels as corpus_kernels
from core.matching._counting_kernels import count_match
from core.matching.matches import Matches, prepare_posts
from core.matching.trie import static_subscriptions


class CountingMatcher:
    """Static inverted index built once from CSR subscriptions (sorted distinct word ids)."""

    def __init__(self, sub_ids: np.ndarray, indptr: np.ndarray, word_ids: np.ndarray) -> None:
        ids, ptr, words = static_subscriptions(sub_ids, indptr, word_ids, "CountingMatcher")
        n_words = int(words.max()) + 1 if words.size else 0
        owner = np.repeat(np.arange(ids.shape[0], dtype=np.int32), np.diff(ptr))
        self._inv_indptr, self._inv_subs = corpus_kernels.group_by_key(words, owner, n_words)
        self._sub_size = np.diff(ptr).astype(np.int32)
        self._sub_ids = ids

    @property
    def n_subscriptions(self) -> int:
        return int(self._sub_ids.shape[0])

    def match(
        self, post_indptr: np.ndarray, post_words: np.ndarray, word_map: np.ndarray | None = None
    ) -> Matches:
        """Same contract as :meth:`core.matching.trie.TrieMatcher.match`."""
        ptr, words, mapping = prepare_posts(post_indptr, post_words, word_map)
        indptr, subs, ops = count_match(
            ptr, words, mapping, self._inv_indptr, self._inv_subs, self._sub_size, self._sub_ids
        )
        return Matches(indptr, subs, int(ops))
