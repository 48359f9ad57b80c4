"""A mergeable, memory-bounded sketch of word frequencies that finds the hot words.

Count-min (Cormode and Muthukrishnan) with a heavy-hitter candidate set: ``depth`` rows of
``width`` counters, each row hashing a word's 64-bit key with its own seeded mixer; an
estimate is the least of a key's counters, so it never undercounts (recall of truly hot
words is 1) and overcounts by at most ``e / width`` of the total with probability
``1 - exp(-depth)``. Beside the counters, the ``capacity`` keys with the largest estimates
are kept, so hot words can be named without storing the stream.

Merging adds the counters (the merge of sketches of parts equals the sketch of the whole,
exactly) and re-ranks the union of the candidate sets. A word whose share of the whole is
at least ``phi`` has at least that share in some part, so it is a candidate there when
``capacity`` comfortably exceeds ``1 / phi`` (the default 512 covers ``phi >= 1/256``
with room for count-min's overestimates).

Keys are :func:`core.routing.hashing.stable_hash` of the word, so sketches from different
workers, batches and routing versions (whose word ids differ) merge.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass

import numpy as np

from core.errors import InvalidArgumentError
from core.monitor import _kernels
from core.routing.hashing import stable_hash

_SEED_KEY = "s3tm.word-sketch.row"


@dataclass(frozen=True)
class SketchSpec:
    """Shape of a sketch; sketches merge only when their specs are equal."""

    width: int = 1 << 14
    depth: int = 4
    capacity: int = 512
    seed: int = 0

    def validate(self) -> None:
        if self.width < 16 or self.width & (self.width - 1):
            raise InvalidArgumentError(f"width must be a power of two >= 16, got {self.width}")
        if not 1 <= self.depth <= 16:
            raise InvalidArgumentError(f"depth must be in [1, 16], got {self.depth}")
        if self.capacity < 1:
            raise InvalidArgumentError(f"capacity must be >= 1, got {self.capacity}")

    @property
    def nbytes(self) -> int:
        """Memory of one sketch: the counters and the candidate keys and estimates."""
        return self.width * self.depth * 8 + self.capacity * 16

    def row_seeds(self) -> np.ndarray:
        return np.array(
            [stable_hash(f"{_SEED_KEY}.{self.seed}.{r}") for r in range(self.depth)],
            dtype=np.uint64,
        )


def word_keys(words: list[str] | np.ndarray) -> np.ndarray:
    """``(n,)`` uint64 sketch keys of words."""
    return np.fromiter((stable_hash(str(w)) for w in words), dtype=np.uint64, count=len(words))


class WordSketch:
    """Word frequencies of a stream (occurrences; a word counts once per post)."""

    def __init__(self, spec: SketchSpec | None = None) -> None:
        self.spec = spec or SketchSpec()
        self.spec.validate()
        self._seeds = self.spec.row_seeds()
        self.counts = np.zeros((self.spec.depth, self.spec.width), dtype=np.int64)
        self.total = 0
        self.candidates = np.zeros(0, dtype=np.uint64)

    @property
    def nbytes(self) -> int:
        return int(self.counts.nbytes + self.candidates.shape[0] * 16)

    def add(self, keys: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count ``keys`` (distinct or not), each ``weights[i]`` times (default once).

        Raises:
            InvalidArgumentError: on mismatched shapes or negative weights.
        """
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        weight = (
            np.ones(keys.shape[0], dtype=np.int64)
            if weights is None
            else np.ascontiguousarray(weights, dtype=np.int64)
        )
        if keys.ndim != 1 or weight.shape != keys.shape:
            raise InvalidArgumentError("keys and weights must be 1-D of equal length")
        if weight.size and weight.min() < 0:
            raise InvalidArgumentError("weights must be non-negative")
        _kernels.add(self.counts, self._seeds, keys, weight)
        self.total += int(weight.sum())
        self._rank(np.concatenate([self.candidates, np.unique(keys)]))

    def _rank(self, keys: np.ndarray) -> None:
        keys = np.unique(keys)
        if keys.shape[0] > self.spec.capacity:
            estimates = self.estimate(keys)
            # ties broken by key, so the kept set does not depend on arrival order
            order = np.lexsort((keys, -estimates))[: self.spec.capacity]
            keys = np.sort(keys[order])
        self.candidates = keys

    def estimate(self, keys: np.ndarray) -> np.ndarray:
        """``(n,)`` int64: count-min estimates (>= the true counts)."""
        return _kernels.estimate(
            self.counts, self._seeds, np.ascontiguousarray(keys, dtype=np.uint64)
        )

    def merge(self, other: WordSketch) -> WordSketch:
        """A new sketch of both streams.

        Raises:
            InvalidArgumentError: if the specs differ.
        """
        if other.spec != self.spec:
            raise InvalidArgumentError(f"cannot merge sketches {self.spec} and {other.spec}")
        merged = WordSketch(self.spec)
        merged.counts = self.counts + other.counts
        merged.total = self.total + other.total
        merged._rank(np.concatenate([self.candidates, other.candidates]))
        return merged

    def heavy_hitters(self, min_share: float) -> tuple[np.ndarray, np.ndarray]:
        """Candidate keys whose estimated share of all occurrences is >= ``min_share``:
        ``(keys uint64, estimates int64)``, most frequent first."""
        if self.total == 0 or self.candidates.shape[0] == 0:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        estimates = self.estimate(self.candidates)
        hot = estimates >= min_share * self.total
        keys, counts = self.candidates[hot], estimates[hot]
        order = np.lexsort((keys, -counts))
        return keys[order], counts[order]

    # -- transport (task notes are JSON) ----------------------------------------------------
    def to_text(self) -> str:
        """The sketch as compact ASCII (zlib + base64) for a task's JSON note."""
        header = np.array([self.total, self.candidates.shape[0]], dtype=np.int64)
        raw = header.tobytes() + self.candidates.tobytes() + self.counts.tobytes()
        return base64.b64encode(zlib.compress(raw, 1)).decode("ascii")

    @classmethod
    def from_text(cls, text: str, spec: SketchSpec | None = None) -> WordSketch:
        """Read :meth:`to_text`'s output (the spec must be the writer's).

        Raises:
            InvalidArgumentError: if the text does not hold a sketch of ``spec``.
        """
        sketch = cls(spec)
        try:
            raw = zlib.decompress(base64.b64decode(text))
            total, n_candidates = np.frombuffer(raw[:16], dtype=np.int64)
            body = raw[16:]
            split = int(n_candidates) * 8
            candidates = np.frombuffer(body[:split], dtype=np.uint64).copy()
            counts = np.frombuffer(body[split:], dtype=np.int64).copy()
            counts = counts.reshape(sketch.spec.depth, sketch.spec.width)
        except (ValueError, zlib.error) as error:
            raise InvalidArgumentError(f"not a word sketch of {sketch.spec}: {error}") from None
        sketch.total, sketch.candidates, sketch.counts = int(total), candidates, counts
        return sketch
