"""The stream tests' own check: a `matches` table that differs from brute force is reported
by how (pairs written twice, missing, extra, with their batch and matcher), not passed."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest

from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from tests.spark_jobs.stream import harness


def _matches(pairs: list[tuple[str, int, int]]) -> pa.Table:
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    return pa.Table.from_pylist(
        [
            {
                "post_id": post,
                "sub_id": sub,
                "subscriber": "user0",
                "routing_version": 1,
                "matcher_id": sub % 4,
                "matched_at": at,
                "batch_id": batch,
            }
            for post, sub, batch in pairs
        ],
        schema=table("matches").schema,
    )


def test_equal_matches_pass_and_each_kind_of_difference_is_named(tmp_path):
    lake = Lakehouse(None, tmp_path / "lakehouse", engine="rs")
    lake.write_arrow(_matches([("p1", 1, 0), ("p1", 2, 0), ("p2", 3, 1)]), "matches")
    harness.assert_matches_equal(lake, Counter({("p1", 1): 1, ("p1", 2): 1, ("p2", 3): 1}))

    lake.write_arrow(_matches([("p2", 3, 2), ("p3", 9, 2)]), "matches")  # a replay, and more
    with pytest.raises(AssertionError) as failed:
        harness.assert_matches_equal(
            lake, Counter({("p1", 1): 1, ("p1", 2): 1, ("p2", 3): 1, ("p4", 5): 1})
        )
    message = str(failed.value)
    assert "1 pairs written more than once, 1 missing, 1 extra" in message
    assert "more than once: ('p2', 3) at [(1, 3, 1), (2, 3, 1)]" in message
    assert "missing: ('p4', 5) at []" in message and "extra: ('p3', 9) at [(2, 1, 1)]" in message
    assert "commits: v1 WRITE" in message and "v0 WRITE" in message
