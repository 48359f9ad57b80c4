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

from core.errors import InvalidArgumentError
from core.shedding.plan import ShedPlan
from core.shedding.post_value import keep_most_valuable, line_values, object_lines
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
    protected = sampled | ~object_lines(lines)
    if plan.drop_values is None:
        values = np.zeros(n, dtype=np.float64)
    else:
        values = line_values(lines, plan.drop_values)
    keep = keep_most_valuable(values, plan.drop_fraction, protected, seed)
    return LineDrop(keep, sampled, float(values[~keep].sum()), float(values[keep].sum()))


# Raw line lengths in bins of LENGTH_BIN bytes, the last bin open: what the driver knows
# of the posts' costs before any batch has run at a drop level
LENGTH_BIN = 32
LENGTH_BINS = 64


def length_histogram(lengths: np.ndarray) -> np.ndarray:
    """Lines per length bin (``LENGTH_BINS`` bins of ``LENGTH_BIN`` bytes)."""
    bins = np.minimum(np.asarray(lengths, dtype=np.int64) // LENGTH_BIN, LENGTH_BINS - 1)
    return np.bincount(bins, minlength=LENGTH_BINS)


def kept_byte_share(counts: np.ndarray, drop_fraction: float) -> float:
    """The share of the bytes in the longest ``1 - drop_fraction`` of the lines, from a
    :func:`length_histogram` (bin middles; the boundary bin taken in part). A value drop
    keeps the posts with the most words, and a post's work grows with its words: this
    is the work a drop level keeps, where the share of posts kept would understate it."""
    counts = np.asarray(counts, dtype=np.float64)
    if not 0.0 <= drop_fraction < 1.0:
        raise InvalidArgumentError(f"the drop fraction must lie in [0, 1), got {drop_fraction}")
    total_lines = counts.sum()
    middles = (np.arange(counts.shape[0]) + 0.5) * LENGTH_BIN
    total_bytes = float(counts @ middles)
    if total_lines <= 0 or total_bytes <= 0:
        return 1.0 - drop_fraction
    keep = (1.0 - drop_fraction) * total_lines
    kept = 0.0
    for b in range(counts.shape[0] - 1, -1, -1):  # longest first
        take = min(counts[b], keep)
        kept += take * middles[b]
        keep -= take
        if keep <= 0:
            break
    return kept / total_bytes
