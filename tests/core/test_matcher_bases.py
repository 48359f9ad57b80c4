"""Executors hold only their matchers: the stream's snapshot carries routing arrays and the
changes since a per-matcher base; a worker's matcher = its base + the changes, equal to the
driver's placement at every epoch; a base is rewritten only when the changes grow past a
share of it; a worker holding its share lets the others go."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from core.matching.predicate import AccessPredicateMatcher
from core.placement.live import LivePlacement
from core.routing.table import RoutingTable
from core.stream import snapshot as snapshots
from core.stream.dispatch import Subscribers, subscribers_of
from core.stream.snapshot import MatcherSubs, MemoryBases, SnapshotMaker
from core.stream.worker import MatcherCache
from tests.hypothesis_tiers import examples

WORDS = [f"w{i}" for i in range(14)]
N = 5


def _table() -> RoutingTable:
    words = [*WORDS[:12], "w0", "w0"]  # w0 split over three matchers; w12, w13 unmapped
    parts = [0] * 12 + [1, 2]
    matchers = [i % N for i in range(12)] + [1, 2]
    return RoutingTable.from_rows(words, parts, matchers, N)


def _placed(live: LivePlacement, matcher: int) -> set[tuple[int, tuple[int, ...]]]:
    sub_ids, indptr, words = live.by_matcher()[matcher]
    return {
        (int(s), tuple(words[indptr[i] : indptr[i + 1]].tolist()))
        for i, s in enumerate(sub_ids.tolist())
    }


def _held(subs: MatcherSubs) -> set[tuple[int, tuple[int, ...]]]:
    return {
        (int(s), tuple(subs.word_ids[subs.indptr[i] : subs.indptr[i + 1]].tolist()))
        for i, s in enumerate(subs.sub_ids.tolist())
    }


word_set = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True).map(sorted)


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(word_set, min_size=1, max_size=40),
    st.lists(
        st.tuples(st.lists(word_set, max_size=6), st.lists(st.integers(0, 200), max_size=6)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0.0, 0.3, 10.0]),
)
def test_a_worker_matcher_is_its_base_plus_the_changes_at_every_epoch(
    first, rounds, fraction
) -> None:
    bases = MemoryBases()
    maker = SnapshotMaker(bases, "mem://bases", owner="t")
    live = LivePlacement(_table())
    owner_of: dict[int, str] = {}

    def add(sets: list[list[str]]) -> None:
        start = max(owner_of, default=-1) + 1
        ids = list(range(start, start + len(sets)))
        live.place(ids, sets)
        for s in ids:
            owner_of[s] = f"user{s % 3}"
        maker.codes.assign(ids, [owner_of[s] for s in ids])
        maker.added(ids)

    add(first)
    cache = MatcherCache("predicate", bases)
    old_fraction, old_min = snapshots.REBASE_FRACTION, snapshots.REBASE_MIN_CHANGES
    snapshots.REBASE_FRACTION, snapshots.REBASE_MIN_CHANGES = fraction, 0
    try:
        for epoch, (more, cancel) in enumerate(rounds, start=1):
            snapshot = maker.freeze(live, 3, epoch)
            rng = np.random.default_rng(epoch)
            posts = [rng.choice(snapshot.n_words, size=5) for _ in range(20)]
            post_words = np.concatenate([np.unique(p) for p in posts]).astype(np.int32)
            post_indptr = np.concatenate(
                [[0], np.cumsum([np.unique(p).size for p in posts])]
            ).astype(np.int64)
            assert snapshot.base_location  # a base from the first epoch on
            pending = sum(len(c.added) + c.removed.size for c in snapshot.changes)
            if fraction == 0.0:  # any change is past a share of none: a new base, no changes
                assert pending == 0
            taken, reads = cache.change_seconds, cache.base_reads
            for m in range(N):
                subs = cache.subscriptions(snapshot, m)
                assert _held(subs) == _placed(live, m)
                names = [snapshot.subscriber_names[c] for c in subs.subscriber_codes]
                assert names == [owner_of[int(s)] for s in subs.sub_ids]
                # the base's index less the cancelled, plus the additions' index, matches as
                # a fresh index over the placement does
                got = cache.match(snapshot, m, post_indptr, post_words)
                fresh = AccessPredicateMatcher(*live.by_matcher()[m]).match(
                    post_indptr, post_words, np.arange(snapshot.n_words, dtype=np.int32)
                )
                assert [sorted(x) for x in got.as_sets()] == [sorted(x) for x in fresh.as_sets()]
                # the codes a match task sends for matched ids are those subscriptions'
                some = subs.sub_ids[::2]
                codes = cache.subscriber_codes(snapshot, m, some)
                assert [snapshot.subscriber_names[c] for c in codes] == [
                    owner_of[int(s)] for s in some
                ]
            # taking an epoch's changes of a base the worker holds is timed as change work
            if pending and cache.base_reads == reads:
                assert cache.change_seconds > taken
            # ... and so is reading and indexing a base the changes made, for a matcher the
            # worker held at an older base of the version
            if epoch > 1 and cache.base_reads > reads:
                assert cache.change_seconds > taken
            gone = [s for s in cancel if s in live]
            gone = list(dict.fromkeys(gone))
            live.remove(gone)
            maker.removed(gone)
            add(more)
    finally:
        snapshots.REBASE_FRACTION, snapshots.REBASE_MIN_CHANGES = old_fraction, old_min
    # a base is read once per matcher per epoch that changed it, never per batch, and a
    # worker holds one copy of a matcher (the base is let go once changes are applied)
    assert bases.reads == cache.base_reads
    assert N * len(maker.written) <= cache.base_reads <= N * len(rounds)


def _pending(snapshot) -> int:
    return sum(len(c.added) + c.removed.size for c in snapshot.changes)


def test_changes_ship_as_changes_until_they_pass_a_tenth_of_the_base() -> None:
    bases = MemoryBases()
    maker = SnapshotMaker(bases, "mem://bases")
    live = LivePlacement(_table())
    rng = np.random.default_rng(4)
    sets = [sorted(rng.choice(WORDS, size=3, replace=False).tolist()) for _ in range(20_000)]
    ids = list(range(len(sets)))
    live.place(ids, sets)
    maker.codes.assign(ids, ["a"] * len(ids))
    maker.added(ids)
    first = maker.freeze(live, 1, 1)
    base_bytes = sum(bases.read(first.base_location, m).nbytes for m in range(N))
    assert _pending(first) == 0 and len(maker.written) == 1
    # 1,000 changes between two batches: shipped as changes, a small part of the base
    more = list(range(20_000, 20_500))
    live.place(more, sets[:500])
    maker.codes.assign(more, ["b"] * 500)
    maker.added(more)
    live.remove(list(range(500)))
    maker.removed(list(range(500)))
    second = maker.freeze(live, 1, 2)
    assert second.base_epoch == 1 and len(maker.written) == 1
    assert sum(len(c.added) for c in second.changes) >= 500  # the multicast ones once each
    assert 0 < second.changes_nbytes < 0.1 * base_bytes
    # past a tenth of the base's subscriptions: a new base, no changes
    rest = list(range(500, 2_600))
    live.remove(rest)
    maker.removed(rest)
    third = maker.freeze(live, 1, 3)
    assert third.base_epoch == 3 and _pending(third) == 0 and len(maker.written) == 2


def test_a_worker_holding_its_share_lets_the_least_recent_matchers_go() -> None:
    bases = MemoryBases()
    maker = SnapshotMaker(bases, "mem://bases")
    live = LivePlacement(_table())
    sets = [[w] for w in WORDS] * 3
    ids = list(range(len(sets)))
    live.place(ids, sets)
    maker.codes.assign(ids, ["a"] * len(ids))
    maker.added(ids)
    snapshot = maker.freeze(live, 1, 1)
    cache = MatcherCache("predicate", bases)
    cache.hold = 2
    for m in (0, 1, 2, 1, 3):
        cache.index(snapshot, m)
    assert cache.held_matchers == [1, 3]
    held_bases = sum(bases.read(snapshot.base_location, m).nbytes for m in (1, 3))
    assert cache.held_bytes == held_bases + 2 * MatcherSubs.empty().nbytes  # no changes
    assert cache.evictions == 2  # 0 when 2 came, 2 when 3 came
    cache.hold = None
    for m in range(N):  # a matcher let go is read again when met again, and answers the same
        sub_ids, indptr, words = live.by_matcher()[m]
        got = cache.match(snapshot, m, indptr, words)
        assert set(got.sub_ids.tolist()) == set(sub_ids.tolist())


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["b", "a", "c"])), max_size=30))
def test_subscribers_from_match_codes_rank_as_from_the_registry(pairs) -> None:
    owner = dict(pairs)  # one subscriber per id
    reference = Subscribers.of(owner)
    names = list(dict.fromkeys(owner.values()))  # codes in order of arrival, not by name
    ids = np.array([s for s, _ in pairs], dtype=np.int64)
    codes = np.array([names.index(owner[int(s)]) for s in ids], dtype=np.int32)
    got = Subscribers.of_codes(ids, codes, names)
    assert got.sub_of_rank.tolist() == reference.sub_of_rank.tolist()
    assert [names[c] for c in got.owner_of_rank] == [
        reference.names[c].as_py() for c in reference.owner_of_rank
    ]
    assert got.ranks(ids).tolist() == reference.ranks(ids).tolist()
    # and from a matched table's lists
    matched = pa.table(
        {
            "post_id": ["p"] * len(ids),
            "matcher_id": pa.array(np.zeros(len(ids), dtype=np.int32)),
            "shedding_level": pa.array(np.zeros(len(ids), dtype=np.int32)),
            "sub_ids": pa.array([[int(s)] for s in ids], pa.list_(pa.int64())),
            "subscriber_codes": pa.array([[int(c)] for c in codes], pa.list_(pa.int32())),
        }
    )
    assert subscribers_of(matched, names).sub_of_rank.tolist() == got.sub_of_rank.tolist()
