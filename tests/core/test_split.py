"""Hot-word splitting: the rule, the token graph it builds, and what it does to routing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import _kernels, corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import build_problem, learn_mapping, plan_split
from core.learn._split_kernels import split_word_posts
from core.routing import route_corpus, routing_metrics
from tests.hypothesis_tiers import examples


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 500), min_size=1, max_size=40), st.integers(1, 300), st.data())
def test_split_rule(freqs: list[int], n: int, data: st.DataObject) -> None:
    frequencies = np.array(freqs, dtype=np.int64)
    considered = np.array(
        data.draw(st.lists(st.booleans(), min_size=len(freqs), max_size=len(freqs)))
    )
    plan = plan_split(frequencies, considered, n)
    share = frequencies[considered].sum() / n
    assert plan.per_node_share == pytest.approx(share)
    assert plan.cap == max(1, int(share // 2))
    for f, ok, k in zip(frequencies, considered, plan.n_parts, strict=True):
        if not ok or f <= share / 2:
            assert k == 1  # only considered hot words are split
        else:
            assert -(-f // k) <= plan.cap  # every version within the cap ...
            assert -(-f // (k - 1)) > plan.cap if k > 1 else True  # ... with the fewest k


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=12),
    st.data(),
)
def test_split_word_posts_regroups_like_a_counting_sort_by_token(
    word_lists: list[list[int]], data: st.DataObject
) -> None:
    # the reference: every edge keyed by its token, stably sorted by key
    n_parts = np.array(
        data.draw(st.lists(st.integers(1, 5), min_size=len(word_lists), max_size=len(word_lists))),
        dtype=np.int32,
    )
    word_indptr = np.zeros(len(word_lists) + 1, dtype=np.int64)
    word_indptr[1:] = np.cumsum([len(posts) for posts in word_lists])
    word_posts = np.array([p for posts in word_lists for p in sorted(posts)], dtype=np.int32)
    versions = np.array(
        [
            data.draw(st.integers(0, int(k) - 1))
            for k, posts in zip(n_parts, word_lists, strict=True)
            for _ in posts
        ],
        dtype=np.int32,
    )
    token_base = np.concatenate([[0], np.cumsum(n_parts)]).astype(np.int64)
    edge_token = (np.repeat(token_base[:-1], np.diff(word_indptr)) + versions).astype(np.int32)
    expected = _kernels.group_by_key(edge_token, word_posts, int(token_base[-1]))
    got = split_word_posts(word_indptr, word_posts, n_parts, versions)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["hot", "a", "b", "c", "d", "e"]), min_size=1, max_size=4),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 12),
    st.integers(0, 5),
)
def test_split_problem_preserves_the_posts(lists: list[list[str]], n: int, seed: int) -> None:
    corpus = corpus_from_word_lists(lists)
    problem = build_problem(corpus, n, split=True, seed=seed)
    plan = problem.split_plan
    assert plan is not None
    # Each post keeps exactly its words, one version per split word.
    for p in range(corpus.n_posts):
        tokens = problem.post_tokens[problem.post_indptr[p] : problem.post_indptr[p + 1]]
        words = problem.token_word[tokens]
        assert sorted(words.tolist()) == sorted(
            corpus.indices[corpus.indptr[p] : corpus.indptr[p + 1]].tolist()
        )
    # Versions: 0..k-1 for every word, each within the cap, balanced to within one post.
    freq = problem.token_frequencies
    for w in range(corpus.n_words):
        tokens = np.flatnonzero(problem.token_word == w)
        assert problem.token_part[tokens].tolist() == list(range(plan.n_parts[w]))
        if plan.n_parts[w] > 1:
            assert freq[tokens].max() <= plan.cap
            assert freq[tokens].max() - freq[tokens].min() <= 1
    # The two CSRs are transposes of each other.
    for t in range(problem.n_tokens):
        for p in problem.token_posts[problem.token_indptr[t] : problem.token_indptr[t + 1]]:
            row = problem.post_tokens[problem.post_indptr[p] : problem.post_indptr[p + 1]]
            assert t in row


def test_split_spreads_the_load_of_a_hot_word() -> None:
    rng = np.random.default_rng(0)
    # "hot" is in every post; the other words are rare. N = 8.
    lists = [["hot", f"r{rng.integers(400)}"] for _ in range(4000)]
    corpus = corpus_from_word_lists(lists)
    plain = learn_mapping(corpus, 8, "salb")
    split = learn_mapping(corpus, 8, "salb", split=True)
    assert plain.table.n_split_words == 0 and split.table.n_split_words == 1
    hot_versions = split.table.version_matchers("hot")
    assert len(set(hot_versions.tolist())) == len(hot_versions) > 1
    before = routing_metrics(route_corpus(plain.table, corpus))
    after = routing_metrics(route_corpus(split.table, corpus, seed=1))
    assert before.loads[int(plain.table.version_matchers("hot")[0])] == 4000
    assert max(after.loads) < 0.6 * max(before.loads)
    assert after.throughput > before.throughput


def test_router_picks_versions_uniformly() -> None:
    corpus = corpus_from_word_lists([["hot"]] * 20_000)
    table = learn_mapping(corpus, 64, "hash", split=True).table
    versions = table.version_matchers("hot")
    assert len(versions) > 1
    loads = np.array(routing_metrics(route_corpus(table, corpus, seed=5)).loads)
    per_version = np.array([loads[m] for m in sorted(set(versions.tolist()))])
    expected = (
        20_000
        / len(versions)
        * np.array([np.count_nonzero(versions == m) for m in sorted(set(versions.tolist()))])
    )
    assert np.all(np.abs(per_version - expected) < 5 * np.sqrt(expected))


def test_plan_split_rejects_bad_input() -> None:
    with pytest.raises(InvalidArgumentError, match="equal length"):
        plan_split(np.array([1, 2]), np.array([True]), 2)
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        plan_split(np.array([-1]), np.array([True]), 2)
    with pytest.raises(InvalidArgumentError, match="n_matchers"):
        plan_split(np.array([1]), np.array([True]), 0)


def test_problem_and_dealing_reject_bad_input() -> None:
    corpus = corpus_from_word_lists([["a"]])
    with pytest.raises(InvalidArgumentError, match="n_matchers"):
        build_problem(corpus, 0)
    from core.learn.split import deal_versions

    with pytest.raises(InvalidArgumentError, match="one entry per word"):
        deal_versions(np.array([0, 1], dtype=np.int64), np.array([1, 1], dtype=np.int32), 0)


def test_min_parts_split_a_word_the_training_posts_see_as_cool():
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
    from core.learn import learn_mapping

    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=3000, n_words=800, seed=4))
    order = np.argsort(corpus.word_frequencies)
    cool = str(corpus.vocabulary[order[-200]])  # mid-frequency: the split rule leaves it
    plain = learn_mapping(corpus, 8, "salb", split=True, seed=1).table
    assert plain.version_matchers(cool).shape[0] == 1
    boosted = learn_mapping(corpus, 8, "salb", split=True, seed=1, min_parts={cool: 3}).table
    assert boosted.version_matchers(cool).shape[0] == 3
    rare = str(corpus.vocabulary[order[0]])  # 1 post: never more versions than posts
    capped = learn_mapping(corpus, 8, "salb", split=True, min_parts={rare: 5, "absent": 4}).table
    assert capped.version_matchers(rare).shape[0] == int(corpus.word_frequencies[order[0]])
    assert "absent" not in capped.word_index
