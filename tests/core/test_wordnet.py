"""Word-network baselines (METIS via pymetis): graph construction and partitions."""

from __future__ import annotations

import numpy as np
import pytest

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import build_problem, learn_mapping
from core.learn.wordnet import cooccurrence, learn_wordnet
from core.remap_options import WORDNET_VARIANTS


def test_cooccurrence_counts_and_frequencies():
    corpus = corpus_from_word_lists([["a", "b", "c"], ["a", "c"], ["b"]])
    problem = build_problem(corpus, 2)
    tokens = problem.learnable_tokens()
    co = cooccurrence(problem, tokens).toarray()
    names = problem.vocabulary[problem.token_word[tokens]].tolist()
    idx = {w: i for i, w in enumerate(names)}
    assert co[idx["a"], idx["a"]] == 2 and co[idx["b"], idx["b"]] == 2  # f(w) on the diagonal
    assert co[idx["a"], idx["c"]] == co[idx["c"], idx["a"]] == 2
    assert co[idx["a"], idx["b"]] == 1 and co[idx["b"], idx["c"]] == 1


@pytest.mark.parametrize("variant", WORDNET_VARIANTS)
def test_two_communities_are_kept_apart(variant):
    # Two groups of words that only co-occur within their group: every variant should give
    # each group its own matcher (N = 2), and the mapping must route every post to one.
    rng = np.random.default_rng(0)
    left, right = [f"l{i}" for i in range(8)], [f"r{i}" for i in range(8)]
    posts = [
        list(rng.choice(group, 3, replace=False)) for _ in range(300) for group in (left, right)
    ]
    corpus = corpus_from_word_lists(posts)
    problem = build_problem(corpus, 2)
    token_matcher = learn_wordnet(problem, 2, variant, seed=1)
    assert set(token_matcher.tolist()) <= {0, 1}
    by_word = dict(
        zip(problem.vocabulary[problem.token_word].tolist(), token_matcher.tolist(), strict=True)
    )
    assert len({by_word[w] for w in left}) == 1 and len({by_word[w] for w in right}) == 1
    assert by_word["l0"] != by_word["r0"]


def test_wordnet_learners_through_learn_mapping():
    corpus = corpus_from_word_lists([["a", "b"], ["c", "d"], ["a", "d"], ["e"]] * 10)
    for variant in WORDNET_VARIANTS:
        table = learn_mapping(corpus, 3, variant, subscribed_words=["a", "b", "c"]).table
        assert sorted(table.words.tolist()) == ["a", "b", "c"]
        assert table.part_matchers.min() >= 0 and table.part_matchers.max() < 3
    # N = 1 and more matchers than words need no METIS call
    assert set(learn_mapping(corpus, 1, "gFCL").table.part_matchers.tolist()) == {0}
    assert len(set(learn_mapping(corpus, 64, "gNFCL").table.part_matchers.tolist())) == 5


def test_wordnet_rejects_bad_arguments():
    problem = build_problem(corpus_from_word_lists([["a"]]), 2)
    with pytest.raises(InvalidArgumentError, match="variant"):
        learn_wordnet(problem, 2, "gX")
    with pytest.raises(InvalidArgumentError, match="n_matchers"):
        learn_wordnet(problem, 0, "gC")
