"""The sizing benchmark's measurement: every subscription lands in exactly one matcher's
index (either kind), and the memory it reports grows with the subscriptions held."""

from __future__ import annotations

import pytest

from benchmarks.sizing import measure
from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.subscriptions.workloads import tweet_subscriptions


@pytest.mark.parametrize("kind", ["predicate", "trie"])
def test_sizing_places_every_subscription_once_and_memory_grows_with_them(kind):
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=6000, n_words=3000, seed=5))
    small = measure("s", tweet_subscriptions(corpus, 500, 1), matchers=4, kind=kind)
    large = measure("l", tweet_subscriptions(corpus, 5000, 1), matchers=4, kind=kind)
    assert (small.subscriptions, large.subscriptions) == (500, 5000)
    assert (small.index, large.index) == (kind, kind)
    assert 0 < small.index_mib < large.index_mib
    assert large.row()[6] == pytest.approx(large.index_mib * 100_000 / 5000)
