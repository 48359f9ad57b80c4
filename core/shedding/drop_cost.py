"""What a kept and a dropped post cost at the drop levels, fitted on the batches that ran
at them (the stream's shedding policy reads it into its loads L(l))."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from core.shedding.shedder import LevelLadder

# What a dropped post still costs, as a share of a post processed in full: read from the
# source and handed to a Python worker, its raw bytes scanned for its value (measured at
# 2x on the real tweets: 1.2 of 7.5 us; the no-op query's rate says the same).
DROPPED_POST_COST = 0.16
# Recent batches at drop levels the costs of a kept and a dropped post are fitted on
DROP_FIT_BATCHES = 8


@dataclass(frozen=True)
class DropCosts:
    """Seconds a batch costs whatever its size, per kept post at each level, per dropped
    post."""

    fixed: float
    kept: np.ndarray
    dropped: float


class DropCostFit:
    """The recent batches at drop levels and the costs fitted on them."""

    def __init__(self, ladder: LevelLadder, batches: int = DROP_FIT_BATCHES) -> None:
        self.ladder = ladder
        # (level, kept, dropped, seconds) of recent batches at drop levels
        self.batches: deque[tuple[int, int, int, float]] = deque(maxlen=batches)
        self.batch_lines = 0  # lines of the newest batch at a drop level

    def record(self, level: int, kept: int, dropped: int, seconds: float) -> None:
        self.batches.append((level, kept, dropped, seconds))
        self.batch_lines = kept + dropped

    def clear(self) -> None:
        self.batches.clear()

    def costs(self, shape: np.ndarray, capacity: float | None) -> DropCosts | None:
        """The costs at the drop levels (None: no batch ran at one, or no capacity yet).

        A dropped post costs ``DROPPED_POST_COST`` of a level-0 post (at ``capacity``
        posts/s); the rest is fitted on the recent batches at drop levels, time = fixed +
        kept x cost, a cost per cap: the drop levels' and the deep levels' kept posts differ
        (m = 1 sends each to one matcher and finds fewer matches to dispatch). A cap no
        recent batch ran at takes a measured cap's cost scaled by the model's ``shape`` (a
        kept post's work per level), until one does.

        The fixed part matters at high levels, where few posts are kept: folded into the
        kept posts' cost it makes each level down look far dearer than it is. It is fitted
        on the cap with the most batches; without enough spread in their kept counts to
        tell the two apart it is taken as 0."""
        if not self.batches or not capacity:
            return None
        ladder = self.ladder
        dropped_cost = DROPPED_POST_COST / capacity
        by_cap: dict[float | None, list[tuple[int, float]]] = {}
        for level, kept_posts, dropped_posts, seconds in self.batches:
            by_cap.setdefault(ladder.cap(level), []).append(
                (kept_posts, seconds - dropped_posts * dropped_cost)
            )
        if sum(k for runs in by_cap.values() for k, _ in runs) <= 0:
            return None
        fixed = 0.0
        most = max(by_cap.values(), key=len)
        kept = np.array([k for k, _ in most], dtype=np.float64)
        spent = np.array([t for _, t in most])
        if kept.shape[0] >= 3 and kept.std() > 0.05 * kept.mean() and spent.min() > 0:
            slope, intercept = np.polyfit(kept, spent, 1)
            if slope > 0:
                # never more than half of the cheapest batch: the kept posts stay the cost
                fixed = float(np.clip(intercept, 0.0, 0.5 * spent.min()))
        measured: dict[float | None, float] = {}
        for cap, runs in by_cap.items():
            kept_sum = sum(k for k, _ in runs)
            cost = sum(t - fixed for _, t in runs) / kept_sum if kept_sum else 0.0
            if cost > 0:
                measured[cap] = cost
        if not measured:
            return None
        # the newest batch at a measured cap: what the others scale from
        reference = next(
            level for level, *_ in reversed(self.batches) if ladder.cap(level) in measured
        )
        scale = measured[ladder.cap(reference)] / max(float(shape[reference]), 1e-9)
        kept_cost = np.array(
            [measured.get(ladder.cap(lv), scale * float(shape[lv])) for lv in range(shape.shape[0])]
        )
        return DropCosts(fixed, kept_cost, dropped_cost)
