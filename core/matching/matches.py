"""The result of matching a batch of posts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError


@dataclass(frozen=True)
class Matches:
    """Matched subscription ids per post (CSR) and the operations the matcher performed.

    Attributes:
        indptr: ``(n_posts + 1,)`` int64.
        sub_ids: int64 subscription ids; post ``p`` matched ``sub_ids[indptr[p]:indptr[p+1]]``.
        operations: lookups (trie: hash probes; counting: counter increments).
        post_operations: ``(n_posts,)`` int64 lookups per post, when the matcher counts them.
    """

    indptr: np.ndarray
    sub_ids: np.ndarray
    operations: int
    post_operations: np.ndarray | None = None

    @property
    def n_posts(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_matches(self) -> int:
        return int(self.sub_ids.shape[0])

    def of_post(self, post: int) -> list[int]:
        """Sorted subscription ids matched by one post."""
        return sorted(self.sub_ids[self.indptr[post] : self.indptr[post + 1]].tolist())

    def as_sets(self) -> list[set[int]]:
        return [set(self.of_post(p)) for p in range(self.n_posts)]


def prepare_posts(
    post_indptr: np.ndarray, post_words: np.ndarray, word_map: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a batch of posts (CSR of word ids) and its word map for a matcher kernel.

    Returns contiguous ``(indptr int64, words int32, word_map int32)``; the identity map
    when ``word_map`` is None.

    Raises:
        InvalidArgumentError: on a malformed CSR or word ids outside the map.
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
    return ptr, words, mapping
