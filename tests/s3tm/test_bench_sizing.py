"""The sizing benchmark's measurement: every subscription lands in exactly one matcher's
trie, and the memory it reports grows with the subscriptions held."""

from __future__ import annotations

import pytest

from core.corpus.synthetic import SyntheticCorpusSpec, generate_corpus
from core.subscriptions.workloads import tweet_subscriptions
from s3tm.bench.sizing import measure


def test_sizing_places_every_subscription_once_and_memory_grows_with_them():
    corpus = generate_corpus(SyntheticCorpusSpec(n_posts=6000, n_words=3000, seed=5))
    small = measure("s", tweet_subscriptions(corpus, 500, 1), matchers=4)
    large = measure("l", tweet_subscriptions(corpus, 5000, 1), matchers=4)
    assert (small.subscriptions, large.subscriptions) == (500, 5000)
    assert 0 < small.trie_mib < large.trie_mib
    assert large.row()[5] == pytest.approx(large.trie_mib * 100_000 / 5000)
