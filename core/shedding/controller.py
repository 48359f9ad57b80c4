"""How much to shed (paper 001, Sect. 5.2.2): the 3-segment buffer and the level controller.

The buffer's fullness (posts waiting) is read once per adaptation period. Below the *ideal*
segment's top the level goes down, above the buffer size ``b`` (the *overload* segment) it
goes up, in the *stable* segment between them it holds. After a move, the controller moves
again in the same direction only if the fullness has not improved since the last period
(the paper's anti-oscillation rule).

Segment sizes from the loads per level, L(l) (work kept at level l over work at level 0):
queue length is proportional to load (Little's law), so a step down from the top of the
ideal segment multiplies the fullness by at most max_l L(l-1)/L(l). The ideal segment is
therefore ``b * min_l L(l)/L(l-1)``, and no single step down can leave it for the overload
segment, nor a step up leave overload for ideal (the paper's Eq. 8; its Eq. 9 as printed
is the complement, the stable segment's share).

Two step rules:
- ``"one"`` (the paper): one level per period;
- ``"rate"`` (default): given the measured input rate and the capacity at level 0, go to
  the least shedding level whose capacity covers the input and drains what waits within a
  few buffers' time, with ``headroom``: one input step needs one or two level changes, not one
  per period, and at a steady overload it settles on the least level that keeps up, down
  as well as up (the paper's rule holds in the stable segment, and so can carry a backlog
  and shed more than the input demands). The anti-oscillation rule stays: no step down
  right after a step down that left the buffer fuller, no rise while the buffer drains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError

STEP_RULES = ("one", "rate")


def ideal_fraction(loads: np.ndarray) -> float:
    """The ideal segment's share of the buffer size ``b``: min over levels of L(l)/L(l-1)."""
    loads = np.asarray(loads, dtype=np.float64)
    if loads.ndim != 1 or loads.shape[0] < 2 or loads[0] != 1.0:
        raise InvalidArgumentError("loads must start with L(0) = 1 and have >= 2 levels")
    if (loads <= 0).any() or (np.diff(loads) > 1e-12).any():
        raise InvalidArgumentError("loads must be positive and not increase with the level")
    return float((loads[1:] / loads[:-1]).min())


@dataclass(frozen=True)
class Decision:
    level: int
    segment: str  # ideal | stable | overload
    moved: int  # -k, 0, +k levels


class SheddingController:
    """A pure state machine: ``adapt(fullness)`` once per period returns the level.

    Args:
        loads: L(l) per level, L(0) = 1, not increasing.
        buffer_size: b, the fullness where the overload segment starts (posts).
        step: ``"rate"`` or ``"one"`` (see the module docstring).
        capacity: posts per second the matchers take at level 0 (``"rate"`` rule).
        headroom: capacity to keep above the input rate when jumping (``"rate"`` rule).
        drain_budgets: what waits is drained within this many buffers' time, b / capacity
            each (``"rate"`` rule): one sheds hard for a moment, several shed less for
            longer (and jump less on a noisy reading).
    """

    def __init__(
        self,
        loads: np.ndarray,
        buffer_size: float,
        *,
        step: str = "rate",
        capacity: float | None = None,
        headroom: float = 1.05,
        drain_budgets: float = 4.0,
    ) -> None:
        if buffer_size <= 0:
            raise InvalidArgumentError(f"buffer size must be > 0, got {buffer_size}")
        if step not in STEP_RULES:
            raise InvalidArgumentError(f"step must be one of {STEP_RULES}, got {step!r}")
        if headroom < 1.0:
            raise InvalidArgumentError(f"headroom must be >= 1, got {headroom}")
        if drain_budgets <= 0:
            raise InvalidArgumentError(f"drain_budgets must be > 0, got {drain_budgets}")
        self.drain_budgets = drain_budgets
        self.loads = np.asarray(loads, dtype=np.float64)
        self.ideal_top = ideal_fraction(self.loads) * buffer_size
        self.buffer_size = float(buffer_size)
        self.step = step
        self.capacity = capacity
        self.headroom = headroom
        self.level = 0
        self._last_fullness: float | None = None
        self._last_move = 0

    @property
    def max_level(self) -> int:
        return int(self.loads.shape[0] - 1)

    def retune(self, loads: np.ndarray, buffer_size: float, capacity: float | None = None) -> None:
        """New measurements of L(l), b and the capacity; the level and history are kept."""
        if buffer_size <= 0:
            raise InvalidArgumentError(f"buffer size must be > 0, got {buffer_size}")
        loads = np.asarray(loads, dtype=np.float64)
        fraction = ideal_fraction(loads)
        if loads.shape[0] != self.loads.shape[0]:
            raise InvalidArgumentError("the number of levels cannot change")
        self.loads = loads
        self.buffer_size = float(buffer_size)
        self.ideal_top = fraction * buffer_size
        self.capacity = capacity

    def segment(self, fullness: float) -> str:
        if fullness >= self.buffer_size:
            return "overload"
        return "ideal" if fullness < self.ideal_top else "stable"

    def _covering_level(self, input_rate: float) -> int | None:
        """The least shedding level whose capacity covers ``input_rate`` with headroom."""
        if self.capacity is None or self.capacity <= 0:
            return None
        fits = np.flatnonzero(self.capacity / self.loads >= self.headroom * input_rate)
        return int(fits[0]) if fits.size else self.max_level

    def adapt(self, fullness: float, input_rate: float | None = None) -> Decision:
        """One adaptation period: the buffer's ``fullness`` now, in work at the current level
        (posts waiting x L(level)), and for the ``"rate"`` rule the input rate measured over
        the period (posts/s) -> the level to run at."""
        if fullness < 0:
            raise InvalidArgumentError(f"fullness must be >= 0, got {fullness}")
        segment = self.segment(fullness)
        last, previous_move = self._last_fullness, self._last_move
        self._last_fullness = fullness
        improving = last is not None and fullness < last
        worsening = last is not None and fullness > last
        wanted = self._wanted_level(fullness, input_rate) if self.step == "rate" else None
        target = self.level
        rises = segment == "overload" and not (previous_move > 0 and improving)
        may_fall = not (previous_move < 0 and worsening)
        if wanted is None:  # the paper's rule: one level per period
            if rises and self.level < self.max_level:
                target = self.level + 1
            elif segment == "ideal" and self.level > 0 and may_fall:
                target = self.level - 1
        elif segment == "overload":
            # at least one level up, unless the last rise is already draining the buffer
            if rises:
                target = min(self.max_level, max(self.level + 1, wanted))
        elif wanted > self.level and not improving:
            # the buffer holds, but the input outgrew the level
            target = wanted
        elif wanted < self.level and may_fall:
            # headroom: the least level that covers the input and drains what waits (not
            # right after a step down that left the buffer fuller)
            target = wanted
        moved = target - self.level
        self.level = target
        self._last_move = (
            int(np.sign(moved)) if moved else (previous_move if segment != "stable" else 0)
        )
        return Decision(target, segment, moved)

    def _wanted_level(self, fullness: float, input_rate: float | None) -> int | None:
        """The ``"rate"`` rule's level: the least one whose capacity covers the input plus
        draining the posts waiting within ``drain_budgets`` buffers' time; None without a
        rate or a capacity."""
        if input_rate is None or self.capacity is None or self.capacity <= 0:
            return None
        waiting = fullness / float(self.loads[self.level])  # posts (Little's law)
        drain_seconds = self.drain_budgets * self.buffer_size / self.capacity
        return self._covering_level(max(0.0, input_rate) + waiting / drain_seconds)
