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
from typing import Literal, cast

import numpy as np
import scipy.sparse as sp

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError

log = logging.getLogger(__name__)

Workload = Literal["tweet", "topic"]
WORKLOADS: tuple[Workload, ...] = ("tweet", "topic")


def as_workload(name: str, option: str = "--workload") -> Workload:
    """``name`` as a :data:`Workload`.

    Raises:
        InvalidArgumentError: naming ``option``, for a name that is not one.
    """
    if name not in WORKLOADS:
        raise InvalidArgumentError(f"{option} takes tweet or topic, got {name!r}")
    return cast(Workload, name)


def parse_workloads(text: str, option: str = "--workloads") -> list[Workload]:
    """``"tweet,topic"`` -> the workloads it names, in its order.

    Raises:
        InvalidArgumentError: naming ``option``, for an empty list or an unknown name.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or any(n not in WORKLOADS for n in names):
        raise InvalidArgumentError(f"{option} takes tweet and/or topic, got {text!r}")
    return [as_workload(n, option) for n in names]


def tweet_subscriptions(corpus: Corpus, n_subscriptions: int, seed: int) -> Corpus:
    """``n_subscriptions`` random posts of ``corpus`` as subscriptions (the paper's
    tweet-based workload).

    Up to the posts' count the posts are distinct. Past it every post is taken
    ``n_subscriptions // n_posts`` times and the remainder are distinct random posts: the
    paper draws its 10M from a larger crawl, so a repeat here stands for another user who
    subscribed to the same words (its own subscription id, its own matches), and every word
    set is registered as evenly as the count allows.

    Raises:
        InvalidArgumentError: if fewer than one subscription is asked for, or the corpus
            has no posts.
    """
    if n_subscriptions < 1:
        raise InvalidArgumentError(f"n_subscriptions must be at least 1, got {n_subscriptions}")
    if corpus.n_posts == 0:
        raise InvalidArgumentError("tweet-based subscriptions need posts to draw from")
    copies, rest = divmod(n_subscriptions, corpus.n_posts)
    # the remainder first, from the same stream as before: counts up to the posts' count
    # draw exactly the posts they always drew
    rows = np.random.default_rng(seed).choice(corpus.n_posts, rest, replace=False)
    if copies:
        whole = np.tile(np.arange(corpus.n_posts, dtype=np.int64), copies)
        rows = np.concatenate([whole, rows.astype(np.int64)])
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


def sample_topic_word_sets(
    topics: np.ndarray,
    n_subscriptions: int,
    seed: int,
    *,
    zipf_exponent: float = 0.5,
    max_length: int = 5,
) -> list[np.ndarray]:
    """Topic-based subscriptions as arrays of topic entries (word ids or words).

    Each picks a topic uniformly, a length k in 1..min(max_length, words per topic) with
    P(k) ~ k^-s, and k distinct words of that topic.

    Raises:
        InvalidArgumentError: for n_subscriptions < 1 or an empty topic table.
    """
    if n_subscriptions < 1:
        raise InvalidArgumentError(f"n_subscriptions must be >= 1, got {n_subscriptions}")
    table = np.asarray(topics)
    if table.ndim != 2 or table.shape[0] < 1 or table.shape[1] < 1:
        raise InvalidArgumentError("topics must be a non-empty 2-D array (topic x word)")
    n_topics, per_topic = table.shape
    longest = min(max_length, per_topic)
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.power(np.arange(1, longest + 1, dtype=np.float64), zipf_exponent)
    lengths = rng.choice(np.arange(1, longest + 1), size=n_subscriptions, p=weights / weights.sum())
    chosen = rng.integers(n_topics, size=n_subscriptions)
    # k distinct words of the topic: the first k of a random permutation of its slots.
    order = np.argsort(rng.random((n_subscriptions, per_topic)), axis=1)
    return [table[t, order[i, : lengths[i]]] for i, t in enumerate(chosen)]


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
    sets = sample_topic_word_sets(
        model.topics, n_subscriptions, seed, zipf_exponent=zipf_exponent, max_length=max_length
    )
    indptr = np.zeros(n_subscriptions + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=indptr[1:])
    indices = np.concatenate([np.sort(s) for s in sets]).astype(np.int32)
    return Corpus(
        corpus.vocabulary, indptr, indices, np.arange(n_subscriptions).astype(str).astype(object)
    )
