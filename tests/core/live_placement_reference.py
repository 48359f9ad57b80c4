"""The slow obvious version of core.placement.live, written from the paper's rules and not
from the code it checks (tests/core/test_live_placement.py compares the two): a dict of
subscriptions, every matcher's words recounted from its subscriptions when asked, LASP
(paper 001, Alg. 2) evaluated candidate by candidate with the load's coefficient of
variation computed from scratch.

The rules:
- a word's versions are its matchers in the routing table; a word the table does not map
  has one, its stable hash (as the router routes it);
- a subscription is eligible for the owners of its unsplit words; one made only of split
  words is multicast to every version of its word with the fewest versions (the first such
  word in dictionary order);
- LASP gives a unicast subscription to the eligible matcher of highest utility
  ``-f(new words) * cv(costs after)``, with ``f(x) = slope * x + intercept`` and cv the
  coefficient of variation of ``f(|H(j)|)`` over all matchers; ties go to the matcher
  holding the fewest subscriptions, then to the lowest id;
- a stored placement is kept when it is covering: its matchers hold every version of one
  of the subscription's words; otherwise it is placed again, after the kept ones;
- new words get dictionary ids rarest first (by the given frequencies, then the word).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.errors import InvalidArgumentError
from core.matching.dictionary import WordDictionary
from core.placement.lasp import UNIT_COST, CostModel
from core.placement.live import PlacedSubscription  # the answer's type, not its logic
from core.routing.hashing import stable_hash
from core.routing.table import RoutingTable

# what the placement's calls take: subscription ids, and each one's words or matchers
Ids = Sequence[int]
WordSets = Sequence[Sequence[str]]
MatcherSets = Sequence[Sequence[int]]


@dataclass
class ReferenceLivePlacement:
    """The placed subscriptions of one routing table, the obvious way."""

    table: RoutingTable
    cost: CostModel = field(default=UNIT_COST, kw_only=True)
    word_frequency: Mapping[str, int] = field(default_factory=dict, kw_only=True)
    dictionary: WordDictionary = field(default_factory=WordDictionary, init=False)
    _subs: dict[int, PlacedSubscription] = field(default_factory=dict, init=False)

    @property
    def n_matchers(self) -> int:
        return self.table.n_matchers

    # -- what a matcher holds, recounted -------------------------------------------------
    def _versions(self, word_id: int) -> list[int]:
        word = self.dictionary.word(word_id)
        i = self.table.word_index.get(word)
        if i is None:
            return [stable_hash(word) % self.n_matchers]
        start, end = self.table.part_indptr[i], self.table.part_indptr[i + 1]
        return [int(m) for m in self.table.part_matchers[start:end]]

    def _on(self, matcher: int) -> list[PlacedSubscription]:
        return [p for p in self._subs.values() if matcher in p.matchers.tolist()]

    def _words_on(self, matcher: int) -> set[int]:
        return {int(w) for p in self._on(matcher) for w in p.word_ids.tolist()}

    def unique_words(self) -> np.ndarray:
        return np.array([len(self._words_on(m)) for m in range(self.n_matchers)], dtype=np.int64)

    def slot_subscriptions(self) -> np.ndarray:
        """Per (word, version) slot in id order: subscriptions on that matcher with the word."""
        counts = []
        for word_id in range(len(self.dictionary)):
            for matcher in self._versions(word_id):
                on = self._on(matcher)
                counts.append(sum(word_id in p.word_ids.tolist() for p in on))
        return np.array(counts, dtype=np.float64)

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

    def _encode_all(
        self, sub_ids: Sequence[int], word_sets: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        if len(sub_ids) != len(word_sets):
            raise InvalidArgumentError("one word set per subscription id is required")
        if len(set(sub_ids)) != len(sub_ids) or any(s in self._subs for s in sub_ids):
            raise InvalidArgumentError("subscription ids must be new and distinct")
        new = {w for words in word_sets for w in words if w not in self.dictionary}
        for word in sorted(new, key=lambda w: (self.word_frequency.get(w, 0), w)):
            self.dictionary.add(word)
        encoded = [self.dictionary.encode(words) for words in word_sets]
        if any(e.shape[0] == 0 for e in encoded):
            raise InvalidArgumentError("every subscription needs at least one word")
        return encoded

    def _covering(self, word_ids: np.ndarray, matchers: set[int]) -> bool:
        return any(set(self._versions(int(w))) <= matchers for w in word_ids.tolist())

    def adopt(self, sub_ids: Ids, word_sets: WordSets, matcher_sets: MatcherSets) -> list[int]:
        encoded = self._encode_all(sub_ids, word_sets)
        if len(matcher_sets) != len(sub_ids):
            raise InvalidArgumentError("one matcher set per subscription id is required")
        if any(not 0 <= m < self.n_matchers for ms in matcher_sets for m in ms):
            raise InvalidArgumentError(f"matcher ids must lie in [0, {self.n_matchers})")
        redo = []
        for sub, words, matchers in zip(sub_ids, encoded, matcher_sets, strict=True):
            if self._covering(words, set(matchers)):
                self._subs[int(sub)] = PlacedSubscription(
                    words, np.array(sorted(set(matchers)), dtype=np.int32)
                )
            else:
                redo.append((int(sub), words))
        for sub, words in redo:
            self._subs[sub] = PlacedSubscription(words, self._lasp(words))
        return [sub for sub, _ in redo]

    def place(
        self, sub_ids: Sequence[int], word_sets: Sequence[Sequence[str]]
    ) -> dict[int, np.ndarray]:
        encoded = self._encode_all(sub_ids, word_sets)
        out = {}
        for sub, words in zip(sub_ids, encoded, strict=True):
            chosen = self._lasp(words)
            self._subs[int(sub)] = PlacedSubscription(words, chosen)
            out[int(sub)] = chosen.copy()
        return out

    def _lasp(self, word_ids: np.ndarray) -> np.ndarray:
        words = [int(w) for w in word_ids.tolist()]
        owners: list[int] = []
        for w in words:
            versions = self._versions(w)
            if len(versions) == 1 and versions[0] not in owners:
                owners.append(versions[0])
        if not owners:  # only split words: every version of the least split one
            fewest = min(words, key=lambda w: (len(self._versions(w)), w))
            return np.array(list(dict.fromkeys(self._versions(fewest))), dtype=np.int32)
        f = self.cost
        held = [self._words_on(m) for m in range(self.n_matchers)]
        load = [len(self._on(m)) for m in range(self.n_matchers)]

        def utility(candidate: int) -> float:
            new = sum(w not in held[candidate] for w in words)
            costs = [
                f.slope * (len(held[m]) + (new if m == candidate else 0)) + f.intercept
                for m in range(self.n_matchers)
            ]
            n = len(costs)
            mean = sum(costs) / n
            variance = max(sum(c * c for c in costs) / n - mean * mean, 0.0)
            cv = math.sqrt(variance) / mean if mean > 0 else 0.0
            return -(f.slope * new + f.intercept) * cv

        best = max(owners, key=lambda m: (utility(m), -load[m], -m))
        return np.array([best], dtype=np.int32)

    def remove(self, sub_ids: Sequence[int]) -> None:
        unknown = [s for s in sub_ids if s not in self._subs]
        if unknown:
            raise InvalidArgumentError(f"subscriptions {unknown[:5]} are not placed")
        for sub in sub_ids:
            del self._subs[sub]

    def by_matcher(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per matcher: its subscriptions as ``(sub_ids int64, indptr int64, word_ids int32)``."""
        out = []
        for matcher in range(self.n_matchers):
            subs = [s for s, p in self._subs.items() if matcher in p.matchers.tolist()]
            sizes = [self._subs[s].word_ids.shape[0] for s in subs]
            indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            words = [w for s in subs for w in self._subs[s].word_ids.tolist()]
            out.append((np.array(subs, dtype=np.int64), indptr, np.array(words, dtype=np.int32)))
        return out
