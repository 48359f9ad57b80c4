"""What a worker needs to route and match a micro-batch with one routing version.

A :class:`MatcherSnapshot` is plain arrays (it travels to the workers in a Spark broadcast):
the dictionary of subscription words, each word's version matchers (hash fall-back already
filled in), and each matcher's placed subscriptions as CSR. ``epoch`` increases whenever the
placed subscriptions change, so workers can tell a stale cache from a current one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.placement.live import LivePlacement
from core.stream.dispatch import Subscribers

# (owner, routing version, epoch): names one immutable snapshot.
SnapshotKey = tuple[str, int, int]


@dataclass(frozen=True, eq=False)
class MatcherSnapshot:
    """One routing version's routing arrays and per-matcher subscriptions at one epoch.

    Attributes:
        routing_version: the published version this snapshot routes with.
        epoch: the placed-subscription state's number (increases on every change).
        n_matchers: N.
        words: dictionary id -> word (the words of the placed subscriptions).
        part_start, part_count, part_matchers: per word id, the matchers of its versions.
        matcher_subs: per matcher, ``(sub_ids int64, indptr int64, word_ids int32)``.
        subscribers: the subscriber of every placed subscription (for deliveries).
        seed: seeds the choice of a split word's version.
        slot_subscriptions: per version slot, the subscriptions on its matcher holding its
            word (load shedding's ``subscription`` utility and the yield prior).
    """

    routing_version: int
    epoch: int
    n_matchers: int
    words: list[str]
    part_start: np.ndarray
    part_count: np.ndarray
    part_matchers: np.ndarray
    matcher_subs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    subscribers: Subscribers
    seed: int = 0
    slot_subscriptions: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Which stream made the snapshot: worker caches live as long as the Python workers, so
    # a second stream (or a restarted one) in the same Spark application, counting its own
    # versions and epochs from the start, must not find the first one's tries and words.
    owner: str = ""

    @property
    def key(self) -> SnapshotKey:
        return (self.owner, self.routing_version, self.epoch)

    @property
    def n_words(self) -> int:
        return len(self.words)


def snapshot_of(
    placement: LivePlacement,
    routing_version: int,
    epoch: int,
    *,
    subscribers: Subscribers | None = None,
    seed: int = 0,
    owner: str = "",
) -> MatcherSnapshot:
    """Freeze ``placement`` into a snapshot."""
    part_start, part_count, part_matchers = placement.word_versions()
    n_words = len(placement.dictionary)
    return MatcherSnapshot(
        routing_version=routing_version,
        epoch=epoch,
        n_matchers=placement.n_matchers,
        words=[placement.dictionary.word(i) for i in range(n_words)],
        part_start=part_start,
        part_count=part_count,
        part_matchers=part_matchers,
        matcher_subs=placement.by_matcher(),
        subscribers=subscribers or Subscribers.of({}),
        seed=seed,
        slot_subscriptions=placement.slot_subscriptions(),
        owner=owner,
    )
