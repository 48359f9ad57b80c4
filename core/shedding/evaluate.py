"""What each routed (post, matcher) pair is worth: its matches and its counted matcher work.

The ground truth of the shedding experiments (Fig. 8a): posts are routed with a table, each
matcher's trie (its LASP-placed subscriptions) matches the posts routed to it, and every
pair records the matches it found and the trie operations it cost. A shedding policy is a
keep-mask over the pairs; its accuracy is the share of distinct (post, subscription)
matches still found by some kept pair (a multicast subscription may be found twice).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from core.corpus import _kernels as corpus_kernels
from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.matching.trie import TrieMatcher
from core.placement.cost import encode_subscriptions, subscription_dictionary
from core.placement.lasp import Placement
from core.routing.router import AlignedTable, align_table, route_corpus
from core.routing.table import RoutingTable
from core.shedding import _kernels as K
from core.shedding.shedder import pair_utilities
from core.shedding.yield_stats import YieldObservation, attribution_slots, observe


@dataclass(frozen=True, eq=False)
class PairOutcomes:
    """Routed pairs of a set of posts and what each yields.

    Attributes:
        posts: the routed posts (word ids in ``posts.vocabulary``).
        aligned: the table indexed by those word ids (slots = ``part_matchers`` indices).
        routed_indptr, routed_matchers: each post's matchers (CSR over posts).
        pair_matches, pair_work: ``(n_pairs,)`` matches found and trie operations.
        match_pair, match_key: per raw match, its pair and its (post, subscription) key.
        slot_subscriptions: per slot, subscriptions on the slot's matcher holding its word.
        observation: the yield counts of these posts, all processed in full.
    """

    posts: Corpus
    aligned: AlignedTable
    n_matchers: int
    seed: int
    routed_indptr: np.ndarray
    routed_matchers: np.ndarray
    pair_matches: np.ndarray
    pair_work: np.ndarray
    match_pair: np.ndarray
    match_key: np.ndarray
    slot_subscriptions: np.ndarray
    observation: YieldObservation

    @property
    def n_pairs(self) -> int:
        return int(self.routed_matchers.shape[0])

    @property
    def spreads(self) -> np.ndarray:
        return np.diff(self.routed_indptr)

    @functools.cached_property
    def _match_ids(self) -> tuple[np.ndarray, int]:
        """Per raw match, the id of its distinct (post, subscription); how many there are."""
        distinct, inverse = np.unique(self.match_key, return_inverse=True)
        return inverse.astype(np.int64), int(distinct.shape[0])

    @property
    def n_matches(self) -> int:
        return self._match_ids[1]

    def utilities(self, slot_weight: np.ndarray | None) -> np.ndarray:
        """Each routed pair's utility under ``slot_weight`` (one per version slot; None:
        the consensus utility), as the stream's route task computes it."""
        a = self.aligned
        return pair_utilities(
            self.posts.indptr, self.posts.indices, a.part_start, a.part_count,
            a.part_matchers, self.routed_indptr, self.routed_matchers, self.n_matchers,
            slot_weight=slot_weight, subscribed=a.subscribed, seed=self.seed,
        )  # fmt: skip

    def accuracy(self, keep: np.ndarray) -> float:
        """Distinct matches found by kept pairs / distinct matches of all pairs."""
        if keep.shape != (self.n_pairs,):
            raise InvalidArgumentError("one keep flag per routed pair is required")
        ids, total = self._match_ids
        if total == 0:
            return 1.0
        found = np.bincount(ids[keep[self.match_pair]], minlength=total)
        return int(np.count_nonzero(found)) / total

    def shed(self, keep: np.ndarray) -> tuple[float, float]:
        """(share of pairs shed, share of counted matcher work shed)."""
        pairs = 1.0 - keep.sum() / max(self.n_pairs, 1)
        total = float(self.pair_work.sum())
        work = 1.0 - float(self.pair_work[keep].sum()) / total if total > 0 else 0.0
        return float(pairs), work


def pair_outcomes(
    table: RoutingTable,
    placement: Placement,
    subscriptions: Corpus,
    posts: Corpus,
    *,
    seed: int = 0,
) -> PairOutcomes:
    """Route ``posts``, match every pair on its matcher's trie, record what each yields.

    Raises:
        InvalidArgumentError: if placement and table disagree on N.
    """
    if placement.n_matchers != table.n_matchers:
        raise InvalidArgumentError("placement and routing table have different N")
    n = table.n_matchers
    aligned = align_table(table, posts.vocabulary)
    routed = route_corpus(table, posts, seed=seed)
    n_pairs = routed.matchers.shape[0]
    pair_post = np.repeat(np.arange(posts.n_posts, dtype=np.int64), routed.spreads())
    pair_key = pair_post * n + routed.matchers
    by_key = np.argsort(pair_key, kind="stable")
    post_ptr, post_rows = corpus_kernels.transpose_csr(routed.indptr, routed.matchers, n)
    sub_ptr, sub_rows = placement.subscriptions_by_matcher()
    dictionary = subscription_dictionary(subscriptions, posts)
    word_map = dictionary.map_vocabulary(posts.vocabulary.tolist())
    # dictionary id -> posts' word id (-1: a word no post has), to find a match's slot
    post_word = posts.word_index
    to_post = np.array(
        [post_word.get(dictionary.word(i), -1) for i in range(len(dictionary))], dtype=np.int64
    )
    pair_matches = np.zeros(n_pairs, dtype=np.int64)
    pair_work = np.zeros(n_pairs, dtype=np.int64)
    slot_subs = np.zeros(aligned.part_matchers.shape[0])
    match_pair: list[np.ndarray] = []
    match_key: list[np.ndarray] = []
    observations: list[YieldObservation] = []
    n_sub_ids = int(placement.sub_ids.max()) + 1 if placement.sub_ids.size else 1
    for i in range(n):
        rows = sub_rows[sub_ptr[i] : sub_ptr[i + 1]].astype(np.int64)
        if rows.size == 0:
            continue
        indptr, words = encode_subscriptions(subscriptions, dictionary, rows)
        # words sorted by dictionary id = rarest first: a match is credited to its rarest
        # word with a version here, as the stream's matchers credit it
        sub_post_words = to_post[words].astype(np.int32)
        slots = K.slots_on_matcher(
            sub_post_words, i, aligned.part_start, aligned.part_count, aligned.part_matchers
        )
        slot_subs += np.bincount(slots[slots >= 0], minlength=slot_subs.shape[0])
        targets = post_rows[post_ptr[i] : post_ptr[i + 1]].astype(np.int64)
        if targets.size == 0:
            continue
        trie = TrieMatcher(capacity=int(indptr[-1]) + 1)
        trie.insert_many(placement.sub_ids[rows], indptr, words)
        batch_ptr, batch_words = corpus_kernels.select_rows(posts.indptr, posts.indices, targets)
        found = trie.match(batch_ptr, batch_words, word_map)
        assert found.post_operations is not None
        pairs = by_key[np.searchsorted(pair_key[by_key], targets * n + i)]
        pair_matches[pairs] = np.diff(found.indptr)
        pair_work[pairs] = found.post_operations
        per_match = np.repeat(np.arange(targets.shape[0]), np.diff(found.indptr))
        match_pair.append(pairs[per_match])
        match_key.append(targets[per_match] * n_sub_ids + found.sub_ids)
        credit = attribution_slots(
            indptr,
            sub_post_words,
            i,
            aligned.part_start,
            aligned.part_count,
            aligned.part_matchers,
        )
        order = np.argsort(placement.sub_ids[rows])
        sorted_ids = placement.sub_ids[rows][order]
        match_slots = credit[order][np.searchsorted(sorted_ids, found.sub_ids)]
        observations.append(
            observe(
                batch_ptr,
                batch_words,
                np.ones(targets.shape[0], dtype=np.bool_),
                found.indptr,
                match_slots,
                i,
                aligned.part_start,
                aligned.part_count,
                aligned.part_matchers,
            )
        )
    empty = np.zeros(0, dtype=np.int64)
    return PairOutcomes(
        posts=posts,
        aligned=aligned,
        n_matchers=n,
        seed=seed,
        routed_indptr=routed.indptr,
        routed_matchers=routed.matchers,
        pair_matches=pair_matches,
        pair_work=pair_work,
        match_pair=np.concatenate(match_pair) if match_pair else empty,
        match_key=np.concatenate(match_key) if match_key else empty,
        slot_subscriptions=slot_subs,
        observation=YieldObservation.merge(observations),
    )
