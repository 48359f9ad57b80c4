"""A micro-batch's shedding plan: what the driver decided, what the route tasks apply.

Part of the batch plan (``stream.batches``): a replayed batch carries the same level, cap
and utility weights, so it sheds exactly the same (post, matcher) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from core.errors import InvalidArgumentError
from core.shedding.post_value import ValueTable
from core.shedding.shedder import Utility

ShedMode = Literal["off", Utility]
SHEDDING_MODES: tuple[str, ...] = get_args(ShedMode)
# How a drop level picks the posts it drops: the least valuable by the learned estimate
# (:mod:`core.shedding.post_value`), or at random (the baseline).
DropRule = Literal["value", "random"]
DROP_RULES: tuple[str, ...] = get_args(DropRule)


@dataclass(frozen=True, eq=False)
class ShedPlan:
    """Attributes:
    utility: ``off`` or one of :data:`core.shedding.shedder.UTILITIES`.
    level: the shedding level (0: no cap).
    max_spread: the cap m of the level (None at level 0).
    slot_weight: per version slot, the utility's weight (None: consensus, 1 per word).
    exempt_fraction: posts processed in full whatever the level, the sample the yield
        estimate learns from (0: every post counts, nothing exempt).
    drop_fraction: share of whole posts dropped (a drop level: the last resort).
    drop_values: the estimate of each post's matches the drop ranks posts by (None: the
        drop is random).
    """

    utility: str = "off"
    level: int = 0
    max_spread: float | None = None
    slot_weight: np.ndarray | None = None
    exempt_fraction: float = 0.0
    drop_fraction: float = 0.0
    drop_values: ValueTable | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop_fraction < 1.0:
            raise InvalidArgumentError(f"drop fraction must lie in [0, 1): {self.drop_fraction}")
        if self.utility not in SHEDDING_MODES:
            raise InvalidArgumentError(f"shedding must be one of {SHEDDING_MODES}")
        if (self.level == 0) != (self.max_spread is None):
            raise InvalidArgumentError("level 0 has no cap; every other level has one")
        if self.max_spread is not None and self.max_spread < 1:
            raise InvalidArgumentError(f"a spread cap must be >= 1, got {self.max_spread}")

    @property
    def active(self) -> bool:
        return self.max_spread is not None

    @property
    def learns_yield(self) -> bool:
        """Whether the match tasks report yield counts (only the yield utility uses them)."""
        return self.utility == "yield"


NO_SHEDDING = ShedPlan()
