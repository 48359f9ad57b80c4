"""Dispatch of a batch's raw matches: each (post, subscription) once, one delivery per
(post, subscriber) with its sub ids ascending; against a plain Python reference."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InputDataError
from core.stream._dispatch_kernels import dedupe_by_post
from core.stream.dispatch import (
    MATCHED_ARROW,
    MATCHED_NARROW_ARROW,
    MATCHES_ARROW,
    Subscribers,
    concat_matched,
    dispatch_tables,
    matched_sub_ids,
    matches_of_deliveries,
)
from tests.hypothesis_tiers import examples

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
OWNERS = {s: f"user{s % 3}" for s in range(1, 9)}

raw_matches = st.lists(
    st.tuples(st.sampled_from(["p1", "p2", "p3", "p4", "q"]), st.integers(1, 8), st.integers(0, 5)),
    max_size=40,
)


@settings(max_examples=examples(150), deadline=None)
@given(raw_matches, st.booleans())
def test_dispatch_equals_the_plain_reference(rows, as_lists) -> None:
    # both input forms: a row per match, and a list of sub ids per (post, matcher) as the
    # matcher tasks send them
    _check_dispatch(rows, as_lists)


def _as_lists(matched: pa.Table) -> pa.Table:
    """Row-per-match -> MATCHED_ARROW: one row per (post, matcher, level), ids in order met."""
    groups: dict[tuple[str, int, int | None], list[int]] = {}
    for r in matched.to_pylist():
        key = (r["post_id"], r["matcher_id"], r["shedding_level"])
        groups.setdefault(key, []).append(r["sub_id"])
    return pa.Table.from_pylist(
        [
            {
                "post_id": p, "matcher_id": m, "shedding_level": lv, "sub_ids": subs,
                "arrived_at": _arrival(p, m),
            }
            for (p, m, lv), subs in groups.items()
        ],
        schema=MATCHED_ARROW,
    )  # fmt: skip


def _arrival(post: str, matcher: int) -> dt.datetime:
    """A row's arrival: rows of one post differ (a post id repeated in a batch)."""
    return NOW - dt.timedelta(seconds=len(post) + matcher)


def _check_dispatch(rows, as_lists: bool) -> None:
    # a post's shedding level is the same on every row of it (posts named "p<k>" by tests
    # get level k % 3; an old-style row without a level reads as 0)
    level = {p: (int(p[1:]) % 3 if p[1:].isdigit() else None) for p, _, _ in rows}
    matched = pa.Table.from_pylist(
        [
            {"post_id": p, "sub_id": s, "matcher_id": m, "shedding_level": level[p]}
            for p, s, m in rows
        ],
        schema=MATCHES_ARROW,
    )
    if as_lists:
        matched = _as_lists(matched)
    matches, deliveries = dispatch_tables(matched, Subscribers.of(OWNERS), 7, 3, NOW)
    assert matches is not None  # the matches table is asked for
    assert all(r["shedding_level"] == (level[r["post_id"]] or 0) for r in deliveries.to_pylist())
    lowest: dict[tuple[str, int], int] = {}
    for p, s, m in rows:
        lowest[(p, s)] = min(m, lowest.get((p, s), m))
    got = {(r["post_id"], r["sub_id"]): r for r in matches.to_pylist()}
    assert len(got) == matches.num_rows  # no duplicate pair
    assert {k: r["matcher_id"] for k, r in got.items()} == lowest
    assert all(r["subscriber"] == OWNERS[r["sub_id"]] for r in got.values())
    assert {(r["routing_version"], r["batch_id"], r["matched_at"]) for r in got.values()} <= {
        (7, 3, NOW)
    }
    expected: dict[tuple[str, str], list[int]] = {}
    for p, s in sorted(lowest):
        expected.setdefault((p, OWNERS[s]), []).append(s)
    assert {(r["post_id"], r["subscriber"]): r["sub_ids"] for r in deliveries.to_pylist()} == {
        k: sorted(v) for k, v in expected.items()
    }
    assert deliveries.num_rows == len(expected)
    # each delivery carries its post's arrival: the earliest of the post's rows (none
    # when the rows had none)
    for r in deliveries.to_pylist():
        rows_of_post = [m for p, _, m in rows if p == r["post_id"]]
        assert r["arrived_at"] == (
            min(_arrival(r["post_id"], m) for m in rows_of_post) if as_lists else None
        )
    # the deliveries hold the matches: derived rows = the rows dispatch built
    derived = matches_of_deliveries(deliveries)
    assert _rows(derived) == _rows(matches)


def _rows(t: pa.Table) -> list[tuple]:
    return sorted(
        (r["post_id"], r["sub_id"], r["subscriber"], r["matcher_id"], r["routing_version"],
         r["batch_id"], r["matched_at"])
        for r in t.to_pylist()
    )  # fmt: skip


def test_deliveries_without_matcher_ids_derive_null_matchers() -> None:
    rows = [("p1", 1, 0), ("p1", 4, 2), ("p2", 2, 1)]
    matched = pa.Table.from_pylist(
        [{"post_id": p, "sub_id": s, "matcher_id": m} for p, s, m in rows], schema=MATCHES_ARROW
    )
    _, deliveries = dispatch_tables(matched, Subscribers.of(OWNERS), 1, 0, NOW)
    assert deliveries.column("sub_ids").to_pylist() == [[1, 4], [2]]  # user1, user2
    # a row written before matcher ids were kept: a null list
    old = deliveries.set_column(
        deliveries.schema.get_field_index("matcher_ids"),
        "matcher_ids",
        pa.array([None, [1]], pa.list_(pa.int32())),
    )
    derived = matches_of_deliveries(old).to_pylist()
    assert [(r["sub_id"], r["matcher_id"]) for r in derived] == [(1, None), (4, None), (2, 1)]
    bad = deliveries.set_column(
        deliveries.schema.get_field_index("matcher_ids"),
        "matcher_ids",
        pa.array([[0, 0]] * deliveries.num_rows, pa.list_(pa.int32())),
    )
    with pytest.raises(InputDataError, match="line up"):
        matches_of_deliveries(bad)


def test_a_match_without_subscriber_is_an_error() -> None:
    matched = pa.Table.from_pylist(
        [{"post_id": "p", "sub_id": 99, "matcher_id": 0}], schema=MATCHES_ARROW
    )
    with pytest.raises(InputDataError, match="no subscriber"):
        dispatch_tables(matched, Subscribers.of(OWNERS), 1, 0, NOW)


def test_an_empty_batch_dispatches_nothing() -> None:
    for empty in (MATCHES_ARROW.empty_table(), MATCHED_ARROW.empty_table()):
        matches, deliveries = dispatch_tables(empty, Subscribers.of(OWNERS), 1, 0, NOW)
        assert matches is not None
        assert matches.num_rows == deliveries.num_rows == 0


def test_subscriptions_rank_by_subscriber_then_id() -> None:
    subscribers = Subscribers.of({5: "b", 2: "b", 9: "a", 4: "a"})
    assert subscribers.sub_of_rank.tolist() == [4, 9, 2, 5]
    assert subscribers.ranks(np.array([2, 4, 5, 9])).tolist() == [2, 0, 3, 1]
    with pytest.raises(InputDataError, match="no subscriber"):
        subscribers.ranks(np.array([3]))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), min_size=1, max_size=60),
    st.sampled_from([0, 1 << 40]),  # ids a table covers, and ids only a search finds
    st.lists(st.integers(0, 45), max_size=30),
)
def test_ranks_by_table_and_by_search_equal_the_sorted_reference(pairs, offset, asked) -> None:
    ids = np.array([offset + i for i, _ in pairs], dtype=np.int64)
    # one subscriber per id, the first pair's (a batch's matches repeat ids)
    owner: dict[int, int] = {}
    for i, code in pairs:
        owner.setdefault(offset + i, code)
    codes = np.array([owner[int(i)] for i in ids], dtype=np.int32)
    names = ["d", "c", "b", "a"]
    subscribers = Subscribers.of_codes(ids, codes, names)
    reference = sorted(owner, key=lambda i: (names[owner[i]], i))
    assert subscribers.sub_of_rank.tolist() == reference
    assert subscribers.owner_of_rank.tolist() == [owner[i] for i in reference]
    wanted = np.array([offset + a for a in asked], dtype=np.int64)
    if all(int(w) in owner for w in wanted):
        assert subscribers.ranks(wanted).tolist() == [reference.index(int(w)) for w in wanted]
    else:
        with pytest.raises(InputDataError, match="no subscriber"):
            subscribers.ranks(wanted)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # post code
            st.integers(0, 5),  # matcher
            st.integers(0, 2),  # level
            st.lists(st.integers(0, (1 << 20) - 1), max_size=120),  # ranks, wide ones too
        ),
        max_size=12,
    )
)
def test_dedupe_kernel_equals_a_stable_sort(rows) -> None:
    # posts of many matches take the kernel's radix sort, few its insertion sort: both
    # against the obvious order (post, rank, matcher, row), each (post, rank) once
    n_posts = 4
    offsets = np.cumsum([0] + [len(r[3]) for r in rows]).astype(np.int64)
    got = dedupe_by_post(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=np.int32),
        offsets,
        np.array([x for r in rows for x in r[3]], dtype=np.int64),
        n_posts,
    )
    found = sorted(
        (post, rank, matcher, i, level)
        for i, (post, matcher, level, ranks) in enumerate(rows)
        for rank in ranks
    )
    expected: dict[tuple[int, int], tuple[int, int]] = {}
    for post, rank, matcher, _, level in found:
        expected.setdefault((post, rank), (matcher, level))
    assert [a.tolist() for a in got] == [
        [p for p, _ in expected],
        [r for _, r in expected],
        [m for m, _ in expected.values()],
        [lv for _, lv in expected.values()],
    ]


def test_matched_ids_travel_narrow_when_they_fit() -> None:
    ids, schema = matched_sub_ids(np.array([3, 7], dtype=np.int64))
    assert ids.type == pa.int32() and schema == MATCHED_NARROW_ARROW
    ids, schema = matched_sub_ids(np.array([3, 1 << 40], dtype=np.int64))
    assert ids.type == pa.int64() and schema == MATCHED_ARROW
    row = {"post_id": "p1", "matcher_id": 0, "shedding_level": 0}
    narrow = pa.Table.from_pylist([{**row, "sub_ids": [1]}], schema=MATCHED_NARROW_ARROW)
    wide = pa.Table.from_pylist([{**row, "matcher_id": 1, "sub_ids": [4]}], schema=MATCHED_ARROW)
    both = concat_matched([narrow, wide])
    assert both.schema == MATCHED_ARROW and both.column("sub_ids").to_pylist() == [[1], [4]]
    assert concat_matched([narrow, narrow]).schema == MATCHED_NARROW_ARROW
    _, deliveries = dispatch_tables(both, Subscribers.of(OWNERS), 1, 0, NOW)
    assert deliveries.column("sub_ids").to_pylist() == [[1, 4]]  # user1's two
