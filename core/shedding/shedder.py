"""What to shed (paper 001, Sect. 5.2.1): cap each post's spread at m matchers.

A post routed to more than m matchers is forwarded only to the m with the highest utility:

- ``consensus``: how many of the post's words the matcher owns;
- ``subscription``: how many subscriptions on the matcher contain those words;
- ``yield`` (after paper 003): the matches per routed (matcher, word) observed on recent
  posts that were processed in full (:mod:`core.shedding.yield_stats`).

Levels: 0 = no cap; level l >= 1 caps at m = k - (l - 1) * delta (paper: k = 7). A
fractional m forwards the last matcher with that probability (seeded per post, so a replay
sheds the same pairs). Ties go to the lower matcher id. Shedding only removes (post,
matcher) pairs, so it can lose matches but never invent one.

Beyond the paper, a ladder may end in *drop levels*: at the smallest cap, a seeded share of
whole posts is dropped too. Capping saves only the matchers' work; when normalising and
routing the posts is itself more than the machines can take, only dropping posts helps
(what the paper's system would do when its buffer overflows, but counted and reported).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from core.errors import InvalidArgumentError
from core.shedding import _kernels as K

Utility = Literal["consensus", "subscription", "yield"]
UTILITIES: tuple[str, ...] = get_args(Utility)


@dataclass(frozen=True)
class LevelLadder:
    """Shedding levels -> spread caps: level l >= 1 caps at ``k - (l - 1) * delta``.

    Attributes:
        k: the cap of level 1 (paper: 7).
        delta: the step between levels (fractional: probabilistic last matcher).
        min_cap: the smallest cap (the last capping level).
        drop_fractions: rising shares of whole posts dropped by the levels after it.
        drop_cap: the cap of the drop levels (None: ``min_cap``). Where routing, not
            matching, dominates the cost, a moderate cap with fewer posts dropped keeps
            more matches than the smallest cap with more dropped.
        deep_cap: the cap of the *deep* drop levels, after the drop levels (at most
            ``drop_cap``), with their own rising ``deep_fractions``: deep in overload a
            smaller cap keeps more posts at the same cost, for somewhat fewer matches.
    """

    k: float = 7.0
    delta: float = 1.0
    min_cap: float = 1.0
    drop_fractions: tuple[float, ...] = ()
    drop_cap: float | None = None
    deep_cap: float | None = None
    deep_fractions: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.drop_cap is not None and not self.min_cap <= self.drop_cap <= self.k:
            raise InvalidArgumentError(f"drop_cap must lie in [min_cap, k], got {self.drop_cap}")
        if self.deep_fractions and self.deep_cap is None:
            raise InvalidArgumentError("deep_fractions need a deep_cap")
        upper = self.drop_cap if self.drop_cap is not None else self.min_cap
        if self.deep_cap is not None and not 1 <= self.deep_cap <= upper:
            raise InvalidArgumentError(
                f"deep_cap must lie in [1, {upper}] (the drop levels' cap), got {self.deep_cap}"
            )
        if self.delta <= 0 or self.min_cap < 1 or self.k < self.min_cap:
            raise InvalidArgumentError(
                f"need delta > 0 and 1 <= min_cap <= k, got k={self.k}, delta={self.delta}, "
                f"min_cap={self.min_cap}"
            )
        for fractions in (self.drop_fractions, self.deep_fractions):
            if any(not 0 < d < 1 for d in fractions) or any(
                b <= a for a, b in itertools.pairwise((0.0, *fractions))
            ):
                raise InvalidArgumentError("drop fractions must rise within (0, 1)")

    @property
    def cap_levels(self) -> int:
        """The last level that only caps."""
        return 1 + math.floor((self.k - self.min_cap) / self.delta + 1e-9)

    @property
    def deep_levels(self) -> int:
        """The first deep drop level (``max_level + 1`` without any)."""
        return self.cap_levels + len(self.drop_fractions) + 1

    @property
    def max_level(self) -> int:
        return self.cap_levels + len(self.drop_fractions) + len(self.deep_fractions)

    def _check(self, level: int) -> None:
        if not 0 <= level <= self.max_level:
            raise InvalidArgumentError(f"level must lie in [0, {self.max_level}], got {level}")

    def cap(self, level: int) -> float | None:
        """The spread cap m of ``level`` (None: level 0, no cap)."""
        self._check(level)
        if level == 0:
            return None
        if level >= self.deep_levels and self.deep_cap is not None:
            return self.deep_cap
        if level > self.cap_levels and self.drop_cap is not None:
            return self.drop_cap
        return max(self.min_cap, self.k - (level - 1) * self.delta)

    def drop(self, level: int) -> float:
        """The share of whole posts ``level`` drops (0 below the drop levels)."""
        self._check(level)
        if level >= self.deep_levels:
            return self.deep_fractions[level - self.deep_levels]
        beyond = level - self.cap_levels
        return self.drop_fractions[beyond - 1] if beyond > 0 else 0.0


def split_cap(max_spread: float) -> tuple[int, float]:
    """m -> (whole matchers, probability of one more)."""
    if not max_spread >= 1:
        raise InvalidArgumentError(f"a spread cap must be >= 1, got {max_spread}")
    whole = math.floor(max_spread)
    return whole, float(max_spread - whole)


def pair_utilities(
    indptr: np.ndarray,
    word_ids: np.ndarray,
    part_start: np.ndarray,
    part_count: np.ndarray,
    part_matchers: np.ndarray,
    routed_indptr: np.ndarray,
    routed_matchers: np.ndarray,
    n_matchers: int,
    *,
    slot_weight: np.ndarray | None = None,
    subscribed: np.ndarray | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Utility of each routed pair: the sum of ``slot_weight`` (one per version slot, i.e.
    per (word, matcher)) over the post's words routed there; ``None`` = 1 per word, which is
    the consensus utility. ``seed`` must be the router's, so split words draw alike.

    Raises:
        InvalidArgumentError: on arrays that do not fit together.
    """
    n_slots = part_matchers.shape[0]
    weight = np.ones(n_slots) if slot_weight is None else np.asarray(slot_weight, np.float64)
    if weight.shape != (n_slots,):
        raise InvalidArgumentError(f"slot_weight needs one value per slot ({n_slots})")
    n_words = part_start.shape[0]
    if word_ids.size and (word_ids.min() < 0 or word_ids.max() >= n_words):
        raise InvalidArgumentError("word ids must index part_start")
    mask = np.ones(n_words, dtype=np.bool_) if subscribed is None else subscribed
    if indptr.shape[0] != routed_indptr.shape[0]:
        raise InvalidArgumentError("posts and routed posts differ in number")
    return K.pair_utilities(
        np.ascontiguousarray(indptr, np.int64),
        np.ascontiguousarray(word_ids, np.int32),
        np.ascontiguousarray(part_start, np.int64),
        np.ascontiguousarray(part_count, np.int32),
        np.ascontiguousarray(part_matchers, np.int32),
        np.ascontiguousarray(mask, np.bool_),
        weight,
        np.ascontiguousarray(routed_indptr, np.int64),
        np.ascontiguousarray(routed_matchers, np.int32),
        int(n_matchers),
        int(seed),
    )


def cap_spread(
    routed_indptr: np.ndarray,
    routed_matchers: np.ndarray,
    utility: np.ndarray,
    max_spread: float | None,
    *,
    exempt: np.ndarray | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Boolean keep-mask over the routed pairs: each post keeps its ``max_spread`` pairs of
    highest utility (None: every pair). ``exempt`` posts keep all of theirs."""
    n_pairs = routed_matchers.shape[0]
    if utility.shape != (n_pairs,):
        raise InvalidArgumentError("one utility per routed pair is required")
    if max_spread is None:
        return np.ones(n_pairs, dtype=np.bool_)
    whole, fraction = split_cap(max_spread)
    n_posts = routed_indptr.shape[0] - 1
    free = np.zeros(n_posts, dtype=np.bool_) if exempt is None else exempt
    if free.shape != (n_posts,):
        raise InvalidArgumentError("one exempt flag per post is required")
    return K.cap_pairs(
        np.ascontiguousarray(routed_indptr, np.int64),
        np.ascontiguousarray(routed_matchers, np.int32),
        np.ascontiguousarray(utility, np.float64),
        whole,
        fraction,
        np.ascontiguousarray(free, np.bool_),
        int(seed),
    )


def exempt_posts(n_posts: int, fraction: float, seed: int) -> np.ndarray:
    """The posts processed in full whatever the level (seeded): an unbiased sample that
    keeps the yield estimate honest while the rest is capped."""
    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgumentError(f"the exempt fraction must lie in [0, 1], got {fraction}")
    return K.exempt_posts(int(n_posts), float(fraction), int(seed))


def drop_posts_at_random(n_posts: int, fraction: float, seed: int) -> np.ndarray:
    """The baseline: keep-mask over whole posts, each dropped with probability ``fraction``."""
    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgumentError(f"the drop fraction must lie in [0, 1], got {fraction}")
    return K.keep_posts(int(n_posts), float(fraction), int(seed))


def pair_load(spreads: np.ndarray, max_spread: float | None) -> float:
    """Expected routed pairs kept under a cap, from the posts' spreads (any utility)."""
    spreads = np.asarray(spreads, dtype=np.int64)
    if spreads.size == 0:
        return 0.0
    return pair_load_of_histogram(np.bincount(spreads), max_spread)


def pair_load_of_histogram(counts: np.ndarray, max_spread: float | None) -> float:
    """:func:`pair_load` from ``counts[s]``, the number of posts of spread s: the same
    figure in the histogram's size, not the posts' (a stream's histogram covers every
    post it has seen)."""
    counts = np.asarray(counts, dtype=np.float64)
    spreads = np.arange(counts.shape[0], dtype=np.float64)
    if max_spread is None:
        return float(counts @ spreads)
    whole, fraction = split_cap(max_spread)
    kept = np.minimum(spreads, whole) + fraction * (spreads > whole)
    return float(counts @ kept)


def level_loads(spreads: np.ndarray, ladder: LevelLadder) -> np.ndarray:
    """L(l) for every level: routed pairs kept / pairs at level 0 (1.0 at level 0)."""
    total = float(spreads.sum())
    out = np.ones(ladder.max_level + 1)
    if total > 0:
        for level in range(1, ladder.max_level + 1):
            out[level] = pair_load(spreads, ladder.cap(level)) / total
    return out
