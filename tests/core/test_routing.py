"""Router, metrics, routing tables and the stable hash."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.corpus import corpus_from_word_lists
from core.errors import InvalidArgumentError
from core.routing import (
    RoutingTable,
    hash_matcher,
    hash_matchers,
    metrics_from_loads,
    relative_throughput,
    route_corpus,
    route_post,
    routing_metrics,
    stable_hash,
)
from core.routing.evaluate import evaluate_table, hash_table
from tests.hypothesis_tiers import examples


def _table(rows: dict[str, list[int]], n: int, subscribed: list[str] | None = None):
    words, parts, matchers = [], [], []
    for word, ms in rows.items():
        for part, m in enumerate(ms):
            words.append(word)
            parts.append(part)
            matchers.append(m)
    return RoutingTable.from_rows(words, parts, matchers, n, subscribed_words=subscribed)


def test_metrics_hand_computed() -> None:
    # M: a->0, b->1, c->1, d->2.  Posts: {a,b}, {b,c}, {a}, {d,a,c}.
    table = _table({"a": [0], "b": [1], "c": [1], "d": [2]}, 3)
    corpus = corpus_from_word_lists([["a", "b"], ["b", "c"], ["a"], ["d", "a", "c"]])
    routed = route_corpus(table, corpus)
    assert [
        sorted(routed.matchers[routed.indptr[p] : routed.indptr[p + 1]].tolist()) for p in range(4)
    ] == [[0, 1], [1], [0], [0, 1, 2]]
    m = routing_metrics(routed)
    assert m.loads == (3, 3, 1)  # posts, not words: {b,c} counts once
    assert m.spread == pytest.approx(7 / 4)
    assert m.imbalance == pytest.approx(3 / (7 / 3))
    assert m.load_cv == pytest.approx(np.std([3, 3, 1]) / (7 / 3))
    assert m.throughput == pytest.approx(4 / 3)
    assert m.routed_fraction == 1.0 and m.spread_routed == pytest.approx(7 / 4)


def test_only_subscribed_words_route_and_unseen_words_hash() -> None:
    table = _table({"a": [0]}, 4, subscribed=["a", "new"])
    corpus = corpus_from_word_lists([["a", "zzz"], ["new"], ["zzz"]])
    routed = route_corpus(table, corpus)
    assert routed.spreads().tolist() == [1, 1, 0]
    assert routed.matchers.tolist() == [0, hash_matcher("new", 4)]
    m = routing_metrics(routed)
    assert m.routed_fraction == pytest.approx(2 / 3)
    assert m.spread == pytest.approx(2 / 3) and m.spread_routed == 1.0


@settings(max_examples=examples(50), deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(list("abcdefgh")), min_size=1, max_size=5), min_size=1, max_size=20
    ),
    st.integers(1, 5),
)
def test_corpus_router_equals_single_post_router(lists: list[list[str]], n: int) -> None:
    table = _table({"a": [0], "b": [n - 1], "c": [0]}, n, subscribed=list("abcdef"))
    routed = route_corpus(table, corpus_from_word_lists(lists))
    rng = np.random.default_rng(0)
    for p, words in enumerate(lists):
        assert sorted(
            routed.matchers[routed.indptr[p] : routed.indptr[p + 1]].tolist()
        ) == route_post(table, words, rng)


def test_routing_is_reproducible_for_a_seed() -> None:
    table = _table({"hot": [0, 1, 2, 3]}, 4)
    corpus = corpus_from_word_lists([["hot"]] * 500)
    a = route_corpus(table, corpus, seed=3).matchers
    assert np.array_equal(a, route_corpus(table, corpus, seed=3).matchers)
    assert not np.array_equal(a, route_corpus(table, corpus, seed=4).matchers)


def test_metrics_reject_bad_input() -> None:
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        metrics_from_loads(np.array([]), np.array([1]))
    with pytest.raises(InvalidArgumentError, match="one per post"):
        metrics_from_loads(np.array([1]), np.array([]))
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        metrics_from_loads(np.array([-1, 1]), np.array([0]))
    with pytest.raises(InvalidArgumentError, match="must equal"):
        metrics_from_loads(np.array([2, 1]), np.array([1, 1]))


def test_metrics_when_nothing_is_routed() -> None:
    m = metrics_from_loads(np.array([0, 0]), np.array([0, 0, 0]))
    assert m.spread == 0.0 and math.isnan(m.throughput) and math.isnan(m.imbalance)


def test_relative_throughput_needs_the_same_posts() -> None:
    a = metrics_from_loads(np.array([2, 1]), np.array([1, 1, 1]))
    b = metrics_from_loads(np.array([3, 0]), np.array([1, 1, 1]))
    assert relative_throughput(a, b) == pytest.approx(1.5)
    with pytest.raises(InvalidArgumentError, match="same posts"):
        relative_throughput(a, metrics_from_loads(np.array([1]), np.array([1])))


def test_evaluate_compares_with_hash_on_the_same_posts() -> None:
    corpus = corpus_from_word_lists([["a", "b"], ["b"], ["c", "a"]])
    table = _table({"a": [1], "b": [1], "c": [1]}, 2)
    result = evaluate_table(table, corpus)
    assert result.candidate.loads == (0, 3)
    assert result.hash_baseline == routing_metrics(route_corpus(hash_table(2, None), corpus))
    assert result.relative_throughput == pytest.approx(
        result.candidate.throughput / result.hash_baseline.throughput
    )


def test_table_validation(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"0\.\.k-1"):
        RoutingTable.from_rows(["a", "a"], [0, 2], [0, 1], 3)
    with pytest.raises(InvalidArgumentError, match=r"0\.\.k-1"):
        RoutingTable.from_rows(["a", "a"], [0, 0], [0, 1], 3)
    with pytest.raises(InvalidArgumentError, match=r"\[0, 2\)"):
        RoutingTable.from_rows(["a"], [0], [2], 2)


def test_stable_hash_is_process_independent() -> None:
    code = "from core.routing import stable_hash; print(stable_hash('white'))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in (1, 2)
    }
    assert outputs == {str(stable_hash("white"))}


def test_hash_matchers_range_and_validation() -> None:
    words = [f"w{i}" for i in range(5000)]
    m = hash_matchers(words, 7)
    assert m.dtype == np.int32 and m.min() == 0 and m.max() == 6
    assert np.bincount(m).min() > 5000 / 7 * 0.8  # roughly uniform
    assert [hash_matcher(w, 7) for w in words[:50]] == m[:50].tolist()
    for bad in (0, -1, 1.5):
        with pytest.raises(InvalidArgumentError, match="n_matchers"):
            hash_matcher("a", bad)  # type: ignore[arg-type]


def test_route_corpus_rejects_negative_seed() -> None:
    with pytest.raises(InvalidArgumentError, match="seed"):
        route_corpus(_table({"a": [0]}, 2), corpus_from_word_lists([["a"]]), seed=-1)


def test_subscribed_words_no_post_holds_keep_their_hash_matcher_explicitly():
    from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
    from core.learn import learn_mapping
    from core.routing.hashing import hash_matcher

    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=1500, n_words=400, seed=2))
    subscribed = set(corpus.vocabulary[:40].tolist()) | {"neverseen", "alsonew"}
    table = learn_mapping(corpus, 8, "salb", split=True, subscribed_words=subscribed).table
    assert subscribed <= set(table.words.tolist())  # the table covers every subscribed word
    for word in ("neverseen", "alsonew"):
        assert table.version_matchers(word).tolist() == [hash_matcher(word, 8)]
    assert table.manifest["unseen_subscribed_words"] == 2
