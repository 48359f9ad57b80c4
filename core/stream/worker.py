"""Routing and matching a micro-batch on a worker, with caches that outlive the batch.

Python workers are reused across Spark tasks, so the token -> word-id encoder and each
matcher's index are built once per routing version and brought up to date when the
snapshot's epoch changes. A cache keeps one routing version: a newer one replaces it.

The index is the access-predicate matcher (paper 000) by default: `s3tm bench matcher`
measured it faster than the trie in every scenario, and it builds in one sort, so an epoch
change rebuilds it. ``index_kind="trie"`` (the stream: ``S3TM_MATCHER_INDEX=trie``) keeps the
trie of paper 001, whose subscriptions are inserted and deleted in place per epoch.
"""

from __future__ import annotations

import time
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.corpus.arrays import take_rows
from core.errors import InvalidArgumentError
from core.matching.matches import Matches
from core.matching.trie import TrieMatcher
from core.routing.router import RoutedPosts, route_csr
from core.shedding.plan import ShedPlan
from core.shedding.shedder import cap_spread, exempt_posts, pair_utilities
from core.stream import _route_kernels
from core.stream.held import HeldMatcher
from core.stream.snapshot import BaseStore, MatcherSnapshot, MatcherSubs
from core.text.encoder import WordEncoder


def batch_seed(snapshot: MatcherSnapshot, first_post_id: str) -> int:
    """A per-batch seed for split-word versions, so equal positions in different batches
    do not always draw the same version."""
    return (snapshot.seed * 1_000_003 + zlib.crc32(first_post_id.encode())) & 0x7FFFFFFF


def line_seed(snapshot: MatcherSnapshot, first_line: bytes | None) -> int:
    """A per-block seed from a block's first raw line, for what is decided before the lines
    are parsed (the exempt sample, a drop level's ties)."""
    return batch_seed(snapshot, (first_line or b"").decode("utf-8", "replace"))


def routed_posts(
    snapshot: MatcherSnapshot, indptr: np.ndarray, word_ids: np.ndarray, *, seed: int = 0
) -> RoutedPosts:
    """Each encoded post's matchers under the snapshot's routing version."""
    return route_csr(
        indptr,
        word_ids,
        snapshot.part_start,
        snapshot.part_count,
        snapshot.part_matchers,
        snapshot.n_matchers,
        seed=seed,
    )


def route(
    snapshot: MatcherSnapshot, indptr: np.ndarray, word_ids: np.ndarray, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Route encoded posts: ``(pair_post int64, pair_matcher int32)``, one row per
    (post, matcher it is multicast to); posts with no subscription word get no row."""
    routed = routed_posts(snapshot, indptr, word_ids, seed=seed)
    pair_post = np.repeat(np.arange(routed.n_posts, dtype=np.int64), routed.spreads())
    return pair_post, routed.matchers


@dataclass(frozen=True)
class ShedBatch:
    """The routed pairs a route task forwards after shedding, and what was shed.

    Attributes:
        pair_post, pair_matcher: the kept pairs.
        post_level: per post, the plan's level if the post lost pairs (it may miss
            matches), else 0.
        sampled: per post, whether it counts toward the yield estimate: a seeded sample
            processed in full whatever the level (every post when the plan asks none).
        shed_by_matcher: ``(N,)`` pairs not forwarded to each matcher.
        spread_counts: posts per spread before shedding (the load per level follows).
        routed: every post's matchers before shedding (what the routing version does).
    """

    pair_post: np.ndarray
    pair_matcher: np.ndarray
    post_level: np.ndarray
    sampled: np.ndarray
    shed_by_matcher: np.ndarray
    spread_counts: np.ndarray
    routed: RoutedPosts

    @property
    def capped_posts(self) -> int:
        return int(np.count_nonzero(self.post_level))


def route_and_shed(
    snapshot: MatcherSnapshot,
    plan: ShedPlan,
    indptr: np.ndarray,
    word_ids: np.ndarray,
    *,
    seed: int = 0,
    sampled: np.ndarray | None = None,
) -> ShedBatch:
    """Route encoded posts, then cap each post's spread as ``plan`` says. ``sampled``: the
    plan's exempt sample when drawn already (over the raw lines, before a drop)."""
    n = snapshot.n_matchers
    routed = routed_posts(snapshot, indptr, word_ids, seed=seed)
    spreads = routed.spreads()
    pair_post = np.repeat(np.arange(routed.n_posts, dtype=np.int64), spreads)
    spread_counts = np.bincount(spreads, minlength=n + 1).astype(np.int64)
    # the unbiased sample the yield estimate learns from (every post when none is asked)
    if plan.exempt_fraction <= 0:
        sampled = np.ones(routed.n_posts, dtype=np.bool_)
    elif sampled is None:
        sampled = exempt_posts(routed.n_posts, plan.exempt_fraction, seed)
    elif sampled.shape != (routed.n_posts,):
        raise InvalidArgumentError("one sampled flag per post is required")
    if not plan.active:
        return ShedBatch(
            pair_post,
            routed.matchers,
            np.zeros(routed.n_posts, dtype=np.int8),
            sampled,
            np.zeros(n, dtype=np.int64),
            spread_counts,
            routed,
        )
    weight = None
    if plan.utility == "subscription":
        weight = snapshot.slot_subscriptions
    elif plan.utility == "yield":
        weight = plan.slot_weight
    if weight is not None and weight.shape[0] != snapshot.part_matchers.shape[0]:
        raise InvalidArgumentError("the shedding plan's weights do not fit the snapshot's slots")
    utility = pair_utilities(
        indptr,
        word_ids,
        snapshot.part_start,
        snapshot.part_count,
        snapshot.part_matchers,
        routed.indptr,
        routed.matchers,
        n,
        slot_weight=weight,
        seed=seed,
    )
    keep = cap_spread(
        routed.indptr,
        routed.matchers,
        utility,
        plan.max_spread,
        exempt=sampled if plan.exempt_fraction > 0 else None,
        seed=seed,
    )
    lost = np.bincount(pair_post[~keep], minlength=routed.n_posts) > 0
    post_level = np.where(lost, plan.level, 0).astype(np.int8)
    return ShedBatch(
        pair_post[keep],
        routed.matchers[keep],
        post_level,
        sampled,
        np.bincount(routed.matchers[~keep], minlength=n).astype(np.int64),
        spread_counts,
        routed,
    )


def gather_for_matchers(
    indptr: np.ndarray,
    word_ids: np.ndarray,
    rows: np.ndarray,
    matchers: np.ndarray,
    kept: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per routed pair ``(rows[i], matchers[i])``, the post's words matcher ``matchers[i]``
    uses (``kept``, from :func:`matcher_words`), as ``(offsets int32, values int32)``."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    matchers = np.ascontiguousarray(matchers, dtype=np.int64)
    if rows.shape != matchers.shape:
        raise InvalidArgumentError("rows and matchers must have one entry per pair")
    if rows.size and (rows.min() < 0 or rows.max() >= indptr.shape[0] - 1):
        raise InvalidArgumentError("rows must index the posts")
    if matchers.size and (matchers.min() < 0 or matchers.max() >= 8 * kept.shape[1]):
        raise InvalidArgumentError("matchers must lie within the kept words' matchers")
    if word_ids.size and word_ids.max() >= kept.shape[0]:
        raise InvalidArgumentError("word ids must lie within the kept words' dictionary")
    return _route_kernels.gather_kept(
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(word_ids, dtype=np.int32),
        rows,
        matchers,
        np.ascontiguousarray(kept, dtype=np.uint8),
    )


class _CachedTrie:
    def __init__(self) -> None:
        self.trie = TrieMatcher()
        self.epoch = -1
        self.subs: set[int] = set()


INDEX_KINDS = ("predicate", "trie")


class MatcherCache:
    """Per-matcher subscriptions and indexes, and the post encoder, of the current routing
    version. A matcher's subscriptions are its base (read from ``bases`` once per base,
    indexed once) and the snapshot's changes since it (indexed apart once per epoch,
    :class:`core.stream.held.HeldMatcher`): only the matchers this worker's tasks run are
    ever read."""

    def __init__(self, index_kind: str = "predicate", bases: BaseStore | None = None) -> None:
        if index_kind not in INDEX_KINDS:
            raise InvalidArgumentError(
                f"matcher index must be one of {', '.join(INDEX_KINDS)}, not {index_kind!r}"
            )
        self.index_kind = index_kind
        self.bases = bases
        self._version: tuple[str, int] | None = None
        self._held: dict[int, HeldMatcher] = {}
        self._tries: dict[int, _CachedTrie] = {}
        self._encoder: tuple[int, WordEncoder] | None = None
        self._identity = np.zeros(0, dtype=np.int32)
        self.rebuilds = 0  # indexes built over a whole base
        self.updates = 0  # indexes built over an epoch's additions
        self.base_reads = 0
        self.base_bytes = 0  # subscription bytes read from bases since the worker started
        # seconds spent taking subscription changes (a held matcher brought to a new epoch:
        # the additions since its base indexed, the cancelled marked; a base the changes
        # made, read and indexed; the encoder extended by new words): what changes cost the
        # tasks, apart from routing and matching
        self.change_seconds = 0.0
        # matchers held, least recently used first; past ``hold`` the oldest is let go
        self._recent: OrderedDict[int, None] = OrderedDict()
        self.hold: int | None = None
        self.evictions = 0

    def _use(self, snapshot: MatcherSnapshot) -> None:
        version = (snapshot.owner, snapshot.routing_version)
        if version != self._version:
            self._version = version
            self._held.clear()
            self._recent.clear()
            self._tries.clear()
            self._encoder = None

    def _check(self, snapshot: MatcherSnapshot, matcher: int) -> None:
        if not 0 <= matcher < snapshot.n_matchers:
            raise InvalidArgumentError(f"matcher must lie in [0, {snapshot.n_matchers})")
        self._use(snapshot)
        self._touch(matcher)

    def held(self, snapshot: MatcherSnapshot, matcher: int) -> HeldMatcher:
        """Matcher ``matcher`` at the snapshot's epoch (its base read once per base)."""
        self._check(snapshot, matcher)
        held = self._held.get(matcher)
        if held is None or held.base_key != snapshot.base_key:
            # a new base of the version this worker holds the matcher for: the changes since
            # the last base made it, so reading and indexing it is change work too
            rebased = held is not None
            started = time.perf_counter()
            if not snapshot.base_location:
                subs = MatcherSubs.empty()
            elif self.bases is None:
                raise InvalidArgumentError("this worker has no base store to read matchers from")
            else:
                subs = self.bases.read(snapshot.base_location, matcher)
                self.base_reads += 1
                self.base_bytes += subs.nbytes
            held = self._held[matcher] = HeldMatcher(snapshot.base_key, subs, rebased=rebased)
            if rebased:
                self.change_seconds += time.perf_counter() - started
        if held.epoch != snapshot.epoch:
            before = held.change_seconds
            held.use_changes(snapshot.epoch, snapshot.changes[matcher])
            self.change_seconds += held.change_seconds - before
        return held

    def subscriptions(self, snapshot: MatcherSnapshot, matcher: int) -> MatcherSubs:
        """Matcher ``matcher``'s subscriptions at the snapshot's epoch."""
        return self.held(snapshot, matcher).subscriptions()

    def _touch(self, matcher: int) -> None:
        self._recent[matcher] = None
        self._recent.move_to_end(matcher)
        while self.hold is not None and len(self._recent) > max(1, self.hold):
            gone, _ = self._recent.popitem(last=False)
            self._held.pop(gone, None)
            self._tries.pop(gone, None)
            self.evictions += 1

    @property
    def held_matchers(self) -> list[int]:
        """The matchers whose subscriptions this worker holds, least recently used first."""
        return list(self._recent)

    @property
    def held_bytes(self) -> int:
        """The subscription bytes this worker holds (bases and their changes)."""
        return sum(held.nbytes for held in self._held.values())

    def subscriber_codes(
        self, snapshot: MatcherSnapshot, matcher: int, sub_ids: np.ndarray
    ) -> np.ndarray:
        """The subscriber code of each of matcher ``matcher``'s subscriptions ``sub_ids``."""
        return self.held(snapshot, matcher).subscriber_codes(sub_ids)

    def encoder(self, snapshot: MatcherSnapshot) -> WordEncoder:
        self._use(snapshot)
        if self._encoder is None:
            self._encoder = (snapshot.epoch, WordEncoder(snapshot.words))
        elif self._encoder[0] != snapshot.epoch:
            # within a version the dictionary only grows, so the token cache is kept
            encoder = self._encoder[1]
            if encoder.n_words != snapshot.n_words:  # the changes brought new words
                started = time.perf_counter()
                encoder.extend(snapshot.words)
                self.change_seconds += time.perf_counter() - started
            self._encoder = (snapshot.epoch, encoder)
        return self._encoder[1]

    def matcher_words(self, snapshot: MatcherSnapshot) -> np.ndarray:
        """The words each matcher uses (the snapshot's ``kept_words``, made by the driver)."""
        kept: np.ndarray = snapshot.kept_words
        return kept

    def trie(self, snapshot: MatcherSnapshot, matcher: int) -> TrieMatcher:
        """Matcher ``matcher``'s trie at the snapshot's epoch."""
        self._check(snapshot, matcher)
        cached = self._tries.setdefault(matcher, _CachedTrie())
        if cached.epoch == snapshot.epoch:
            return cached.trie
        sub_ids, indptr, words = self.subscriptions(snapshot, matcher).csr()
        held = set(cached.subs)
        wanted = sub_ids.tolist()
        for sub in held.difference(wanted):
            cached.trie.delete(sub)
            cached.subs.discard(sub)
        started = time.perf_counter()
        rows = np.array([i for i, sub in enumerate(wanted) if sub not in held], dtype=np.int64)
        if rows.size:
            # snapshot sets are sorted (dictionary order), as the trie wants them
            new_indptr, new_words = take_rows(indptr, words, rows)
            cached.trie.insert_many(sub_ids[rows], new_indptr, new_words)
            cached.subs.update(sub_ids[rows].tolist())
        if held:
            self.updates += 1
            self.change_seconds += time.perf_counter() - started
        else:
            self.rebuilds += 1
        cached.epoch = snapshot.epoch
        return cached.trie

    def index(self, snapshot: MatcherSnapshot, matcher: int) -> TrieMatcher | HeldMatcher:
        """Matcher ``matcher``'s index at the snapshot's epoch (built on first use)."""
        if self.index_kind == "trie":
            return self.trie(snapshot, matcher)
        held = self.held(snapshot, matcher)
        base_built = held.base.index is None
        before, started = held.change_seconds, time.perf_counter()
        built = held.build()
        if base_built and held.rebased:  # the whole of a rebased matcher's index
            self.change_seconds += time.perf_counter() - started
        else:
            self.change_seconds += held.change_seconds - before
        self.rebuilds += int(base_built)
        self.updates += built - int(base_built)
        return held

    def prepare(self, snapshot: MatcherSnapshot, matchers: Sequence[int]) -> None:
        """Build the indexes of ``matchers`` now (ahead of the posts that meet them)."""
        for matcher in matchers:
            self.index(snapshot, int(matcher))

    def match(
        self,
        snapshot: MatcherSnapshot,
        matcher: int,
        offsets: np.ndarray,
        word_ids: np.ndarray,
    ) -> Matches:
        """Match posts (CSR of dictionary ids) against matcher ``matcher``'s subscriptions."""
        index = self.index(snapshot, matcher)
        if self._identity.shape[0] != snapshot.n_words:  # ids are the dictionary's own
            self._identity = np.arange(snapshot.n_words, dtype=np.int32)
        return index.match(offsets, word_ids, self._identity)
