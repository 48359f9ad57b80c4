"""What the ``yield`` utility knows of a routing version: matches per (post, matcher slot),
learned from the match tasks' sampled counts (:class:`core.shedding.yield_stats.YieldStats`).
The shedding policy (``core.stream.shedding_policy``) chooses levels; this learns yields."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.shedding.yield_stats import YieldObservation, YieldStats
from core.stream.notes import MatchNote
from core.stream.slot_weights import SlotWeightStore
from core.stream.snapshot import MatcherSnapshot


class MatchYields:
    """The yield estimate of the routing version in force; a new version starts afresh
    (slots are a version's own)."""

    def __init__(self) -> None:
        self.stats = YieldStats()
        self._version: tuple[str, int] | None = None

    def _follow(self, snapshot: MatcherSnapshot) -> None:
        version = (snapshot.owner, snapshot.routing_version)
        if version != self._version:
            self._version = version
            self.stats = YieldStats()

    def weights(
        self, snapshot: MatcherSnapshot, store: SlotWeightStore, batch_id: int, *, replayed: bool
    ) -> np.ndarray:
        """A batch's utility weight per slot: saved to ``store`` before the batch runs, or
        on a replay loaded from it, so the replay sheds the same pairs."""
        self._follow(snapshot)
        weight = store.load(batch_id, snapshot) if replayed else None
        if weight is None:
            weight = self.stats.weights(snapshot.slot_subscriptions)
            store.save(batch_id, snapshot, weight)
        return weight

    def learn(self, snapshot: MatcherSnapshot, match_notes: Sequence[MatchNote]) -> None:
        """Fold in a committed batch's sampled yield counts."""
        self._follow(snapshot)
        parts = [
            YieldObservation(
                np.asarray(observed["slots"], dtype=np.int64),
                np.asarray(observed["matches"], dtype=np.float64),
                np.asarray(observed["posts"], dtype=np.float64),
            )
            for n in match_notes
            if (observed := n.get("yield_counts")) is not None
        ]
        if parts:
            self.stats.update(YieldObservation.merge(parts), int(snapshot.part_matchers.shape[0]))
