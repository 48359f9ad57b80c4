"""The stream's input rate, in posts/s, measured over its last few plans."""

from __future__ import annotations

from collections import deque

# Plans the input rate is measured over: a file source lands whole files, so one trigger
# interval's count is off by a file either way (+-20% at 5 files per interval)
RATE_WINDOW = 3


class InputRate:
    """Posts landed so far at each of the last ``window`` plans: the rate is measured over
    them, as files land in whole numbers per trigger interval."""

    def __init__(self, window: int = RATE_WINDOW) -> None:
        self._landed: deque[tuple[float, float]] = deque(maxlen=window + 1)
        self._taken_posts = 0.0  # posts the batches so far took from the source

    def observe(self, split: tuple[float, float], now: float) -> float | None:
        """Posts/s landed over the window, from (this batch's posts, posts waiting behind
        it) at ``now``; None at the first plan."""
        batch, waiting = split
        landed = self._taken_posts + batch + waiting
        rate = None
        if self._landed and now > self._landed[0][0]:
            first_time, first_landed = self._landed[0]
            rate = max(0.0, (landed - first_landed) / (now - first_time))
        self._landed.append((now, landed))
        self._taken_posts += batch
        return rate
