"""Dispatch of a batch's raw matches: each (post, subscription) once, one delivery per
(post, subscriber) with its sub ids ascending; against a plain Python reference."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import InputDataError
from core.stream.dispatch import MATCHES_ARROW, Subscribers, dispatch_tables

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
OWNERS = {s: f"user{s % 3}" for s in range(1, 9)}

raw_matches = st.lists(
    st.tuples(st.sampled_from(["p1", "p2", "p3", "p4", "q"]), st.integers(1, 8), st.integers(0, 5)),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(raw_matches, st.booleans())
def test_dispatch_equals_the_plain_reference(rows, packed) -> None:
    import core.stream.dispatch as dispatch

    # both orderings: the packed int64 key, and the lexsort used when it would overflow
    saved, dispatch.PACKED_KEY_BITS = dispatch.PACKED_KEY_BITS, (62 if packed else 0)
    try:
        _check_dispatch(rows)
    finally:
        dispatch.PACKED_KEY_BITS = saved


def _check_dispatch(rows) -> None:
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
    matches, deliveries = dispatch_tables(matched, Subscribers.of(OWNERS), 7, 3, NOW)
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


def test_a_match_without_subscriber_is_an_error() -> None:
    matched = pa.Table.from_pylist(
        [{"post_id": "p", "sub_id": 99, "matcher_id": 0}], schema=MATCHES_ARROW
    )
    with pytest.raises(InputDataError, match="no subscriber"):
        dispatch_tables(matched, Subscribers.of(OWNERS), 1, 0, NOW)
