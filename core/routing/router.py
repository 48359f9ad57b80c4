"""The router: a post goes to the distinct matchers owning its subscribed words (Eq. 1).

Split words pick one version uniformly at random per post (seeded, counter-based, so a
replay routes identically); words missing from the table route by the stable hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from core.corpus.arrays import Corpus
from core.errors import InvalidArgumentError
from core.routing import _router_kernels
from core.routing.hashing import hash_matchers
from core.routing.table import RoutingTable


@dataclass(frozen=True)
class RoutedPosts:
    """Each post's matchers K(P, M) as CSR: ``matchers[indptr[p]:indptr[p + 1]]``."""

    n_matchers: int
    indptr: np.ndarray
    matchers: np.ndarray

    @property
    def n_posts(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def loads(self) -> np.ndarray:
        """``(N,)`` int64: L(i, M), posts routed to each matcher (a post counts once)."""
        return np.bincount(self.matchers, minlength=self.n_matchers).astype(np.int64)

    def spreads(self) -> np.ndarray:
        """``(n_posts,)`` int64: |K(P, M)| per post."""
        return np.diff(self.indptr)


@dataclass(frozen=True)
class AlignedTable:
    """A routing table re-indexed by a corpus vocabulary (hash fall-back filled in)."""

    part_start: np.ndarray
    part_count: np.ndarray
    part_matchers: np.ndarray
    subscribed: np.ndarray


def align_table(table: RoutingTable, vocabulary: np.ndarray) -> AlignedTable:
    """Index ``table`` by the word ids of ``vocabulary``."""
    n_words = len(vocabulary)
    mapped = np.fromiter(
        (table.word_index.get(w, -1) for w in vocabulary), dtype=np.int64, count=n_words
    )
    unmapped = np.flatnonzero(mapped < 0)
    fallback = hash_matchers(vocabulary[unmapped].tolist(), table.n_matchers)
    part_start = np.empty(n_words, dtype=np.int64)
    part_count = np.ones(n_words, dtype=np.int32)
    known = mapped >= 0
    part_start[known] = table.part_indptr[mapped[known]]
    part_count[known] = np.diff(table.part_indptr)[mapped[known]]
    part_start[unmapped] = table.part_matchers.shape[0] + np.arange(unmapped.shape[0])
    part_matchers = np.concatenate([table.part_matchers, fallback]).astype(np.int32)
    if table.subscribed_words is None:
        subscribed = np.ones(n_words, dtype=bool)
    else:
        wanted = table.subscribed_words
        subscribed = np.fromiter((w in wanted for w in vocabulary), dtype=bool, count=n_words)
    return AlignedTable(part_start, part_count, part_matchers, subscribed)


def route_corpus(table: RoutingTable, corpus: Corpus, *, seed: int = 0) -> RoutedPosts:
    """Route every post of ``corpus`` with ``table``.

    Raises:
        InvalidArgumentError: if ``seed`` is negative.
    """
    if seed < 0:
        raise InvalidArgumentError(f"seed must be >= 0, got {seed}")
    aligned = align_table(table, corpus.vocabulary)
    indptr, matchers = _router_kernels.route_posts(
        corpus.indptr,
        corpus.indices,
        aligned.part_start,
        aligned.part_count,
        aligned.part_matchers,
        aligned.subscribed,
        table.n_matchers,
        int(seed),
    )
    return RoutedPosts(table.n_matchers, indptr, matchers)


def route_post(table: RoutingTable, words: Iterable[str], rng: np.random.Generator) -> list[int]:
    """Route one post given as words: the sorted distinct matchers K(P, M)."""
    targets: set[int] = set()
    for word in set(words):
        if not table.is_subscribed(word):
            continue
        versions = table.version_matchers(word)
        pick = 0 if versions.shape[0] == 1 else int(rng.integers(versions.shape[0]))
        targets.add(int(versions[pick]))
    return sorted(targets)


def route_csr(
    indptr: np.ndarray,
    word_ids: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    n_matchers: int,
    *,
    seed: int = 0,
) -> RoutedPosts:
    """Route posts given as CSR of word ids, each id's versions given by
    ``part_matchers[part_start[w]:part_start[w] + part_count[w]]`` (every id routes).

    Raises:
        InvalidArgumentError: on ids outside ``part_start`` or a negative seed.
    """
    if seed < 0:
        raise InvalidArgumentError(f"seed must be >= 0, got {seed}")
    if word_ids.size and (word_ids.min() < 0 or word_ids.max() >= part_start.shape[0]):
        raise InvalidArgumentError("word ids must index part_start")
    routed_indptr, matchers = _router_kernels.route_posts(
        indptr,
        word_ids,
        part_start,
        part_count,
        part_matchers,
        np.ones(part_start.shape[0], dtype=np.bool_),
        n_matchers,
        int(seed),
    )
    return RoutedPosts(n_matchers, routed_indptr, matchers)
