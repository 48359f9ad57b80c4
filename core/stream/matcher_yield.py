"""What one matcher's sampled posts yielded, for the ``yield`` shedding utility's estimate
(:mod:`core.shedding.yield_stats`): the posts' words and the subscription slots their
matches credit."""

from __future__ import annotations

import numpy as np

from core.corpus.arrays import take_rows
from core.matching.matches import Matches
from core.shedding.yield_stats import YieldObservation, observe
from core.stream.held import HeldMatcher
from core.stream.snapshot import MatcherSnapshot


def csr_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indptr of the given rows, positions of their entries in the CSR's values)."""
    starts = np.asarray(indptr, dtype=np.int64)[rows]
    lengths = np.asarray(indptr, dtype=np.int64)[rows + 1] - starts
    out = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out, np.repeat(starts - out[:-1], lengths) + np.arange(out[-1], dtype=np.int64)


def matcher_yield(
    held: HeldMatcher,
    snapshot: MatcherSnapshot,
    matcher: int,
    offsets: np.ndarray,
    word_ids: np.ndarray,
    sampled: np.ndarray,
    matches: Matches,
) -> YieldObservation:
    """The yield counts of one matcher's sampled posts: only those count, so their words
    and matches are gathered first (2% of a batch), not every match looked up and most of
    them thrown away."""
    rows = np.flatnonzero(sampled)
    if rows.size == 0:
        return YieldObservation.empty()
    post_indptr, post_words = take_rows(offsets, word_ids, rows)
    match_indptr, match_at = csr_positions(matches.indptr, rows)
    match_slots = held.credit(snapshot, matcher, matches.sub_ids[match_at])
    return observe(
        post_indptr,
        post_words,
        np.ones(rows.shape[0], dtype=np.bool_),
        match_indptr,
        match_slots,
        matcher,
        snapshot.part_start,
        snapshot.part_count,
        snapshot.part_matchers,
    )
