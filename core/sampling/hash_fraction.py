"""Deterministic per-post selections without Spark: the same posts Spark's
``pmod(xxhash64(lit(seed), post_id), 2^30) < fraction * 2^30`` selects
(``spark_jobs/jobs/sampling.py``), computed on Arrow string arrays with numba."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from core.errors import InvalidArgumentError
from core.sampling import _xxhash_kernels as K

BUCKETS = 1 << 30
SPARK_HASH_SEED = 42  # the seed Spark's xxhash64 starts from


def spark_xxhash64(seed_value: int, strings: pa.Array) -> np.ndarray:
    """Spark's ``xxhash64(lit(seed_value), strings)`` as int64 (a string array; no nulls)."""
    if strings.null_count:
        raise InvalidArgumentError("ids must not be null")
    if pa.types.is_large_string(strings.type):
        strings = strings.cast(pa.string())
    if not pa.types.is_string(strings.type):
        raise InvalidArgumentError(f"ids must be strings, got {strings.type}")
    strings = pa.concat_arrays([strings]) if strings.offset else strings
    _, offsets_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[: len(strings) + 1].astype(np.int64)
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    hashes = K.hash_int_then_strings(
        np.int64(seed_value), offsets, data, np.uint64(SPARK_HASH_SEED)
    )
    return hashes.view(np.int64)


def hash_fraction_mask(ids: pa.Array, fraction: float, seed: int) -> np.ndarray:
    """True for the ids Spark's ``hash_fraction_filter(fraction, seed)`` keeps."""
    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgumentError(f"fraction must be in [0, 1], got {fraction}")
    # pmod by 2^30 of a two's-complement long is its low 30 bits
    bucket = spark_xxhash64(seed, ids) & np.int64(BUCKETS - 1)
    return bucket < int(fraction * BUCKETS)
