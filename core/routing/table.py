"""The routing table M: (word, part) -> matcher, plus the subscribed vocabulary.

Stored as a directory: ``mapping.parquet`` (word, part, matcher_id), optional
``subscribed_words.parquet`` (word) and ``manifest.json`` (algorithm, N, params, corpus
fingerprint, metrics). Words absent from the table route by the stable hash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InvalidArgumentError
from core.routing.hashing import hash_matcher

if TYPE_CHECKING:  # pandas only for to_frame: every process that routes imports this module
    import pandas as pd

# the mapping salb2's restreaming started from (a manifest records it)
RestreamStart = Literal["salb", "metis"]

MAPPING_SCHEMA = pa.schema(
    [
        pa.field("word", pa.string(), nullable=False),
        pa.field("part", pa.int32(), nullable=False),
        pa.field("matcher_id", pa.int32(), nullable=False),
    ]
)


class AlignedIds(TypedDict):
    """How a full remap's matcher ids were aligned to the published version's: the
    subscription words kept in place before and after renaming."""

    kept_subscription_words_before: int
    kept_subscription_words: int


class ManifestSource(TypedDict):
    """The corpus file ``s3tm learn`` read, and how it split it."""

    path: str
    fingerprint: str
    posts: int
    holdout_fraction: float
    split_seed: int
    text_column: str


class LearnerManifest(TypedDict, total=False):
    """What a learner records about a routing table (``manifest.json`` beside a saved
    table; keys by who writes them).

    - every learner (``core.learn.api``): ``algorithm``, ``label``, ``split``, ``seed``, the
      training corpus (``corpus_fingerprint``, ``training_posts``, ``training_words``),
      ``mapped_tokens``, ``hot_words``, ``learn_seconds``, ``unseen_subscribed_words``;
    - salb2: ``matches_per_post`` (subscription weights), ``start_training_work_max`` (each
      start's judged work), ``refinement_*`` and the ``*_load_max`` figures;
    - an incremental remap: ``remap``, ``moved_tokens``, ``moved_subscription_words``,
      ``move_budget``, ``penalty``, ``start_training_load_max``;
    - a full remap aligned to the published ids: ``aligned_to_published``;
    - ``s3tm learn``: ``source`` (the corpus file and split) and ``training_metrics``;
    - :meth:`RoutingTable.save`: ``n_matchers`` and ``subscribed_words`` (a count).
    """

    algorithm: str
    label: str
    split: bool
    seed: int
    corpus_fingerprint: str
    training_posts: int
    training_words: int
    mapped_tokens: int
    hot_words: int
    learn_seconds: float
    unseen_subscribed_words: int
    matches_per_post: float
    start_training_work_max: dict[str, int]
    refinement_moves: list[int]
    refinement_kept: bool
    refinement_start: RestreamStart
    training_load_max: int
    salb_training_load_max: int
    training_weighted_load_max: float
    remap: str
    moved_tokens: int
    moved_subscription_words: int
    move_budget: int
    penalty: float
    start_training_load_max: int
    aligned_to_published: AlignedIds
    source: ManifestSource
    training_metrics: dict[str, object]
    n_matchers: int
    subscribed_words: int | None


@dataclass(frozen=True, eq=False)
class RoutingTable:
    """Word -> matchers of its versions, with hash fall-back.

    Attributes:
        n_matchers: N.
        words: ``(n_mapped,)`` object array of the mapped words.
        part_indptr: ``(n_mapped + 1,)`` int64; word ``i``'s versions are
            ``part_matchers[part_indptr[i]:part_indptr[i + 1]]`` (version 0 first).
        part_matchers: int32 matcher of each version.
        subscribed_words: the words that route posts; None means every word does.
    """

    n_matchers: int
    words: np.ndarray
    part_indptr: np.ndarray
    part_matchers: np.ndarray
    subscribed_words: frozenset[str] | None = None
    manifest: LearnerManifest = field(default_factory=lambda: LearnerManifest())

    def __post_init__(self) -> None:
        if self.n_matchers < 1:
            raise InvalidArgumentError(f"n_matchers must be >= 1, got {self.n_matchers}")
        if self.part_indptr.shape != (len(self.words) + 1,) or self.part_indptr[0] != 0:
            raise InvalidArgumentError("part_indptr must have len(words) + 1 entries from 0")
        if self.part_indptr[-1] != self.part_matchers.shape[0]:
            raise InvalidArgumentError("part_indptr must end at len(part_matchers)")
        if np.any(np.diff(self.part_indptr) < 1):
            raise InvalidArgumentError("every mapped word needs at least one version")
        if self.part_matchers.size and (
            self.part_matchers.min() < 0 or self.part_matchers.max() >= self.n_matchers
        ):
            raise InvalidArgumentError(f"matcher ids must lie in [0, {self.n_matchers})")

    @cached_property
    def word_index(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.words.tolist())}

    @property
    def n_split_words(self) -> int:
        return int(np.count_nonzero(np.diff(self.part_indptr) > 1))

    def is_subscribed(self, word: str) -> bool:
        return self.subscribed_words is None or word in self.subscribed_words

    def version_matchers(self, word: str) -> np.ndarray:
        """The matchers of every version of ``word`` (its hash matcher when unmapped)."""
        i = self.word_index.get(word)
        if i is None:
            return np.array([hash_matcher(word, self.n_matchers)], dtype=np.int32)
        return self.part_matchers[self.part_indptr[i] : self.part_indptr[i + 1]]

    def to_arrow(self) -> pa.Table:
        """One row per (word, part) with its matcher_id (``MAPPING_SCHEMA``)."""
        counts = np.diff(self.part_indptr)
        starts = np.repeat(self.part_indptr[:-1], counts)
        return pa.table(
            [
                pa.array(np.repeat(self.words, counts), pa.string()),
                pa.array((np.arange(self.part_matchers.shape[0]) - starts).astype(np.int32)),
                pa.array(self.part_matchers.astype(np.int32)),
            ],
            schema=MAPPING_SCHEMA,
        )

    def to_frame(self) -> pd.DataFrame:
        """:meth:`to_arrow` as a pandas frame (word, part, matcher_id)."""
        return self.to_arrow().to_pandas()

    @classmethod
    def from_rows(
        cls,
        words: Iterable[str],
        parts: Iterable[int],
        matchers: Iterable[int],
        n_matchers: int,
        *,
        subscribed_words: Iterable[str] | None = None,
        manifest: LearnerManifest | None = None,
    ) -> RoutingTable:
        """Build from (word, part, matcher) rows; each word's parts must be 0..k-1.

        Raises:
            InvalidArgumentError: on duplicate or missing parts.
        """
        rows = pa.table(
            {
                "word": _column(words, pa.string()),
                "part": _column(parts, pa.int64()),
                "m": _column(matchers, pa.int32()),
            }
        )
        # Arrow's sort is stable and orders strings by their UTF-8 bytes: code point order
        rows = rows.take(pc.sort_indices(rows, [("word", "ascending"), ("part", "ascending")]))
        word_values = rows.column("word").to_numpy()
        boundaries = np.flatnonzero(word_values[1:] != word_values[:-1]) + 1
        starts = np.concatenate([[0], boundaries]).astype(np.int64)
        indptr = np.append(starts, len(rows)).astype(np.int64)
        expected_parts = np.arange(len(rows)) - np.repeat(starts, np.diff(indptr))
        if not np.array_equal(rows.column("part").to_numpy(), expected_parts):
            raise InvalidArgumentError("each word's parts must be exactly 0..k-1, no repeats")
        subscribed = None if subscribed_words is None else frozenset(subscribed_words)
        return cls(
            n_matchers=int(n_matchers),
            words=word_values[starts] if len(rows) else np.array([], dtype=object),
            part_indptr=indptr if len(rows) else np.zeros(1, dtype=np.int64),
            part_matchers=rows.column("m").to_numpy().astype(np.int32),
            subscribed_words=subscribed,
            manifest=LearnerManifest(**(manifest or {})),
        )


def _column(values: Iterable[object], kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``values`` (a sequence, an array, an Arrow column) as an Arrow column of ``kind``.

    Raises:
        InvalidArgumentError: a null or a value of another kind.
    """
    try:
        if isinstance(values, pa.Array | pa.ChunkedArray):
            column = values.cast(kind)
        else:
            column = pa.array(values if isinstance(values, np.ndarray) else list(values), kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as err:
        raise InvalidArgumentError(f"routing rows: expected {kind} values: {err}") from err
    if column.null_count:
        raise InvalidArgumentError(f"routing rows: {column.null_count} null {kind} values")
    return column
