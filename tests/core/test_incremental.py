"""Incremental remap: the published mapping refined within a budget of moved subscriptions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import build_problem, learn_mapping, remap_incremental
from core.learn.incremental import learn_incremental, project_table
from core.learn.salb2 import MIN_RESTREAM_FREQUENCY
from core.routing import route_corpus, routing_metrics
from tests.core.references import direct_loads, planted_communities, token_sets
from tests.hypothesis_tiers import examples


@st.composite
def cases(draw: st.DrawFn) -> tuple:
    vocab = [f"w{i}" for i in range(draw(st.integers(2, 12)))]
    posts = st.lists(
        st.lists(st.sampled_from(vocab), min_size=1, max_size=5), min_size=1, max_size=30
    )
    n = draw(st.integers(2, 5))
    return draw(posts), draw(posts), n, draw(st.integers(0, 40)), draw(st.sampled_from([0.0, 2.0]))


@settings(max_examples=examples(120), deadline=None)
@given(cases())
def test_moves_stay_within_the_budget_and_the_state_stays_exact(case: tuple) -> None:
    old_posts, new_posts, n, budget, penalty = case
    published = learn_mapping(corpus_from_word_lists(old_posts), n, "salb2", split=True).table
    problem = build_problem(corpus_from_word_lists(new_posts), n, split=True)
    origin = project_table(published, problem)
    cost = np.arange(problem.n_tokens, dtype=np.int64) % 7  # some words carry none
    result = learn_incremental(problem, n, origin, cost, budget=budget, penalty=penalty)
    learned = result.token_matcher >= 0
    away = learned & (origin >= 0) & (result.token_matcher != origin)
    assert result.moved_cost == int(cost[away].sum()) <= budget
    assert result.moved_tokens == int(away.sum())
    # every learnable token is placed; tokens the published table lacks are placed anew
    assert np.array_equal(learned, problem.token_subscribed & (problem.token_frequencies > 0))
    # tokens in fewer than MIN_RESTREAM_FREQUENCY posts are not restreamed: they stay put
    rare = learned & (origin >= 0) & (problem.token_frequencies < MIN_RESTREAM_FREQUENCY)
    np.testing.assert_array_equal(result.token_matcher[rare], origin[rare])
    mapping = {int(t): int(result.token_matcher[t]) for t in np.flatnonzero(learned)}
    np.testing.assert_array_equal(result.loads, direct_loads(token_sets(problem), mapping, n))


def test_a_zero_budget_moves_nothing_the_table_knows() -> None:
    old = planted_communities(n_groups=6, words_per_group=20, posts=1500, seed=1)
    new = planted_communities(n_groups=6, words_per_group=25, posts=1500, seed=2)
    published = learn_mapping(old, 4, "salb2", split=True).table
    problem = build_problem(new, 4, split=True)
    origin = project_table(published, problem)
    result = learn_incremental(
        problem, 4, origin, np.ones(problem.n_tokens, dtype=np.int64), budget=0, penalty=0.0
    )
    known = origin >= 0
    assert result.moved_tokens == 0
    np.testing.assert_array_equal(result.token_matcher[known], origin[known])
    assert np.all(result.token_matcher[~known & (problem.token_frequencies > 0)] >= 0)


def test_projection_recovers_the_mapping_learned_on_the_same_posts() -> None:
    corpus = planted_communities(n_groups=5, words_per_group=30, posts=3000, seed=4)
    learned = learn_mapping(corpus, 64, "salb2", split=True)  # N large enough for hot words
    origin = project_table(learned.table, learned.problem)
    assert learned.problem.split_plan is not None and learned.problem.split_plan.hot_words.size
    frame = learned.table.to_frame()
    pairs = zip(frame["word"], frame["part"], strict=True)
    expected = dict(zip(pairs, frame["matcher_id"], strict=True))
    got = {
        (
            learned.problem.vocabulary[learned.problem.token_word[t]],
            int(learned.problem.token_part[t]),
        ): int(origin[t])
        for t in range(learned.problem.n_tokens)
    }
    assert got == expected


def drifted_pair() -> tuple:
    """Two windows with the same words whose group sizes change (a drift)."""
    rng = np.random.default_rng(5)

    def window(hot_group: int) -> list[list[str]]:
        posts = []
        for _ in range(4000):
            group = hot_group if rng.random() < 0.35 else rng.integers(8)
            posts.append([f"g{group}w{w}" for w in rng.choice(20, size=3, replace=False)])
        return posts

    return corpus_from_word_lists(window(0)), corpus_from_word_lists(window(5))


def test_an_incremental_remap_recovers_throughput_moving_few_subscriptions() -> None:
    before, after = drifted_pair()  # the stale mapping: imbalance ~3.9 on the new window
    n = 8
    published = learn_mapping(before, n, "salb2", split=True).table
    words = after.vocabulary.tolist()
    n_subs = 10 * len(words)

    def throughput(table) -> float:
        return routing_metrics(route_corpus(table, after)).throughput

    stale = throughput(published)
    full = throughput(learn_mapping(after, n, "salb2", split=True).table)
    previous = stale
    for fraction in (0.1, 0.3):
        remap = remap_incremental(
            after, published, dict.fromkeys(words, 10), n_subscriptions=n_subs,
            max_moved_fraction=fraction,
        ).table  # fmt: skip
        manifest = remap.manifest
        assert manifest["remap"] == "incremental"
        assert manifest["move_budget"] == int(fraction * n_subs)
        assert 0 < manifest["moved_subscription_words"] <= manifest["move_budget"]
        assert throughput(remap) > previous  # a bigger budget buys more of the drift back
        previous = throughput(remap)
    assert previous >= 0.9 * full  # 30% of the subscriptions: nearly a full remap's gain


def test_unseen_subscribed_words_keep_their_published_matcher() -> None:
    old = corpus_from_word_lists([["a", "b"], ["c", "d"], ["a", "c"], ["e"]] * 5)
    new = corpus_from_word_lists([["a", "b"], ["c", "d"]] * 5)
    published = learn_mapping(old, 3, "salb2", split=True, subscribed_words=list("abcde")).table
    remap = remap_incremental(
        new, published, {}, n_subscriptions=0, subscribed_words=list("abcde")
    ).table
    assert remap.version_matchers("e").tolist() == published.version_matchers("e").tolist()


def test_bad_arguments_get_clear_errors() -> None:
    corpus = corpus_from_word_lists([["a", "b"]])
    table = learn_mapping(corpus, 2, "salb2", split=True).table
    with pytest.raises(InvalidArgumentError, match="max_moved_fraction"):
        remap_incremental(corpus, table, {}, n_subscriptions=1, max_moved_fraction=1.5)
    problem = build_problem(corpus, 2, split=True)
    with pytest.raises(InvalidArgumentError, match="budget"):
        learn_incremental(
            problem,
            2,
            project_table(table, problem),
            np.zeros(problem.n_tokens),
            budget=-1,
            penalty=0.0,
        )
    with pytest.raises(InvalidArgumentError, match="outside"):
        learn_incremental(
            problem,
            2,
            np.full(problem.n_tokens, 5),
            np.zeros(problem.n_tokens),
            budget=0,
            penalty=0.0,
        )


def test_gain_of_full_remap() -> None:
    from core.learn.api import gain_of_full_remap

    assert gain_of_full_remap(1.2, 1.0) == pytest.approx(0.2)
    assert gain_of_full_remap(0.9, 1.0) == pytest.approx(-0.1)
    assert gain_of_full_remap(1.0, 0.0) == math.inf
