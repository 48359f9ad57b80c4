"""The full-or-incremental remap rule (core.learn.remap_rule), on core types alone."""

from __future__ import annotations

from collections import Counter

from core.corpus import corpus_from_word_lists
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.learn import learn_mapping
from core.learn.remap_rule import incremental_or_full
from core.routing import route_corpus, routing_metrics


def _scene(n: int):
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=1500, n_words=300, seed=2))
    full = learn_mapping(corpus, n, "salb2", split=True, seed=0)
    metrics = routing_metrics(route_corpus(full.table, corpus, seed=0))
    return corpus, full, metrics


def _decide(published, corpus, full, metrics, *, gain: float, judge=None):
    words = Counter(str(w) for w in corpus.vocabulary[:50])
    return incremental_or_full(
        published,
        words,
        corpus,
        judge,
        full,
        metrics,
        len(words),
        corpus_from_word_lists([[str(w)] for w in corpus.vocabulary[:50]]),
        None,
        max_moved=0.1,
        full_remap_gain=gain,
        seed=0,
        min_parts={},
    )


def test_nothing_published_or_another_n_takes_the_full_remap() -> None:
    corpus, full, metrics = _scene(4)
    chosen, chosen_metrics, about = _decide(None, corpus, full, metrics, gain=0.1)
    assert chosen is full and chosen_metrics is metrics
    assert about == {"remap": "full", "remap_reason": "no published version"}
    other = learn_mapping(corpus, 6, "salb2", split=True, seed=1).table
    chosen, _, about = _decide((3, other), corpus, full, metrics, gain=0.1)
    assert chosen is full and about["remap_reason"] == "N changed (6 -> 4)"


def test_the_gain_threshold_decides_between_refined_and_full() -> None:
    corpus, full, metrics = _scene(4)
    published = (1, learn_mapping(corpus, 4, "hash", split=False, seed=0).table)
    # a threshold no gain reaches keeps the incremental remap; a negative one never does
    kept, _, about = _decide(published, corpus, full, metrics, gain=10.0)
    assert about["remap"] == "incremental" and kept is not full
    assert about["from_version"] == 1 and about["judged_posts"] == corpus.n_posts
    moved = about["moved_subscription_words"]
    assert isinstance(moved, int) and moved <= about["move_budget"]
    replaced, _, about = _decide(published, corpus, full, metrics, gain=-1.0)
    assert about["remap"] == "full" and replaced is full
    assert "a full remap gains" in str(about["remap_reason"])
