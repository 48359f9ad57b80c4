"""What a routing version achieves on live posts, beside hash routing on the same posts.

Per batch (or any set of posts): posts routed to each matcher (a post once per matcher,
before any shedding), for the version and for plain hash routing of the same subscribed
words. Throughput is Eq. 6 with C = 1, ``posts / max load``, so the relative throughput
against hash is ``max hash load / max load`` (paper 001, Sect. 3.1; as
:mod:`core.routing.metrics` computes it offline). Figures of several batches merge by adding
loads, so an hour's health is computed from its batches' rows, not averaged from ratios.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import InvalidArgumentError
from core.monitor.sketch import WordSketch
from core.routing.router import RoutedPosts


def _max_over_mean(loads: np.ndarray) -> float:
    mean = float(loads.mean()) if loads.size else 0.0
    return float(loads.max()) / mean if mean > 0 else math.nan


@dataclass(frozen=True)
class RoutingHealth:
    """Loads of the version and of hash routing on the same posts.

    Attributes:
        posts: posts seen (those with no subscribed word included).
        loads, hash_loads: ``(N,)`` posts routed to each matcher.
        routed_posts, hash_routed_posts: posts sent to at least one matcher.
    """

    posts: int
    loads: np.ndarray
    hash_loads: np.ndarray
    routed_posts: int
    hash_routed_posts: int

    def __post_init__(self) -> None:
        if self.loads.shape != self.hash_loads.shape or self.loads.ndim != 1:
            raise InvalidArgumentError("loads and hash_loads must be 1-D of equal length")

    @classmethod
    def empty(cls, n_matchers: int) -> RoutingHealth:
        zeros = np.zeros(n_matchers, dtype=np.int64)
        return cls(0, zeros, zeros.copy(), 0, 0)

    @classmethod
    def of(cls, version: RoutedPosts, hashed: RoutedPosts) -> RoutingHealth:
        """Health of posts routed both ways (equal post counts).

        Raises:
            InvalidArgumentError: if the two routed different posts or N.
        """
        if version.n_posts != hashed.n_posts or version.n_matchers != hashed.n_matchers:
            raise InvalidArgumentError("health needs the same posts routed both ways")
        return cls(
            version.n_posts,
            version.loads(),
            hashed.loads(),
            int(np.count_nonzero(version.spreads())),
            int(np.count_nonzero(hashed.spreads())),
        )

    def merge(self, other: RoutingHealth) -> RoutingHealth:
        return RoutingHealth(
            self.posts + other.posts,
            self.loads + other.loads,
            self.hash_loads + other.hash_loads,
            self.routed_posts + other.routed_posts,
            self.hash_routed_posts + other.hash_routed_posts,
        )

    @property
    def spread(self) -> float:
        """Mean matchers per routed post."""
        return float(self.loads.sum()) / self.routed_posts if self.routed_posts else math.nan

    @property
    def hash_spread(self) -> float:
        pairs = float(self.hash_loads.sum())
        return pairs / self.hash_routed_posts if self.hash_routed_posts else math.nan

    @property
    def imbalance(self) -> float:
        return _max_over_mean(self.loads)

    @property
    def hash_imbalance(self) -> float:
        return _max_over_mean(self.hash_loads)

    @property
    def throughput(self) -> float:
        """Eq. 6 with C = 1: posts per unit of the busiest matcher's work."""
        top = int(self.loads.max()) if self.loads.size else 0
        return self.posts / top if top else math.nan

    @property
    def relative_throughput(self) -> float:
        """T / T(hash) on the same posts."""
        top, hash_top = int(self.loads.max()), int(self.hash_loads.max())
        return hash_top / top if top and hash_top else math.nan

    def as_row(self) -> dict[str, Any]:
        """The figures as ``stream.health`` columns."""
        return {
            "posts": self.posts,
            "routed_posts": self.routed_posts,
            "pairs": int(self.loads.sum()),
            "loads": self.loads.tolist(),
            "spread": _finite(self.spread),
            "imbalance": _finite(self.imbalance),
            "throughput": _finite(self.throughput),
            "hash_pairs": int(self.hash_loads.sum()),
            "hash_loads": self.hash_loads.tolist(),
            "hash_routed_posts": self.hash_routed_posts,
            "hash_spread": _finite(self.hash_spread),
            "hash_imbalance": _finite(self.hash_imbalance),
            "relative_throughput": _finite(self.relative_throughput),
        }

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> RoutingHealth:
        """Merge ``stream.health`` rows (one routing version's, equal N).

        Raises:
            InvalidArgumentError: on no rows or rows of different N.
        """
        if not rows:
            raise InvalidArgumentError("no health rows to merge")
        total = cls.empty(len(rows[0]["loads"]))
        for row in rows:
            if len(row["loads"]) != total.loads.shape[0]:
                raise InvalidArgumentError("health rows of different N cannot be merged")
            total = total.merge(
                cls(
                    int(row["posts"]),
                    np.asarray(row["loads"], dtype=np.int64),
                    np.asarray(row["hash_loads"], dtype=np.int64),
                    int(row["routed_posts"]),
                    int(row["hash_routed_posts"] or 0),
                )
            )
        return total


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def work_throughput(posts: int, work: Sequence[int]) -> float | None:
    """Posts per unit of the busiest matcher's counted work (lookups + matches): the measure
    the publish gate and the monitor judge a version by; None when nothing was counted."""
    busiest = max(work, default=0)
    return posts / busiest if busiest > 0 else None


def split_threshold(n_matchers: int) -> float:
    """Sect. 5.1's rule as a share of all subscribed-word occurrences: a word is hot when
    its frequency exceeds half the per-matcher share, ``f(w) > sum(f) / (2N)``."""
    if n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be >= 1, got {n_matchers}")
    return 1.0 / (2 * n_matchers)


def versions_needed(share: float, n_matchers: int) -> int:
    """The versions a word of this share of occurrences needs for each to stay within the
    split threshold: ``ceil(share * 2N)`` (at least 1)."""
    if share < 0:
        raise InvalidArgumentError(f"share must be >= 0, got {share}")
    return max(1, math.ceil(share / split_threshold(n_matchers) - 1e-9))


@dataclass(frozen=True)
class HotWord:
    """A word whose every version carries more than the split threshold.

    Attributes:
        share: estimated share of all subscribed-word occurrences (an overestimate, never
            under: count-min).
        versions: the routing version's versions of the word (1 for a word it routes by
            hash).
        mapped: whether the routing version knew the word at all.
    """

    word: str
    share: float
    versions: int
    mapped: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "share": self.share,
            "versions": self.versions,
            "mapped": self.mapped,
        }


def hot_words(
    sketch: WordSketch,
    word_of_key: Mapping[int, str],
    versions_of: Callable[[str], tuple[int, bool]],
    n_matchers: int,
    *,
    tolerance: float = 0.25,
) -> list[HotWord]:
    """Words whose share per version exceeds the split threshold by more than
    ``tolerance`` (a relative margin that keeps sampling noise around the threshold from
    reporting words the version split adequately), most frequent first.

    Args:
        word_of_key: the words the sketch may hold, by sketch key (others are skipped).
        versions_of: word -> (versions in the routing version, whether it is mapped).
    """
    if tolerance < 0:
        raise InvalidArgumentError(f"tolerance must be >= 0, got {tolerance}")
    limit = split_threshold(n_matchers) * (1.0 + tolerance)
    keys, counts = sketch.heavy_hitters(limit)
    found = []
    for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
        word = word_of_key.get(int(key))
        if word is None:
            continue
        versions, mapped = versions_of(word)
        share = count / sketch.total
        if share / max(versions, 1) > limit:
            found.append(HotWord(word, share, versions, mapped))
    return found
