"""Fitting LASP's cost function f (paper 001, Fig. 3): trie lookups per post as a linear
function of the number of unique words in the trie."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.matching.dictionary import WordDictionary
from core.matching.trie import TrieMatcher
from core.placement.lasp import CostModel


@dataclass(frozen=True)
class CostFit:
    """The fitted line and the measured points it was fitted to."""

    model: CostModel
    unique_words: np.ndarray
    ops_per_post: np.ndarray
    r_squared: float


def subscription_dictionary(subscriptions: Corpus, posts: Corpus) -> WordDictionary:
    """Word ids for the matchers: subscription words, rarest (in ``posts``) first."""
    used = np.unique(subscriptions.indices)
    words = subscriptions.vocabulary[used].tolist()
    freq_by_word = dict(
        zip(posts.vocabulary.tolist(), posts.word_frequencies.tolist(), strict=True)
    )
    return WordDictionary.by_rarity(words, [freq_by_word.get(w, 0) for w in words])


def encode_subscriptions(
    subscriptions: Corpus, dictionary: WordDictionary, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the given subscription rows in dictionary ids, sorted within each row
    (columns throughout: 10M rows one by one took minutes)."""
    to_id = np.asarray(dictionary.map_vocabulary(subscriptions.vocabulary.tolist()))
    rows = np.asarray(rows, dtype=np.int64)
    starts = subscriptions.indptr[rows]
    lengths = subscriptions.indptr[rows + 1] - starts
    indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    # each row's words, row after row, then sorted within their row
    positions = np.repeat(starts - indptr[:-1], lengths) + np.arange(int(indptr[-1]))
    ids = to_id[subscriptions.indices[positions]]
    owner = np.repeat(np.arange(rows.shape[0], dtype=np.int64), lengths)
    words: np.ndarray = ids[np.lexsort((ids, owner))].astype(np.int32)
    return indptr, words


# the largest subset the fit builds a trie of: a matcher's trie holds N-th of the
# subscriptions, and the fit is a line; a trie of all 10M took 13 GiB and minutes
MAX_FIT_SUBSCRIPTIONS = 1_000_000


def fit_cost_model(
    subscriptions: Corpus, posts: Corpus, *, steps: int = 8, sample_posts: int = 5000, seed: int = 0
) -> CostFit:
    """Build tries of growing subscription subsets (up to ``MAX_FIT_SUBSCRIPTIONS``),
    measure lookups per post on a sample of ``posts``, and fit ops = slope * unique_words +
    intercept (intercept clamped at 0).

    Raises:
        InvalidArgumentError: if ``steps`` < 2 or there are fewer subscriptions than steps.
    """
    if steps < 2 or subscriptions.n_posts < steps:
        raise InvalidArgumentError("need steps >= 2 and at least `steps` subscriptions")
    rng = np.random.default_rng(seed)
    order = rng.permutation(subscriptions.n_posts)
    sample = posts.select(
        np.sort(rng.choice(posts.n_posts, min(sample_posts, posts.n_posts), replace=False))
    )
    dictionary = subscription_dictionary(subscriptions, posts)
    word_map = dictionary.map_vocabulary(sample.vocabulary.tolist())
    # Geometric sizes from one subscription up: popular (topic) workloads saturate their
    # vocabulary after a few hundred subscriptions, so linear steps would all look alike.
    largest = min(subscriptions.n_posts, MAX_FIT_SUBSCRIPTIONS)
    sizes = np.unique(np.geomspace(1, largest, steps).astype(np.int64))
    xs, ys = [], []
    for size in sizes.tolist():
        rows = order[:size]
        indptr, words = encode_subscriptions(subscriptions, dictionary, rows)
        trie = TrieMatcher(capacity=int(rows.size) + 1)  # its slots; nodes grow as needed
        trie.insert_many(rows.astype(np.int64), indptr, words)
        matches = trie.match(sample.indptr, sample.indices, word_map)
        xs.append(float(np.unique(words).shape[0]))
        ys.append(matches.operations / sample.n_posts)
    x, y = np.array(xs), np.array(ys)
    slope, intercept = np.polyfit(x, y, 1) if np.ptp(x) > 0 else (0.0, float(y.mean()))
    predicted = slope * x + intercept
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - predicted) ** 2).sum()) / total if total > 0 else 1.0
    return CostFit(CostModel(float(slope), max(0.0, float(intercept))), x, y, r2)
