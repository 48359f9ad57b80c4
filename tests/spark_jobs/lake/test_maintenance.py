"""Table maintenance: compaction keeps the content, retention deletes exactly the old days,
bad policies are refused, and compacting while the stream runs loses and duplicates
nothing, whichever engine commits the stream's batches (matches still equal brute force;
Spark and delta-rs readers find every file)."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pyarrow as pa
import pytest

from core.errors import InvalidArgumentError
from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from spark_jobs.lake.maintenance import MaintenancePolicy, file_count, maintain
from spark_jobs.lake.subscription_store import register_word_sets
from spark_jobs.stream.matcher import start
from tests.spark_jobs.stream import harness

TODAY = dt.date(2026, 3, 31)


def _match_rows(batch: int, day: dt.date, n: int = 5) -> pa.Table:
    at = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC)
    return pa.Table.from_pylist(
        [
            {
                "post_id": f"b{batch}-p{i}",
                "sub_id": i,
                "subscriber": f"user{i % 3}",
                "routing_version": 1,
                "matcher_id": i % 4,
                "matched_at": at,
                "batch_id": batch,
            }
            for i in range(n)
        ],
        schema=table("matches").schema,
    )


def _sorted(data: pa.Table) -> list[dict]:
    return sorted(data.to_pylist(), key=lambda r: (r["post_id"], r["sub_id"]))


def test_compaction_keeps_content_and_retention_deletes_old_days(tmp_path):
    lake = Lakehouse(None, tmp_path / "lakehouse")
    for batch in range(12):  # one small file per micro-batch, days 0..11 before TODAY
        lake.write_arrow(_match_rows(batch, TODAY - dt.timedelta(days=batch)), "matches")
    before = _sorted(lake.read_arrow("matches"))
    assert file_count(lake, "matches") == 12

    keep_all = MaintenancePolicy(tables=("matches",), keep_days={"matches": 0})
    [report] = maintain(lake, keep_all, today=TODAY)
    assert (report.files_before, report.files_after) == (12, 1)
    assert report.rows_before == report.rows_after == len(before)
    assert _sorted(lake.read_arrow("matches")) == before  # identical content
    # time travel to the pre-compaction version still reads (files kept until vacuum)
    assert _sorted(lake.read_arrow("matches", version=report.version_before)) == before

    week = MaintenancePolicy(tables=("matches",), keep_days={"matches": 7})
    [report] = maintain(lake, week, today=TODAY)
    kept = [r for r in before if r["matched_at"].date() >= TODAY - dt.timedelta(days=7)]
    assert len(kept) < len(before)  # the matches span more than a week
    assert report.rows_deleted == len(before) - len(kept)
    assert _sorted(lake.read_arrow("matches")) == kept
    assert report.files_after == 1


def test_stream_health_keeps_30_days_by_default(tmp_path):
    lake = Lakehouse(None, tmp_path / "lakehouse")
    spec = table("stream.health")
    rows = [
        {
            **{f.name: None for f in spec.schema},
            "query_id": "q",
            "batch_id": days,
            "routing_version": 1,
            "n_matchers": 4,
            "recorded_at": dt.datetime.combine(
                TODAY - dt.timedelta(days=days), dt.time(9), tzinfo=dt.UTC
            ),
        }
        for days in (0, 10, 29, 31, 60)
    ]
    rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    lake.write_arrow(pa.Table.from_pylist(rows, schema=spec.schema), "stream.health")
    [report] = maintain(lake, MaintenancePolicy(tables=("stream.health",)), today=TODAY)
    assert report.rows_deleted == 2
    assert sorted(lake.read_arrow("stream.health")["batch_id"].to_pylist()) == [0, 10, 29]


def test_absent_tables_are_reported_not_failed(tmp_path):
    lake = Lakehouse(None, tmp_path / "lakehouse")
    reports = maintain(lake, MaintenancePolicy(), today=TODAY)
    assert {r.note for r in reports} == {"absent"}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vacuum_hours": 0}, "at least 1 hour"),
        ({"tables": ("no.such",)}, "unknown tables"),
        ({"keep_days": {"routing.versions": 3}}, "no retention by day"),
        ({"keep_days": {"matches": -1}}, ">= 0"),
    ],
)
def test_bad_policies_are_refused(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        MaintenancePolicy(**kwargs)


@pytest.mark.parametrize("engine", ["rs", "spark"])
def test_compaction_during_a_running_stream_loses_nothing(lakehouse, tmp_path, engine):
    """delta-rs compacts, checkpoints and vacuums while the stream commits its batches with
    each engine (delta-spark: format("delta") appends with txnAppId/txnVersion)."""
    lakehouse = Lakehouse(lakehouse.spark, lakehouse.root, engine=engine)
    landing = harness.Landing(tmp_path / "landing")
    sets = harness.subscription_sets(landing, 200, seed=3)
    register_word_sets(lakehouse, [" ".join(s) for s in sets], sets, "user0")
    harness.publish_learned(lakehouse, landing, 4, "salb", split=False)
    policy = MaintenancePolicy(
        tables=("matches", "deliveries", "stream.batches"), keep_days={}, vacuum_hours=1
    )
    posts = landing.write(150)
    query, _ = start(lakehouse.spark, lakehouse, harness.stream_config(tmp_path, landing))
    stop = threading.Event()
    compactions: list[int] = []
    errors: list[BaseException] = []

    def compact_repeatedly() -> None:
        # after each commit the stream made (polled every 0.1 s), so compactions fall between
        # a batch's commits and between batches; back to back, they took a core (and the
        # driver's GIL) from the stream they race
        maintainer = Lakehouse(None, lakehouse.root, engine="rs")
        compacted_at: tuple[int | None, ...] = ()
        while not stop.wait(0.1):
            try:
                if tuple(maintainer.version(t) for t in policy.tables) == compacted_at:
                    continue
                reports = maintain(maintainer, policy)
                compacted_at = tuple(maintainer.version(t) for t in policy.tables)
                compactions.extend(r.files_compacted for r in reports)
                assert not [r.note for r in reports if r.note.startswith("FAILED")], reports
            except BaseException as err:
                errors.append(err)
                return

    worker = threading.Thread(target=compact_repeatedly, daemon=True)
    try:
        query.processAllAvailable()
        worker.start()
        for _ in range(5):  # five more micro-batches while the tables are compacted
            posts += landing.write(150)
            query.processAllAvailable()
            # Spark reads (other queries on the tables) find every file meanwhile
            assert lakehouse.read("matches").count() == lakehouse.read_arrow("matches").num_rows
    finally:
        stop.set()
        worker.join(timeout=120)
        query.stop()
    assert errors == []
    assert sum(compactions) > 0, "no compaction happened while the stream ran"
    maintain(lakehouse, policy)  # and once more after the last batch
    assert file_count(lakehouse, "matches") == 1
    expected = harness.expected_matches(landing, posts, harness.active_subscriptions(lakehouse))
    assert sum(expected.values()) > 100
    harness.assert_matches_equal(lakehouse, expected, landing)
    harness.check_deliveries(lakehouse)
    assert Counter((r.post_id, r.sub_id) for r in lakehouse.read("matches").collect()) == expected
