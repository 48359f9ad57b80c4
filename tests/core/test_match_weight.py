"""salb2's token weights: the matches of a token's subscriptions, against brute force, and
what weighing does to the matchers' counted work."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import build_problem, learn_mapping
from core.learn.match_weight import match_weights, subscription_frequencies
from core.placement.lasp import place_subscriptions
from core.replay import matcher_work, replay
from tests.hypothesis_tiers import examples

VOCAB = [f"w{i}" for i in range(8)]
word_sets = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4)


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(word_sets, min_size=1, max_size=25),
    st.lists(word_sets, min_size=1, max_size=12),
    st.integers(1, 30),
)
def test_subscription_frequencies_equal_brute_force_containment(posts, subs, chunk) -> None:
    corpus = corpus_from_word_lists(posts)
    subscriptions = corpus_from_word_lists(subs)
    expected = [sum(1 for p in posts if set(s) <= set(p)) for s in subs]
    # posts matched in chunks (any size): the same counts
    assert subscription_frequencies(subscriptions, corpus, chunk_posts=chunk).tolist() == expected


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(word_sets, min_size=1, max_size=25), st.lists(word_sets, min_size=1, max_size=12))
def test_match_weights_share_each_subscriptions_matches_among_its_words(posts, subs) -> None:
    corpus = corpus_from_word_lists(posts)
    subscriptions = corpus_from_word_lists(subs)
    problem = build_problem(corpus, 3, split=True, seed=0)
    weight, matches_per_post = match_weights(problem, subscriptions, corpus)
    frequencies = [sum(1 for p in posts if set(s) <= set(p)) for s in subs]
    assert matches_per_post == sum(frequencies) / len(posts)
    # matches -> posts at the subscribed words a post holds (all words are subscribed here)
    lookups_per_post = max(1.0, sum(len(set(p)) for p in posts) / len(posts))
    for word in VOCAB:
        expected = sum(f / len(set(s)) for s, f in zip(subs, frequencies, strict=True) if word in s)
        tokens = np.flatnonzero(problem.vocabulary[problem.token_word] == word)
        got = float(weight[tokens].sum()) * lookups_per_post
        assert abs(got - expected) < 1e-9 * max(1.0, expected)
    assert np.all(weight >= 0)


def test_weighing_by_matches_levels_the_counted_work_where_posts_are_level() -> None:
    # two equally frequent word groups; group a's words sit in many subscriptions, so a
    # post of group a meets ~40 of them and one of group b meets ~1
    rng = np.random.default_rng(5)
    posts = []
    for _ in range(3000):
        group = "ab"[int(rng.integers(2))]
        size = int(rng.integers(2, 4))
        posts.append([f"{group}{w}" for w in rng.choice(12, size=size, replace=False)])
    corpus = corpus_from_word_lists(posts)
    subs = [[f"a{int(rng.integers(12))}"] for _ in range(480)]
    subs += [[f"b{int(rng.integers(12))}"] for _ in range(12)]
    subs += [[f"{g}{w}" for w in range(12)] for g in "ab"]  # every word subscribed
    subscriptions = corpus_from_word_lists(subs)

    def work(weigh: bool) -> np.ndarray:
        learned = learn_mapping(
            corpus, 4, "salb2", seed=0, subscriptions=subscriptions if weigh else None
        )
        placement = place_subscriptions(learned.table, subscriptions, seed=0)
        result = replay(learned.table, placement, subscriptions, corpus, min_sample_seconds=0)
        return result.matcher_operations + result.matcher_matches

    posts_only, weighed = work(False), work(True)
    # by posts the groups go to two matchers each; by work group a needs more of them
    assert weighed.max() < 0.8 * posts_only.max()
    assert weighed.max() / weighed.mean() < 1.25


def test_salb2_keeps_the_start_whose_busiest_matcher_counts_less_work() -> None:
    rng = np.random.default_rng(11)
    posts = [
        [f"g{g}w{w}" for w in rng.choice(15, size=int(rng.integers(2, 5)), replace=False)]
        for g in rng.integers(5, size=2000)
    ]
    corpus = corpus_from_word_lists(posts)
    subs = [list(p[: int(rng.integers(1, 3))]) for p in posts[:300]]
    subs += [[f"g{g}w{w}"] for g in range(5) for w in range(15)]  # every word subscribed
    subscriptions = corpus_from_word_lists(subs)
    learned = learn_mapping(corpus, 4, "salb2", subscriptions=subscriptions)
    scores = learned.table.manifest["start_training_work_max"]
    assert set(scores) == {"salb", "metis"}
    assert learned.table.manifest["refinement_start"] == min(
        scores, key=lambda start: scores[start]
    )
    # the score is the kept table's busiest matcher by counted work on the training posts
    placement = place_subscriptions(learned.table, subscriptions, seed=0)
    counted = matcher_work(learned.table, placement, subscriptions, corpus)
    assert int(counted.max()) == min(scores.values())
    # frequencies counted once can be handed to the next learner of the same window
    frequencies = learned.subscription_frequencies
    assert frequencies is not None
    np.testing.assert_array_equal(frequencies, subscription_frequencies(subscriptions, corpus))
    again = learn_mapping(corpus, 4, "salb2", subscriptions=subscriptions, frequencies=frequencies)
    assert again.table.to_frame().equals(learned.table.to_frame())
    problem = build_problem(corpus, 4, split=True, seed=0)
    with pytest.raises(InvalidArgumentError, match="one count per subscription"):
        match_weights(problem, subscriptions, corpus, frequencies=frequencies[:-1])


def test_matcher_work_is_the_replays_counted_work() -> None:
    rng = np.random.default_rng(4)
    post_words = [
        list(rng.choice(VOCAB, size=int(rng.integers(1, 5)), replace=False)) for _ in range(400)
    ]
    sub_words = [
        list(rng.choice(VOCAB, size=int(rng.integers(1, 3)), replace=False)) for _ in range(60)
    ]
    corpus = corpus_from_word_lists(post_words)
    subscriptions = corpus_from_word_lists(sub_words)
    learned = learn_mapping(corpus, 3, "salb", split=True)
    placement = place_subscriptions(learned.table, subscriptions, seed=0)
    result = replay(learned.table, placement, subscriptions, corpus, min_sample_seconds=0)
    np.testing.assert_array_equal(
        matcher_work(learned.table, placement, subscriptions, corpus),
        result.matcher_operations + result.matcher_matches,
    )
    # the distinct (post, subscription) pairs are brute force's; a split word's post can
    # match one subscription on two matchers, so the matchers' matches are at least those
    expected = {
        (row, sub_id)
        for row, words in enumerate(post_words)
        for sub_id, wanted in enumerate(sub_words)
        if set(wanted) <= set(words)
    }
    assert result.match_pairs is not None
    assert {(int(row), int(sub)) for row, sub in result.match_pairs} == expected
    assert result.matcher_matches.sum() >= len(expected)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4), min_size=1, max_size=30),
    st.integers(1, 8),
)
def test_distinct_rows_equal_a_dict_of_rows(rows, chunk) -> None:
    """In any chunking of the rows (the keys are made a chunk of rows at a time)."""
    from core.corpus import arrays

    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    values = np.array([v for r in rows for v in r], dtype=np.int32)
    old, arrays.DISTINCT_CHUNK_ROWS = arrays.DISTINCT_CHUNK_ROWS, chunk
    try:
        first, inverse = arrays.distinct_rows(indptr, values)
    finally:
        arrays.DISTINCT_CHUNK_ROWS = old
    assert [rows[first[i]] for i in inverse] == rows  # every row is its representative
    assert len({tuple(r) for r in rows}) == first.shape[0]  # and those are distinct


def test_distinct_rows_survive_a_hash_collision(monkeypatch) -> None:
    """Weights of 1 make [1, 2] and [2, 1] hash alike: the rows are compared and told
    apart."""
    from core.corpus import arrays

    class Ones:
        def integers(self, low, high, size, dtype):
            return np.ones(size, dtype=dtype)

    monkeypatch.setattr(np.random, "default_rng", lambda seed: Ones())  # arrays' np
    indptr = np.array([0, 2, 4, 6], dtype=np.int64)
    values = np.array([1, 2, 2, 1, 1, 2], dtype=np.int32)
    first, inverse = arrays.distinct_rows(indptr, values)
    assert first.tolist() == [0, 1] and inverse.tolist() == [0, 1, 0]
