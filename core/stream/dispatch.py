"""Dispatch: a batch's raw matches -> ``matches`` rows and per-subscriber ``deliveries``.

Pure numpy/pyarrow, run where the matches are (a dispatch task of the streaming job).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.errors import InputDataError
from core.stream._dispatch_kernels import dedupe_by_post, delivery_runs

MATCHES_ARROW = pa.schema(
    [
        ("post_id", pa.string()),
        ("sub_id", pa.int64()),
        ("matcher_id", pa.int32()),
        # the post's shedding level if it lost matchers to a spread cap, else 0
        ("shedding_level", pa.int32()),
    ]
)
# What a matcher task hands to dispatch: one row per (post, matcher) with the ids of the
# subscriptions matched there. A post id travels once per matcher, not once per match (a
# topic-based post meets ~200 subscriptions).
MATCHED_ARROW = pa.schema(
    [
        ("post_id", pa.string()),
        ("matcher_id", pa.int32()),
        ("shedding_level", pa.int32()),
        ("sub_ids", pa.list_(pa.int64())),
        # each id's subscriber, a code into the snapshot's names (a match task knows its
        # own matcher's subscribers; the workers hold no table of every subscription's)
        ("subscriber_codes", pa.list_(pa.int32())),
        # when the post arrived (the Kafka record's timestamp, the landed file's time;
        # null where the source gives none): carried to its deliveries for their latency
        ("arrived_at", pa.timestamp("us", tz="UTC")),
    ]
)
# The same with int32 ids, what a matcher task sends when its ids fit: half the bytes
# shuffled to dispatch (a topic-based post meets ~200 subscriptions).
MATCHED_NARROW_ARROW = MATCHED_ARROW.set(3, pa.field("sub_ids", pa.list_(pa.int32())))


def matched_sub_ids(sub_ids: np.ndarray) -> tuple[pa.Array, pa.Schema]:
    """A matcher's matched ids as an Arrow array, int32 when they fit, and the schema of
    the ``matched`` table they go in."""
    if sub_ids.size == 0 or (sub_ids.min() >= 0 and sub_ids.max() <= np.iinfo(np.int32).max):
        return pa.array(sub_ids.astype(np.int32, copy=False)), MATCHED_NARROW_ARROW
    return pa.array(sub_ids.astype(np.int64, copy=False)), MATCHED_ARROW


def concat_matched(tables: list[pa.Table]) -> pa.Table:
    """``matched`` tables of both id widths as one (int64 ids if any has them)."""
    if not tables:
        return MATCHED_ARROW.empty_table()
    if any(t.schema != tables[0].schema for t in tables):
        tables = [t.cast(MATCHED_ARROW) for t in tables]
    return pa.concat_tables(tables)


@dataclass(frozen=True)
class Subscribers:
    """sub id -> subscriber, as arrays (a batch holds hundreds of thousands of matches),
    for the subscriptions a batch matched.

    Subscriptions are also ranked by (subscriber, sub id): dispatch sorts a post's matches
    by rank, which groups them into deliveries with their ids ascending.
    """

    names: pa.Array  # subscriber of each code
    sorted_ids: np.ndarray  # int64: the known sub ids, ascending
    rank_of_sorted: np.ndarray  # int64: the rank of each of them
    sub_of_rank: np.ndarray  # int64
    owner_of_rank: np.ndarray  # int32: the subscriber code

    @classmethod
    def of(cls, subscribers: dict[int, str]) -> Subscribers:
        names = sorted(set(subscribers.values()))
        code = {name: i for i, name in enumerate(names)}
        ids = np.fromiter(subscribers, dtype=np.int64, count=len(subscribers))
        codes = np.array([code[subscribers[int(s)]] for s in ids], dtype=np.int32)
        return cls.of_codes(ids, codes, names)

    @classmethod
    def of_codes(cls, sub_ids: np.ndarray, codes: np.ndarray, names: Sequence[str]) -> Subscribers:
        """From (sub id, subscriber code) pairs, repeats allowed (what a batch's matches
        carry); ``names[code]`` is the subscriber.

        Raises:
            InputDataError: for a code with no name.
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int32)
        if ids.shape != codes.shape:
            raise InputDataError("one subscriber code per matched subscription is required")
        if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
            raise InputDataError(f"subscriber codes must lie in [0, {len(names)})")
        unique, unique_codes = _distinct_ids(ids, codes)
        # by the subscriber's name, then the id (codes are in order of arrival)
        name_rank = np.empty(len(names), dtype=np.int64)
        name_rank[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
        by = np.lexsort((unique, name_rank[unique_codes]))
        rank_of_sorted = np.empty(unique.shape[0], dtype=np.int64)
        rank_of_sorted[by] = np.arange(unique.shape[0], dtype=np.int64)
        return cls(
            pa.array(list(names), pa.string()),
            unique,
            rank_of_sorted,
            unique[by],
            unique_codes[by],
        )

    def ranks(self, sub_ids: np.ndarray) -> np.ndarray:
        """The rank of each sub id by (subscriber, sub id).

        Raises:
            InputDataError: for a sub id with no subscriber (not in the registry snapshot).
        """
        ids = np.asarray(sub_ids, dtype=np.int64)
        if _dense(self.sorted_ids, ids.shape[0]) and (ids.size == 0 or ids.min() >= 0):
            # a table over the id range: one gather instead of a binary search per match
            top = int(self.sorted_ids[-1]) if self.sorted_ids.size else -1
            table = np.full(top + 2, -1, dtype=np.int64)  # the last slot: ids past the top
            table[self.sorted_ids] = self.rank_of_sorted
            rank = table[np.minimum(ids, top + 1)]
            known = rank >= 0
        else:
            at = np.searchsorted(self.sorted_ids, ids)
            known = at < self.sorted_ids.shape[0]
            known[known] = self.sorted_ids[at[known]] == ids[known]
            rank = np.full(ids.shape[0], -1, dtype=np.int64)
            rank[known] = self.rank_of_sorted[at[known]]
        if not known.all():
            raise InputDataError(f"matched subscriptions {ids[~known][:5]} have no subscriber")
        return np.asarray(rank, dtype=np.int64)


def _dense(ids: np.ndarray, uses: int) -> bool:
    """Whether a table over ``[0, max id]`` costs less than sorting or searching ``uses``
    ids: the tweet batches' ids span 100k-10M, a task's matches number ~650k."""
    return ids.size == 0 or (int(ids.min()) >= 0 and int(ids.max()) < 8 * uses + 65_536)


def _distinct_ids(ids: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``ids`` ascending, each with the code of its first occurrence."""
    if not _dense(ids, ids.shape[0]):
        unique, first = np.unique(ids, return_index=True)
        return unique, codes[first]
    top = int(ids.max()) if ids.size else -1
    seen = np.zeros(top + 1, dtype=np.bool_)
    seen[ids] = True
    unique = np.flatnonzero(seen).astype(np.int64)
    code_of = np.empty(top + 1, dtype=np.int32)
    # reversed: where an id repeats, its first occurrence is written last
    code_of[ids[::-1]] = codes[::-1]
    return unique, code_of[unique]


def subscribers_of(matched: pa.Table, names: Sequence[str]) -> Subscribers:
    """The :class:`Subscribers` of a ``matched`` table's ids, from the subscriber codes
    its rows carry (``subscriber_codes``, parallel to ``sub_ids``).

    Raises:
        InputDataError: a row without its codes, or codes that do not line up with its ids.
    """
    matched = as_matched_lists(matched)
    ids = matched.column("sub_ids").combine_chunks()
    codes = matched.column("subscriber_codes").combine_chunks()
    if codes.null_count:
        raise InputDataError("a matched row has no subscriber codes")
    if not pc.all(pc.equal(pc.list_value_length(ids), pc.list_value_length(codes))).as_py() and len(
        ids
    ):
        raise InputDataError("a matched row's subscriber codes do not line up with its ids")
    return Subscribers.of_codes(
        np.asarray(pc.list_flatten(ids), dtype=np.int64),
        np.asarray(pc.list_flatten(codes), dtype=np.int32),
        names,
    )


def as_matched_lists(matched: pa.Table) -> pa.Table:
    """``matched`` in MATCHED_ARROW's form: row-per-match tables (MATCHES_ARROW) become one
    list of one id per row; list tables pass through."""
    if "sub_ids" in matched.column_names:
        return matched
    n = matched.num_rows
    sub_id = matched.column("sub_id").combine_chunks()
    level = (
        matched.column("shedding_level")
        if "shedding_level" in matched.column_names
        else pa.nulls(n, pa.int32())
    )
    return pa.table(
        {
            "post_id": matched.column("post_id"),
            "matcher_id": matched.column("matcher_id"),
            "shedding_level": level,
            "sub_ids": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32)), sub_id.cast(pa.int64())
            ),
            "subscriber_codes": pa.nulls(n, pa.list_(pa.int32())),
            "arrived_at": pa.nulls(n, pa.timestamp("us", tz="UTC")),
        }
    )


def dispatch_tables(
    matched: pa.Table,
    subscribers: Subscribers,
    routing_version: int,
    batch_id: int,
    now: dt.datetime,
    *,
    match_rows: bool = True,
) -> tuple[pa.Table | None, pa.Table]:
    """Pure: a batch's matches (MATCHED_ARROW lists, or MATCHES_ARROW rows) -> (matches,
    deliveries) tables; ``match_rows=False`` skips building the ``matches`` rows (None:
    the deliveries hold them, see :func:`matches_of_deliveries`).

    A (post, subscription) pair found twice (a multicast subscription reached on several
    matchers, or a post id repeated in the batch) is kept once, on the lowest matcher id;
    deliveries group a post's matches per subscriber, sub ids ascending, and carry the
    post's shedding level (0: every matcher it was routed to got it).
    """
    matched = as_matched_lists(matched)
    posts = pc.dictionary_encode(matched.column("post_id").combine_chunks())
    row_post = np.asarray(posts.indices, dtype=np.int64)
    row_matcher = np.asarray(matched.column("matcher_id").combine_chunks(), dtype=np.int64)
    row_level = np.asarray(
        pc.fill_null(matched.column("shedding_level").combine_chunks(), 0), dtype=np.int32
    )
    lists = matched.column("sub_ids").combine_chunks()
    if lists.null_count:
        raise InputDataError("a matched row has no sub id list")
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    # int32 or int64 ids (a matcher task sends the narrower when they fit)
    sub_ids = np.asarray(lists.values)[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    post_code, rank, matcher, shed_level = dedupe_by_post(
        row_post,
        row_matcher,
        row_level,
        offsets,
        subscribers.ranks(sub_ids),
        len(posts.dictionary),
    )
    sub_id = subscribers.sub_of_rank[rank]
    owner = subscribers.owner_of_rank[rank]
    n = post_code.shape[0]

    def coded(codes: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
        # dictionary-encoded: no copy of the strings per row (Parquet stores them so anyway)
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), values)

    def constant(value: int) -> pa.Array:
        # one column per value for both tables (deliveries are at most as many as matches)
        return pa.array(np.full(n, value, dtype=np.int64))

    routing_versions, batch_ids = constant(routing_version), constant(batch_id)
    stamp_column = constant(now_micros(now)).view(pa.timestamp("us", tz="UTC"))

    matches = (
        None
        if not match_rows
        else pa.table(
            {
                "post_id": coded(post_code, posts.dictionary),
                "sub_id": pa.array(sub_id, pa.int64()),
                "subscriber": coded(owner, subscribers.names),
                "routing_version": routing_versions,
                "matcher_id": pa.array(matcher),
                "matched_at": stamp_column,
                "batch_id": batch_ids,
            }
        )
    )
    # rows are sorted by (post, subscriber, sub): each (post, subscriber) run is a delivery
    # (a post id repeated in a batch: the higher level of its copies)
    offsets32, run_level = delivery_runs(post_code, owner, shed_level)
    starts = offsets32[:-1]
    m = starts.shape[0]
    arrived = _arrival_of_posts(matched, row_post, len(posts.dictionary))
    deliveries = pa.table(
        {
            "post_id": coded(post_code[starts], posts.dictionary),
            "subscriber": coded(owner[starts], subscribers.names),
            "sub_ids": pa.ListArray.from_arrays(pa.array(offsets32), pa.array(sub_id, pa.int64())),
            "routing_version": routing_versions.slice(0, m),
            "delivered_at": stamp_column.slice(0, m),
            "batch_id": batch_ids.slice(0, m),
            "shedding_level": pa.array(run_level),
            "matcher_ids": pa.ListArray.from_arrays(pa.array(offsets32), pa.array(matcher)),
            "arrived_at": arrived.take(pa.array(post_code[starts])),
        }
    )
    return matches, deliveries


def _arrival_of_posts(matched: pa.Table, row_post: np.ndarray, n_posts: int) -> pa.Array:
    """Each post code's arrival (the earliest of its rows'; null where none is known)."""
    kind = pa.timestamp("us", tz="UTC")
    if "arrived_at" not in matched.column_names or n_posts == 0:
        return pa.nulls(n_posts, kind)
    column = matched.column("arrived_at").combine_chunks().cast(kind)
    known = np.asarray(column.is_valid(), dtype=np.bool_)
    micros = np.asarray(column.fill_null(0).cast(pa.int64()), dtype=np.int64)
    earliest = np.full(n_posts, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(earliest, row_post[known], micros[known])
    missing = earliest == np.iinfo(np.int64).max
    return pa.array(np.where(missing, 0, earliest), pa.int64(), mask=missing).cast(kind)


def matches_of_deliveries(deliveries: pa.Table) -> pa.Table:
    """The ``matches`` rows a ``deliveries`` table holds: one per (delivery, sub id), with
    the matcher from ``matcher_ids`` (null where a row has none) and ``matched_at`` =
    ``delivered_at``. Pure pyarrow: what a reader derives when the stream wrote deliveries
    only."""
    ids = deliveries.column("sub_ids").combine_chunks()
    parent = pc.list_parent_indices(ids)
    n = len(parent)
    if "matcher_ids" in deliveries.column_names:
        matcher_lists = deliveries.column("matcher_ids").combine_chunks()
        # a row's matcher ids line up with its sub ids, or the row has none (null)
        sizes = pc.fill_null(pc.list_value_length(matcher_lists), -1)
        aligned = pc.or_(pc.equal(sizes, pc.list_value_length(ids)), pc.equal(sizes, -1))
        if pc.any(pc.invert(aligned)).as_py():
            raise InputDataError("a delivery's matcher_ids do not line up with its sub_ids")
        # null rows (written before matcher ids were kept) flatten to nothing
        has = np.asarray(pc.is_valid(matcher_lists).take(parent), dtype=bool)
        values = np.zeros(n, dtype=np.int32)
        values[has] = np.asarray(pc.list_flatten(matcher_lists), dtype=np.int32)
        matcher = pa.array(values, pa.int32(), mask=~has)
    else:
        matcher = pa.nulls(n, pa.int32())
    return pa.table(
        {
            "post_id": deliveries.column("post_id").take(parent),
            "sub_id": pc.list_flatten(ids),
            "subscriber": deliveries.column("subscriber").take(parent),
            "routing_version": deliveries.column("routing_version").take(parent),
            "matcher_id": matcher,
            "matched_at": deliveries.column("delivered_at").take(parent),
            "batch_id": deliveries.column("batch_id").take(parent),
        }
    )


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
