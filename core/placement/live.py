"""Subscriptions placed on the matchers of one routing version, changed one at a time.

The streaming matcher keeps one :class:`LivePlacement` per routing version: it adopts the
version's stored placements, places subscriptions registered since with LASP (Alg. 2 is
incremental by nature: one subscription at a time against the matchers' current word sets),
and removes cancelled ones. Words no version maps (a subscription newer than the remap)
route by the stable hash, as in the router, so placement and routing always agree.

A placement is *covering* when every post that contains the subscription reaches one of its
matchers: one matcher owns an unsplit word of it, or its matchers hold every version of one
of its words. Only covering placements make matching exact; adopted rows that are not
covering (a corrupted table, a mapping changed under them) are re-placed and reported.

The placed subscriptions are arrays (``core.placement.rows``), not an object each: the
driver holds millions of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.corpus.arrays import take_rows
from core.errors import InvalidArgumentError
from core.matching.dictionary import WordDictionary
from core.placement import _lasp_kernels as K
from core.placement.lasp import UNIT_COST, CostModel
from core.placement.rows import PlacedRows
from core.routing.hashing import hash_matchers
from core.routing.table import RoutingTable


@dataclass(frozen=True)
class PlacedSubscription:
    word_ids: np.ndarray  # sorted distinct int32 ids in the placement's dictionary
    matchers: np.ndarray  # int32, one entry unless multicast


class LivePlacement:
    """The placed subscriptions of one routing table, with LASP for new ones.

    Attributes:
        table: the routing version's table.
        dictionary: word ids of every subscription word seen (append-only, so ids stay
            valid for the life of the placement).
    """

    def __init__(
        self,
        table: RoutingTable,
        *,
        cost: CostModel = UNIT_COST,
        word_frequency: Mapping[str, int] | None = None,
    ) -> None:
        self.table = table
        self.cost = cost
        # New words of a call get ids rarest first: the ids are the tries' word order, and
        # rare words first keep scoped traversals shallow (unknown words count as rarest).
        self.word_frequency = word_frequency or {}
        self.dictionary = WordDictionary()
        n = table.n_matchers
        self._part_start = np.zeros(0, dtype=np.int64)
        self._part_count = np.zeros(0, dtype=np.int32)
        self._part_matchers = np.zeros(0, dtype=np.int32)
        self._word_count = np.zeros((n, 64), dtype=np.int32)
        self._unique = np.zeros(n, dtype=np.int64)
        self._subscriptions_on = np.zeros(n, dtype=np.int64)  # LASP's tie-break
        self._rows = PlacedRows()

    # -- words ---------------------------------------------------------------------------
    @property
    def n_matchers(self) -> int:
        return self.table.n_matchers

    def _encode(self, words: Sequence[str]) -> np.ndarray:
        """Sorted ids of ``words``, adding new words with their versions' matchers."""
        before = len(self.dictionary)
        ids = self.dictionary.encode(words, add=True)
        if len(self.dictionary) > before:
            self._extend_words(before)
        return ids

    def _extend_words(self, first_new: int) -> None:
        new_words = [self.dictionary.word(i) for i in range(first_new, len(self.dictionary))]
        index = self.table.word_index
        counts = np.empty(len(new_words), dtype=np.int32)
        matchers: list[np.ndarray] = []
        unmapped = [w for w in new_words if w not in index]
        fallback = iter(hash_matchers(unmapped, self.n_matchers).tolist())
        for k, word in enumerate(new_words):
            i = index.get(word)
            if i is None:
                versions = np.array([next(fallback)], dtype=np.int32)
            else:
                versions = self.table.part_matchers[
                    self.table.part_indptr[i] : self.table.part_indptr[i + 1]
                ]
            counts[k] = versions.shape[0]
            matchers.append(versions)
        starts = self._part_matchers.shape[0] + np.concatenate(
            [[0], np.cumsum(counts[:-1], dtype=np.int64)]
        )
        self._part_start = np.concatenate([self._part_start, starts.astype(np.int64)])
        self._part_count = np.concatenate([self._part_count, counts])
        self._part_matchers = np.concatenate([self._part_matchers, *matchers]).astype(np.int32)
        if len(self.dictionary) > self._word_count.shape[1]:
            grown = np.zeros(
                (self.n_matchers, max(len(self.dictionary), 2 * self._word_count.shape[1])),
                dtype=np.int32,
            )
            grown[:, : self._word_count.shape[1]] = self._word_count
            self._word_count = grown

    def slot_subscriptions(self) -> np.ndarray:
        """Per version slot (index of ``part_matchers``): the subscriptions on the slot's
        matcher that contain the slot's word (the ``subscription`` shedding utility)."""
        n_words = len(self.dictionary)
        word_of_slot = np.repeat(np.arange(n_words), self._part_count[:n_words])
        order = np.argsort(self._part_start[:n_words], kind="stable")
        # slots are laid out word after word in id order, so a repeat of the ids follows them
        assert np.array_equal(order, np.arange(n_words))
        return self._word_count[self._part_matchers, word_of_slot].astype(np.float64)

    def word_versions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per dictionary id: ``(part_start, part_count, part_matchers)`` (copies)."""
        return self._part_start.copy(), self._part_count.copy(), self._part_matchers.copy()

    # -- subscriptions -------------------------------------------------------------------
    def __contains__(self, sub_id: object) -> bool:
        return isinstance(sub_id, int | np.integer) and self._rows.contains(int(sub_id))

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def sub_ids(self) -> np.ndarray:
        """The placed subscriptions' ids (int64), in the order they were placed."""
        return self._rows.sub_ids()

    def placed(self, sub_ids: np.ndarray) -> np.ndarray:
        """Whether each id is placed."""
        return self._rows.rows_of(np.asarray(sub_ids, dtype=np.int64)) >= 0

    def get(self, sub_id: int) -> PlacedSubscription:
        """Raises: KeyError for an id that is not placed."""
        row = int(self._rows.rows_of(np.array([sub_id], dtype=np.int64))[0])
        if row < 0:
            raise KeyError(sub_id)
        return PlacedSubscription(self._rows.words(row).copy(), self._rows.matchers(row).copy())

    def unique_words(self) -> np.ndarray:
        """``(N,)`` |H(i)|: distinct words of the subscriptions on each matcher."""
        return self._unique.copy()

    def _encode_all(
        self, sub_ids: Sequence[int], word_sets: Sequence[Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray]:
        if len(sub_ids) != len(word_sets):
            raise InvalidArgumentError("one word set per subscription id is required")
        ids = np.asarray(sub_ids, dtype=np.int64)
        if np.unique(ids).shape[0] != ids.shape[0] or self.placed(ids).any():
            raise InvalidArgumentError("subscription ids must be new and distinct")
        frequency = self.word_frequency
        new_words = sorted(
            {w for words in word_sets for w in words if w not in self.dictionary},
            key=lambda w: (frequency.get(w, 0), w),
        )
        self._encode(new_words)
        encoded = [self._encode(words) for words in word_sets]
        if any(e.shape[0] == 0 for e in encoded):
            raise InvalidArgumentError("every subscription needs at least one word")
        indptr = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([e.shape[0] for e in encoded], out=indptr[1:])
        words = np.concatenate(encoded) if encoded else np.zeros(0, dtype=np.int32)
        return indptr, words.astype(np.int32)

    def adopt(
        self,
        sub_ids: Sequence[int],
        word_sets: Sequence[Sequence[str]],
        matcher_sets: Sequence[Sequence[int]],
    ) -> list[int]:
        """Take over stored placements; those that are not covering are placed again.

        Returns:
            The ids of the subscriptions that had to be re-placed.
        """
        indptr, words = self._encode_all(sub_ids, word_sets)
        if len(matcher_sets) != len(sub_ids):
            raise InvalidArgumentError("one matcher set per subscription id is required")
        place_indptr = np.zeros(len(sub_ids) + 1, dtype=np.int64)
        np.cumsum([len(set(m)) for m in matcher_sets], out=place_indptr[1:])
        placed = np.array([m for ms in matcher_sets for m in sorted(set(ms))], dtype=np.int32)
        redo = self._adopt_encoded(
            np.asarray(sub_ids, dtype=np.int64), indptr, words, place_indptr, placed
        )
        return [int(s) for s in redo]

    def adopt_arrays(
        self,
        sub_ids: np.ndarray,
        word_lists: pa.Array | pa.ChunkedArray,
        place_indptr: np.ndarray,
        placed: np.ndarray,
    ) -> np.ndarray:
        """:meth:`adopt` for columns: ``word_lists`` a ``list<string>`` column, the stored
        matchers as CSR (sorted distinct per subscription). Returns the re-placed ids."""
        ids = np.asarray(sub_ids, dtype=np.int64)
        indptr, words = self._encode_lists(ids, word_lists)
        if place_indptr.shape != (ids.shape[0] + 1,):
            raise InvalidArgumentError("one matcher set per subscription id is required")
        return self._adopt_encoded(
            ids, indptr, words, np.asarray(place_indptr, dtype=np.int64), placed.astype(np.int32)
        )

    def _adopt_encoded(
        self,
        ids: np.ndarray,
        indptr: np.ndarray,
        words: np.ndarray,
        place_indptr: np.ndarray,
        placed: np.ndarray,
    ) -> np.ndarray:
        if placed.size and (placed.min() < 0 or placed.max() >= self.n_matchers):
            raise InvalidArgumentError(f"matcher ids must lie in [0, {self.n_matchers})")
        ok = K.covering(
            indptr,
            words,
            place_indptr,
            placed,
            self._part_start,
            self._part_count,
            self._part_matchers,
            self.n_matchers,
        )
        keep = np.flatnonzero(ok)
        kept_words = take_rows(indptr, words, keep)
        kept_matchers = take_rows(place_indptr, placed, keep)
        self._rows.append(ids[keep], *kept_words, *kept_matchers)
        K.account(
            *kept_words, *kept_matchers, self._word_count, self._unique, self._subscriptions_on, 1
        )
        redo = np.flatnonzero(~ok)
        if redo.size:
            self._place_csr(ids[redo], *take_rows(indptr, words, redo))
        return ids[redo]

    def place_arrays(
        self, sub_ids: np.ndarray, word_lists: pa.Array | pa.ChunkedArray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`place` for columns; returns the matchers as CSR ``(indptr, matchers)``."""
        ids = np.asarray(sub_ids, dtype=np.int64)
        indptr, words = self._encode_lists(ids, word_lists)
        return self._place_csr(ids, indptr, words)

    def _encode_lists(
        self, ids: np.ndarray, word_lists: pa.Array | pa.ChunkedArray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_encode_all` over a ``list<string>`` column: each distinct word looked up
        once, each subscription's ids sorted and distinct (no Python list per row)."""
        lists = (
            word_lists.combine_chunks() if isinstance(word_lists, pa.ChunkedArray) else word_lists
        )
        if len(lists) != ids.shape[0]:
            raise InvalidArgumentError("one word set per subscription id is required")
        if np.unique(ids).shape[0] != ids.shape[0] or self.placed(ids).any():
            raise InvalidArgumentError("subscription ids must be new and distinct")
        lengths = np.asarray(pc.fill_null(pc.list_value_length(lists), 0), dtype=np.int64)
        coded = pc.dictionary_encode(pc.list_flatten(lists))
        vocabulary = coded.dictionary.to_pylist()
        frequency = self.word_frequency
        self._encode(
            sorted(
                (w for w in vocabulary if w not in self.dictionary),
                key=lambda w: (frequency.get(w, 0), w),
            )
        )
        word_ids = self.dictionary.map_vocabulary(vocabulary)[np.asarray(coded.indices)]
        row = np.repeat(np.arange(ids.shape[0], dtype=np.int64), lengths)
        order = np.lexsort((word_ids, row))
        row, word_ids = row[order], word_ids[order]
        distinct = np.ones(row.shape[0], dtype=np.bool_)
        distinct[1:] = (row[1:] != row[:-1]) | (word_ids[1:] != word_ids[:-1])
        row, word_ids = row[distinct], word_ids[distinct]
        counts = np.bincount(row, minlength=ids.shape[0])
        if (counts == 0).any():
            raise InvalidArgumentError("every subscription needs at least one word")
        indptr = np.zeros(ids.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return indptr, word_ids.astype(np.int32)

    def place(
        self, sub_ids: Sequence[int], word_sets: Sequence[Sequence[str]]
    ) -> dict[int, np.ndarray]:
        """Place new subscriptions with LASP, in the given order; returns their matchers."""
        indptr, words = self._encode_all(sub_ids, word_sets)
        return self._place_encoded(
            list(sub_ids), [words[indptr[s] : indptr[s + 1]] for s in range(len(sub_ids))]
        )

    def _place_encoded(
        self, sub_ids: list[int], encoded: list[np.ndarray]
    ) -> dict[int, np.ndarray]:
        if not sub_ids:
            return {}
        indptr = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([e.shape[0] for e in encoded], out=indptr[1:])
        words = np.concatenate(encoded).astype(np.int32)
        place_indptr, matchers = self._place_csr(np.asarray(sub_ids, dtype=np.int64), indptr, words)
        return {
            sub: matchers[place_indptr[s] : place_indptr[s + 1]].copy()
            for s, sub in enumerate(sub_ids)
        }

    def _place_csr(
        self, ids: np.ndarray, indptr: np.ndarray, words: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """LASP for encoded subscriptions, in order; their matchers as CSR."""
        if ids.size == 0:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32)
        place_indptr, matchers = K.place(
            indptr,
            words,
            self._part_start,
            self._part_count,
            self._part_matchers,
            self._word_count,
            self._unique,
            self._subscriptions_on,
            float(self.cost.slope),
            float(self.cost.intercept),
            False,
            0,
            np.full(ids.shape[0], -1, dtype=np.int32),
        )
        self._rows.append(ids, indptr, words, place_indptr, matchers)
        return place_indptr, matchers

    def remove(self, sub_ids: Sequence[int] | np.ndarray) -> None:
        """Take cancelled subscriptions off their matchers.

        Raises:
            InvalidArgumentError: for an id that is not placed.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        if ids.size == 0:
            return
        rows = self._rows.remove(ids)
        K.account(*self._rows.csr(rows), self._word_count, self._unique, self._subscriptions_on, -1)
        self._rows.compact_if_sparse()

    def rows_of(
        self, sub_ids: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(sub_ids, word indptr, word ids, matcher indptr, matchers)`` of the given placed
        subscriptions (default: every one, in the order they were placed).

        Raises:
            InvalidArgumentError: for an id that is not placed.
        """
        ids = self.sub_ids if sub_ids is None else np.asarray(sub_ids, dtype=np.int64)
        rows = self._rows.rows_of(ids)
        if (rows < 0).any():
            raise InvalidArgumentError(f"subscriptions {ids[rows < 0][:5].tolist()} are not placed")
        return (ids, *self._rows.csr(rows))

    def words_in_use(self) -> np.ndarray:
        """``(N, n_words)`` bool: whether a subscription on matcher m holds word w."""
        return self._word_count[:, : len(self.dictionary)] > 0

    def by_matcher(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per matcher: its subscriptions as ``(sub_ids int64, indptr int64, word_ids int32)``,
        in the order they were placed."""
        return self._rows.by_matcher(self.n_matchers)
