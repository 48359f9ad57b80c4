"""Deterministic per-post selections (sampling, hold-out) from a hash of the post id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import InvalidArgumentError
from core.remap_options import HOLDOUT_FRACTION, HOLDOUT_SEED

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["HOLDOUT_FRACTION", "HOLDOUT_SEED", "hash_fraction_filter", "holdout_filter"]

_BUCKETS = 1 << 30


def hash_fraction_filter(fraction: float, seed: int, column: str = "post_id") -> Column:
    """Column predicate true for a deterministic ``fraction`` of ids (xxhash64 with seed)."""
    from pyspark.sql import functions as F

    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgumentError(f"fraction must be in [0, 1], got {fraction}")
    bucket = F.pmod(F.xxhash64(F.lit(seed), F.col(column)), F.lit(_BUCKETS))
    return bucket < F.lit(int(fraction * _BUCKETS))


def holdout_filter(fraction: float) -> Column:
    """True for held-out posts (kept out of learning, used by evaluate)."""
    return hash_fraction_filter(fraction, HOLDOUT_SEED)
