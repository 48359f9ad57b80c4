"""Seeded synthetic corpora: a Zipfian vocabulary with topical co-occurrence.

Real tweets may not be copied into the repository, so demos and tests use this generator.
Model: word ``r`` (rank ``r``) has global weight ``1 / (r + q)^s`` (Zipf-Mandelbrot); there
are ``n_topics`` topics, each a Zipf-weighted pool of ``words_per_topic`` words (drawn with
a flattened global weight, so topics are built of mid-frequency words); topics themselves
are Zipf-popular. A post picks one topic and a length ``1 + Poisson``; each word slot comes
from the topic with probability ``topic_share``, else from the global distribution. Repeats
within a post collapse (a post is a set).

Time (``days > 1``): post ``i`` falls on day ``i * days // n_posts``. Topic popularity drifts:
each topic's weight follows a log-normal random walk over days (``topic_drift`` is the
per-day standard deviation of its log). On each of ``burst_days`` a new word (the
:func:`burst_word` of that burst, outside the base vocabulary) appears in ``burst_share`` of
that day's posts, halving each later day: a world event's word, suddenly among the hottest.

Words are pseudo-words of consonant-vowel syllables over the vowels a/o/u: none is an
English stop word and all are fixed points of the Porter stemmer, so the text rendered by
:func:`render_post_text` normalises back to exactly the generated word set.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from core.corpus import _kernels
from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError

_CONSONANTS = "bdfgklmnprtvz"
_VOWELS = "aou"
SYLLABLES = tuple(c + v for c in _CONSONANTS for v in _VOWELS)
_NOISE_STOP_WORDS = ("the", "a", "and", "of", "to", "is", "in", "for", "on", "with", "it's")
_PUNCTUATION = ("!", ",", ".", "?", "...", ":")


@dataclass(frozen=True)
class SyntheticCorpusSpec:
    """Parameters of a synthetic corpus; equal specs give equal corpora."""

    n_posts: int
    n_words: int = 100_000
    mean_words_per_post: float = 8.0
    n_topics: int = 300
    words_per_topic: int = 300
    topic_share: float = 0.6
    zipf_exponent: float = 1.0
    seed: int = 0
    days: int = 1
    topic_drift: float = 0.0
    burst_days: tuple[int, ...] = ()
    burst_share: float = 0.15

    def validate(self) -> None:
        """Raise :class:`InvalidArgumentError` naming the first bad parameter."""
        checks = [
            (self.n_posts >= 1, "n_posts must be >= 1"),
            (self.n_words >= 2, "n_words must be >= 2"),
            (self.mean_words_per_post >= 1.0, "mean_words_per_post must be >= 1"),
            (self.n_topics >= 1, "n_topics must be >= 1"),
            (self.words_per_topic >= 1, "words_per_topic must be >= 1"),
            (0.0 <= self.topic_share <= 1.0, "topic_share must be in [0, 1]"),
            (self.zipf_exponent > 0.0, "zipf_exponent must be > 0"),
            (self.days >= 1, "days must be >= 1"),
            (self.topic_drift >= 0.0, "topic_drift must be >= 0"),
            (all(0 <= d < self.days for d in self.burst_days), "burst_days must be in [0, days)"),
            (0.0 < self.burst_share <= 1.0, "burst_share must be in (0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise InvalidArgumentError(f"{message} (spec: {asdict(self)})")


def pseudo_word(rank: int) -> str:
    """The pseudo-word of a rank: shorter words for more frequent ranks, all distinct."""
    if rank < 0:
        raise InvalidArgumentError(f"rank must be >= 0, got {rank}")
    base = len(SYLLABLES)
    n_syllables, offset = 2, rank
    while offset >= base**n_syllables:
        offset -= base**n_syllables
        n_syllables += 1
    parts = []
    for _ in range(n_syllables):
        offset, digit = divmod(offset, base)
        parts.append(SYLLABLES[digit])
    return "".join(reversed(parts))


def burst_word(spec: SyntheticCorpusSpec, burst: int) -> str:
    """The word of burst number ``burst`` (ranks past the base vocabulary: never seen before)."""
    return pseudo_word(spec.n_words + burst)


def post_days(spec: SyntheticCorpusSpec) -> np.ndarray:
    """``(n_posts,)`` int64: the day of each post (posts are in time order)."""
    return np.arange(spec.n_posts, dtype=np.int64) * spec.days // spec.n_posts


def _topic_cdfs(spec: SyntheticCorpusSpec) -> np.ndarray:
    """``(days, n_topics)``: each day's topic-popularity CDF (a log-normal walk per topic)."""
    base = np.log(np.diff(_zipf_cdf(spec.n_topics, 0.8, shift=1.0), prepend=0.0))
    rng = np.random.default_rng([spec.seed, 2])
    steps = rng.normal(0.0, spec.topic_drift, size=(spec.days, spec.n_topics))
    steps[0] = 0.0
    weights = np.exp(base + np.cumsum(steps, axis=0))
    cdfs = np.cumsum(weights, axis=1)
    normalised: np.ndarray = cdfs / cdfs[:, -1:]
    return normalised


def _draw_topics(spec: SyntheticCorpusSpec, rng: np.random.Generator) -> np.ndarray:
    uniform = rng.random(spec.n_posts)
    if spec.days == 1 or spec.topic_drift == 0.0:
        cdf = _zipf_cdf(spec.n_topics, 0.8, shift=1.0)
        return np.minimum(np.searchsorted(cdf, uniform, side="right"), spec.n_topics - 1)
    day = post_days(spec)
    topics = np.empty(spec.n_posts, dtype=np.int64)
    for d, cdf in enumerate(_topic_cdfs(spec)):
        on_day = day == d
        topics[on_day] = np.searchsorted(cdf, uniform[on_day], side="right")
    return np.minimum(topics, spec.n_topics - 1)


def _burst_ranks(spec: SyntheticCorpusSpec) -> np.ndarray:
    """``(n_posts,)`` int64: the burst word's rank a post carries, -1 for none."""
    ranks = np.full(spec.n_posts, -1, dtype=np.int64)
    if not spec.burst_days:
        return ranks
    rng = np.random.default_rng([spec.seed, 3])
    day = post_days(spec)
    uniform = rng.random(spec.n_posts)
    for burst, first in enumerate(spec.burst_days):
        share = np.where(day >= first, spec.burst_share * 0.5 ** (day - first), 0.0)
        ranks[(ranks < 0) & (uniform < share)] = spec.n_words + burst
        uniform = rng.random(spec.n_posts)
    return ranks


def _zipf_cdf(n: int, exponent: float, shift: float = 2.7) -> np.ndarray:
    weights = 1.0 / np.power(np.arange(n, dtype=np.float64) + shift, exponent)
    cdf: np.ndarray = np.cumsum(weights)
    normalised: np.ndarray = cdf / cdf[-1]
    return normalised


def _draw(cdf: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    drawn: np.ndarray = np.searchsorted(cdf, rng.random(size), side="right")
    capped: np.ndarray = np.minimum(drawn, cdf.shape[0] - 1)
    return capped


def generate_corpus(spec: SyntheticCorpusSpec) -> Corpus:
    """Generate the corpus described by ``spec`` (vectorised; ~1 s per million posts).

    Returns:
        A corpus whose vocabulary holds only the words that occur, word ``i`` of the
        vocabulary being ``pseudo_word(rank)`` of its global rank.
    """
    spec.validate()
    rng = np.random.default_rng(spec.seed)
    global_cdf = _zipf_cdf(spec.n_words, spec.zipf_exponent)
    # Topic pools lean on mid-frequency words: flatten the global weights before drawing.
    pool_cdf = _zipf_cdf(spec.n_words, spec.zipf_exponent * 0.6, shift=50.0)
    topic_pools = _draw(pool_cdf, rng, spec.n_topics * spec.words_per_topic).reshape(
        spec.n_topics, spec.words_per_topic
    )
    in_topic_cdf = _zipf_cdf(spec.words_per_topic, 1.0, shift=1.0)

    # Repeats collapse, so draw a little more than the target mean.
    lam = max(spec.mean_words_per_post * 1.08 - 1.0, 0.0)
    lengths = 1 + np.minimum(rng.poisson(lam, spec.n_posts), 60)
    n_slots = int(lengths.sum())
    post_of_slot = np.repeat(np.arange(spec.n_posts), lengths)
    topic_of_post = _draw_topics(spec, rng)
    from_topic = rng.random(n_slots) < spec.topic_share
    topic_words = topic_pools[topic_of_post[post_of_slot], _draw(in_topic_cdf, rng, n_slots)]
    global_words = _draw(global_cdf, rng, n_slots)
    ranks = np.where(from_topic, topic_words, global_words).astype(np.int32)

    indptr = np.zeros(spec.n_posts + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    bursts = _burst_ranks(spec)
    carries = bursts >= 0
    if carries.any():  # the burst word joins its posts' rows
        ranks = np.insert(ranks, indptr[1:][carries], bursts[carries].astype(np.int32))
        indptr[1:] += np.cumsum(carries)
    indptr, ranks = _kernels.dedupe_sort_rows(indptr, ranks)
    used_ranks, indices = np.unique(ranks, return_inverse=True)
    vocabulary = np.array([pseudo_word(int(r)) for r in used_ranks], dtype=object)
    post_ids = np.array([f"demo-{i:08d}" for i in range(spec.n_posts)], dtype=object)
    return Corpus(vocabulary, indptr, indices.astype(np.int32), post_ids)


def render_post_text(words: list[str], rng: np.random.Generator) -> str:
    """Render a word set as tweet-like text with noise that normalisation removes.

    Noise: shuffled order, capitals, stop words, punctuation, a hashtag, ``@user``, a URL.
    """
    order = rng.permutation(len(words))
    tokens: list[str] = []
    if rng.random() < 0.1:
        tokens.append("@user")
    for position in order:
        word = words[position]
        if rng.random() < 0.25:
            tokens.append(str(_NOISE_STOP_WORDS[rng.integers(len(_NOISE_STOP_WORDS))]))
        if rng.random() < 0.15:
            word = word.capitalize()
        if rng.random() < 0.08:
            word = "#" + word
        if rng.random() < 0.1:
            word += _PUNCTUATION[rng.integers(len(_PUNCTUATION))]
        tokens.append(word)
    if rng.random() < 0.15:
        tokens.append(f"https://t.co/{rng.integers(1 << 40):x}")
    return " ".join(tokens)
