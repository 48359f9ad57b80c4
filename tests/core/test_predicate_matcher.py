"""The access-predicate matcher (paper 000) against brute-force set containment and the trie."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InvalidArgumentError
from core.matching import predicate
from core.matching.predicate import AccessPredicateMatcher
from core.matching.trie import TrieMatcher
from tests.core.references import brute_force, csr_of_sets
from tests.hypothesis_tiers import examples

# few words: many shared access words and duplicate sets; many words: signature collisions
few_words = st.lists(st.sets(st.integers(0, 14), min_size=1, max_size=5), min_size=1, max_size=40)
many_words = st.lists(st.sets(st.integers(0, 300), min_size=1, max_size=6), min_size=1, max_size=60)
posts_few = st.lists(st.sets(st.integers(0, 20), max_size=9), min_size=1, max_size=30)
posts_many = st.lists(st.sets(st.integers(0, 320), max_size=40), min_size=1, max_size=30)


def _check(subs: list[set[int]], posts: list[set[int]], vocabulary: int) -> None:
    ids = np.arange(7, 7 + len(subs), dtype=np.int64)[::-1].copy()  # ids unrelated to order
    s_ptr, s_words = csr_of_sets(subs)
    p_ptr, p_words = csr_of_sets(posts, shuffle=True)  # post word order must not matter
    word_map = np.arange(vocabulary, dtype=np.int32)
    expected = brute_force({int(i): s for i, s in zip(ids, subs, strict=True)}, posts)
    matcher = AccessPredicateMatcher(ids, s_ptr, s_words)
    got = matcher.match(p_ptr, p_words, word_map)
    assert got.as_sets() == expected
    assert got.n_matches == sum(len(e) for e in expected)  # no duplicates
    assert matcher.n_subscriptions == len(subs)
    assert matcher.n_sets == len({frozenset(s) for s in subs})
    assert matcher.match(p_ptr, p_words, word_map).as_sets() == expected  # stamps move on


@settings(max_examples=examples(150), deadline=None)
@given(few_words, posts_few)
def test_equals_brute_force_with_shared_words_and_duplicates(subs, posts) -> None:
    _check(subs, posts, 21)


@settings(max_examples=examples(150), deadline=None)
@given(many_words, posts_many)
def test_equals_brute_force_when_signatures_collide(subs, posts) -> None:
    _check(subs, posts, 321)


def test_unmapped_and_out_of_range_words_are_ignored() -> None:
    matcher = AccessPredicateMatcher(np.array([1, 2]), np.array([0, 1, 3]), np.array([0, 0, 2]))
    matcher_ids = np.array([0, -1, 2, 9], dtype=np.int32)  # caller word 1 is in no sub
    got = matcher.match(np.array([0, 2, 4]), np.array([0, 1, 2, 3]), matcher_ids)
    assert got.as_sets() == [{1}, set()]  # caller 3 -> matcher 9: beyond every sub's words


def test_stamps_wrap_without_stale_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the stamp limit the marks are cleared: an old post's words must not leak."""
    matcher = AccessPredicateMatcher(np.array([5]), np.array([0, 2]), np.array([0, 1]))
    both = matcher.match(np.array([0, 2]), np.array([0, 1]))
    assert both.as_sets() == [{5}]
    monkeypatch.setattr(predicate, "_STAMP_LIMIT", 0)
    only_first = matcher.match(np.array([0, 1]), np.array([0]))
    assert only_first.as_sets() == [set()]


def test_agrees_with_the_trie_on_a_skewed_corpus() -> None:
    """Zipf-like words (ids rarest first, as the dictionary gives them), 5,000 subscriptions."""
    rng = np.random.default_rng(3)
    n_words = 2000
    weights = 1.0 / np.arange(n_words, 0, -1)  # high ids are common
    weights /= weights.sum()

    def sets(count: int, low: int, high: int) -> list[set[int]]:
        return [
            set(rng.choice(n_words, size=rng.integers(low, high), p=weights).tolist())
            for _ in range(count)
        ]

    subs, posts = sets(5000, 1, 5), sets(3000, 3, 25)
    ids = np.arange(len(subs), dtype=np.int64)
    s_ptr, s_words = csr_of_sets(subs)
    p_ptr, p_words = csr_of_sets(posts)
    trie = TrieMatcher()
    trie.insert_many(ids, s_ptr, s_words)
    expected = trie.match(p_ptr, p_words).as_sets()
    assert sum(map(len, expected)) > 1000  # the corpus does match
    assert AccessPredicateMatcher(ids, s_ptr, s_words).match(p_ptr, p_words).as_sets() == expected


@pytest.mark.parametrize(
    ("ids", "indptr", "words", "message"),
    [
        ([1, 2], [0, 1], [3], "one sub id per subscription"),
        ([1, 1], [0, 1, 2], [3, 4], "distinct"),
        ([1], [0, 2], [4, 3], "sorted"),
        ([1, 2], [0, 1, 1], [3], "at least one word"),
    ],
)
def test_rejects_malformed_subscriptions(ids, indptr, words, message) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        AccessPredicateMatcher(np.array(ids), np.array(indptr), np.array(words))


@settings(max_examples=examples(100), deadline=None)
@given(few_words, posts_few, st.lists(st.sets(st.integers(0, 60)), min_size=1, max_size=3))
def test_cancelled_subscriptions_are_left_out_until_the_set_is_replaced(
    subs, posts, cancellations
) -> None:
    ids = np.arange(7, 7 + len(subs), dtype=np.int64)[::-1].copy()
    s_ptr, s_words = csr_of_sets(subs)
    p_ptr, p_words = csr_of_sets(posts, shuffle=True)
    word_map = np.arange(21, dtype=np.int32)
    matcher = AccessPredicateMatcher(ids, s_ptr, s_words)
    by_id = {int(i): s for i, s in zip(ids, subs, strict=True)}
    # each set replaces the one before (ids not held are ignored); the last one is empty
    for cancelled in [*cancellations, set()]:
        matcher.set_cancelled(np.array(sorted(cancelled), dtype=np.int64))
        kept = {i: s for i, s in by_id.items() if i not in cancelled}
        got = matcher.match(p_ptr, p_words, word_map)
        assert got.as_sets() == brute_force(kept, posts)
