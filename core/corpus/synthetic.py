"""Seeded synthetic corpora: a Zipfian vocabulary with topical co-occurrence.

Real tweets may not be copied into the repository, so demos and tests use this generator.
Model: word ``r`` (rank ``r``) has global weight ``1 / (r + q)^s`` (Zipf-Mandelbrot); there
are ``n_topics`` topics, each a Zipf-weighted pool of ``words_per_topic`` words (drawn with
a flattened global weight, so topics are built of mid-frequency words); topics themselves
are Zipf-popular. A post picks one topic and a length ``1 + Poisson``; each word slot comes
from the topic with probability ``topic_share``, else from the global distribution. Repeats
within a post collapse (a post is a set).

Words are pseudo-words of consonant-vowel syllables over the vowels a/o/u: none is an
English stop word and all are fixed points of the Porter stemmer, so the text rendered by
:func:`render_post_text` normalises back to exactly the generated word set.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

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


def _zipf_cdf(n: int, exponent: float, shift: float = 2.7) -> np.ndarray:
    weights = 1.0 / np.power(np.arange(n, dtype=np.float64) + shift, exponent)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _draw(cdf: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), cdf.shape[0] - 1)


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
    topic_cdf = _zipf_cdf(spec.n_topics, 0.8, shift=1.0)
    in_topic_cdf = _zipf_cdf(spec.words_per_topic, 1.0, shift=1.0)

    # Repeats collapse, so draw a little more than the target mean.
    lam = max(spec.mean_words_per_post * 1.08 - 1.0, 0.0)
    lengths = 1 + np.minimum(rng.poisson(lam, spec.n_posts), 60)
    n_slots = int(lengths.sum())
    post_of_slot = np.repeat(np.arange(spec.n_posts), lengths)
    topic_of_post = _draw(topic_cdf, rng, spec.n_posts)
    from_topic = rng.random(n_slots) < spec.topic_share
    topic_words = topic_pools[topic_of_post[post_of_slot], _draw(in_topic_cdf, rng, n_slots)]
    global_words = _draw(global_cdf, rng, n_slots)
    ranks = np.where(from_topic, topic_words, global_words).astype(np.int32)

    indptr = np.zeros(spec.n_posts + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
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


def write_demo_corpus(
    path: str | Path,
    spec: SyntheticCorpusSpec,
    *,
    start: datetime | None = None,
    days: int = 7,
) -> Corpus:
    """Write a synthetic corpus as JSON lines (gzipped when ``path`` ends in ``.gz``).

    Each line holds ``id``, ``text`` and ``created_at`` (spread evenly over ``days`` days
    from ``start``, default 2026-01-01 UTC).

    Returns:
        The generated corpus (the text of line ``i`` normalises to post ``i``'s words).
    """
    if days < 1:
        raise InvalidArgumentError(f"days must be >= 1, got {days}")
    corpus = generate_corpus(spec)
    origin = start or datetime(2026, 1, 1, tzinfo=UTC)
    step = timedelta(days=days) / corpus.n_posts
    rng = np.random.default_rng(spec.seed + 1)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if target.suffix == ".gz" else open
    vocabulary = corpus.vocabulary
    with opener(target, "wt", encoding="utf-8") as out:
        for post in range(corpus.n_posts):
            words = vocabulary[corpus.indices[corpus.indptr[post] : corpus.indptr[post + 1]]]
            record = {
                "id": corpus.post_ids[post] if corpus.post_ids is not None else str(post),
                "text": render_post_text(list(words), rng),
                "created_at": (origin + step * post).isoformat().replace("+00:00", "Z"),
            }
            out.write(json.dumps(record) + "\n")
    return corpus
