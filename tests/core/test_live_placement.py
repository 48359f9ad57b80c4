"""Live (incremental) LASP placement and the streaming matcher's worker-side pieces."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus.arrays import corpus_from_word_lists, take_rows
from core.errors import InvalidArgumentError
from core.matching.trie import TrieMatcher
from core.placement import _lasp_kernels as K
from core.placement.lasp import place_subscriptions
from core.placement.live import LivePlacement
from core.routing.table import RoutingTable
from core.shedding.yield_stats import YieldObservation, attribution_slots, observe
from core.stream.matcher_yield import matcher_yield
from core.stream.snapshot import snapshot_of
from core.stream.worker import (
    INDEX_KINDS,
    MatcherCache,
    gather_for_matchers,
    route,
)
from core.text import normalize
from core.text.encoder import WordEncoder
from tests.hypothesis_tiers import examples

WORDS = [f"w{i}" for i in range(12)]


def _table(n: int = 4) -> RoutingTable:
    # w0 is split in 3 versions, w1 in 2; the rest one matcher each; w11 stays unmapped
    words, parts, matchers = [], [], []
    for i, word in enumerate(WORDS[:11]):
        k = 3 if i == 0 else 2 if i == 1 else 1
        for part in range(k):
            words.append(word)
            parts.append(part)
            matchers.append((i + part) % n)
    return RoutingTable.from_rows(words, parts, matchers, n)


word_sets = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True).map(sorted),
    min_size=1,
    max_size=30,
)


@settings(max_examples=examples(60), deadline=None)
@given(word_sets, st.integers(1, 5))
def test_live_lasp_in_chunks_equals_one_batch_placement(sets, chunk) -> None:
    table = _table()
    batch = place_subscriptions(table, corpus_from_word_lists(sets))
    live = LivePlacement(table)
    for start in range(0, len(sets), chunk):
        ids = list(range(start, min(start + chunk, len(sets))))
        live.place(ids, [sets[i] for i in ids])
    for s in range(len(sets)):
        expected = sorted(batch.matchers[batch.indptr[s] : batch.indptr[s + 1]].tolist())
        assert sorted(live.get(s).matchers.tolist()) == expected


def _direct_unique(live: LivePlacement) -> list[int]:
    held: list[set[int]] = [set() for _ in range(live.n_matchers)]
    for sub in live.sub_ids:
        placed = live.get(sub)
        for m in placed.matchers.tolist():
            held[m].update(placed.word_ids.tolist())
    return [len(h) for h in held]


@settings(max_examples=examples(60), deadline=None)
@given(word_sets, st.data())
def test_unique_words_follow_adds_and_removals(sets, data) -> None:
    live = LivePlacement(_table())
    live.place(list(range(len(sets))), sets)
    gone = data.draw(st.lists(st.sampled_from(range(len(sets))), unique=True))
    live.remove(gone)
    assert live.unique_words().tolist() == _direct_unique(live)
    live.place([100 + g for g in gone], [sets[g] for g in gone])
    assert live.unique_words().tolist() == _direct_unique(live)


def _covers_by_enumeration(live: LivePlacement, words: list[int], matchers: set[int]) -> bool:
    """Every choice of a version per word (a post holding exactly these words) reaches one
    of ``matchers``."""
    starts, counts, parts = live.word_versions()
    options = [parts[starts[w] : starts[w] + counts[w]].tolist() for w in words]
    return all(set(choice) & matchers for choice in itertools.product(*options))


@settings(max_examples=examples(80), deadline=None)
@given(word_sets, st.data())
def test_covering_equals_enumeration_of_version_choices(sets, data) -> None:
    live = LivePlacement(_table())
    live.place(list(range(len(sets))), sets)  # registers the words
    for s in range(len(sets)):
        ids = live.get(s).word_ids
        chosen = data.draw(st.sets(st.integers(0, 3), min_size=1))
        placed = np.array(sorted(chosen), dtype=np.int32)
        starts, counts, parts = live.word_versions()
        got = K.covering(
            np.array([0, ids.shape[0]], dtype=np.int64),
            ids,
            np.array([0, placed.shape[0]], dtype=np.int64),
            placed,
            starts,
            counts,
            parts,
            4,
        )[0]
        assert got == _covers_by_enumeration(live, ids.tolist(), set(chosen))
        # and LASP's own placements always cover
        assert _covers_by_enumeration(live, ids.tolist(), set(live.get(s).matchers.tolist()))


def test_adopt_keeps_covering_rows_and_replaces_the_rest() -> None:
    live = LivePlacement(_table())
    w2_owner = 2  # w2 is unsplit on matcher 2
    replaced = live.adopt([1, 2], [["w2", "w5"], ["w2"]], [[w2_owner], [0]])
    assert replaced == [2]
    assert live.get(1).matchers.tolist() == [w2_owner]
    assert live.get(2).matchers.tolist() == [w2_owner]
    with pytest.raises(InvalidArgumentError):
        live.adopt([1], [["w2"]], [[0]])  # already placed
    with pytest.raises(InvalidArgumentError):
        live.remove([99])


def test_unmapped_words_are_placed_on_their_hash_matcher() -> None:
    from core.routing.hashing import hash_matcher

    live = LivePlacement(_table())
    live.place([1], [["w11"]])
    assert live.get(1).matchers.tolist() == [hash_matcher("w11", 4)]


def _posts(texts: list[str], snapshot) -> tuple[np.ndarray, np.ndarray]:
    return WordEncoder(snapshot.words).encode(texts)


@settings(max_examples=examples(40), deadline=None)
@given(
    word_sets, st.lists(st.lists(st.sampled_from([*WORDS, "the", "x9"]), max_size=8), max_size=25)
)
def test_routed_and_matched_posts_equal_brute_force(sets, posts) -> None:
    for kind in INDEX_KINDS:
        _routed_and_matched_equal_brute_force(sets, posts, kind)


def _counts(observation: YieldObservation) -> tuple[list, list, list]:
    return (
        observation.slots.tolist(),
        observation.matches.tolist(),
        observation.posts.tolist(),
    )


def _observe_all(snapshot, live, matcher, offsets, values, sampled, matches) -> YieldObservation:
    """The plain reference: every match credited to its slot, then the sample counted."""
    sub_ids, indptr, words = live.by_matcher()[matcher]
    credit = attribution_slots(
        indptr, words, matcher, snapshot.part_start, snapshot.part_count, snapshot.part_matchers
    )
    slot_of_sub = dict(zip(sub_ids.tolist(), credit.tolist(), strict=True))
    match_slots = np.array([slot_of_sub[s] for s in matches.sub_ids.tolist()], dtype=np.int64)
    return observe(
        offsets,
        values,
        sampled,
        matches.indptr,
        match_slots,
        matcher,
        snapshot.part_start,
        snapshot.part_count,
        snapshot.part_matchers,
    )


def _routed_and_matched_equal_brute_force(sets, posts, kind: str) -> None:
    live = LivePlacement(_table())
    live.place(list(range(len(sets))), sets)
    snapshot = snapshot_of(live, 1, 1, seed=3)
    texts = [" ".join(p).upper() + " !" for p in posts]
    indptr, ids = _posts(texts, snapshot)
    # the encoder gives normalize()'s words, restricted to the dictionary
    for p, text in enumerate(texts):
        got = {snapshot.words[i] for i in ids[indptr[p] : indptr[p + 1]]}
        assert got == set(normalize(text)) & set(snapshot.words)
    pair_post, pair_matcher = route(snapshot, indptr, ids, seed=5)
    cache = MatcherCache(kind)
    expected = {
        (p, s)
        for p, text in enumerate(texts)
        for s, words in enumerate(sets)
        if set(words) <= set(normalize(text))
    }
    # each matcher sent a post's words, and only the words it uses (the route's payloads):
    # the same matches and the same yield counts
    observed = []
    for cut in (False, True):
        found = set()
        counts = []
        for m in range(snapshot.n_matchers):
            rows = np.flatnonzero(pair_matcher == m)
            if cut:
                offsets, values = gather_for_matchers(
                    indptr, ids, pair_post[rows], pair_matcher[rows], cache.matcher_words(snapshot)
                )
            else:  # every word of the post
                offsets, values = take_rows(indptr, ids, pair_post[rows])
            matches = cache.match(snapshot, m, offsets, values)
            sampled = np.ones(rows.shape[0], dtype=np.bool_)
            counts.append(
                matcher_yield(
                    cache.held(snapshot, m), snapshot, m, offsets, values, sampled, matches
                )
            )
            # a sample of the posts: the counts of every post's matches, filtered
            some = np.random.default_rng(m).random(rows.shape[0]) < 0.4
            assert _counts(
                matcher_yield(cache.held(snapshot, m), snapshot, m, offsets, values, some, matches)
            ) == (_counts(_observe_all(snapshot, live, m, offsets, values, some, matches)))
            for r in range(rows.shape[0]):
                for sub in matches.sub_ids[matches.indptr[r] : matches.indptr[r + 1]].tolist():
                    found.add((int(pair_post[rows[r]]), sub))
        assert found == expected
        merged = YieldObservation.merge(counts)
        observed.append((merged.slots.tolist(), merged.matches.tolist(), merged.posts.tolist()))
    assert observed[0] == observed[1]


@settings(max_examples=examples(40), deadline=None)
@given(word_sets, st.sampled_from([3, 4, 11]))
def test_matcher_words_are_the_placed_words_and_the_versions(sets, n) -> None:
    live = LivePlacement(_table(n))
    live.place(list(range(len(sets))), sets)
    snapshot = snapshot_of(live, 1, 1)
    kept = snapshot.kept_words
    assert kept.shape == (snapshot.n_words, (n + 7) // 8)
    for m in range(n):
        placed = {int(w) for w in live.by_matcher()[m][2]}
        versions = {
            w
            for w in range(snapshot.n_words)
            if m
            in snapshot.part_matchers[
                snapshot.part_start[w] : snapshot.part_start[w] + snapshot.part_count[w]
            ].tolist()
        }
        bits = {w for w in range(snapshot.n_words) if kept[w, m // 8] & (1 << (m % 8))}
        assert bits == placed | versions


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_gather_for_matchers_equals_the_obvious_filter(data) -> None:
    n_words = data.draw(st.integers(1, 20))
    n_matchers = data.draw(st.integers(1, 20))
    posts = data.draw(
        st.lists(st.lists(st.integers(0, n_words - 1), max_size=8), min_size=1, max_size=10)
    )
    indptr = np.zeros(len(posts) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in posts])
    word_ids = np.array([w for p in posts for w in p], dtype=np.int32)
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, len(posts) - 1), st.integers(0, n_matchers - 1)))
    )
    rows = np.array([p for p, _ in pairs], dtype=np.int64)
    matchers = np.array([m for _, m in pairs], dtype=np.int64)
    uses = data.draw(
        st.lists(
            st.lists(st.booleans(), min_size=n_matchers, max_size=n_matchers),
            min_size=n_words,
            max_size=n_words,
        )
    )
    kept = np.zeros((n_words, (n_matchers + 7) // 8), dtype=np.uint8)
    for w, row in enumerate(uses):
        for m, used in enumerate(row):
            if used:
                kept[w, m // 8] |= 1 << (m % 8)
    offsets, values = gather_for_matchers(indptr, word_ids, rows, matchers, kept)
    assert offsets.dtype == np.int32 and values.dtype == np.int32
    got = [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(pairs))]
    assert got == [[w for w in posts[p] if uses[w][m]] for p, m in pairs]


def test_gather_for_matchers_refuses_what_does_not_fit() -> None:
    indptr, word_ids = np.array([0, 2], dtype=np.int64), np.array([0, 3], dtype=np.int32)
    kept = np.ones((4, 1), dtype=np.uint8)
    with pytest.raises(InvalidArgumentError, match="one entry per pair"):
        gather_for_matchers(indptr, word_ids, np.array([0]), np.array([0, 0]), kept)
    with pytest.raises(InvalidArgumentError, match="rows"):
        gather_for_matchers(indptr, word_ids, np.array([1]), np.array([0]), kept)
    with pytest.raises(InvalidArgumentError, match="matchers"):
        gather_for_matchers(indptr, word_ids, np.array([0]), np.array([8]), kept)
    with pytest.raises(InvalidArgumentError, match="word ids"):
        gather_for_matchers(indptr, word_ids, np.array([0]), np.array([0]), kept[:3])


@settings(max_examples=examples(30), deadline=None)
@given(word_sets, st.data())
def test_cached_trie_updated_per_epoch_equals_a_fresh_trie(sets, data) -> None:
    live = LivePlacement(_table())
    live.place(list(range(len(sets))), sets)
    cache = MatcherCache()
    epoch = 1
    held = [0] * 4  # subscriptions each matcher's trie held before this epoch
    expected_updates = 0
    for _ in range(3):
        snapshot = snapshot_of(live, 7, epoch)
        for m in range(4):
            trie = cache.trie(snapshot, m)
            sub_ids, _, _ = live.by_matcher()[m]
            # a trie that held subscriptions is updated, an empty one built whole
            expected_updates += held[m] > 0
            held[m] = len(sub_ids)
            assert {s for s in sub_ids.tolist()} == {s for s in live.sub_ids if s in trie}
            fresh = TrieMatcher()
            fresh.insert_many(*live.by_matcher()[m])
            posts = [data.draw(st.sets(st.integers(0, snapshot.n_words - 1), max_size=6))]
            indptr = np.array([0, len(posts[0])], dtype=np.int64)
            words = np.array(sorted(posts[0]), dtype=np.int32)
            assert sorted(trie.match(indptr, words).sub_ids.tolist()) == sorted(
                fresh.match(indptr, words).sub_ids.tolist()
            )
        gone = data.draw(st.lists(st.sampled_from(live.sub_ids.tolist()), unique=True, max_size=5))
        live.remove(gone)
        live.place([1000 * epoch + g for g in gone], [["w3", "w11"]] * len(gone))
        epoch += 1
    assert (cache.updates, cache.rebuilds) == (expected_updates, 12 - expected_updates)


@settings(max_examples=examples(30), deadline=None)
@given(word_sets, st.data())
def test_the_predicate_index_follows_every_epoch(sets, data) -> None:
    """The default index is rebuilt when the epoch moves and answers as a fresh trie does;
    ``prepare`` builds it ahead, so matching then builds nothing."""
    live = LivePlacement(_table())
    live.place(list(range(len(sets))), sets)
    cache = MatcherCache("predicate")
    epoch = 1
    for _ in range(3):
        snapshot = snapshot_of(live, 7, epoch)
        cache.prepare(snapshot, range(snapshot.n_matchers))
        built = cache.rebuilds + cache.updates
        for m in range(snapshot.n_matchers):
            fresh = TrieMatcher()
            fresh.insert_many(*live.by_matcher()[m])
            post = data.draw(st.sets(st.integers(0, snapshot.n_words - 1), max_size=6))
            indptr = np.array([0, len(post)], dtype=np.int64)
            words = np.array(sorted(post), dtype=np.int32)
            assert sorted(cache.match(snapshot, m, indptr, words).sub_ids.tolist()) == sorted(
                fresh.match(indptr, words).sub_ids.tolist()
            )
        assert cache.rebuilds + cache.updates == built  # nothing built while matching
        gone = data.draw(st.lists(st.sampled_from(live.sub_ids.tolist()), unique=True, max_size=5))
        live.remove(gone)
        live.place([1000 * epoch + g for g in gone], [["w3", "w11"]] * len(gone))
        epoch += 1
    assert cache.rebuilds == snapshot.n_matchers


def test_an_unknown_index_kind_is_refused(monkeypatch) -> None:
    with pytest.raises(InvalidArgumentError, match="matcher index must be one of"):
        MatcherCache("btree")
    assert MatcherCache().index_kind == "predicate"
    assert MatcherCache("trie").index_kind == "trie"


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_array_placement_equals_the_object_per_subscription_reference(data) -> None:
    """The arrays the driver keeps (core.placement.rows) and their numba LASP against the
    slow obvious version written from the paper's rules (tests/core/
    live_placement_reference.py: no kernel, every count recounted): the same sequence of
    adopt, place and remove leaves the same matchers, word counts, per-matcher subscriptions
    and lookups, through compactions too."""
    from tests.core.live_placement_reference import ReferenceLivePlacement

    table = _table(4)
    live, reference = LivePlacement(table), ReferenceLivePlacement(table)
    next_id = 0
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        action = data.draw(st.sampled_from(["place", "adopt", "remove"]), label="action")
        if action == "remove" and len(live):
            ids = data.draw(
                st.lists(st.sampled_from(live.sub_ids.tolist()), unique=True, min_size=1),
                label="removed",
            )
            live.remove(ids)
            reference.remove(ids)
            continue
        sets = data.draw(word_sets, label="sets")
        ids = list(range(next_id, next_id + len(sets)))
        next_id += len(sets)
        if action == "adopt":
            stored = [
                data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=2), label="stored")
                for _ in sets
            ]
            assert live.adopt(ids, sets, stored) == reference.adopt(ids, sets, stored)
        else:
            placed = live.place(ids, sets)
            expected = reference.place(ids, sets)
            assert placed.keys() == expected.keys()
            assert all(np.array_equal(placed[s], expected[s]) for s in ids)
    assert len(live) == len(reference)
    assert live.sub_ids.tolist() == reference.sub_ids
    assert np.array_equal(live.unique_words(), reference.unique_words())
    assert np.array_equal(live.slot_subscriptions(), reference.slot_subscriptions())
    for got, want in zip(live.by_matcher(), reference.by_matcher(), strict=True):
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    for sub in reference.sub_ids:
        assert sub in live
        assert np.array_equal(live.get(sub).matchers, reference.get(sub).matchers)
        assert np.array_equal(live.get(sub).word_ids, reference.get(sub).word_ids)
    assert next_id not in live and -1 not in live


def test_rows_compact_and_refuse_what_is_not_dense() -> None:
    from core.placement.rows import PlacedRows

    rows = PlacedRows()
    n = 5000
    one = np.arange(n + 1, dtype=np.int64)
    rows.append(np.arange(n), one, np.arange(n, dtype=np.int32), one, np.zeros(n, np.int32))
    rows.remove(np.arange(0, n, 2))
    rows.remove(np.arange(1, n - 10, 2))
    rows.compact_if_sparse()  # 4,990 dead of 5,000: compacted
    assert len(rows) == 5 and rows.sub_ids().tolist() == list(range(n - 9, n, 2))
    assert [r[0].tolist() for r in rows.by_matcher(2)] == [list(range(n - 9, n, 2)), []]
    assert rows.words(int(rows.rows_of(np.array([n - 1]))[0])).tolist() == [n - 1]
    with pytest.raises(InvalidArgumentError, match="not placed"):
        rows.remove(np.array([0]))
    with pytest.raises(InvalidArgumentError, match="dense"):
        rows.append(
            np.array([10**12]),
            np.array([0, 1]),
            np.zeros(1, np.int32),
            np.array([0, 1]),
            np.zeros(1, np.int32),
        )


@settings(max_examples=examples(40), deadline=None)
@given(word_sets, st.data())
def test_columns_in_place_the_same_as_lists(sets, data) -> None:
    """adopt_arrays / place_arrays (a list<string> column, stored matchers as CSR) leave the
    placement exactly as adopt / place with Python lists do (dictionary ids included)."""
    import pyarrow as pa

    table = _table()
    n = len(sets)
    stored = [
        sorted(set(data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))))
        for _ in range(n)
    ]
    has = [data.draw(st.booleans()) for _ in range(n)]
    lists, columns = LivePlacement(table), LivePlacement(table)
    adopt = [s for s in range(n) if has[s]]
    fresh = [s for s in range(n) if not has[s]]
    redo = lists.adopt(adopt, [sets[s] for s in adopt], [stored[s] for s in adopt])
    lists.place(fresh, [sets[s] for s in fresh])
    indptr = np.concatenate([[0], np.cumsum([len(stored[s]) for s in adopt])]).astype(np.int64)
    placed = np.array([m for s in adopt for m in stored[s]], dtype=np.int32)
    redo_columns = columns.adopt_arrays(
        np.array(adopt, dtype=np.int64),
        pa.array([[*sets[s], sets[s][0]] for s in adopt], pa.list_(pa.string())),  # a repeat
        indptr,
        placed,
    )
    columns.place_arrays(
        np.array(fresh, dtype=np.int64), pa.array([sets[s] for s in fresh], pa.list_(pa.string()))
    )
    assert redo_columns.tolist() == redo
    assert [columns.dictionary.word(i) for i in range(len(columns.dictionary))] == [
        lists.dictionary.word(i) for i in range(len(lists.dictionary))
    ]
    for sub in range(n):
        a, b = lists.get(sub), columns.get(sub)
        assert a.word_ids.tolist() == b.word_ids.tolist()
        assert a.matchers.tolist() == b.matchers.tolist()
    assert lists.unique_words().tolist() == columns.unique_words().tolist()
