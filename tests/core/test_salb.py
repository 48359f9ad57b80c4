"""SALB's incremental kernel against a direct, slow recomputation of Alg. 1."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.learn import build_problem, learn_mapping, learn_salb
from core.learn.salb import salb_order
from core.routing import route_corpus, routing_metrics
from tests.core.references import direct_loads
from tests.hypothesis_tiers import examples


def direct_utility(loads: np.ndarray, n_posts: int) -> float:
    """Alg. 1 as printed: -(spread) x (std / mean of the loads)."""
    spread = loads.sum() / n_posts
    return -spread * (loads.std() / loads.mean())


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[list[str]], int, list[str] | None]:
    n_vocab = draw(st.integers(1, 10))
    vocab = [f"w{i}" for i in range(n_vocab)]
    posts = draw(
        st.lists(st.lists(st.sampled_from(vocab), min_size=1, max_size=6), min_size=1, max_size=25)
    )
    n = draw(st.integers(1, 6))
    subscribed = draw(
        st.one_of(st.none(), st.lists(st.sampled_from(vocab), min_size=1, unique=True))
    )
    return posts, n, subscribed


@settings(max_examples=examples(150), deadline=None)
@given(corpora())
def test_kernel_equals_direct_recomputation(case: tuple) -> None:
    word_lists, n, subscribed = case
    corpus = corpus_from_word_lists(word_lists)
    problem = build_problem(corpus, n, subscribed_words=subscribed)
    result = learn_salb(problem, n, keep_state=True)
    posts = [
        set(problem.post_tokens[problem.post_indptr[p] : problem.post_indptr[p + 1]].tolist())
        for p in range(problem.n_posts)
    ]
    # Words are taken in descending frequency, subscribed ones only.
    freq = problem.token_frequencies
    assert np.all(np.diff(freq[result.order]) <= 0)
    expected_words = {t for t in range(problem.n_tokens) if problem.token_subscribed[t]}
    assert set(result.order.tolist()) == expected_words

    mapping: dict[int, int] = {}
    for step, token in enumerate(result.order.tolist()):
        before = direct_loads(posts, mapping, n)
        utilities = []
        for candidate in range(n):
            loads = direct_loads(posts, {**mapping, token: candidate}, n)
            utilities.append(direct_utility(loads, len(posts)) if n > 1 else 0.0)
        chosen = int(result.token_matcher[token])
        best = max(utilities)
        # The kernel's choice maximises the printed utility ...
        assert utilities[chosen] >= best - 1e-9 * max(1.0, abs(best))
        # ... and is the first maximiser whenever the maximum is clear of rounding.
        ranked = sorted(utilities, reverse=True)
        if n > 1 and ranked[0] - ranked[1] > 1e-9 * max(1.0, abs(ranked[0])):
            assert chosen == int(np.argmax(utilities))
        mapping[token] = chosen
        after = direct_loads(posts, mapping, n)
        assert result.extra_load[step] == after[chosen] - before[chosen]
        others = np.delete(after - before, chosen)
        assert np.all(others == 0)  # only the chosen matcher's load moves
    assert np.array_equal(result.loads, direct_loads(posts, mapping, n))
    untouched = np.setdiff1d(np.arange(problem.n_tokens), result.order)
    assert np.all(result.token_matcher[untouched] == -1)
    # The kept routing state: each post's distinct matchers, with its tokens on each.
    state = result.state
    assert state is not None and np.array_equal(state.loads, result.loads)
    slot_matcher, slot_tokens, post_slots = state.slots(problem.post_indptr)
    for p in range(problem.n_posts):
        row = problem.post_tokens[problem.post_indptr[p] : problem.post_indptr[p + 1]]
        expected: dict[int, int] = {}
        for token in row.tolist():
            if token in mapping:
                expected[mapping[token]] = expected.get(mapping[token], 0) + 1
        base, slots = int(problem.post_indptr[p]), int(post_slots[p])
        kept = dict(
            zip(
                slot_matcher[base : base + slots].tolist(),
                slot_tokens[base : base + slots].tolist(),
                strict=True,
            )
        )
        assert kept == expected


def test_ties_go_to_the_first_matcher_and_loads_balance() -> None:
    # Four disjoint single-word posts of equal frequency: one word per matcher.
    corpus = corpus_from_word_lists([["a"], ["b"], ["c"], ["d"]] * 3)
    result = learn_salb(build_problem(corpus, 4), 4)
    assert result.token_matcher.tolist() == [0, 1, 2, 3]
    assert result.loads.tolist() == [3, 3, 3, 3]


def test_a_word_whose_posts_are_covered_is_colocated() -> None:
    # a and c are disjoint and balance the matchers; b occurs only in a's posts, so putting b
    # with a adds no load (spread and loads unchanged), anywhere else it adds 3 posts.
    corpus = corpus_from_word_lists([["a", "b"]] * 3 + [["a"]] * 2 + [["c"]] * 5)
    table = learn_mapping(corpus, 2, "salb").table
    m = {w: int(table.version_matchers(w)[0]) for w in "abc"}
    assert m["a"] == m["b"] != m["c"]
    metrics = routing_metrics(route_corpus(table, corpus))
    assert metrics.spread == 1.0 and metrics.imbalance == 1.0


def test_utility_is_spread_times_cv_which_is_proportional_to_load_std() -> None:
    # The identity the kernel relies on: spread x CV = N x std(loads) / |P|.
    rng = np.random.default_rng(3)
    for _ in range(100):
        loads = rng.integers(0, 50, size=rng.integers(2, 9)).astype(np.int64)
        if loads.sum() == 0:
            continue
        n_posts = int(rng.integers(1, 100))
        expected = -loads.size * loads.std() / n_posts
        assert direct_utility(loads, n_posts) == pytest.approx(expected, rel=1e-12)


def test_salb_order_is_descending_frequency_then_id() -> None:
    corpus = corpus_from_word_lists([["x", "y"], ["y"], ["z"], ["z", "x"], ["z"]])
    problem = build_problem(corpus, 2)
    names = problem.vocabulary[salb_order(problem)].tolist()
    assert names == ["z", "x", "y"]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "4"])
def test_salb_rejects_bad_n(bad: object) -> None:
    problem = build_problem(corpus_from_word_lists([["a"]]), 1)
    with pytest.raises(InvalidArgumentError, match="n_matchers"):
        learn_salb(problem, bad)  # type: ignore[arg-type]


def test_learn_mapping_rejects_bad_arguments() -> None:
    corpus = corpus_from_word_lists([["a"]])
    with pytest.raises(InvalidArgumentError, match="algorithm"):
        learn_mapping(corpus, 2, "metis")
    with pytest.raises(InvalidArgumentError, match="n_matchers"):
        learn_mapping(corpus, 0, "salb")
    with pytest.raises(InvalidArgumentError, match="empty"):
        learn_mapping(corpus, 2, "salb", subscribed_words=[])


def test_learning_on_subscribed_words_maps_only_them() -> None:
    corpus = corpus_from_word_lists([["a", "b", "c"], ["b", "c"], ["c"]])
    table = learn_mapping(corpus, 3, "salb", subscribed_words=["b", "zzz"]).table
    # "zzz" is in no post: it keeps its hash matcher, explicitly
    assert table.words.tolist() == ["b", "zzz"]
    assert table.subscribed_words == frozenset({"b", "zzz"})
    routed = route_corpus(table, corpus)
    assert routed.spreads().tolist() == [1, 1, 0]


def test_int64_row_offsets_give_the_same_mapping() -> None:
    # Offsets switch to int64 past 2**31 state entries (about 1G edges): same kernel result.
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
    from core.learn._salb_kernels import fill_edge_rows, salb_assign
    from core.learn.salb import edge_rows

    problem = build_problem(generate_corpus(SyntheticCorpusSpec(n_posts=3_000, seed=3)), 16)
    narrow, n_row_entries = edge_rows(problem)
    wide = np.empty(narrow.shape[0], dtype=np.int64)
    fill_edge_rows(problem.token_posts, problem.post_indptr, wide)
    assert narrow.dtype == np.int32 and np.array_equal(narrow, wide)
    order = salb_order(problem)
    by_narrow = salb_assign(problem.token_indptr, narrow, n_row_entries, order, 16)
    by_wide = salb_assign(problem.token_indptr, wide, n_row_entries, order, 16)
    for a, b in zip(by_narrow, by_wide, strict=True):
        assert np.array_equal(a, b)
