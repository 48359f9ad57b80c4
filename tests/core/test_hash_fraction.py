"""Spark's xxhash64 without Spark: the reference XXH64 vectors, and the input checks.
(Bit-exactness against Spark itself: tests/spark_jobs/jobs/test_learn_read.py.)"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from core.errors import InvalidArgumentError
from core.sampling import _xxhash_kernels as K
from core.sampling.hash_fraction import hash_fraction_mask, spark_xxhash64


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # XXH64 with seed 0, from the xxHash reference implementation
        (b"", 0xEF46DB3751D8E999),
        (b"abc", 0x44BC2CF5AD770999),
        (b"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1),
    ],
)
def test_bytes_hash_is_the_reference_xxh64(text: bytes, expected: int) -> None:
    data = np.frombuffer(text, dtype=np.uint8) if text else np.zeros(0, dtype=np.uint8)
    assert int(K.hash_bytes(data, 0, len(text), np.uint64(0))) == expected


def test_slices_and_large_strings_hash_as_their_values() -> None:
    ids = pa.array(["x" * n for n in range(70)])
    whole = spark_xxhash64(7, ids)
    assert (spark_xxhash64(7, ids.slice(5, 20)) == whole[5:25]).all()
    assert (spark_xxhash64(7, ids.cast(pa.large_string())) == whole).all()
    assert len(set(whole.tolist())) == 70


def test_fractions_select_nothing_all_and_about_the_share() -> None:
    ids = pa.array([f"post-{i}" for i in range(20_000)])
    assert not hash_fraction_mask(ids, 0.0, 7).any()
    assert hash_fraction_mask(ids, 1.0, 7).all()
    share = hash_fraction_mask(ids, 0.2, 7).mean()
    assert 0.18 < share < 0.22
    assert (hash_fraction_mask(ids, 0.2, 7) <= hash_fraction_mask(ids, 0.3, 7)).all()  # nested


@pytest.mark.parametrize(
    ("ids", "fraction", "message"),
    [
        (pa.array(["a", None]), 0.5, "must not be null"),
        (pa.array([1, 2]), 0.5, "must be strings"),
        (pa.array(["a"]), 1.5, "fraction must be in"),
    ],
)
def test_bad_input_is_a_clear_error(ids: pa.Array, fraction: float, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        hash_fraction_mask(ids, fraction, 7)
