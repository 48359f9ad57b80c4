"""A worker's view of routing health on the posts it routes: each dictionary word's stable
hash (the word sketch's key; modulo N, the matcher hash routing gives the word), kept per
routing version and grown as its dictionary grows, the word occurrences it adds to the
sketch, and the version's loads beside hash routing's."""

from __future__ import annotations

import numpy as np

from core.monitor.health import RoutingHealth
from core.monitor.sketch import WordSketch, word_keys
from core.routing.router import RoutedPosts, route_csr
from core.stream.snapshot import MatcherSnapshot


class WordKeys:
    """The stable hashes of one routing version's dictionary words (a newer version
    replaces them)."""

    def __init__(self) -> None:
        self._version: tuple[str, int] | None = None
        self._keys = np.zeros(0, dtype=np.uint64)

    def of(self, snapshot: MatcherSnapshot) -> np.ndarray:
        """``(n_words,)`` uint64: each dictionary word's stable hash."""
        version = (snapshot.owner, snapshot.routing_version)
        if version != self._version:
            self._version, self._keys = version, np.zeros(0, dtype=np.uint64)
        known = self._keys.shape[0]
        if known < snapshot.n_words:  # the dictionary only grows within a version
            self._keys = np.concatenate([self._keys, word_keys(snapshot.words[known:])])
        return self._keys[: snapshot.n_words]

    def count_words(
        self, snapshot: MatcherSnapshot, word_counts: np.ndarray, sketch: WordSketch
    ) -> None:
        """Add word occurrences to ``sketch``: ``word_counts[w]`` posts held dictionary word
        w (a task sums its blocks' ``np.bincount`` first: one sketch update per task)."""
        keys = self.of(snapshot)
        present = np.flatnonzero(word_counts)
        sketch.add(keys[present], word_counts[present])

    def health(
        self,
        snapshot: MatcherSnapshot,
        indptr: np.ndarray,
        word_ids: np.ndarray,
        routed: RoutedPosts,
    ) -> RoutingHealth:
        """The version's loads on these posts (``routed``) beside hash routing's (each
        subscribed word to ``stable_hash(word) % N``)."""
        keys = self.of(snapshot)
        n = snapshot.n_matchers
        hashed = route_csr(
            indptr,
            word_ids,
            np.arange(snapshot.n_words, dtype=np.int64),
            np.ones(snapshot.n_words, dtype=np.int32),
            (keys % np.uint64(n)).astype(np.int32),
            n,
        )
        return RoutingHealth.of(routed, hashed)
