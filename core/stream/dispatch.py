"""Dispatch: a batch's raw matches -> ``matches`` rows and per-subscriber ``deliveries``.

Pure numpy/pyarrow, run where the matches are (a dispatch task of the streaming job).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InputDataError

# Bits an int64 sort key may use (post code, subscription rank, matcher id packed).
PACKED_KEY_BITS = 62

MATCHES_ARROW = pa.schema(
    [
        ("post_id", pa.string()),
        ("sub_id", pa.int64()),
        ("matcher_id", pa.int32()),
        # the post's shedding level if it lost matchers to a spread cap, else 0
        ("shedding_level", pa.int32()),
    ]
)


@dataclass(frozen=True)
class Subscribers:
    """sub id -> subscriber, as arrays (a batch holds hundreds of thousands of matches)."""

    code_of_sub: np.ndarray  # int32 per sub id, -1 for unknown ids
    names: pa.Array  # subscriber of each code

    @classmethod
    def of(cls, subscribers: dict[int, str]) -> Subscribers:
        names = sorted(set(subscribers.values()))
        code = {name: i for i, name in enumerate(names)}
        top = max(subscribers, default=-1) + 1
        code_of_sub = np.full(top, -1, dtype=np.int32)
        for sub, name in subscribers.items():
            code_of_sub[sub] = code[name]
        return cls(code_of_sub, pa.array(names, pa.string()))

    def codes(self, sub_ids: np.ndarray) -> np.ndarray:
        """The subscriber code of each sub id.

        Raises:
            InputDataError: for a sub id with no subscriber (not in the registry snapshot).
        """
        inside = (sub_ids >= 0) & (sub_ids < self.code_of_sub.shape[0])
        codes = np.full(sub_ids.shape[0], -1, dtype=np.int32)
        codes[inside] = self.code_of_sub[sub_ids[inside]]
        if (codes < 0).any():
            raise InputDataError(
                f"matched subscriptions {sub_ids[codes < 0][:5]} have no subscriber"
            )
        return codes


def dispatch_tables(
    matched: pa.Table,
    subscribers: Subscribers,
    routing_version: int,
    batch_id: int,
    now: dt.datetime,
) -> tuple[pa.Table, pa.Table]:
    """Pure: match rows (post_id, sub_id, matcher_id) -> (matches, deliveries) tables.

    A (post, subscription) pair found twice (a multicast subscription reached on several
    matchers, or a post id repeated in the batch) is kept once, on the lowest matcher id;
    deliveries group a post's matches per subscriber, sub ids ascending, and carry the
    post's shedding level (0: every matcher it was routed to got it).
    """
    posts = pc.dictionary_encode(matched.column("post_id").combine_chunks())
    post_code = np.asarray(posts.indices, dtype=np.int64)
    sub_ids = np.asarray(matched.column("sub_id").combine_chunks(), dtype=np.int64)
    matcher_ids = np.asarray(matched.column("matcher_id").combine_chunks(), dtype=np.int64)
    shed_level = (
        np.asarray(
            pc.fill_null(matched.column("shedding_level").combine_chunks(), 0), dtype=np.int32
        )
        if "shedding_level" in matched.column_names
        else np.zeros(matcher_ids.shape[0], dtype=np.int32)
    )
    # Rank the batch's subscriptions by (subscriber, sub id), then sort the rows by one
    # int64 key (post, rank, matcher): a single sort instead of a 4-key lexsort.
    subs, sub_row = np.unique(sub_ids, return_inverse=True)
    sub_owner = subscribers.codes(subs).astype(np.int64)
    by_owner = np.lexsort((subs, sub_owner))
    rank = np.empty(subs.shape[0], dtype=np.int64)
    rank[by_owner] = np.arange(subs.shape[0])
    row_rank = rank[sub_row]
    rank_bits = max(int(subs.shape[0]).bit_length(), 1)
    matcher_bits = max(int(matcher_ids.max(initial=0)).bit_length(), 1)
    post_bits = max(int(post_code.max(initial=0)).bit_length(), 1)
    if post_bits + rank_bits + matcher_bits <= PACKED_KEY_BITS:
        key = (post_code << (rank_bits + matcher_bits)) | (row_rank << matcher_bits) | matcher_ids
        order = np.argsort(key, kind="stable")
    else:  # too many to pack: the same order by lexsort
        order = np.lexsort((matcher_ids, row_rank, post_code))
    post_code, row_rank, matcher_ids = post_code[order], row_rank[order], matcher_ids[order]
    shed_level = shed_level[order]
    # one row per (post, subscription): the first, i.e. the lowest matcher id
    first = np.ones(order.shape[0], dtype=bool)
    first[1:] = (post_code[1:] != post_code[:-1]) | (row_rank[1:] != row_rank[:-1])
    post_code, row_rank, matcher = post_code[first], row_rank[first], matcher_ids[first]
    shed_level = shed_level[first]
    ranked = subs[by_owner]
    sub_id = ranked[row_rank]
    owner = sub_owner[by_owner][row_rank]
    n = post_code.shape[0]

    def coded(codes: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
        # dictionary-encoded: no copy of the strings per row (Parquet stores them so anyway)
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), values)

    def constant(value: int, size: int, kind: pa.DataType) -> pa.Array:
        return pa.repeat(pa.scalar(value, kind), size)

    stamp = pa.scalar(now_micros(now), pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    matches = pa.table(
        {
            "post_id": coded(post_code, posts.dictionary),
            "sub_id": pa.array(sub_id, pa.int64()),
            "subscriber": coded(owner, subscribers.names),
            "routing_version": constant(routing_version, n, pa.int64()),
            "matcher_id": pa.array(matcher, pa.int32()),
            "matched_at": pa.repeat(stamp, n),
            "batch_id": constant(batch_id, n, pa.int64()),
        }
    )
    # rows are sorted by (post, subscriber, sub): each (post, subscriber) run is a delivery
    start = np.ones(n, dtype=bool)
    start[1:] = (post_code[1:] != post_code[:-1]) | (owner[1:] != owner[:-1])
    starts = np.flatnonzero(start)
    m = starts.shape[0]
    offsets = np.append(starts, n).astype(np.int32)
    deliveries = pa.table(
        {
            "post_id": coded(post_code[starts], posts.dictionary),
            "subscriber": coded(owner[starts], subscribers.names),
            "sub_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(sub_id, pa.int64())),
            "routing_version": constant(routing_version, m, pa.int64()),
            "delivered_at": pa.repeat(stamp, m),
            "batch_id": constant(batch_id, m, pa.int64()),
            # a post id repeated in a batch: the higher level of its copies
            "shedding_level": pa.array(
                np.maximum.reduceat(shed_level, starts) if m else shed_level[:0], pa.int32()
            ),
        }
    )
    return matches, deliveries


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its string columns dictionary-encoded, as dispatch builds them."""
    return pa.schema(
        [
            f.with_type(pa.dictionary(pa.int32(), pa.string())) if f.type == pa.string() else f
            for f in schema
        ]
    )


def now_micros(now: dt.datetime) -> int:
    return int(now.timestamp() * 1_000_000)
