"""Trie and counting matchers against brute-force set containment."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.matching.counting import CountingMatcher
from core.matching.dictionary import WordDictionary
from core.matching.trie import TrieMatcher, distinct_prefixes
from tests.core.references import brute_force, csr_of_sets
from tests.hypothesis_tiers import examples

word_sets = st.lists(st.sets(st.integers(0, 14), min_size=1, max_size=5), min_size=1, max_size=40)
post_sets = st.lists(st.sets(st.integers(0, 20), max_size=9), min_size=1, max_size=30)


@settings(max_examples=examples(150), deadline=None)
@given(word_sets, post_sets)
def test_trie_and_counting_equal_brute_force(subs: list[set[int]], posts: list[set[int]]) -> None:
    ids = np.arange(100, 100 + len(subs), dtype=np.int64)
    s_ptr, s_words = csr_of_sets(subs)
    p_ptr, p_words = csr_of_sets(posts, shuffle=True)  # post order must not matter
    word_map = np.arange(21, dtype=np.int32)
    expected = brute_force({int(i): s for i, s in zip(ids, subs, strict=True)}, posts)
    trie = TrieMatcher(capacity=4)  # tiny capacity: exercises growth
    trie.insert_many(ids, s_ptr, s_words)
    got = trie.match(p_ptr, p_words, word_map)
    assert got.as_sets() == expected
    assert got.n_matches == sum(len(e) for e in expected)  # no duplicates
    counting = CountingMatcher(ids, s_ptr, s_words).match(p_ptr, p_words, word_map)
    assert counting.as_sets() == expected
    # counting without listing: per id, the posts it matches (brute force's count)
    counts = trie.count_matches(p_ptr, p_words, 100 + len(subs), word_map)
    want = np.zeros(100 + len(subs), dtype=np.int64)
    for matched in expected:
        for sub_id in matched:
            want[sub_id] += 1
    assert counts.tolist() == want.tolist()


@settings(max_examples=examples(150), deadline=None)
@given(word_sets)
def test_distinct_prefixes_count_the_nodes_of_a_trie_of_the_sets(subs: list[set[int]]) -> None:
    """Against the obvious count: the set of every sorted set's prefixes."""
    prefixes = {tuple(sorted(s)[:k]) for s in subs for k in range(1, len(s) + 1)}
    assert distinct_prefixes(*csr_of_sets(subs)) == len(prefixes)
    trie = TrieMatcher(capacity=2)
    trie.insert_many(np.arange(len(subs)), *csr_of_sets(subs))
    assert trie.n_nodes == len(prefixes)


def test_a_bulk_load_holds_its_distinct_paths_not_its_words() -> None:
    """20k subscriptions of 9 words over 10 distinct sets: 90 nodes, not 180k."""
    rng = np.random.default_rng(3)
    sets = [set(rng.choice(1000, size=9, replace=False).tolist()) for _ in range(10)]
    subs = [sets[i % 10] for i in range(20_000)]
    trie = TrieMatcher()  # sized by the load
    trie.insert_many(np.arange(len(subs)), *csr_of_sets(subs))
    assert trie.n_nodes == distinct_prefixes(*csr_of_sets(sets)) == 90
    by_words = len(subs) * 9 * 6 * 8  # what node records sized by words would hold
    slots = 3 * 8 * (len(subs) + 1)  # every subscription's slot, which any trie holds
    assert trie.nbytes < slots + by_words // 20


@settings(max_examples=examples(100), deadline=None)
@given(word_sets, post_sets, st.data())
def test_trie_stays_exact_under_deletes_and_reinserts(
    subs: list[set[int]], posts: list[set[int]], data: st.DataObject
) -> None:
    trie = TrieMatcher(capacity=2)
    live: dict[int, set[int]] = {}
    for next_id, words in enumerate(subs):
        trie.insert(next_id, np.array(sorted(words)))
        live[next_id] = words
        if data.draw(st.booleans()) and live:
            victim = data.draw(st.sampled_from(sorted(live)))
            trie.delete(victim)
            del live[victim]
        if data.draw(st.booleans()):
            trie.compact()  # renumbering must not change any answer
    p_ptr, p_words = csr_of_sets(posts)
    assert trie.match(p_ptr, p_words).as_sets() == brute_force(live, posts)
    # counting after deletes and renumbering: dead nodes count nothing
    listed = trie.match(p_ptr, p_words).sub_ids
    want = np.bincount(listed, minlength=len(subs)) if listed.size else np.zeros(len(subs))
    assert trie.count_matches(p_ptr, p_words, len(subs)).tolist() == want.tolist()
    assert trie.n_subscriptions == len(live)
    for sid in list(live):
        trie.delete(sid)
    assert trie.n_nodes == 0  # every branch pruned
    assert trie.match(p_ptr, p_words).n_matches == 0


def test_identical_word_sets_share_one_node() -> None:
    trie = TrieMatcher()
    trie.insert_many(np.array([1, 2, 3]), np.array([0, 2, 4, 6]), np.array([3, 7, 3, 7, 3, 7]))
    assert trie.n_nodes == 2
    assert trie.match(np.array([0, 3]), np.array([7, 9, 3])).of_post(0) == [1, 2, 3]


def test_operation_counts_follow_the_scoped_traversal() -> None:
    # Subscriptions {1}, {1,2}, {4}, {5}, {6}; post (1,2,3). The root has 4 children, more
    # than the post's 3 words, so it probes the hash table with each post word (3 ops);
    # node {1} has 1 child, fewer than its 2 remaining words, so its child list is walked
    # (1 op); node {1,2} is a leaf (0 ops): 4 operations.
    trie = TrieMatcher()
    trie.insert_many(
        np.array([10, 11, 12, 13, 14]), np.array([0, 1, 3, 4, 5, 6]), np.array([1, 1, 2, 4, 5, 6])
    )
    m = trie.match(np.array([0, 3]), np.array([3, 2, 1]))
    assert m.of_post(0) == [10, 11] and m.operations == 4


def test_words_outside_every_subscription_are_not_probed() -> None:
    trie = TrieMatcher()
    trie.insert(1, np.array([0]))
    word_map = np.array([0, -1, -1], dtype=np.int32)
    m = trie.match(np.array([0, 3]), np.array([0, 1, 2]), word_map)
    assert m.of_post(0) == [1] and m.operations == 1


@pytest.mark.parametrize(
    ("indptr", "words", "message"),
    [
        ([0, 2], [3, 1], "sorted and distinct"),
        ([0, 2], [1, 1], "sorted and distinct"),
        ([0, 0], [], "at least one word"),
        ([0, 1], [-1], ">= 0"),
        ([1, 2], [1], "from 0"),
    ],
)
def test_trie_rejects_malformed_subscriptions(
    indptr: list[int], words: list[int], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        TrieMatcher().insert_many(np.array([1]), np.array(indptr), np.array(words))


def test_count_matches_refuses_ids_outside_its_range() -> None:
    trie = TrieMatcher()
    trie.insert(7, np.array([1, 2]))
    with pytest.raises(InvalidArgumentError, match=r"\[0, 5\)"):
        trie.count_matches(np.array([0, 2]), np.array([1, 2]), 5)


def test_trie_rejects_duplicate_ids_and_unknown_deletes() -> None:
    trie = TrieMatcher()
    trie.insert(1, np.array([1]))
    with pytest.raises(InvalidArgumentError, match="new and distinct"):
        trie.insert(1, np.array([2]))
    with pytest.raises(InvalidArgumentError, match="new and distinct"):
        trie.insert_many(np.array([5, 5]), np.array([0, 1, 2]), np.array([1, 2]))
    with pytest.raises(InvalidArgumentError, match="not in this matcher"):
        trie.delete(99)
    with pytest.raises(InvalidArgumentError, match="word_map"):
        trie.match(np.array([0, 1]), np.array([5]), np.array([0], dtype=np.int32))


def test_dictionary_orders_by_rarity_and_encodes() -> None:
    d = WordDictionary.by_rarity(["common", "rare", "mid"], [100, 1, 10])
    assert [d.word(i) for i in range(3)] == ["rare", "mid", "common"]
    assert d.encode(["common", "rare", "unknown"]).tolist() == [0, 2]
    assert d.encode(["new"], add=True).tolist() == [3]
    assert d.map_vocabulary(["mid", "zzz"]).tolist() == [1, -1]
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        d.add("")
    with pytest.raises(InvalidArgumentError, match="equal length"):
        WordDictionary.by_rarity(["a"], [])


def test_large_bulk_load_compacts_and_stays_exact() -> None:
    rng = np.random.default_rng(5)
    subs = [
        set(rng.choice(300, size=rng.integers(1, 6), replace=False).tolist()) for _ in range(3000)
    ]
    posts = [
        set(rng.choice(300, size=rng.integers(0, 12), replace=False).tolist()) for _ in range(400)
    ]
    trie = TrieMatcher(capacity=8)
    s_ptr, s_words = csr_of_sets(subs)
    trie.insert_many(np.arange(3000), s_ptr, s_words)  # triggers compaction
    for sid in range(0, 3000, 3):
        trie.delete(sid)
    p_ptr, p_words = csr_of_sets(posts)
    expected = brute_force({i: s for i, s in enumerate(subs) if i % 3}, posts)
    assert trie.match(p_ptr, p_words).as_sets() == expected
    trie.compact()
    assert trie.match(p_ptr, p_words).as_sets() == expected
