"""Token weights for ``salb2``: the matches a token's subscriptions emit, in posts.

Why: a matcher's work is its trie lookups plus the matches it emits (``core.replay``). With
tweet-based subscriptions a post meets a few subscriptions and the lookups dominate, so the
posts routed to a matcher are its load (Eq. 6). With topic-based ones a post meets ~200
and the matches dominate (~0.8M matches against ~45k lookups per matcher at N = 8,
docs/RESULTS.md): a mapping with level post loads left one matcher with 1.33x the mean
work. So the load a token brings is its posts plus the matches of the subscriptions that
will sit with it.

A subscription is placed on the matcher of one of its words (LASP), so its matches are
shared among its words: each word is charged ``f(s) / |s|`` for every subscription ``s``
holding it, where ``f(s)`` is the number of training posts containing all of ``s``. A
split word's versions share it in proportion to their posts. Matches convert to posts at
the lookups a routed post costs: the mean number of subscribed words per training post (a
matcher looks up every subscribed word of a post it receives).
"""

from __future__ import annotations

import numpy as np

from core.corpus.arrays import Corpus, distinct_rows
from core.errors import InvalidArgumentError
from core.learn.problem import LearningProblem
from core.matching.trie import TrieMatcher
from core.placement.cost import encode_subscriptions, subscription_dictionary

MATCH_CHUNK_POSTS = 100_000


def subscription_frequencies(
    subscriptions: Corpus, posts: Corpus, *, chunk_posts: int = MATCH_CHUNK_POSTS
) -> np.ndarray:
    """``(n_subscriptions,)`` int64: the posts of ``posts`` holding every word of each
    subscription (exact: one trie of all subscriptions matched over all posts,
    ``chunk_posts`` posts at a time)."""
    if chunk_posts < 1:
        raise InvalidArgumentError(f"chunk_posts must be >= 1, got {chunk_posts}")
    if subscriptions.n_posts == 0 or posts.n_posts == 0:
        return np.zeros(subscriptions.n_posts, dtype=np.int64)
    dictionary = subscription_dictionary(subscriptions, posts)
    # equal word sets match equally: count each distinct set once (10M tweet-based
    # subscriptions drawn from 1.3M posts are 1.3M sets; a trie of all 10M took 21 GiB)
    # a Corpus' rows are ascending: equal sets are equal rows
    distinct, inverse = distinct_rows(subscriptions.indptr, subscriptions.indices)
    rows = np.arange(distinct.shape[0], dtype=np.int64)
    indptr, words = encode_subscriptions(subscriptions, dictionary, distinct)
    trie = TrieMatcher(capacity=int(indptr[-1]) + 1)
    trie.insert_many(rows, indptr, words)
    counts = np.zeros(distinct.shape[0], dtype=np.int64)
    word_map = dictionary.map_vocabulary(posts.vocabulary.tolist())
    # posts in chunks: only counts are kept, and all matches at once do not fit (8M posts
    # and 100k subscriptions of popular words: billions of matches)
    for first in range(0, posts.n_posts, chunk_posts):
        last = min(first + chunk_posts, posts.n_posts)
        lo, hi = int(posts.indptr[first]), int(posts.indptr[last])
        counts += trie.count_matches(
            posts.indptr[first : last + 1] - lo, posts.indices[lo:hi], counts.shape[0], word_map
        )
    frequencies: np.ndarray = counts[inverse]
    return frequencies


def match_weights(
    problem: LearningProblem,
    subscriptions: Corpus,
    posts: Corpus,
    *,
    frequencies: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Each token's share of the matches its subscriptions emit on ``posts`` (the corpus
    ``problem`` was built from), in posts.

    ``frequencies``: :func:`subscription_frequencies` of the same subscriptions and posts
    when the caller has them (a full and an incremental remap of one window share them);
    None: counted here.

    Returns:
        ``(token_weight, matches_per_post)``: ``(n_tokens,)`` float64 weights (0 for tokens
        no subscription holds), and the mean matches per training post (how much the
        weights matter: ~1 for tweet-based subscriptions, ~200 for topic-based ones).
    """
    weight = np.zeros(problem.n_tokens, dtype=np.float64)
    if subscriptions.n_posts == 0 or posts.n_posts == 0:
        return weight, 0.0
    if frequencies is None:
        frequency = subscription_frequencies(subscriptions, posts)
    else:
        frequency = np.asarray(frequencies, dtype=np.int64)
        if frequency.shape != (subscriptions.n_posts,):
            raise InvalidArgumentError(
                f"frequencies need one count per subscription ({subscriptions.n_posts}), "
                f"got shape {frequency.shape}"
            )
    sizes = np.diff(subscriptions.indptr)
    # a subscription's matches shared evenly among its words (in the subscriptions' ids)
    per_word = np.bincount(
        subscriptions.indices,
        weights=np.repeat(frequency / np.maximum(sizes, 1), sizes),
        minlength=subscriptions.n_words,
    )
    # ... in the training corpus' word ids (words no post holds carry nothing)
    word_id = {w: i for i, w in enumerate(problem.vocabulary.tolist())}
    word_matches = np.zeros(problem.vocabulary.shape[0], dtype=np.float64)
    for w, matches in zip(subscriptions.vocabulary.tolist(), per_word.tolist(), strict=True):
        i = word_id.get(w)
        if i is not None and matches > 0:
            word_matches[i] += matches
    # a split word's versions share its matches as they share its posts
    token_posts = problem.token_frequencies.astype(np.float64)
    word_posts = np.bincount(
        problem.token_word, weights=token_posts, minlength=problem.vocabulary.shape[0]
    )
    share = np.divide(
        token_posts,
        word_posts[problem.token_word],
        out=np.zeros_like(token_posts),
        where=word_posts[problem.token_word] > 0,
    )
    token_matches = word_matches[problem.token_word] * share
    # matches -> posts: a routed post costs a lookup per subscribed word it holds
    subscribed_edges = float(np.dot(token_posts, problem.token_subscribed))
    lookups_per_post = max(1.0, subscribed_edges / max(1, problem.n_posts))
    weight[:] = token_matches / lookups_per_post
    weight[~problem.token_subscribed] = 0.0
    return weight, float(frequency.sum()) / posts.n_posts
