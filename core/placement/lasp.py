"""Subscription placement: LASP (paper 001, Alg. 2) and the random-anycast default.

LASP's utility for eligible matcher i is -f(|S \\ H(i)|) x CV(f(|H(1)|), ..., f(|H(N)|)
after the move), f linear (the fitted trie cost, see ``cost``). The paper prints
sqrt(var / avg); we use the coefficient of variation std / avg, the same imbalance SALB
uses. Of eligible matchers with equal utility the one holding the fewest subscriptions
wins (the paper leaves ties open; see the kernel for why they matter). Placement is
incremental: one subscription at a time, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from core.corpus import _kernels as corpus_kernels
from core.corpus.arrays import Corpus, take_rows
from core.errors import InvalidArgumentError
from core.placement._lasp_kernels import place
from core.routing.router import align_table
from core.routing.table import RoutingTable

Policy = Literal["lasp", "random"]


@dataclass(frozen=True)
class CostModel:
    """f(x) = slope * x + intercept: matching operations per post vs unique trie words."""

    slope: float
    intercept: float

    def __call__(self, unique_words: float) -> float:
        return self.slope * unique_words + self.intercept


UNIT_COST = CostModel(slope=1.0, intercept=0.0)


@dataclass(frozen=True)
class Placement:
    """Matchers of each subscription (CSR; one entry unless multicast).

    Attributes:
        n_matchers: N.
        sub_ids: ``(n_subs,)`` ids of the placed subscriptions, in placement order.
        indptr, matchers: subscription row -> matchers.
        unique_words: ``(N,)`` |H(i)| after placement.
    """

    n_matchers: int
    sub_ids: np.ndarray
    indptr: np.ndarray
    matchers: np.ndarray
    unique_words: np.ndarray

    @property
    def n_subscriptions(self) -> int:
        return int(self.indptr.shape[0] - 1)

    def subscriptions_by_matcher(self) -> tuple[np.ndarray, np.ndarray]:
        """matcher -> subscription rows, as CSR ``(indptr, rows)``."""
        return corpus_kernels.transpose_csr(self.indptr, self.matchers, self.n_matchers)

    def matcher_sets(self) -> dict[int, frozenset[int]]:
        """sub_id -> the matchers it is placed on."""
        return {
            int(sub_id): frozenset(self.matchers[self.indptr[k] : self.indptr[k + 1]].tolist())
            for k, sub_id in enumerate(self.sub_ids.tolist())
        }

    def single_matchers(self) -> dict[int, int]:
        """sub_id -> matcher, for the subscriptions placed on exactly one (not multicast)."""
        one = np.flatnonzero(np.diff(self.indptr) == 1)
        return dict(
            zip(self.sub_ids[one].tolist(), self.matchers[self.indptr[one]].tolist(), strict=True)
        )

    def select(self, sub_ids: np.ndarray) -> Placement | None:
        """The placement of ``sub_ids`` only (rows in that order), or None when one of
        them is not placed here."""
        wanted = np.asarray(sub_ids, dtype=np.int64)
        rows = self._rows_of(wanted)
        if np.any(rows < 0):
            return None
        indptr, matchers = take_rows(self.indptr, self.matchers, rows)
        return Placement(self.n_matchers, wanted, indptr, matchers, self.unique_words)

    def _rows_of(self, sub_ids: np.ndarray) -> np.ndarray:
        """The row of each of ``sub_ids``, -1 where it is not placed."""
        order = np.argsort(self.sub_ids, kind="stable")
        ordered = self.sub_ids[order]
        pos = np.minimum(np.searchsorted(ordered, sub_ids), max(ordered.shape[0] - 1, 0))
        if ordered.shape[0] == 0:
            return np.full(sub_ids.shape[0], -1, dtype=np.int64)
        return np.where(ordered[pos] == sub_ids, order[pos], -1).astype(np.int64)

    def kept_matchers(self, sub_ids: np.ndarray) -> np.ndarray:
        """``(len(sub_ids),)`` int32: the one matcher each of ``sub_ids`` sits on here, -1
        where it is not placed or placed on several (multicast)."""
        rows = self._rows_of(np.asarray(sub_ids, dtype=np.int64))
        single = np.diff(self.indptr) == 1
        ok = rows >= 0
        ok[ok] = single[rows[ok]]
        kept = np.full(rows.shape[0], -1, dtype=np.int32)
        kept[ok] = self.matchers[self.indptr[rows[ok]]]
        return kept

    def multicast_count(self) -> int:
        """Subscriptions placed on more than one matcher (all-hot-word ones)."""
        return int(np.count_nonzero(np.diff(self.indptr) > 1))


def place_subscriptions(
    table: RoutingTable,
    subscriptions: Corpus,
    *,
    policy: Policy = "lasp",
    cost: CostModel = UNIT_COST,
    seed: int = 0,
    previous: Mapping[int, int] | Placement | None = None,
) -> Placement:
    """Place every subscription (rows of ``subscriptions``) on matchers of ``table``.

    With ``previous`` (the published version's placement, or its
    :meth:`Placement.single_matchers`: sub_id -> the one matcher it sits on), a subscription
    stays on that matcher while it is still eligible (holds one of its words), so a remap
    re-places only the subscriptions whose words moved.

    Raises:
        InvalidArgumentError: for an unknown policy, an empty subscription, or a
            subscription word the table does not route (not in its subscribed words).
    """
    if policy not in ("lasp", "random"):
        raise InvalidArgumentError(f"policy must be 'lasp' or 'random', got {policy!r}")
    if np.any(np.diff(subscriptions.indptr) < 1):
        raise InvalidArgumentError("every subscription needs at least one word")
    # the words in use, renumbered densely (a count per word, not a sort of every edge:
    # 10M subscriptions' 80M edges sorted took gigabytes)
    in_use = np.bincount(subscriptions.indices, minlength=subscriptions.n_words) > 0
    used = np.flatnonzero(in_use)
    renumber = np.full(subscriptions.n_words, -1, dtype=np.int32)
    renumber[used] = np.arange(used.shape[0], dtype=np.int32)
    compact = renumber[subscriptions.indices]
    words = subscriptions.vocabulary[used]
    if table.subscribed_words is not None:
        missing = [w for w in words.tolist() if w not in table.subscribed_words]
        if missing:
            raise InvalidArgumentError(
                f"{len(missing)} subscription words are not routed by this table "
                f"(e.g. {missing[:3]}); learn it with these subscriptions' words"
            )
    aligned = align_table(table, words)
    unique = np.zeros(table.n_matchers, dtype=np.int64)
    sub_ids = _sub_ids(subscriptions)
    keep = np.full(subscriptions.n_posts, -1, dtype=np.int32)
    if isinstance(previous, Placement):
        keep = previous.kept_matchers(sub_ids)
    elif previous:
        keep = np.array([previous.get(int(s), -1) for s in sub_ids.tolist()], dtype=np.int32)
    if keep.size and keep.max() >= table.n_matchers:
        raise InvalidArgumentError(
            f"the previous placement uses matcher {int(keep.max())}, the table has "
            f"N={table.n_matchers}: nothing can stay in place"
        )
    indptr, matchers = place(
        subscriptions.indptr,
        compact,
        aligned.part_start,
        aligned.part_count,
        aligned.part_matchers,
        np.zeros((table.n_matchers, int(used.shape[0])), dtype=np.int32),
        unique,
        np.zeros(table.n_matchers, dtype=np.int64),
        float(cost.slope),
        float(cost.intercept),
        policy == "random",
        int(seed),
        keep,
    )
    return Placement(table.n_matchers, sub_ids, indptr, matchers, unique)


def _sub_ids(subscriptions: Corpus) -> np.ndarray:
    """The subscriptions' ids as int64 (their row numbers when the corpus has no ids)."""
    ids = subscriptions.post_ids
    if ids is None:
        return np.arange(subscriptions.n_posts, dtype=np.int64)
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64, copy=False)
    return np.array([int(x) for x in ids], dtype=np.int64)


def moved_subscriptions(
    before: Mapping[int, frozenset[int]] | Placement, current: Placement
) -> int:
    """Subscriptions in both placements whose matchers differ (re-placed by a remap);
    ``before`` is the earlier placement, or its :meth:`Placement.matcher_sets`."""
    if isinstance(before, Placement):
        return _moved_between(before, current)
    return sum(
        1
        for sub_id, matchers in current.matcher_sets().items()
        if sub_id in before and before[sub_id] != matchers
    )


def _moved_between(before: Placement, current: Placement) -> int:
    """:func:`moved_subscriptions` on columns: (sub, matcher) pairs of the subscriptions in
    both, as one int64 key each; a subscription moved when one of its pairs is in one
    placement only."""
    both = np.intersect1d(before.sub_ids, current.sub_ids)
    n = np.int64(max(before.n_matchers, current.n_matchers))

    def keys(placement: Placement) -> np.ndarray:
        rows = placement._rows_of(both)
        indptr, matchers = take_rows(placement.indptr, placement.matchers, rows)
        subs = np.repeat(both, np.diff(indptr))
        return np.unique(subs * n + matchers.astype(np.int64))

    differ = np.setxor1d(keys(before), keys(current), assume_unique=True)
    return int(np.unique(differ // n).shape[0])
