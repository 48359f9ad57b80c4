"""The shedding controller in simulated time (Fig. 8b): a queue fed at a scripted input rate,
served at the capacity of the current level, adapted once per period.

Deterministic: no clock, no threads. Each period ``dt``: ``rate * dt`` posts arrive, up to
``capacity / L(level) * dt`` are served, posts beyond ``buffer_capacity`` are dropped
(counted: the overflow the controller must prevent), then the controller reads the fullness
(the queue's work at the current level, as the stream reads its backlog).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.shedding.controller import SheddingController


@dataclass(frozen=True)
class RateStep:
    start: float  # seconds
    rate: float  # posts per second


@dataclass(frozen=True)
class SimulatedRun:
    """Per period: time, input rate, fullness, level, latency (queue / service rate)."""

    time: np.ndarray
    input_rate: np.ndarray
    fullness: np.ndarray
    level: np.ndarray
    latency: np.ndarray
    dropped: np.ndarray

    def level_changes(self, start: float, stop: float) -> int:
        """Level changes from the period before ``start`` (a change at the step itself
        counts) to the last period before ``stop``."""
        inside = np.flatnonzero((self.time >= start) & (self.time < stop))
        if not inside.size:
            return 0
        levels = self.level[max(0, int(inside[0]) - 1) : int(inside[-1]) + 1]
        return int((np.diff(levels) != 0).sum())


def rate_at(steps: Sequence[RateStep], t: float) -> float:
    rate = steps[0].rate
    for step in steps:
        if t >= step.start:
            rate = step.rate
    return rate


def simulate(
    controller: SheddingController,
    steps: Sequence[RateStep],
    duration: float,
    *,
    capacity: float,
    buffer_capacity: float,
    dt: float = 1.0,
    measure_rate: bool = True,
    initial_queue: float = 0.0,
) -> SimulatedRun:
    """Run ``controller`` against the scripted input ``steps`` for ``duration`` seconds,
    starting with ``initial_queue`` posts waiting."""
    if not steps or steps[0].start != 0:
        raise InvalidArgumentError("rate steps must start at time 0")
    if capacity <= 0 or buffer_capacity <= 0 or dt <= 0 or duration <= 0:
        raise InvalidArgumentError("capacity, buffer capacity, dt and duration must be > 0")
    n = round(duration / dt)
    out = {k: np.zeros(n) for k in ("time", "input", "fullness", "level", "latency", "dropped")}
    queue = float(initial_queue)
    for i in range(n):
        t = i * dt
        rate = rate_at(steps, t)
        served = capacity / controller.loads[controller.level]
        queue += rate * dt
        queue = max(0.0, queue - served * dt)
        dropped = max(0.0, queue - buffer_capacity)
        queue -= dropped
        # the buffer in work at the current level, as the stream reads it
        work = queue * float(controller.loads[controller.level])
        decision = controller.adapt(work, rate if measure_rate else None)
        out["time"][i] = t
        out["input"][i] = rate
        out["fullness"][i] = queue
        out["level"][i] = decision.level
        out["latency"][i] = queue / (capacity / controller.loads[decision.level])
        out["dropped"][i] = dropped
    return SimulatedRun(
        out["time"],
        out["input"],
        out["fullness"],
        out["level"].astype(np.int64),
        out["latency"],
        out["dropped"],
    )
