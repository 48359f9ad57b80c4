"""One matcher's subscriptions as a worker holds them: the base (read once per base) and
the current epoch's changes, each with its own access-predicate index.

A change between batches costs an index over the few subscriptions added since the base
and the few cancelled marked in the base's index (its matches skip them), not a rebuild of
the matcher's index over all its subscriptions: at 10M subscriptions a matcher holds 600k
of them, and a batch after 10,000 changes would otherwise rebuild every matcher's index.
"""

from __future__ import annotations

import time

import numpy as np

from core.errors import InvalidArgumentError
from core.matching.matches import Matches
from core.matching.predicate import AccessPredicateMatcher
from core.shedding.yield_stats import attribution_slots
from core.stream.snapshot import MatcherChanges, MatcherSnapshot, MatcherSubs


class _Part:
    """Subscriptions with their ids sorted (for lookups) and a lazily built index."""

    def __init__(self, subs: MatcherSubs) -> None:
        self.subs = subs
        self.order = np.argsort(subs.sub_ids, kind="stable")
        self.sorted_ids = subs.sub_ids[self.order]
        self.index: AccessPredicateMatcher | None = None
        self.credit: np.ndarray | None = None  # per sorted id: the slot a match credits

    def find(self, sub_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(whether each id is here, its position in ``subs`` where it is)."""
        n = self.sorted_ids.shape[0]
        if n == 0:
            return np.zeros(sub_ids.shape[0], dtype=np.bool_), np.zeros(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.sorted_ids, sub_ids), n - 1)
        found = self.sorted_ids[at] == sub_ids
        return found, at[found]


class HeldMatcher:
    """A matcher's base and the changes of one epoch. Build with the base; move to an
    epoch with :meth:`use_changes`. ``rebased``: it replaced the matcher's older base of
    the same routing version (subscription changes made the new base)."""

    def __init__(
        self, base_key: tuple[str, int, int], base: MatcherSubs, *, rebased: bool = False
    ) -> None:
        self.base_key = base_key
        # whether it replaced the matcher's older base of the same version (changes made it)
        self.rebased = rebased
        self.base = _Part(base)
        self.epoch = -1
        self.added = _Part(MatcherSubs.empty())
        self.removed = np.zeros(0, dtype=np.int64)
        self._cancelled = self.removed  # what the base index leaves out
        self._current: MatcherSubs | None = None
        # seconds spent on changes since the base: taking an epoch's, indexing its
        # additions, marking its cancellations in the base's index (not the base's index)
        self.change_seconds = 0.0

    def use_changes(self, epoch: int, changes: MatcherChanges) -> None:
        """The changes of ``epoch`` (since the base): additions indexed apart, cancellations
        of the base's subscriptions filtered out of its matches."""
        started = time.perf_counter()
        self.epoch = epoch
        self.added = _Part(changes.added)
        removed = np.unique(np.asarray(changes.removed, dtype=np.int64))
        self.removed = removed[self.base.find(removed)[0]]
        self._current = None
        self.change_seconds += time.perf_counter() - started

    @property
    def nbytes(self) -> int:
        current = self._current.nbytes if self._current is not None else 0
        return self.base.subs.nbytes + self.added.subs.nbytes + current

    def subscriptions(self) -> MatcherSubs:
        """The matcher's subscriptions at this epoch, as one set of arrays (made on ask)."""
        if self._current is None:
            self._current = self.base.subs.apply(MatcherChanges(self.added.subs, self.removed))
        return self._current

    def build(self) -> int:
        """Build the indexes not built yet and mark the epoch's cancellations in the base's;
        returns how many indexes it built (the base's, the additions')."""
        built = 0
        if self.base.index is None:
            self.base.index = AccessPredicateMatcher(*self.base.subs.csr())
            built += 1
        if self.added.index is None or self._cancelled is not self.removed:
            # (timed only when there is an epoch's changes to take: match calls this each time)
            started = time.perf_counter()
            if self.added.index is None:
                self.added.index = AccessPredicateMatcher(*self.added.subs.csr())
                built += 1
            if self._cancelled is not self.removed:  # the epoch's cancellations, in the index
                self.base.index.set_cancelled(self.removed)
                self._cancelled = self.removed
            self.change_seconds += time.perf_counter() - started
        return built

    def match(self, offsets: np.ndarray, word_ids: np.ndarray, identity: np.ndarray) -> Matches:
        """Match posts (CSR of dictionary ids): the base's matches less the cancelled ones,
        then the additions', each post's base matches first."""
        self.build()
        assert self.base.index is not None and self.added.index is not None
        found = self.base.index.match(offsets, word_ids, identity)
        if len(self.added.subs):
            found = _with(found, self.added.index.match(offsets, word_ids, identity))
        return found

    def lookup(self, sub_ids: np.ndarray, of_base: np.ndarray, of_added: np.ndarray) -> np.ndarray:
        """``of_base[i]`` / ``of_added[i]``: a value per subscription of the base / the
        additions, in their order; the value of each of ``sub_ids`` (matched ones).

        Raises:
            InvalidArgumentError: for an id the matcher does not hold.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        in_base, at_base = self.base.find(ids)
        out = np.empty(ids.shape[0], dtype=of_base.dtype)
        out[in_base] = of_base[self.base.order[at_base]]
        rest = ~in_base
        if rest.any():
            in_added, at_added = self.added.find(ids[rest])
            if not in_added.all():
                raise InvalidArgumentError(f"matched ids {ids[rest][~in_added][:5]} not held")
            out[rest] = of_added[self.added.order[at_added]]
        return out

    def subscriber_codes(self, sub_ids: np.ndarray) -> np.ndarray:
        return self.lookup(
            sub_ids, self.base.subs.subscriber_codes, self.added.subs.subscriber_codes
        )

    def credit(self, snapshot: MatcherSnapshot, matcher: int, sub_ids: np.ndarray) -> np.ndarray:
        """The version slot each matched subscription's matches are credited to (its rarest
        word's slot on this matcher: ``core.shedding.yield_stats``)."""
        credits = []
        for part in (self.base, self.added):
            if part.credit is None:
                part.credit = attribution_slots(
                    part.subs.indptr,
                    part.subs.word_ids,
                    matcher,
                    snapshot.part_start,
                    snapshot.part_count,
                    snapshot.part_matchers,
                )
            credits.append(part.credit)
        return self.lookup(sub_ids, credits[0], credits[1])


def _with(found: Matches, more: Matches) -> Matches:
    """Each post's matches of ``found`` then of ``more`` (the same posts)."""
    if more.n_posts != found.n_posts:
        raise InvalidArgumentError("both matches must be of the same posts")
    if more.n_matches == 0:
        return Matches(
            found.indptr,
            found.sub_ids,
            found.operations + more.operations,
            _summed(found.post_operations, more.post_operations),
        )
    counts = np.diff(more.indptr)
    # insert each post's new matches at the end of its run (np.insert keeps their order)
    at = np.repeat(found.indptr[1:], counts)
    sub_ids = np.insert(found.sub_ids, at, more.sub_ids)
    indptr = found.indptr + more.indptr
    return Matches(
        indptr,
        sub_ids,
        found.operations + more.operations,
        _summed(found.post_operations, more.post_operations),
    )


def _summed(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    return a + b if a is not None and b is not None else a if b is None else b
