"""Aligning a full remap's matcher ids with the published mapping: a renaming that keeps
the most subscriptions in place and changes nothing else."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import align_to_published, learn_mapping
from core.learn.align import align_matchers
from core.placement.lasp import moved_subscriptions, place_subscriptions
from core.routing import route_corpus, routing_metrics
from tests.core.references import planted_communities
from tests.hypothesis_tiers import examples


@st.composite
def mappings(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n = draw(st.integers(1, 5))
    size = draw(st.integers(0, 40))
    ids = st.lists(st.integers(-1, n - 1), min_size=size, max_size=size)
    cost = st.lists(st.integers(0, 9), min_size=size, max_size=size)
    return (
        np.array(draw(ids), dtype=np.int32),
        np.array(draw(ids), dtype=np.int32),
        np.array(draw(cost), dtype=np.int64),
        n,
    )


def kept(token_matcher: np.ndarray, origin: np.ndarray, cost: np.ndarray) -> int:
    both = (token_matcher >= 0) & (origin >= 0)
    return int(cost[both & (token_matcher == origin)].sum())


@settings(max_examples=examples(200), deadline=None)
@given(mappings())
def test_the_renaming_keeps_the_most_any_renaming_can(case: tuple) -> None:
    token_matcher, origin, cost, n = case
    alignment = align_matchers(token_matcher, origin, cost, n)
    assert sorted(alignment.new_id.tolist()) == list(range(n))  # a renaming
    renamed = alignment.apply(token_matcher)
    np.testing.assert_array_equal(renamed < 0, token_matcher < 0)
    # what is kept, counted directly, against every renaming (brute force, N <= 5)
    weights = cost if cost[(token_matcher >= 0) & (origin >= 0)].any() else np.ones_like(cost)
    best = max(
        kept(
            np.where(token_matcher >= 0, np.array(p)[np.maximum(token_matcher, 0)], -1),
            origin,
            weights,
        )
        for p in itertools.permutations(range(n))
    )
    assert alignment.kept == kept(renamed, origin, weights) == best
    assert alignment.kept_before == kept(token_matcher, origin, weights) <= best


def test_a_renamed_mapping_is_renamed_back() -> None:
    rng = np.random.default_rng(2)
    origin = rng.integers(0, 6, size=200).astype(np.int32)
    shuffled = rng.permutation(6)[origin].astype(np.int32)
    alignment = align_matchers(shuffled, origin, rng.integers(1, 5, size=200), 6)
    np.testing.assert_array_equal(alignment.apply(shuffled), origin)


def test_bad_input_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="one entry per token"):
        align_matchers(np.zeros(3), np.zeros(2), np.zeros(3), 2)
    with pytest.raises(InvalidArgumentError, match="outside"):
        align_matchers(np.array([0, 2]), np.array([0, 1]), np.ones(2), 2)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        align_matchers(np.array([0, 1]), np.array([0, 1]), np.array([1, -1]), 2)


def test_an_aligned_full_remap_routes_the_same_and_moves_fewer_subscriptions() -> None:
    old = planted_communities(n_groups=6, words_per_group=20, posts=1500, seed=1)
    new = planted_communities(n_groups=6, words_per_group=20, posts=1500, seed=2)
    rng = np.random.default_rng(3)
    words = old.vocabulary.tolist()
    subs = corpus_from_word_lists(
        [list(rng.choice(words, size=int(rng.integers(1, 3)), replace=False)) for _ in range(600)]
    )
    published = learn_mapping(old, 6, "salb2", subscriptions=subs).table
    full = learn_mapping(new, 6, "salb2", subscriptions=subs, seed=5)
    per_word: dict[str, int] = {}
    for row in range(subs.n_posts):
        for w in subs.vocabulary[subs.indices[subs.indptr[row] : subs.indptr[row + 1]]]:
            per_word[w] = per_word.get(w, 0) + 1
    aligned = align_to_published(full, published, per_word)
    # the same partition of the posts: spread and loads (as a multiset) unchanged
    before = routing_metrics(route_corpus(full.table, new))
    after = routing_metrics(route_corpus(aligned.table, new))
    assert after.spread == before.spread
    assert sorted(after.loads) == sorted(before.loads)
    about = aligned.table.manifest["aligned_to_published"]
    assert about["kept_subscription_words"] >= about["kept_subscription_words_before"]
    placed_before = place_subscriptions(published, subs)
    previous = placed_before.single_matchers()

    def moved(table) -> int:
        return moved_subscriptions(
            placed_before.matcher_sets(), place_subscriptions(table, subs, previous=previous)
        )

    # the planted groups are the same in both windows: renamed, almost nothing moves
    assert moved(aligned.table) < 0.1 * moved(full.table)
    with pytest.raises(InvalidArgumentError, match="cannot align"):
        align_to_published(learn_mapping(new, 5, "salb2"), published, per_word)
