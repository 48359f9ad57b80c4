"""The stable word hash: the default routing and the fall-back for unseen words.

Python's ``hash`` is salted per process, so it cannot route consistently across routers,
Spark executors and days. This is ``blake2b`` (8-byte digest, little-endian) modulo N.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from core.errors import InvalidArgumentError

VERSION_SEPARATOR = "#"  # never inside a normalised word (punctuation is stripped)


def stable_hash(key: str) -> int:
    """A process-independent 64-bit hash of ``key``."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def version_key(word: str, part: int) -> str:
    """The routing key of version ``part`` of ``word``: the word itself for part 0."""
    return word if part == 0 else f"{word}{VERSION_SEPARATOR}{part}"


def _check_n_matchers(n_matchers: int) -> None:
    if not isinstance(n_matchers, int | np.integer) or n_matchers < 1:
        raise InvalidArgumentError(f"n_matchers must be a positive integer, got {n_matchers!r}")


def hash_matcher(word: str, n_matchers: int) -> int:
    """The matcher hash routing gives ``word``, in ``[0, n_matchers)``."""
    _check_n_matchers(n_matchers)
    return stable_hash(word) % int(n_matchers)


def hash_matchers(keys: Iterable[str], n_matchers: int) -> np.ndarray:
    """:func:`hash_matcher` over many keys, as an int32 array."""
    _check_n_matchers(n_matchers)
    n = int(n_matchers)
    return np.fromiter((stable_hash(k) % n for k in keys), dtype=np.int32)
