"""The reference for core.placement.live: the dict-of-objects LivePlacement it replaced
(one Python object per subscription), kept as the slow obvious version the array-based
one is compared with (tests/core/test_live_placement.py).

Subscriptions placed on the matchers of one routing version, changed one at a time.

The streaming matcher keeps one :class:`LivePlacement` per routing version: it adopts the
version's stored placements, places subscriptions registered since with LASP (Alg. 2 is
incremental by nature: one subscription at a time against the matchers' current word sets),
and removes cancelled ones. Words no version maps (a subscription newer than the remap)
route by the stable hash, as in the router, so placement and routing always agree.

A placement is *covering* when every post that contains the subscription reaches one of its
matchers: one matcher owns an unsplit word of it, or its matchers hold every version of one
of its words. Only covering placements make matching exact; adopted rows that are not
covering (a corrupted table, a mapping changed under them) are re-placed and reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.matching.dictionary import WordDictionary
from core.placement import _lasp_kernels as K
from core.placement.lasp import UNIT_COST, CostModel
from core.routing.hashing import hash_matchers
from core.routing.table import RoutingTable


@dataclass(frozen=True)
class PlacedSubscription:
    word_ids: np.ndarray  # sorted distinct int32 ids in the placement's dictionary
    matchers: np.ndarray  # int32, one entry unless multicast


class ReferenceLivePlacement:
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
        self._subscriptions_on = np.zeros(self._unique.shape[0], dtype=np.int64)
        self._subs: dict[int, PlacedSubscription] = {}

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
        return sub_id in self._subs

    def __len__(self) -> int:
        return len(self._subs)

    @property
    def sub_ids(self) -> list[int]:
        return list(self._subs)

    def get(self, sub_id: int) -> PlacedSubscription:
        return self._subs[sub_id]

    def unique_words(self) -> np.ndarray:
        """``(N,)`` |H(i)|: distinct words of the subscriptions on each matcher."""
        return self._unique.copy()

    def _encode_all(
        self, sub_ids: Sequence[int], word_sets: Sequence[Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray]:
        if len(sub_ids) != len(word_sets):
            raise InvalidArgumentError("one word set per subscription id is required")
        if len(set(sub_ids)) != len(sub_ids) or any(s in self._subs for s in sub_ids):
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
        for s in keep.tolist():
            self._subs[int(sub_ids[s])] = PlacedSubscription(
                words[indptr[s] : indptr[s + 1]], placed[place_indptr[s] : place_indptr[s + 1]]
            )
        kept_subs = [self._subs[int(sub_ids[s])] for s in keep.tolist()]
        self._account(kept_subs, +1)
        redo = np.flatnonzero(~ok).tolist()
        if redo:
            self._place_encoded(
                [int(sub_ids[s]) for s in redo],
                [words[indptr[s] : indptr[s + 1]] for s in redo],
            )
        return [int(sub_ids[s]) for s in redo]

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
            np.full(len(sub_ids), -1, dtype=np.int32),
        )
        out: dict[int, np.ndarray] = {}
        for s, sub in enumerate(sub_ids):
            chosen = matchers[place_indptr[s] : place_indptr[s + 1]].copy()
            self._subs[sub] = PlacedSubscription(encoded[s], chosen)
            out[sub] = chosen
        return out

    def remove(self, sub_ids: Sequence[int]) -> None:
        """Take cancelled subscriptions off their matchers.

        Raises:
            InvalidArgumentError: for an id that is not placed.
        """
        unknown = [s for s in sub_ids if s not in self._subs]
        if unknown:
            raise InvalidArgumentError(f"subscriptions {unknown[:5]} are not placed")
        gone = [self._subs.pop(s) for s in sub_ids]
        self._account(gone, -1)

    def _account(self, subs: list[PlacedSubscription], sign: int) -> None:
        if not subs:
            return
        indptr = np.zeros(len(subs) + 1, dtype=np.int64)
        np.cumsum([p.word_ids.shape[0] for p in subs], out=indptr[1:])
        place_indptr = np.zeros(len(subs) + 1, dtype=np.int64)
        np.cumsum([p.matchers.shape[0] for p in subs], out=place_indptr[1:])
        K.account(
            indptr,
            np.concatenate([p.word_ids for p in subs]).astype(np.int32),
            place_indptr,
            np.concatenate([p.matchers for p in subs]).astype(np.int32),
            self._word_count,
            self._unique,
            self._subscriptions_on,
            sign,
        )

    def by_matcher(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per matcher: its subscriptions as ``(sub_ids int64, indptr int64, word_ids int32)``."""
        rows: list[list[int]] = [[] for _ in range(self.n_matchers)]
        for sub, placed in self._subs.items():
            for m in placed.matchers.tolist():
                rows[m].append(sub)
        out = []
        for subs in rows:
            sets = [self._subs[s].word_ids for s in subs]
            indptr = np.zeros(len(sets) + 1, dtype=np.int64)
            np.cumsum([w.shape[0] for w in sets], out=indptr[1:])
            words = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int32)
            out.append((np.array(subs, dtype=np.int64), indptr, words.astype(np.int32)))
        return out
