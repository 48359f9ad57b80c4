"""One entry point for every learner: corpus in, routing table out."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.learn.align import align_matchers
from core.learn.hash import learn_hash
from core.learn.incremental import learn_incremental, project_table
from core.learn.match_weight import match_weights, subscription_frequencies
from core.learn.problem import LearningProblem, build_problem
from core.learn.salb import learn_salb
from core.learn.salb2 import learn_salb2
from core.learn.wordnet import learn_wordnet
from core.placement.lasp import place_subscriptions
from core.remap_options import ALGORITHMS, Algorithm
from core.replay import matcher_work
from core.routing.hashing import hash_matchers
from core.routing.table import LearnerManifest, RoutingTable

log = logging.getLogger(__name__)

# score a move loses per subscription it re-places (the LDG score is in posts: a move must
# gather this many more of the token's posts per subscription it moves)
DEFAULT_PENALTY = 1.0


def gain_of_full_remap(full_throughput: float, incremental_throughput: float) -> float:
    """How much more a full remap carries than the incremental one (0.1: 10% more); inf
    when the incremental remap carries nothing."""
    if incremental_throughput <= 0:
        return math.inf
    return full_throughput / incremental_throughput - 1.0


@dataclass(frozen=True)
class LearnedMapping:
    """A learned routing table and how it was learned.

    ``subscription_frequencies``: the training posts holding each subscription when the
    learner counted them (``salb2`` with subscriptions), for another learner of the same
    window to reuse (``frequencies=``); else None.
    """

    table: RoutingTable
    problem: LearningProblem
    learn_seconds: float
    subscription_frequencies: np.ndarray | None = None


# learners whose form includes hot-word splitting (they refuse split=False)
SPLITTING_ALGORITHMS: frozenset[str] = frozenset({"salb2"})


def algorithm_label(algorithm: str, split: bool) -> str:
    """Display name, e.g. ``salb+split`` (``salb2``: splitting is part of it)."""
    return f"{algorithm}+split" if split and algorithm not in SPLITTING_ALGORITHMS else algorithm


def learn_mapping(
    corpus: Corpus,
    n_matchers: int,
    algorithm: Algorithm | str,
    *,
    split: bool | None = None,
    subscribed_words: Collection[str] | None = None,
    seed: int = 0,
    min_parts: Mapping[str, int] | None = None,
    subscriptions: Corpus | None = None,
    frequencies: np.ndarray | None = None,
) -> LearnedMapping:
    """Learn a word -> matcher mapping.

    Args:
        corpus: training posts.
        n_matchers: N >= 1.
        algorithm: ``hash``, ``salb`` (Alg. 1 as printed), ``salb2`` (SALB or METIS, then
            restreaming, :mod:`core.learn.salb2`) or a word-network variant (``gC``,
            ``gFC``, ``gFCL``, ``gNFCL``).
        split: split hot words first (Sect. 5.1); None: the algorithm's default (on for
            ``salb2``, which refuses False; off for the others).
        subscribed_words: learn on these words only (None: all words are subscribed).
        seed: seeds hot-word dealing.
        min_parts: with ``split``, at least this many versions for these words (the live
            stream's hot words, :func:`core.monitor.health.versions_needed`).
        subscriptions: the active subscriptions (rows of word sets): ``salb2`` then weighs
            each token by the matches its subscriptions emit on the training posts beside
            its posts (:mod:`core.learn.match_weight`), and chooses between its two starts
            by the busiest matcher's counted trie work on the training posts (the
            subscriptions placed by LASP); the other learners ignore them.
        frequencies: :func:`subscription_frequencies` of ``subscriptions`` on ``corpus``
            when already counted (None: counted here, if needed).

    Returns:
        The table (mapped: every learnable token) with a manifest of parameters.

    Raises:
        InvalidArgumentError: for an unknown algorithm, N < 1 or an empty subscribed set.
    """
    if algorithm not in ALGORITHMS:
        raise InvalidArgumentError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if not isinstance(n_matchers, int | np.integer) or n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be a positive integer, got {n_matchers!r}")
    if split is None:
        split = algorithm in SPLITTING_ALGORITHMS
    if algorithm in SPLITTING_ALGORITHMS and not split:
        raise InvalidArgumentError(
            f"{algorithm} splits hot words as part of its form; use salb for an unsplit mapping"
        )
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
    refinement: LearnerManifest = {}
    if algorithm == "salb":
        token_matcher = learn_salb(problem, int(n_matchers)).token_matcher
    elif algorithm == "salb2":
        judge = None
        token_weight, frequencies = _weighing(
            problem, subscriptions, corpus, frequencies, refinement
        )
        if subscriptions is not None and token_weight is not None:
            judge = _busiest_work(
                corpus, problem, int(n_matchers), subscribed_words, subscriptions, seed
            )
        refined = learn_salb2(
            problem, int(n_matchers), seed=seed, token_weight=token_weight, judge=judge
        )
        token_matcher = refined.token_matcher
        if refined.scores:
            refinement["start_training_work_max"] = {k: int(v) for k, v in refined.scores.items()}
        refinement = {
            **refinement,
            "refinement_moves": list(refined.moves),
            "refinement_kept": refined.refined,
            "refinement_start": refined.start,
            "training_load_max": int(refined.loads.max()),
            "salb_training_load_max": int(refined.salb_loads.max()),
            "training_weighted_load_max": round(float(refined.weighted_loads.max()), 1),
        }
    elif algorithm == "hash":
        token_matcher = learn_hash(problem, int(n_matchers))
    else:
        token_matcher = learn_wordnet(problem, int(n_matchers), algorithm, seed=seed)
    seconds = time.perf_counter() - started
    return _learned(
        corpus,
        problem,
        token_matcher,
        int(n_matchers),
        seconds,
        subscribed_words,
        {
            "algorithm": algorithm,
            "label": algorithm_label(algorithm, split),
            "split": split,
            "seed": seed,
            **refinement,
        },
        frequencies=frequencies,
    )


def _weighing(
    problem: LearningProblem,
    subscriptions: Corpus | None,
    corpus: Corpus,
    frequencies: np.ndarray | None,
    manifest: LearnerManifest,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``salb2``'s token weights from the subscriptions' matches on ``corpus`` (None: no
    subscriptions), and the subscription counts they came from (``frequencies`` when
    given); records ``matches_per_post`` in ``manifest``."""
    if subscriptions is None or not subscriptions.n_posts:
        return None, frequencies
    if frequencies is None:
        frequencies = subscription_frequencies(subscriptions, corpus)
    token_weight, matches_per_post = match_weights(
        problem, subscriptions, corpus, frequencies=frequencies
    )
    manifest["matches_per_post"] = round(matches_per_post, 3)
    return token_weight, frequencies


def _busiest_work(
    corpus: Corpus,
    problem: LearningProblem,
    n_matchers: int,
    subscribed_words: Collection[str] | None,
    subscriptions: Corpus,
    seed: int,
) -> Callable[[np.ndarray], float]:
    """``salb2``'s judge: a token -> matcher mapping's busiest matcher by counted trie
    work (lookups + matches) on the training posts, the subscriptions placed by LASP with
    the unit cost model (deterministic; the fitted one is timed)."""

    def busiest(token_matcher: np.ndarray) -> float:
        table = _routing_table(problem, token_matcher, n_matchers, subscribed_words, {})
        placement = place_subscriptions(table, subscriptions, policy="lasp", seed=seed)
        return float(matcher_work(table, placement, subscriptions, corpus, seed=seed).max())

    return busiest


def align_to_published(
    learned: LearnedMapping,
    published: RoutingTable,
    word_subscriptions: Mapping[str, int],
) -> LearnedMapping:
    """``learned`` (a full remap) with its matcher ids renamed to keep the most
    subscriptions on the matchers ``published`` has them on (:mod:`core.learn.align`):
    the same spread and loads, fewer subscriptions re-placed. The manifest records the
    subscription words kept in place before and after.

    Raises:
        InvalidArgumentError: if the two tables differ in N.
    """
    n_matchers = learned.table.n_matchers
    if published.n_matchers != n_matchers:
        raise InvalidArgumentError(
            f"cannot align N={n_matchers} with a published N={published.n_matchers}"
        )
    # every row of the table: the words learned, and subscribed words no post held
    table = learned.table
    counts = np.diff(table.part_indptr)
    row_word = np.repeat(table.words, counts).tolist()
    row_part = np.arange(table.part_matchers.shape[0]) - np.repeat(table.part_indptr[:-1], counts)
    origin = np.array(
        [_published_matcher(published, w, int(p)) for w, p in zip(row_word, row_part, strict=True)],
        dtype=np.int64,
    )
    move_cost = np.array([word_subscriptions.get(w, 0) for w in row_word], dtype=np.int64)
    alignment = align_matchers(table.part_matchers, origin, move_cost, n_matchers)
    renamed = dataclasses.replace(
        table,
        part_matchers=alignment.new_id[table.part_matchers],
        manifest={
            **table.manifest,
            "aligned_to_published": {
                "kept_subscription_words_before": alignment.kept_before,
                "kept_subscription_words": alignment.kept,
            },
        },
    )
    return dataclasses.replace(learned, table=renamed)


def _published_matcher(published: RoutingTable, word: str, part: int) -> int:
    """Where version ``part`` of ``word`` sits in ``published`` (an unlisted word: its hash
    matcher, where the table routes it; a version it does not have: -1)."""
    matchers = published.version_matchers(word)
    return int(matchers[part]) if part < matchers.shape[0] else -1


def remap_incremental(
    corpus: Corpus,
    published: RoutingTable,
    word_subscriptions: Mapping[str, int],
    *,
    n_subscriptions: int,
    max_moved_fraction: float = 0.1,
    penalty: float = DEFAULT_PENALTY,
    subscribed_words: Collection[str] | None = None,
    seed: int = 0,
    min_parts: Mapping[str, int] | None = None,
    subscriptions: Corpus | None = None,
    frequencies: np.ndarray | None = None,
) -> LearnedMapping:
    """Refine ``published`` on a new window instead of learning from scratch (``salb2``'s
    restreaming with each token's published matcher as its origin, see
    :mod:`core.learn.incremental`).

    Args:
        corpus: the new window's training posts.
        published: the mapping the matchers hold today; its N is kept.
        word_subscriptions: active subscriptions per word (the move cost of its tokens).
        n_subscriptions: active subscriptions in all (the budget's base).
        max_moved_fraction: moves re-place at most this fraction of them (counted per word,
            so a subscription two moved words share counts twice: conservative).
        penalty: score lost per subscription re-placed.
        subscribed_words, seed, min_parts, subscriptions, frequencies: as
            :func:`learn_mapping` (hot words split; the subscriptions weigh the tokens, as
            ``salb2``'s).

    Raises:
        InvalidArgumentError: for a fraction outside [0, 1] or a negative count.
    """
    if not 0.0 <= max_moved_fraction <= 1.0:
        raise InvalidArgumentError(
            f"max_moved_fraction must be within [0, 1], got {max_moved_fraction!r}"
        )
    if n_subscriptions < 0:
        raise InvalidArgumentError(f"n_subscriptions must be >= 0, got {n_subscriptions!r}")
    if subscribed_words is not None and len(subscribed_words) == 0:
        raise InvalidArgumentError("subscribed_words is empty; pass None for 'all words'")
    started = time.perf_counter()
    n_matchers = published.n_matchers
    problem = build_problem(
        corpus,
        n_matchers,
        subscribed_words=subscribed_words,
        split=True,
        seed=seed,
        min_parts=min_parts,
    )
    word_cost = np.fromiter(
        (word_subscriptions.get(w, 0) for w in problem.vocabulary.tolist()),
        dtype=np.int64,
        count=len(problem.vocabulary),
    )
    budget = math.floor(max_moved_fraction * n_subscriptions)
    weighing: LearnerManifest = {}
    token_weight, frequencies = _weighing(problem, subscriptions, corpus, frequencies, weighing)
    result = learn_incremental(
        problem,
        n_matchers,
        project_table(published, problem),
        word_cost[problem.token_word],
        budget=budget,
        penalty=penalty,
        token_weight=token_weight,
    )
    seconds = time.perf_counter() - started
    return _learned(
        corpus,
        problem,
        result.token_matcher,
        n_matchers,
        seconds,
        subscribed_words,
        {
            "algorithm": "salb2",
            "label": "salb2",
            "split": True,
            "seed": seed,
            "remap": "incremental",
            **weighing,
            "moved_tokens": result.moved_tokens,
            "moved_subscription_words": result.moved_cost,
            "move_budget": result.budget,
            "penalty": penalty,
            "refinement_moves": list(result.moves),
            "training_load_max": int(result.loads.max()),
            "start_training_load_max": int(result.start_loads.max()),
        },
        keep=published,
        frequencies=frequencies,
    )


def _learned(
    corpus: Corpus,
    problem: LearningProblem,
    token_matcher: np.ndarray,
    n_matchers: int,
    seconds: float,
    subscribed_words: Collection[str] | None,
    about: LearnerManifest,
    keep: RoutingTable | None = None,
    frequencies: np.ndarray | None = None,
) -> LearnedMapping:
    """The routing table of a token -> matcher decision, with its manifest."""
    hot = 0 if problem.split_plan is None else int(problem.split_plan.hot_words.size)
    manifest: LearnerManifest = {
        **about,
        "corpus_fingerprint": corpus.fingerprint(),
        "training_posts": corpus.n_posts,
        "training_words": corpus.n_words,
        "mapped_tokens": int(np.count_nonzero(token_matcher >= 0)),
        "hot_words": hot,
        "learn_seconds": round(seconds, 4),
    }
    log.info(
        "learned %s N=%d: %d tokens, %d hot words, %.2fs",
        manifest["label"],
        n_matchers,
        manifest["mapped_tokens"],
        hot,
        seconds,
    )
    table = _routing_table(problem, token_matcher, n_matchers, subscribed_words, manifest, keep)
    return LearnedMapping(
        table=table,
        problem=problem,
        learn_seconds=seconds,
        subscription_frequencies=frequencies,
    )


def _routing_table(
    problem: LearningProblem,
    token_matcher: np.ndarray,
    n_matchers: int,
    subscribed_words: Collection[str] | None,
    manifest: LearnerManifest,
    keep: RoutingTable | None = None,
) -> RoutingTable:
    """The table of a token -> matcher decision. Subscribed words no training post holds
    keep their matcher in ``keep`` (else hash's); the manifest counts them."""
    learned = np.flatnonzero(token_matcher >= 0)
    words = problem.vocabulary[problem.token_word[learned]]
    parts = problem.token_part[learned]
    matchers = token_matcher[learned]
    if subscribed_words is not None:
        # A subscribed word no learning post holds (a new subscription, a word not yet
        # seen) has nothing to learn from: it keeps the matcher hash routing gives it (or
        # the kept table's, so an incremental remap does not move it), as an explicit
        # row, so the table covers every subscribed word.
        unseen = sorted(set(subscribed_words).difference(words.tolist()))
        if unseen:
            kept = (
                hash_matchers(unseen, int(n_matchers))
                if keep is None
                else np.array([keep.version_matchers(w)[0] for w in unseen], dtype=np.int32)
            )
            words = np.concatenate([words, np.array(unseen, dtype=object)])
            parts = np.concatenate([parts, np.zeros(len(unseen), dtype=parts.dtype)])
            matchers = np.concatenate([matchers, kept.astype(matchers.dtype)])
            manifest = {**manifest, "unseen_subscribed_words": len(unseen)}
    return RoutingTable.from_rows(
        words,
        parts,
        matchers,
        int(n_matchers),
        subscribed_words=subscribed_words,
        manifest=manifest,
    )
