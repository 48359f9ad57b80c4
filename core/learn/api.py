"""One entry point for every learner: corpus in, routing table out."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.learn.hash import learn_hash
from core.learn.problem import LearningProblem, build_problem
from core.learn.salb import learn_salb
from core.learn.wordnet import WORDNET_VARIANTS, learn_wordnet
from core.routing.hashing import hash_matchers
from core.routing.table import RoutingTable

log = logging.getLogger(__name__)

Algorithm = Literal["hash", "salb", "gC", "gFC", "gFCL", "gNFCL"]
ALGORITHMS: tuple[str, ...] = ("hash", "salb", *WORDNET_VARIANTS)


@dataclass(frozen=True)
class LearnedMapping:
    """A learned routing table and how it was learned."""

    table: RoutingTable
    problem: LearningProblem
    learn_seconds: float


def algorithm_label(algorithm: str, split: bool) -> str:
    """Display name, e.g. ``salb+split``."""
    return f"{algorithm}+split" if split else algorithm


def learn_mapping(
    corpus: Corpus,
    n_matchers: int,
    algorithm: Algorithm | str,
    *,
    split: bool = False,
    subscribed_words: Collection[str] | None = None,
    seed: int = 0,
    min_parts: Mapping[str, int] | None = None,
) -> LearnedMapping:
    """Learn a word -> matcher mapping.

    Args:
        corpus: training posts.
        n_matchers: N >= 1.
        algorithm: ``hash``, ``salb`` or a word-network variant (``gC``, ``gFC``, ``gFCL``,
            ``gNFCL``).
        split: split hot words first (Sect. 5.1).
        subscribed_words: learn on these words only (None: all words are subscribed).
        seed: seeds hot-word dealing.
        min_parts: with ``split``, at least this many versions for these words (the live
            stream's hot words, :func:`core.monitor.health.versions_needed`).

    Returns:
        The table (mapped: every learnable token) with a manifest of parameters.

    Raises:
        InvalidArgumentError: for an unknown algorithm, N < 1 or an empty subscribed set.
    """
    if algorithm not in ALGORITHMS:
        raise InvalidArgumentError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if not isinstance(n_matchers, int | np.integer) or n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be a positive integer, got {n_matchers!r}")
    if subscribed_words is not None and len(subscribed_words) == 0:
        raise InvalidArgumentError("subscribed_words is empty; pass None for 'all words'")
    started = time.perf_counter()
    problem = build_problem(
        corpus,
        int(n_matchers),
        subscribed_words=subscribed_words,
        split=split,
        seed=seed,
        min_parts=min_parts,
    )
    if algorithm == "salb":
        token_matcher = learn_salb(problem, int(n_matchers)).token_matcher
    elif algorithm == "hash":
        token_matcher = learn_hash(problem, int(n_matchers))
    else:
        token_matcher = learn_wordnet(problem, int(n_matchers), algorithm, seed=seed)
    seconds = time.perf_counter() - started
    learned = np.flatnonzero(token_matcher >= 0)
    hot = 0 if problem.split_plan is None else int(problem.split_plan.hot_words.size)
    manifest = {
        "algorithm": algorithm,
        "label": algorithm_label(algorithm, split),
        "split": split,
        "seed": seed,
        "corpus_fingerprint": corpus.fingerprint(),
        "training_posts": corpus.n_posts,
        "training_words": corpus.n_words,
        "mapped_tokens": int(learned.size),
        "hot_words": hot,
        "learn_seconds": round(seconds, 4),
    }
    log.info(
        "learned %s N=%d: %d tokens, %d hot words, %.2fs",
        manifest["label"],
        n_matchers,
        learned.size,
        hot,
        seconds,
    )
    words = problem.vocabulary[problem.token_word[learned]]
    parts = problem.token_part[learned]
    matchers = token_matcher[learned]
    if subscribed_words is not None:
        # A subscribed word no learning post holds (a new subscription, a word not yet
        # seen) has nothing to learn from: it keeps the matcher hash routing gives it, as
        # an explicit row, so the table covers every subscribed word.
        unseen = sorted(set(subscribed_words).difference(words.tolist()))
        if unseen:
            words = np.concatenate([words, np.array(unseen, dtype=object)])
            parts = np.concatenate([parts, np.zeros(len(unseen), dtype=parts.dtype)])
            matchers = np.concatenate(
                [matchers, hash_matchers(unseen, int(n_matchers)).astype(matchers.dtype)]
            )
            manifest["unseen_subscribed_words"] = len(unseen)
    table = RoutingTable.from_rows(
        words,
        parts,
        matchers,
        int(n_matchers),
        subscribed_words=subscribed_words,
        manifest=manifest,
    )
    return LearnedMapping(table=table, problem=problem, learn_seconds=seconds)
