"""Which posts to drop when whole posts must go: a per-post estimate of the matches a post
would produce, read off its raw bytes before any per-post work (JSON, normalising, routing).

The estimate is a sum of learned word yields (matches credited per post that holds the
word, :mod:`core.shedding.yield_stats`) looked up by a hash of each token's first
``PREFIX`` bytes. Raw tokens are lower-cased runs of ASCII letters and digits and of
non-ASCII bytes; a 4-byte prefix makes most raw words meet their normalised (stemmed) form
(``happy``/``happi``, ``matches``/``match``) at the cost of some collisions, which only blur
the ranking. On the real tweets (100k tweet-based subscriptions, held-out posts) keeping the
half of the posts with the highest estimate keeps 85% of their matches; random 50%, raw
token count 59%, an oracle 90% (``docs/RESULTS.md``, Load shedding).

Drops are decided per block of lines (an Arrow batch of the route task): the least valuable
``fraction`` of the block's non-exempt lines go, ties broken by a seeded draw. Same block,
same table, same seed: the same lines go, so a replayed batch drops exactly what it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from core.errors import InvalidArgumentError
from core.shedding import _value_kernels as K

PREFIX = 4  # bytes of a token that key its yield
TABLE_BITS = 16  # 65,536 hashed buckets (a tweet corpus has ~20k distinct 4-byte prefixes)


@dataclass(frozen=True, eq=False)
class ValueTable:
    """Hashed word-prefix -> expected matches per post holding it (float32 buckets)."""

    buckets: np.ndarray

    def __post_init__(self) -> None:
        size = self.buckets.shape[0]
        if self.buckets.ndim != 1 or size == 0 or size & (size - 1):
            raise InvalidArgumentError("a value table needs a power-of-two number of buckets")

    @classmethod
    def from_words(
        cls, words: Sequence[str], values: np.ndarray, *, bits: int = TABLE_BITS
    ) -> ValueTable:
        """The table of ``values[i]`` (expected matches of a post holding ``words[i]``)."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(words),):
            raise InvalidArgumentError("one value per word is required")
        if not 4 <= bits <= 24:
            raise InvalidArgumentError(f"table bits must lie in [4, 24], got {bits}")
        buckets = np.zeros(1 << bits, dtype=np.float64)
        if words:
            offsets, data = _binary_buffers(pa.array(list(words), pa.string()).cast(pa.binary()))
            hashes = K.prefix_hashes(offsets, data, PREFIX) & np.uint64((1 << bits) - 1)
            np.add.at(buckets, hashes.astype(np.int64), values)
        return cls(buckets.astype(np.float32))


def word_values(
    slot_weight: np.ndarray, part_start: np.ndarray, part_count: np.ndarray
) -> np.ndarray:
    """Per word: expected matches per post holding it, from the per-slot yields. A post
    reaches one version of a split word, so a word's value is its versions' mean."""
    slot_weight = np.asarray(slot_weight, dtype=np.float64)
    counts = np.asarray(part_count, dtype=np.int64)
    if part_start.shape != counts.shape or int(counts.sum()) != slot_weight.shape[0]:
        raise InvalidArgumentError("slot weights do not fit the word versions")
    word_of_slot = np.repeat(np.arange(counts.shape[0]), counts)
    total = np.bincount(word_of_slot, weights=slot_weight, minlength=counts.shape[0])
    return np.divide(total, counts, out=np.zeros_like(total), where=counts > 0)


def line_values(lines: pa.Array | pa.ChunkedArray, table: ValueTable) -> np.ndarray:
    """Per raw line (JSON bytes or text): the estimated matches of its post (nulls: 0)."""
    offsets, data = _binary_buffers(lines)
    return K.line_values(offsets, data, table.buckets, PREFIX)


def object_lines(lines: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per raw line: does it start like a JSON object (``^\\s*{``; nulls: no)?"""
    offsets, data = _binary_buffers(lines)
    return K.object_lines(offsets, data)


def keep_most_valuable(
    values: np.ndarray, fraction: float, exempt: np.ndarray | None, seed: int
) -> np.ndarray:
    """Keep-mask over posts: ``round(fraction * n)`` of the non-exempt ones, those of least
    value, are dropped (with every value equal: a seeded random drop)."""
    if not 0.0 <= fraction < 1.0:
        raise InvalidArgumentError(f"the drop fraction must lie in [0, 1), got {fraction}")
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    free = np.zeros(n, dtype=np.bool_) if exempt is None else np.asarray(exempt, np.bool_)
    if free.shape != (n,):
        raise InvalidArgumentError("one exempt flag per post is required")
    return K.keep_most_valuable(values, round(fraction * n), free, int(seed))


def _binary_buffers(lines: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data uint8) of a binary or string array, without copying the bytes or the
    offsets (int32 or int64, as the array has them; the kernels take either); nulls read as
    empty."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if pa.types.is_string(lines.type):
        lines = lines.cast(pa.binary())
    elif pa.types.is_large_string(lines.type):
        lines = lines.cast(pa.large_binary())
    elif not (pa.types.is_binary(lines.type) or pa.types.is_large_binary(lines.type)):
        raise InvalidArgumentError(f"lines must be strings or bytes, got {lines.type}")
    if lines.null_count:
        lines = lines.fill_null(b"")
    _, offset_buffer, data_buffer = lines.buffers()
    width = np.int64 if pa.types.is_large_binary(lines.type) else np.int32
    offsets = np.frombuffer(offset_buffer, dtype=width)[
        lines.offset : lines.offset + len(lines) + 1
    ]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    return offsets, data
