"""Measured replay throughput (what paper 001 measured): route posts with a mapping, build
one real trie per matcher from its placed subscriptions, time each matcher's matching of the
posts routed to it, and report posts / max_i time_i (matchers run in parallel, the slowest
bounds throughput, Sect. 3.1.3).

Timing: a matcher's share of a held-out corpus is often a millisecond of work, and the
throughput is set by the maximum over N such times, so a single noisy sample decides it
(best-of-3 per matcher, taken matcher after matcher, measured one mapping up to 1.2x apart
from run to run). The samples therefore run in rounds over all matchers, so a burst of
machine noise lands on one sample of many matchers instead of every sample of one, and a
matcher whose sample was shorter than ``min_sample_seconds`` repeats its matching in the
later rounds until a sample lasts that long; each matcher's time is its best sample.

Scale: the counted figures (work, matches) are made matcher by matcher, a bounded chunk of
posts at a time, over every post, counting matches per trie node rather than listing them
(10M topic-based subscriptions make ~20k matches a post: billions per held-out set), and
the timing may run on the first ``timing_posts`` only (evaluate times 200k of 2M held-out
posts), listing the matches a bounded chunk at a time: the matches of millions of posts do not
fit in memory, and timing them three times per routing version would take minutes and tell
no more. Tries are kept for the rounds up to ``TIMING_TRIE_BYTES``; past that (millions of
subscriptions) a matcher is timed on its own when counted, and one trie is built at a time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from core.corpus import _kernels as corpus_kernels
from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.matching.dictionary import WordDictionary
from core.matching.matches import Matches
from core.matching.trie import TrieMatcher
from core.placement.cost import (
    encode_subscriptions,
    subscription_dictionary,
)
from core.placement.lasp import Placement
from core.routing.router import route_corpus
from core.routing.table import RoutingTable

# a sample of a few milliseconds is long against the timer and the scheduler's tick
DEFAULT_MIN_SAMPLE_SECONDS = 0.005
# posts matched at a time while counting: the matches of a chunk fit in memory (topic-based
# subscriptions emit ~200 matches a post; all of 2M held-out posts' would not)
REPLAY_CHUNK_POSTS = 100_000
# ... and at most about this many matches: the next chunk's posts follow the matches per
# post seen so far (10M topic-based subscriptions emit ~20k a post: 100k posts' matches
# took over 10 GiB), starting from a small first chunk
REPLAY_CHUNK_MATCHES = 10_000_000
FIRST_CHUNK_POSTS = 1_000
# tries kept for the timing rounds at most (256 MiB): beyond, a matcher is timed on its own
# as soon as it is counted and its trie let go (10M subscriptions' 16 tries: 5.6 GiB)
TIMING_TRIE_BYTES = 1 << 28


@dataclass
class _Timed:
    """One matcher's timing: its trie, the posts routed to it, matchings per sample, and
    the best seconds per matching so far."""

    matcher: int
    trie: TrieMatcher
    batches: list[tuple[np.ndarray, np.ndarray]]  # its timed posts, chunked (CSR each)
    word_map: np.ndarray
    loops: int = 1
    best: float = math.inf


@dataclass(frozen=True)
class ReplayResult:
    """Per-matcher work and the resulting throughput.

    Attributes:
        n_posts: posts replayed (every figure but the timing counts all of them).
        matcher_posts, matcher_operations: ``(N,)`` posts received, trie lookups performed.
        matcher_matches: ``(N,)`` matches each matcher emitted (a subscription placed on
            two matchers matches a post at both).
        n_matches: distinct (post, subscription) matches.
        timed_posts: the posts the timing ran on (the first ``timing_posts``).
        matcher_seconds: ``(N,)`` each matcher's matching time of its share of the timed
            posts: the best of ``repeats`` samples (see the module doc).
        throughput: timed_posts / max(matcher_seconds), posts per second.
        work_throughput: n_posts / max(matcher_operations + matcher_matches): the same
            bound with each matcher's counted work as cost, free of timer noise. Work counts
            the matches emitted beside the lookups: with topic-based subscriptions (~200
            matches per post) a matcher emits ~15 matches per lookup and its time follows
            the matches (docs/RESULTS.md), which lookups alone do not see.
        match_pairs: ``(n_matches, 2)`` int64 distinct (post row, sub id) pairs, sorted;
            None when the replay was asked not to keep them.
    """

    n_posts: int
    matcher_posts: np.ndarray
    matcher_operations: np.ndarray
    matcher_matches: np.ndarray
    n_matches: int
    timed_posts: int
    matcher_seconds: np.ndarray
    throughput: float
    match_pairs: np.ndarray | None

    @property
    def work_throughput(self) -> float:
        work = self.matcher_operations + self.matcher_matches
        busiest = int(work.max()) if work.size else 0
        return self.n_posts / busiest if busiest > 0 else float("nan")


def replay(
    table: RoutingTable,
    placement: Placement,
    subscriptions: Corpus,
    posts: Corpus,
    *,
    seed: int = 0,
    repeats: int = 3,
    min_sample_seconds: float = DEFAULT_MIN_SAMPLE_SECONDS,
    timing_posts: int | None = None,
    keep_pairs: bool = True,
    chunk_posts: int = REPLAY_CHUNK_POSTS,
) -> ReplayResult:
    """Replay ``posts`` through router and matchers; see the module docstring.

    Args:
        repeats: timing rounds (each matcher's time is its best round).
        min_sample_seconds: a sample repeats a matcher's matching until it lasts this long
            (0: one matching per sample).
        timing_posts: time the matchers on the first this many posts only (None: all);
            the counted figures always cover every post.
        keep_pairs: keep the match pairs (False: only their count; at millions of posts
            they do not fit in memory).
        chunk_posts: posts matched at a time while counting (bounds the memory of the
            matches; the figures do not depend on it).

    Raises:
        InvalidArgumentError: if placement and table disagree on N, ``repeats`` < 1,
            ``min_sample_seconds`` is negative, or ``timing_posts``/``chunk_posts`` < 1.
    """
    if placement.n_matchers != table.n_matchers:
        raise InvalidArgumentError("placement and routing table have different N")
    if repeats < 1:
        raise InvalidArgumentError(f"repeats must be >= 1, got {repeats}")
    if not min_sample_seconds >= 0:
        raise InvalidArgumentError(f"min_sample_seconds must be >= 0, got {min_sample_seconds!r}")
    if timing_posts is not None and timing_posts < 1:
        raise InvalidArgumentError(f"timing_posts must be >= 1, got {timing_posts}")
    timed_posts = posts.n_posts if timing_posts is None else min(timing_posts, posts.n_posts)
    counted = _count(
        table,
        placement,
        subscriptions,
        posts,
        seed=seed,
        chunk_posts=chunk_posts,
        keep_pairs=keep_pairs,
        timed_posts=timed_posts,
        repeats=repeats,
        min_sample_seconds=min_sample_seconds,
    )
    seconds = counted.seconds
    slowest = float(seconds.max())
    return ReplayResult(
        n_posts=posts.n_posts,
        matcher_posts=counted.matcher_posts,
        matcher_operations=counted.operations,
        matcher_matches=counted.matches,
        n_matches=counted.n_matches,
        timed_posts=timed_posts,
        matcher_seconds=seconds,
        throughput=timed_posts / slowest if slowest > 0 else float("nan"),
        match_pairs=counted.pairs,
    )


def matcher_work(
    table: RoutingTable,
    placement: Placement,
    subscriptions: Corpus,
    posts: Corpus,
    *,
    seed: int = 0,
    chunk_posts: int = REPLAY_CHUNK_POSTS,
) -> np.ndarray:
    """``(N,)`` int64: each matcher's counted work (trie lookups + matches emitted) on
    ``posts`` routed by ``table`` to the tries of ``placement``: the cost in
    :attr:`ReplayResult.work_throughput`, deterministic and without timing."""
    if placement.n_matchers != table.n_matchers:
        raise InvalidArgumentError("placement and routing table have different N")
    counted = _count(
        table,
        placement,
        subscriptions,
        posts,
        seed=seed,
        chunk_posts=chunk_posts,
        keep_pairs=False,
        timed_posts=0,
    )
    work: np.ndarray = counted.operations + counted.matches
    return work


@dataclass
class _Counted:
    """Every matcher's posts matched once: the work counted, and each matcher's time."""

    matcher_posts: np.ndarray
    operations: np.ndarray
    matches: np.ndarray
    n_matches: int
    pairs: np.ndarray | None
    seconds: np.ndarray  # each matcher's best matching time of its timed posts (0: none)


def _count(
    table: RoutingTable,
    placement: Placement,
    subscriptions: Corpus,
    posts: Corpus,
    *,
    seed: int,
    chunk_posts: int,
    keep_pairs: bool,
    timed_posts: int,
    repeats: int = 1,
    min_sample_seconds: float = 0.0,
) -> _Counted:
    """Route ``posts``; then, one matcher at a time, build its trie and match its posts
    once (at most ``chunk_posts`` posts and about ``REPLAY_CHUNK_MATCHES`` listed matches
    at a time): without ``keep_pairs`` the matches are counted per trie node and only those
    of subscriptions placed on two or more matchers are listed (from a trie of those). The
    tries are kept for timing in rounds on their shares of the first ``timed_posts`` posts
    while they fit in ``TIMING_TRIE_BYTES``; a matcher beyond is
    timed at once and its trie let go. The matches a post makes at two matchers (a
    subscription placed on both) count once: their keys are kept until every matcher is
    done (all keys with ``keep_pairs``)."""
    if chunk_posts < 1:
        raise InvalidArgumentError(f"chunk_posts must be >= 1, got {chunk_posts}")
    n = table.n_matchers
    routed = route_corpus(table, posts, seed=seed)
    # each matcher's post rows, ascending
    post_ptr, post_rows = corpus_kernels.transpose_csr(routed.indptr, routed.matchers, n)
    sub_ptr, sub_rows = placement.subscriptions_by_matcher()
    dictionary = subscription_dictionary(subscriptions, posts)
    word_map = dictionary.map_vocabulary(posts.vocabulary.tolist())
    n_subs = placement.sub_ids.shape[0]
    # only a subscription placed on two or more matchers can match a post twice
    multicast = np.diff(placement.indptr) > 1
    operations = np.zeros(n, dtype=np.int64)
    emitted = np.zeros(n, dtype=np.int64)
    seconds = np.zeros(n, dtype=np.float64)
    repeatable: list[np.ndarray] = []  # (post row * n_subs + sub row) that may repeat
    rounds: list[_Timed] = []
    kept_bytes = 0
    for i in range(n):
        rows = sub_rows[sub_ptr[i] : sub_ptr[i + 1]].astype(np.int64)
        mine = post_rows[post_ptr[i] : post_ptr[i + 1]]
        if rows.size == 0 or mine.size == 0:
            continue
        trie = _trie(subscriptions, dictionary, rows)  # by placement row: a pair is an int64
        if keep_pairs:  # every match listed: the pairs, and the work they count
            for targets, matches in _listed(trie, posts, mine, word_map, chunk_posts):
                operations[i] += matches.operations
                emitted[i] += matches.sub_ids.shape[0]
                repeatable.append(np.repeat(targets, np.diff(matches.indptr)) * n_subs
                                  + matches.sub_ids)  # fmt: skip
        else:  # counted per trie node: 10M topic-based subscriptions make billions
            holding = trie.subscriptions_per_node()
            for first in range(0, mine.size, chunk_posts):
                targets = mine[first : first + chunk_posts].astype(np.int64)
                batch_ptr, batch_words = corpus_kernels.select_rows(
                    posts.indptr, posts.indices, targets
                )
                lookups, node_hits = trie.count_traversal(batch_ptr, batch_words, word_map)
                operations[i] += lookups
                emitted[i] += int(node_hits @ holding)
        timed = mine[: np.searchsorted(mine, timed_posts)].astype(np.int64)
        if timed.size:
            # timed as the matcher works: listing every match, a bounded chunk at a time
            per_chunk = _chunk(emitted[i] / mine.size, timed.size)
            batches = [
                corpus_kernels.select_rows(posts.indptr, posts.indices, timed[k : k + per_chunk])
                for k in range(0, timed.size, per_chunk)
            ]
            sample = _Timed(i, trie, batches, word_map)
            if kept_bytes + trie.nbytes <= TIMING_TRIE_BYTES:
                rounds.append(sample)  # timed below, in rounds over every kept matcher
                kept_bytes += trie.nbytes
            else:
                _time(repeats * [[sample]], min_sample_seconds)
                seconds[i] = sample.best
        del trie
        shared = rows[multicast[rows]]
        if not keep_pairs and shared.size:
            # the matches that may repeat at another matcher, listed from a trie of their
            # subscriptions alone, built once the matcher's own is let go
            listing = _trie(subscriptions, dictionary, shared)
            for targets, matches in _listed(listing, posts, mine, word_map, chunk_posts):
                repeatable.append(np.repeat(targets, np.diff(matches.indptr)) * n_subs
                                  + matches.sub_ids)  # fmt: skip
            del listing
    _time(repeats * [rounds], min_sample_seconds)
    for sample in rounds:
        seconds[sample.matcher] = sample.best
    del rounds
    keys = np.concatenate(repeatable) if repeatable else np.empty(0, dtype=np.int64)
    del repeatable
    # sorted in place and counted by their boundaries: no np.unique copy of every key
    keys.sort()
    opens = np.ones(keys.shape[0], dtype=bool)  # a key unlike the one before it
    np.not_equal(keys[1:], keys[:-1], out=opens[1:])
    n_matches = int(emitted.sum()) - int(keys.shape[0]) + int(np.count_nonzero(opens))
    pairs = None
    if keep_pairs:
        distinct = keys[opens]
        pairs = np.stack(
            [distinct // max(n_subs, 1), placement.sub_ids[distinct % max(n_subs, 1)]], 1
        )
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))].astype(np.int64)
    return _Counted(np.diff(post_ptr), operations, emitted, n_matches, pairs, seconds)


def _trie(subscriptions: Corpus, dictionary: WordDictionary, rows: np.ndarray) -> TrieMatcher:
    """A trie of the subscriptions ``rows``, their ids the rows: slots for its
    subscriptions, nodes for their distinct prefixes (``insert_many`` counts them first)."""
    indptr, words = encode_subscriptions(subscriptions, dictionary, rows)
    trie = TrieMatcher(capacity=int(rows.size) + 1)
    trie.insert_many(rows, indptr, words)
    return trie


def _listed(
    trie: TrieMatcher, posts: Corpus, rows: np.ndarray, word_map: np.ndarray, chunk_posts: int
) -> Iterator[tuple[np.ndarray, Matches]]:
    """``trie``'s matches of the posts ``rows``, a chunk at a time: at most ``chunk_posts``
    posts, and as many as keep a chunk's matches near ``REPLAY_CHUNK_MATCHES`` (the matches
    per post seen so far decide, from a small first chunk)."""
    first, size = 0, min(chunk_posts, FIRST_CHUNK_POSTS)
    while first < rows.size:
        targets = rows[first : first + size].astype(np.int64)
        batch_ptr, batch_words = corpus_kernels.select_rows(posts.indptr, posts.indices, targets)
        matches = trie.match(batch_ptr, batch_words, word_map)
        yield targets, matches
        first += targets.size
        size = _chunk(matches.sub_ids.shape[0] / targets.size, chunk_posts)


def _chunk(matches_per_post: float, most: int) -> int:
    """Posts per chunk: as many as keep its listed matches near ``REPLAY_CHUNK_MATCHES``,
    at most ``most``."""
    if matches_per_post <= 0:
        return most
    return max(1, min(most, int(REPLAY_CHUNK_MATCHES / matches_per_post)))


def _time(rounds: list[list[_Timed]], min_sample_seconds: float) -> None:
    """Run the timing rounds: each round samples every matcher in it once; a sample shorter
    than ``min_sample_seconds`` makes that matcher repeat its matching in later rounds."""
    for samples in rounds:
        for t in samples:
            started = time.perf_counter()
            for _ in range(t.loops):
                for batch_ptr, batch_words in t.batches:
                    t.trie.match(batch_ptr, batch_words, t.word_map)
            elapsed = time.perf_counter() - started
            t.best = min(t.best, elapsed / t.loops)
            if elapsed < min_sample_seconds:  # the next samples run long enough
                t.loops = math.ceil(t.loops * min_sample_seconds / max(elapsed, 1e-7))
