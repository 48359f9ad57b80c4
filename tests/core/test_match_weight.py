"""salb2's token weights: the matches of a token's subscriptions, against brute force, and
what weighing does to the matchers' counted work."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.learn import build_problem, learn_mapping
from core.learn.match_weight import match_weights, subscription_frequencies
from core.placement.lasp import place_subscriptions
from core.replay import replay

VOCAB = [f"w{i}" for i in range(8)]
word_sets = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(st.lists(word_sets, min_size=1, max_size=25), st.lists(word_sets, min_size=1, max_size=12))
def test_subscription_frequencies_equal_brute_force_containment(posts, subs) -> None:
    corpus = corpus_from_word_lists(posts)
    subscriptions = corpus_from_word_lists(subs)
    expected = [sum(1 for p in posts if set(s) <= set(p)) for s in subs]
    assert subscription_frequencies(subscriptions, corpus).tolist() == expected


@settings(max_examples=60, deadline=None)
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
