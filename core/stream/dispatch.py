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

MATCHES_ARROW = pa.schema(
    [("post_id", pa.string()), ("sub_id", pa.int64()), ("matcher_id", pa.int32())]
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
    deliveries group a post's matches per subscriber, sub ids ascending.
    """
    posts = pc.dictionary_encode(matched.column("post_id").combine_chunks())
    sub_ids = np.asarray(matched.column("sub_id").combine_chunks(), dtype=np.int64)
    # columns (post code, subscriber code, sub id, matcher id), all int64
    rows = np.stack(
        [
            np.asarray(posts.indices, dtype=np.int64),
            subscribers.codes(sub_ids).astype(np.int64),
            sub_ids,
            np.asarray(matched.column("matcher_id").combine_chunks(), dtype=np.int64),
        ]
    )
    # one row per (post, subscription): sort by post, subscriber, sub, matcher; keep firsts
    rows = rows[:, np.lexsort(rows[::-1])]
    first = np.ones(rows.shape[1], dtype=bool)
    first[1:] = (rows[0, 1:] != rows[0, :-1]) | (rows[2, 1:] != rows[2, :-1])
    post_code, owner, sub_id, matcher = rows[:, first]
    n = post_code.shape[0]
    post_ids = posts.dictionary.take(pa.array(post_code))
    matches = pa.table(
        {
            "post_id": post_ids,
            "sub_id": pa.array(sub_id, pa.int64()),
            "subscriber": subscribers.names.take(pa.array(owner)),
            "routing_version": pa.array(np.full(n, routing_version, dtype=np.int64)),
            "matcher_id": pa.array(matcher, pa.int32()),
            "matched_at": pa.array(np.full(n, now_micros(now), dtype=np.int64)).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "batch_id": pa.array(np.full(n, batch_id, dtype=np.int64)),
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
            "post_id": post_ids.take(pa.array(starts)),
            "subscriber": subscribers.names.take(pa.array(owner[starts])),
            "sub_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(sub_id, pa.int64())),
            "routing_version": pa.array(np.full(m, routing_version, dtype=np.int64)),
            "delivered_at": pa.array(np.full(m, now_micros(now), dtype=np.int64)).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "batch_id": pa.array(np.full(m, batch_id, dtype=np.int64)),
        }
    )
    return matches, deliveries


def now_micros(now: dt.datetime) -> int:
    return int(now.timestamp() * 1_000_000)
