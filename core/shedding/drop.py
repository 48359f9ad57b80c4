"""A drop level on raw lines: which whole posts go, decided before any per-post work.

Runs first in a route task, on the block of raw lines Spark hands it: the plan's seeded
exempt sample is drawn over the lines (processed in full whatever the level, so the yield
estimate keeps learning), then the plan's ``drop_fraction`` of the other lines goes, the
least valuable by :mod:`core.shedding.post_value` or, without values, at random. A line
that does not start like a JSON object is never dropped: it goes on to be judged and
quarantined with its reason, so shedding never hides bad input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.shedding.plan import ShedPlan
from core.shedding.post_value import keep_most_valuable, line_values
from core.shedding.shedder import exempt_posts


@dataclass(frozen=True)
class LineDrop:
    """Per line: ``keep`` (goes on), ``sampled`` (the exempt sample); the estimated
    matches of the dropped and of the kept lines (0 for a random drop)."""

    keep: np.ndarray
    sampled: np.ndarray
    dropped_value: float = 0.0
    kept_value: float = 0.0

    @property
    def dropped(self) -> int:
        return int(self.keep.shape[0] - np.count_nonzero(self.keep))


def drop_lines(plan: ShedPlan, lines: pa.Array, seed: int) -> LineDrop:
    """The plan's drop over one block of raw lines (see the module docstring)."""
    n = len(lines)
    sampled = (
        exempt_posts(n, plan.exempt_fraction, seed)
        if plan.exempt_fraction > 0
        else np.zeros(n, dtype=np.bool_)
    )
    if plan.drop_fraction <= 0 or n == 0:
        return LineDrop(np.ones(n, dtype=np.bool_), sampled)
    objects = pc.fill_null(pc.match_substring_regex(lines, r"^\s*\{"), False)
    protected = sampled | ~np.asarray(objects, dtype=np.bool_)
    if plan.drop_values is None:
        values = np.zeros(n, dtype=np.float64)
    else:
        values = line_values(lines, plan.drop_values)
    keep = keep_most_valuable(values, plan.drop_fraction, protected, seed)
    return LineDrop(keep, sampled, float(values[~keep].sum()), float(values[keep].sum()))
