"""The evaluation's held-out posts recomputed apart from the Spark filter that picks them:
core's hash of each post id (its Arrow version), on silver rows read back."""

from __future__ import annotations

import pyarrow as pa

from core.sampling.hash_fraction import hash_fraction_mask
from spark_jobs.jobs.sampling import HOLDOUT_SEED


def held_out_words(silver: pa.Table, fraction: float = 0.2) -> list[set[str]]:
    """The word sets of the held-out posts among ``silver`` (``post_id``, ``words``)."""
    held = hash_fraction_mask(silver["post_id"].combine_chunks(), fraction, HOLDOUT_SEED)
    return [set(w) for w, h in zip(silver["words"].to_pylist(), held, strict=True) if h]
