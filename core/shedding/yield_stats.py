"""The learned match yield of each (matcher, word) version slot (after paper 003, Alg. 2-3).

A match (post, subscription) found on matcher m is credited to one slot: the subscription's
first word (dictionary order) that has a version on m. A post that reaches m counts once in
the denominator of every slot of its words on m. The expected matches of a (post, matcher)
pair are then the sum of its words' yields: each match is credited exactly once.

Only posts processed in full count (every post at level 0; a small seeded sample when
shedding): counting capped posts would learn only from what the estimate itself chose.
Counts decay per update, so the estimate follows recent batches. Slots never observed fall
back to a prior proportional to their subscription count, scaled by the observed matches
per containing subscription.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.shedding import _kernels as K


@dataclass(frozen=True)
class YieldObservation:
    """Sparse counts of one matcher's batch: per slot, matches credited and posts seen."""

    slots: np.ndarray  # int64, distinct
    matches: np.ndarray  # float64
    posts: np.ndarray  # float64

    @classmethod
    def empty(cls) -> YieldObservation:
        return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))

    @classmethod
    def merge(cls, parts: list[YieldObservation]) -> YieldObservation:
        if not parts:
            return cls.empty()
        slots = np.concatenate([p.slots for p in parts])
        uniq, inverse = np.unique(slots, return_inverse=True)
        matches = np.bincount(inverse, np.concatenate([p.matches for p in parts]), uniq.size)
        posts = np.bincount(inverse, np.concatenate([p.posts for p in parts]), uniq.size)
        return cls(uniq.astype(np.int64), matches, posts)


def attribution_slots(
    sub_indptr: np.ndarray,
    sub_words: np.ndarray,
    matcher: int,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
) -> np.ndarray:
    """Per subscription (rows of a matcher's CSR): the slot its matches are credited to."""
    n_subs = sub_indptr.shape[0] - 1
    if n_subs == 0:
        return np.zeros(0, dtype=np.int64)
    slots = K.slots_on_matcher(
        np.ascontiguousarray(sub_words, np.int32),
        int(matcher),
        np.ascontiguousarray(part_start, np.int64),
        np.ascontiguousarray(part_count, np.int32),
        np.ascontiguousarray(part_matchers, np.int32),
    )
    big = np.iinfo(np.int64).max
    position = np.where(slots >= 0, np.arange(slots.shape[0], dtype=np.int64), big)
    lengths = np.diff(sub_indptr)
    if (lengths == 0).any():
        raise InvalidArgumentError("every subscription needs at least one word")
    first = np.minimum.reduceat(position, sub_indptr[:-1].astype(np.int64))
    out = np.full(n_subs, -1, dtype=np.int64)
    found = first != big
    out[found] = slots[first[found]]
    return out


def observe(
    post_indptr: np.ndarray,
    post_words: np.ndarray,
    sampled: np.ndarray,
    match_indptr: np.ndarray,
    match_slots: np.ndarray,
    matcher: int,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
) -> YieldObservation:
    """Counts of one matcher's posts (CSR of word ids) and their matches, each match given
    as its credited slot (:func:`attribution_slots`); only ``sampled`` posts count."""
    n_posts = post_indptr.shape[0] - 1
    if sampled.shape != (n_posts,) or match_indptr.shape != (n_posts + 1,):
        raise InvalidArgumentError("posts, sampled flags and matches differ in number")
    if not sampled.any():
        return YieldObservation.empty()
    # only the sampled posts' words are looked up (a small share while learning)
    word_post = np.repeat(np.arange(n_posts), np.diff(post_indptr))
    word_slots = K.slots_on_matcher(
        np.ascontiguousarray(post_words[sampled[word_post]], np.int32),
        int(matcher),
        np.ascontiguousarray(part_start, np.int64),
        np.ascontiguousarray(part_count, np.int32),
        np.ascontiguousarray(part_matchers, np.int32),
    )
    seen = word_slots[word_slots >= 0]
    match_post = np.repeat(np.arange(n_posts), np.diff(match_indptr))
    credited = match_slots[(match_slots >= 0) & sampled[match_post]]
    slots = np.concatenate([seen, credited])
    uniq, inverse = np.unique(slots, return_inverse=True)
    is_post = np.zeros(slots.shape[0])
    is_post[: seen.shape[0]] = 1.0
    posts = np.bincount(inverse, is_post, uniq.size)
    matches = np.bincount(inverse, 1.0 - is_post, uniq.size)
    return YieldObservation(uniq.astype(np.int64), matches, posts)


class YieldStats:
    """Decayed per-slot counts and the yield estimate built from them.

    Args:
        decay: weight kept by the old counts at each update (0: only the last batch).
        prior_posts: pseudo-posts of the prior in each slot's estimate.
    """

    def __init__(self, n_slots: int = 0, *, decay: float = 0.8, prior_posts: float = 2.0):
        if not 0.0 <= decay < 1.0 or prior_posts <= 0:
            raise InvalidArgumentError("need 0 <= decay < 1 and prior_posts > 0")
        self.decay = decay
        self.prior_posts = prior_posts
        self.matches = np.zeros(n_slots)
        self.posts = np.zeros(n_slots)
        self.updates = 0

    @property
    def n_slots(self) -> int:
        return int(self.matches.shape[0])

    def _grow(self, n_slots: int) -> None:
        extra = n_slots - self.n_slots
        if extra > 0:
            self.matches = np.concatenate([self.matches, np.zeros(extra)])
            self.posts = np.concatenate([self.posts, np.zeros(extra)])

    def update(self, observation: YieldObservation, n_slots: int) -> None:
        """Fold one batch's counts in (slots grow with the snapshot's dictionary)."""
        self._grow(n_slots)
        if observation.slots.size and observation.slots.max() >= self.n_slots:
            raise InvalidArgumentError("observed slot outside the snapshot's slots")
        self.matches *= self.decay
        self.posts *= self.decay
        np.add.at(self.matches, observation.slots, observation.matches)
        np.add.at(self.posts, observation.slots, observation.posts)
        self.updates += 1

    def weights(self, subscription_count: np.ndarray) -> np.ndarray:
        """Per slot: expected matches credited per post that reaches it (smoothed)."""
        n_slots = subscription_count.shape[0]
        self._grow(n_slots)
        matches, posts = self.matches[:n_slots], self.posts[:n_slots]
        exposure = float((posts * subscription_count).sum())
        per_sub = float(matches.sum()) / exposure if exposure > 0 else 1.0
        prior = per_sub * subscription_count
        a = self.prior_posts
        return (matches + a * prior) / (posts + a)
