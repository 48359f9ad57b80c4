"""The route -> match payload: a match partition's posts, each sent there once.

A post is multicast to ~5 matchers. When there are fewer match tasks than matchers (matcher
m runs in match partition ``group[m]``), sending one copy of the post per matcher ships its
id and words several times to the same task. A payload instead holds the posts of one
route block for one match partition, each post once with the matchers it goes to there, and
its words cut to those any of these matchers uses; the match task cuts each matcher's words
itself (:func:`matcher_inputs`), so every matcher sees exactly the posts and words it saw
when each pair travelled on its own, in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from core.errors import InvalidArgumentError
from core.stream.worker import gather_for_matchers

ARRIVED_TYPE = pa.timestamp("us", tz="UTC")


def posts_schema(n_matchers: int) -> pa.Schema:
    """A payload's rows: one per post sent to the partition (int16 matchers up to 32,767)."""
    matcher_type = pa.int16() if n_matchers <= np.iinfo(np.int16).max + 1 else pa.int32()
    return pa.schema(
        [
            ("post_id", pa.string()),
            ("dpart", pa.int32()),  # the dispatch partition of the post's matches
            ("word_ids", pa.list_(pa.int32())),
            ("matchers", pa.list_(matcher_type)),  # the post's matchers in this partition
            ("shedding_level", pa.int8()),  # the plan's level if the post lost matchers, else 0
            ("sampled", pa.bool_()),  # processed in full: counts toward the yield estimate
            ("arrived_at", ARRIVED_TYPE),  # when the post arrived (null: the source gave none)
        ]
    )


def group_words(kept: np.ndarray, group_of_matcher: np.ndarray) -> np.ndarray:
    """Fold per-matcher word bits (``matcher_words``: ``(n_words, ceil(N/8))`` uint8) into
    per-group bits ``(n_words, ceil(G/8))``: word w's bit g is set when any matcher of group
    g uses w."""
    groups = np.asarray(group_of_matcher, dtype=np.int64)
    n_matchers = groups.shape[0]
    if n_matchers > 8 * kept.shape[1] or (groups.size and groups.min() < 0):
        raise InvalidArgumentError("one group (>= 0) per matcher of the kept words is required")
    n_groups = int(groups.max()) + 1 if groups.size else 0
    bits = np.unpackbits(kept, axis=1, bitorder="little")[:, :n_matchers].astype(np.bool_)
    folded = np.zeros((kept.shape[0], n_groups), dtype=np.bool_)
    for matcher in range(n_matchers):
        folded[:, groups[matcher]] |= bits[:, matcher]
    return np.packbits(folded, axis=1, bitorder="little")


def partition_payloads(
    post_ids: pa.Array,
    dpart: np.ndarray,
    post_level: np.ndarray,
    sampled: np.ndarray,
    indptr: np.ndarray,
    word_ids: np.ndarray,
    pair_post: np.ndarray,
    pair_matcher: np.ndarray,
    group_of_matcher: np.ndarray,
    kept_by_group: np.ndarray,
    n_matchers: int,
    arrived: pa.Array | None = None,
) -> list[tuple[int, pa.RecordBatch]]:
    """``(group, rows)`` per match partition the routed pairs reach (``arrived``: each
    post's arrival, None when the source gave none).

    ``pair_post`` must be ascending (pairs in post order, as routing makes them); each
    group's rows are its posts in that order.
    """
    pair_post = np.asarray(pair_post, dtype=np.int64)
    pair_matcher = np.asarray(pair_matcher, dtype=np.int64)
    if pair_post.shape != pair_matcher.shape:
        raise InvalidArgumentError("pair_post and pair_matcher must have one entry per pair")
    if pair_post.size and np.any(np.diff(pair_post) < 0):
        raise InvalidArgumentError("pairs must come in post order")
    if pair_post.size == 0:
        return []
    schema = posts_schema(n_matchers)
    group = np.asarray(group_of_matcher, dtype=np.int64)[pair_matcher]
    # a stable sort keeps post order within a group (few groups: a 16-bit radix sort)
    order = np.argsort(group.astype(np.int16 if n_matchers <= 1 << 15 else np.int64), kind="stable")
    pair_post, pair_matcher, group = pair_post[order], pair_matcher[order], group[order]
    # a post's run of pairs within its group: a new row where the group or the post changes
    new_row = np.ones(pair_post.shape[0], dtype=np.bool_)
    new_row[1:] = (pair_post[1:] != pair_post[:-1]) | (group[1:] != group[:-1])
    row_start = np.flatnonzero(new_row)
    row_post = pair_post[row_start]
    row_group = group[row_start]
    offsets, values = gather_for_matchers(indptr, word_ids, row_post, row_group, kept_by_group)
    matcher_offsets = np.append(row_start, pair_post.shape[0]).astype(np.int32)
    rows = pa.RecordBatch.from_arrays(
        [
            post_ids.take(pa.array(row_post)),
            pa.array(dpart[row_post], pa.int32()),
            pa.ListArray.from_arrays(offsets, values),
            pa.ListArray.from_arrays(
                matcher_offsets, pa.array(pair_matcher, schema.field("matchers").type.value_type)
            ),
            pa.array(post_level[row_post], pa.int8()),
            pa.array(sampled[row_post], pa.bool_()),
            pa.nulls(row_post.shape[0], ARRIVED_TYPE)
            if arrived is None
            else arrived.take(pa.array(row_post)).cast(ARRIVED_TYPE),
        ],
        schema=schema,
    )
    starts = np.flatnonzero(np.diff(row_group, prepend=-1))
    ends = np.append(starts[1:], row_group.shape[0])
    return [
        (int(row_group[a]), rows.slice(int(a), int(b - a)))
        for a, b in zip(starts, ends, strict=True)
    ]


@dataclass(frozen=True)
class MatcherInput:
    """One matcher's posts of a payload: ``rows`` index the payload's posts (ascending),
    ``offsets``/``word_ids`` their words that matcher uses (CSR)."""

    matcher: int
    rows: np.ndarray
    offsets: np.ndarray
    word_ids: np.ndarray


def matcher_inputs(posts: pa.Table | pa.RecordBatch, kept: np.ndarray) -> Iterator[MatcherInput]:
    """Per matcher named in a payload (ascending), its posts and their words, cut to the
    words it uses (``kept``: ``matcher_words``)."""
    lists = _column(posts, "word_ids")
    word_offsets = np.asarray(lists.offsets, dtype=np.int64)
    flat_words = np.asarray(lists.flatten(), dtype=np.int32)
    word_offsets = word_offsets - word_offsets[0]
    matchers = _column(posts, "matchers")
    counts = np.diff(np.asarray(matchers.offsets, dtype=np.int64)).astype(np.int64)
    pair_matcher = np.asarray(matchers.flatten(), dtype=np.int64)
    pair_row = np.repeat(np.arange(len(matchers), dtype=np.int64), counts)
    return pair_inputs(word_offsets, flat_words, pair_row, pair_matcher, kept)


def pair_inputs(
    indptr: np.ndarray,
    word_ids: np.ndarray,
    pair_post: np.ndarray,
    pair_matcher: np.ndarray,
    kept: np.ndarray,
) -> Iterator[MatcherInput]:
    """Per matcher of the routed pairs ``(pair_post[i], pair_matcher[i])`` (ascending), its
    posts (rows of the CSR ``indptr``/``word_ids``, ascending) and their words, cut to the
    words it uses: what a payload's :func:`matcher_inputs` gives, without the payload (a
    fused task routes and matches in one place)."""
    pair_post = np.asarray(pair_post, dtype=np.int64)
    pair_matcher = np.asarray(pair_matcher, dtype=np.int64)
    order = _stable_order(pair_matcher)
    pair_row, pair_matcher = pair_post[order], pair_matcher[order]
    offsets, values = gather_for_matchers(indptr, word_ids, pair_row, pair_matcher, kept)
    starts = np.flatnonzero(np.diff(pair_matcher, prepend=-1))
    ends = np.append(starts, pair_matcher.shape[0])[1:]
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        cut = offsets[a : b + 1].astype(np.int64)
        yield MatcherInput(
            int(pair_matcher[a]),
            pair_row[a:b],
            cut - cut[0],
            values[int(cut[0]) : int(cut[-1])],
        )


def _stable_order(matchers: np.ndarray) -> np.ndarray:
    """A stable argsort of matcher ids: numpy sorts 16-bit keys by radix (N <= 32,768),
    4x faster than the merge sort of int64 keys on a batch's million pairs."""
    if matchers.size and matchers.max() <= np.iinfo(np.int16).max and matchers.min() >= 0:
        return np.argsort(matchers.astype(np.int16), kind="stable")
    return np.argsort(matchers, kind="stable")


def _column(posts: pa.Table | pa.RecordBatch, name: str) -> pa.ListArray:
    column = posts.column(name)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column
