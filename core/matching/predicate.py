"""The access-predicate matcher (paper 000, Le Subscribe): each distinct subscription set
indexed once under its rarest word, its other words stored after it and tested against the
post's words. A Python API over the kernels in ``_predicate_kernels``.

Same contract as :class:`core.matching.trie.TrieMatcher`: subscriptions are sorted word-id
sets in dictionary ids (rarest first); a post matches a subscription when it contains all of
its words. The index is built in one pass (a sort), so it is rebuilt rather than edited when
a matcher's subscriptions change.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from core.errors import InvalidArgumentError
from core.matching import _predicate_kernels as K
from core.matching.matches import Matches, prepare_posts
from core.matching.trie import static_subscriptions

_STAMP_LIMIT = np.iinfo(np.int64).max // 2


class _Index(NamedTuple):
    """The arrays :func:`_predicate_kernels.build` returns, in the kernels' argument order."""

    acc_indptr: np.ndarray
    res_ptr: np.ndarray
    res_words: np.ndarray
    sub_ptr: np.ndarray
    subs: np.ndarray
    res_sig: np.ndarray


class AccessPredicateMatcher:
    """Static index of CSR subscriptions (sorted distinct word ids, rarest first)."""

    def __init__(self, sub_ids: np.ndarray, indptr: np.ndarray, word_ids: np.ndarray) -> None:
        ids, ptr, words = static_subscriptions(sub_ids, indptr, word_ids, "AccessPredicateMatcher")
        n_words = int(words.max()) + 1 if words.size else 0
        self._index = _Index(*K.build(ptr, words, ids, n_words))
        # the index's slots by subscription id, sorted once here (the sort that checks the
        # ids are distinct): a cancellation then finds its slots by binary search, so marking
        # a round of changes costs what changed, not a sort of the matcher's subscriptions
        self._order = np.argsort(self._index.subs)
        self._sorted_ids = self._index.subs[self._order]
        if bool(np.any(self._sorted_ids[1:] == self._sorted_ids[:-1])):
            raise InvalidArgumentError("subscription ids must be distinct")
        self._mark = np.zeros(n_words, dtype=np.int64)
        self._stamp = np.int64(1)
        # cancelled subscriptions: their slots in ``subs`` hold -1 (the kernel skips them)
        self._cancelled_at = np.zeros(0, dtype=np.int64)
        self._cancelled_ids = np.zeros(0, dtype=np.int64)

    def set_cancelled(self, sub_ids: np.ndarray) -> None:
        """Leave the matches of ``sub_ids`` out from now on (replacing the set given
        before; ids the index does not hold are ignored): a cancellation costs the index
        nothing per match, and the index is not rebuilt."""
        subs = self._index.subs
        subs[self._cancelled_at] = self._cancelled_ids  # the previous set, restored
        ids = np.unique(np.asarray(sub_ids, dtype=np.int64))
        ordered = self._sorted_ids  # the ids as built (``subs`` holds -1 where cancelled)
        if ids.size == 0 or ordered.size == 0:
            self._cancelled_at = self._cancelled_ids = np.zeros(0, dtype=np.int64)
            return
        at = np.minimum(np.searchsorted(ordered, ids), ordered.shape[0] - 1)
        held = ordered[at] == ids
        self._cancelled_at = self._order[at[held]]
        self._cancelled_ids = ids[held]
        subs[self._cancelled_at] = -1

    @property
    def n_subscriptions(self) -> int:
        return int(self._index.subs.shape[0])

    @property
    def n_sets(self) -> int:
        """Distinct word sets (identical subscriptions share one)."""
        return int(self._index.res_ptr.shape[0] - 1)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self._index) + self._mark.nbytes)

    def match(
        self, post_indptr: np.ndarray, post_words: np.ndarray, word_map: np.ndarray | None = None
    ) -> Matches:
        """Match posts (CSR of word ids, distinct within a post; ``word_map`` maps them to
        this matcher's ids, -1 for words in no subscription; identity when None)."""
        ptr, words, mapping = prepare_posts(post_indptr, post_words, word_map)
        if self._stamp > _STAMP_LIMIT:
            self._mark[:] = 0
            self._stamp = np.int64(1)
        indptr, subs, ops, post_ops, self._stamp = K.match_posts(
            ptr,
            words,
            mapping,
            *self._index,
            self._mark,
            np.int64(self._stamp),
        )
        return Matches(indptr, subs, int(ops), post_ops)
