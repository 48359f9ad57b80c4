"""Hot-word splitting (paper 001, Sect. 5.1), as a transformation of the learning input.

The per-node share is the total frequency of the (subscribed) words over N. A word whose
post frequency f(w) exceeds half of that share is hot and is split into the smallest number
k of versions whose post counts all stay within the cap ``max(1, floor(share / 2))``: that
is ``k = ceil(f(w) / cap)``. While learning, the posts of a hot word are dealt to its
versions by a seeded random permutation in round-robin, so each version gets ``f/k``
rounded up or down and no version exceeds the cap. Versions are then learned like words,
by any learner. At routing time a post picks one version uniformly at random.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError


@dataclass(frozen=True)
class SplitPlan:
    """How many versions each word gets.

    Attributes:
        per_node_share: total frequency of the considered words / N.
        cap: the largest post count a version may have.
        n_parts: ``(n_words,)`` int32, 1 for words that are not split.
    """

    per_node_share: float
    cap: int
    n_parts: np.ndarray

    @property
    def hot_words(self) -> np.ndarray:
        """Ids of the words split into more than one version."""
        return np.flatnonzero(self.n_parts > 1)


def plan_split(frequencies: np.ndarray, considered: np.ndarray, n_matchers: int) -> SplitPlan:
    """Decide the number of versions of every word.

    Args:
        frequencies: ``(n_words,)`` post frequencies f(w).
        considered: ``(n_words,)`` bool, the words that generate load (subscribed ones).
        n_matchers: N.

    Raises:
        InvalidArgumentError: on mismatched shapes, negative frequencies or N < 1.
    """
    freq = np.asarray(frequencies)
    mask = np.asarray(considered, dtype=bool)
    if freq.ndim != 1 or mask.shape != freq.shape:
        raise InvalidArgumentError("frequencies and considered must be 1-D of equal length")
    if freq.size and freq.min() < 0:
        raise InvalidArgumentError("frequencies must be non-negative")
    if n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be >= 1, got {n_matchers}")
    share = float(freq[mask].sum()) / n_matchers
    cap = max(1, int(share // 2))
    n_parts = np.ones(freq.shape[0], dtype=np.int32)
    hot = mask & (freq > share / 2)
    n_parts[hot] = np.ceil(freq[hot] / cap).astype(np.int32)
    return SplitPlan(per_node_share=share, cap=cap, n_parts=n_parts)


def deal_versions(word_indptr: np.ndarray, n_parts: np.ndarray, seed: int) -> np.ndarray:
    """The version of every (word, post) edge of the word->posts CSR.

    Returns:
        ``(n_edges,)`` int32 aligned with the word->posts CSR: edge ``e`` of word ``w``
        gets version ``rank % n_parts[w]`` where ``rank`` is the edge's position in a seeded
        random permutation of the word's posts.
    """
    if n_parts.shape[0] != word_indptr.shape[0] - 1:
        raise InvalidArgumentError("n_parts must have one entry per word of word_indptr")
    rng = np.random.default_rng(seed)
    versions = np.zeros(int(word_indptr[-1]), dtype=np.int32)
    for word in np.flatnonzero(n_parts > 1):
        start, stop = int(word_indptr[word]), int(word_indptr[word + 1])
        ranks = rng.permutation(stop - start)
        versions[start:stop] = ranks % n_parts[word]
    return versions
