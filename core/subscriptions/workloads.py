"""Seeded subscription workloads (paper 001, Sect. 6.1).

A subscription set is a :class:`~core.corpus.arrays.Corpus` over the same vocabulary as the
posts it was drawn from: row ``i`` is subscription ``i``'s sorted word ids.

- tweet-based: random posts registered as subscriptions (long, unpopular);
- topic-based: LDA topics (scikit-learn's online variational Bayes, alpha = beta = 0.1 as
  the paper's Mallet defaults), the ``words_per_topic`` most probable words of each topic;
  a subscription picks a topic uniformly, a length k in 1..max_length with P(k) ~ k^-s
  (Zipf, s = 0.5), and k of the topic's words at random (short, popular).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError

log = logging.getLogger(__name__)


def tweet_subscriptions(corpus: Corpus, n_subscriptions: int, seed: int) -> Corpus:
    """``n_subscriptions`` distinct random posts of ``corpus`` as subscriptions.

    Raises:
        InvalidArgumentError: if more subscriptions than posts are asked for.
    """
    if not 1 <= n_subscriptions <= corpus.n_posts:
        raise InvalidArgumentError(
            f"n_subscriptions must be in [1, {corpus.n_posts}], got {n_subscriptions}"
        )
    rows = np.random.default_rng(seed).choice(corpus.n_posts, n_subscriptions, replace=False)
    picked = corpus.select(np.sort(rows))
    return Corpus(
        picked.vocabulary,
        picked.indptr,
        picked.indices,
        np.arange(n_subscriptions).astype(str).astype(object),
    )


@dataclass(frozen=True)
class TopicModel:
    """Topics as word ids of the corpus vocabulary: ``topics[t]`` best first."""

    topics: np.ndarray  # (n_topics, words_per_topic) int32
    seconds: float


def fit_topics(
    corpus: Corpus,
    *,
    n_topics: int = 100,
    words_per_topic: int = 5,
    min_frequency: int = 5,
    max_iter: int = 10,
    seed: int = 0,
) -> TopicModel:
    """Fit LDA on the posts (words with at least ``min_frequency`` posts) and keep the top
    ``words_per_topic`` words of each topic.

    Raises:
        InvalidArgumentError: on non-positive sizes or too few frequent words.
    """
    from sklearn.decomposition import LatentDirichletAllocation

    if n_topics < 1 or words_per_topic < 1 or max_iter < 1:
        raise InvalidArgumentError("n_topics, words_per_topic and max_iter must be >= 1")
    kept = np.flatnonzero(corpus.word_frequencies >= min_frequency)
    if kept.size < words_per_topic:
        raise InvalidArgumentError(
            f"only {kept.size} words occur in >= {min_frequency} posts; need {words_per_topic}"
        )
    column = np.full(corpus.n_words, -1, dtype=np.int64)
    column[kept] = np.arange(kept.size)
    cols = column[corpus.indices]
    rows = np.repeat(np.arange(corpus.n_posts), np.diff(corpus.indptr))
    keep = cols >= 0
    matrix = sp.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.float32), (rows[keep], cols[keep])),
        shape=(corpus.n_posts, kept.size),
    )
    started = time.perf_counter()
    lda = LatentDirichletAllocation(
        n_components=n_topics,
        doc_topic_prior=0.1,
        topic_word_prior=0.1,
        learning_method="online",
        batch_size=4096,
        max_iter=max_iter,
        random_state=seed,
        n_jobs=1,
    )
    lda.fit(matrix)
    best = np.argsort(-lda.components_, axis=1, kind="stable")[:, :words_per_topic]
    seconds = time.perf_counter() - started
    log.info(
        "LDA: %d topics on %d posts x %d words in %.1fs",
        n_topics,
        corpus.n_posts,
        kept.size,
        seconds,
    )
    return TopicModel(kept[best].astype(np.int32), seconds)


def topic_subscriptions(
    corpus: Corpus,
    model: TopicModel,
    n_subscriptions: int,
    seed: int,
    *,
    zipf_exponent: float = 0.5,
    max_length: int = 5,
) -> Corpus:
    """Topic-based subscriptions drawn from ``model`` (see the module docstring)."""
    if n_subscriptions < 1:
        raise InvalidArgumentError(f"n_subscriptions must be >= 1, got {n_subscriptions}")
    n_topics, per_topic = model.topics.shape
    longest = min(max_length, per_topic)
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.power(np.arange(1, longest + 1, dtype=np.float64), zipf_exponent)
    lengths = rng.choice(np.arange(1, longest + 1), size=n_subscriptions, p=weights / weights.sum())
    topics = rng.integers(n_topics, size=n_subscriptions)
    # k distinct words of the topic: the first k of a random permutation of its slots.
    order = np.argsort(rng.random((n_subscriptions, per_topic)), axis=1)
    words = model.topics[topics[:, None], order]
    indptr = np.zeros(n_subscriptions + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    take = np.arange(per_topic)[None, :] < lengths[:, None]
    # Chosen words first (sorted), sentinels after: the first k columns are the subscription.
    indices = np.sort(np.where(take, words, np.iinfo(np.int32).max), axis=1)[take]
    return Corpus(
        corpus.vocabulary,
        indptr,
        indices.astype(np.int32),
        np.arange(n_subscriptions).astype(str).astype(object),
    )
