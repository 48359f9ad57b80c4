"""The Delta I/O module: round trips, time travel, idempotency, cross-engine reads,
concurrent appends, with each engine as the writer (delta-spark, and the delta-rs bridge).
Every table written here is checked with delta-rs directly."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from core.errors import InputDataError, InvalidArgumentError
from schemas import table
from tests.support.grown_tables import GROWN, deliveries_before_shedding

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)


@pytest.fixture(params=["spark", "rs"])
def lakehouse(request, spark, tmp_path):
    """An empty lakehouse written through each engine in turn."""
    from spark_jobs.lake.delta_io import Lakehouse

    return Lakehouse(spark, tmp_path / "lakehouse", engine=request.param)


def _stats(spark, rows):
    return spark.createDataFrame(
        [Row(day=d, word=w, post_frequency=f, cofrequency_sum=c) for d, w, f, c in rows]
    )


def _rs_rows(lakehouse, name, version=None):
    data = DeltaTable(str(lakehouse.path(name)), version=version).to_pyarrow_table()
    return sorted(data.select(table(name).columns).to_pylist(), key=lambda r: tuple(r.values()))


def test_round_trip_and_delta_rs_agrees(spark, lakehouse):
    frame = _stats(spark, [(D1, "a", 3, 1), (D2, "b", 2, 0), (D2, "c", 5, 4)])
    result = lakehouse.write(frame, "gold.word_stats")
    assert (result.rows, result.skipped) == (3, False)
    assert result.version == lakehouse.version("gold.word_stats")
    assertDataFrameEqual(
        lakehouse.read("gold.word_stats"), frame.select(table("gold.word_stats").columns)
    )
    assert _rs_rows(lakehouse, "gold.word_stats") == sorted(
        [r.asDict() for r in frame.collect()], key=lambda r: tuple(r.values())
    )
    dtable = DeltaTable(str(lakehouse.path("gold.word_stats")))
    assert dtable.metadata().partition_columns == ["day"]
    assert dtable.schema().to_arrow() == table("gold.word_stats").schema


def test_overwrite_then_time_travel(spark, lakehouse):
    first = lakehouse.write(_stats(spark, [(D1, "a", 1, 0), (D2, "b", 2, 0)]), "gold.word_stats")
    second = lakehouse.write(
        _stats(spark, [(D1, "z", 9, 9)]),
        "gold.word_stats",
        mode="overwrite",
        replace_where={"day": [D1]},
    )
    now = sorted((r.day, r.word) for r in lakehouse.read("gold.word_stats").collect())
    assert now == [(D1, "z"), (D2, "b")]
    before = sorted(
        (r.day, r.word) for r in lakehouse.read("gold.word_stats", first.version).collect()
    )
    assert before == [(D1, "a"), (D2, "b")]
    lakehouse.write(_stats(spark, [(D2, "y", 1, 1)]), "gold.word_stats", mode="overwrite")
    assert [r.word for r in lakehouse.read("gold.word_stats").collect()] == ["y"]
    operations = [h["operation"] for h in lakehouse.history("gold.word_stats")]
    # delta-spark's first write follows an empty CREATE TABLE (the spec's schema); the
    # bridge's first write is the CREATE TABLE
    assert operations[:2] == ["WRITE", "WRITE"] and operations[-1] == "CREATE TABLE"
    words = _rs_rows(lakehouse, "gold.word_stats", version=second.version)
    assert sorted(r["word"] for r in words) == ["b", "z"]


def test_idempotent_batches(spark, lakehouse):
    frame = _stats(spark, [(D1, "a", 1, 0)])
    first = lakehouse.write(frame, "gold.word_stats", app_id="ingest", batch_id=5)
    again = lakehouse.write(frame, "gold.word_stats", app_id="ingest", batch_id=5)
    older = lakehouse.write(frame, "gold.word_stats", app_id="ingest", batch_id=4)
    assert not first.skipped and again.skipped and older.skipped
    assert lakehouse.read("gold.word_stats").count() == 1
    assert lakehouse.last_batch("gold.word_stats", "ingest") == 5
    other_app = lakehouse.write(frame, "gold.word_stats", app_id="backfill", batch_id=1)
    assert not other_app.skipped and lakehouse.read("gold.word_stats").count() == 2
    assert lakehouse.last_batch("gold.word_stats", "ingest") == 5


def test_table_written_by_delta_rs_is_read_by_the_lakehouse(spark, lakehouse):
    spec = table("routing.mappings")
    data = pa.table(
        {
            "routing_version": [1, 1, 2],
            "word": ["a", "b", "a"],
            "part": [0, 0, 0],
            "matcher_id": [3, 1, 0],
        },
        schema=spec.schema,
    )
    write_deltalake(str(lakehouse.path("routing.mappings")), data, partition_by=["routing_version"])
    read = lakehouse.read("routing.mappings").orderBy("routing_version", "word").collect()
    assert [(r.routing_version, r.word, r.matcher_id) for r in read] == [
        (1, "a", 3),
        (1, "b", 1),
        (2, "a", 0),
    ]
    # ... and the lakehouse appends to it in the same protocol.
    lakehouse.write(
        spark.createDataFrame([Row(routing_version=3, word="c", part=0, matcher_id=2)]),
        "routing.mappings",
    )
    assert len(_rs_rows(lakehouse, "routing.mappings")) == 4


def test_arrow_writes_and_reads(lakehouse):
    spec = table("routing.mappings")
    data = pa.table(
        {"routing_version": [7], "word": ["w"], "part": [0], "matcher_id": [1]}, schema=spec.schema
    )
    lakehouse.write_arrow(data, "routing.mappings", app_id="learn", batch_id=7)
    assert lakehouse.write_arrow(data, "routing.mappings", app_id="learn", batch_id=7).skipped
    assert lakehouse.read_arrow("routing.mappings").to_pylist() == data.to_pylist()
    assert lakehouse.read_arrow("routing.versions").num_rows == 0  # absent: empty


def test_arrow_reads_of_columns_rows_and_partitions_equal_the_filtered_whole(lakehouse):
    """Reading only some columns, rows (a filter the files' statistics prune by) or
    partitions gives what filtering the whole table gives (delta-rs' own read)."""
    import pyarrow.compute as pc

    spec = table("routing.placements")
    for version in (1, 2):  # two partitions, two commits each: several files
        for chunk in (range(0, 500), range(500, 900)):
            ids = np.array(list(chunk), dtype=np.int64)
            lakehouse.write_arrow(
                pa.table(
                    {
                        "routing_version": np.full(ids.size, version, dtype=np.int64),
                        "sub_id": ids,
                        "matcher_id": (ids % 7).astype(np.int32),
                        "placed_at": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * ids.size),
                    },
                    schema=spec.schema,
                ),
                "routing.placements",
            )
    whole = DeltaTable(str(lakehouse.path("routing.placements"))).to_pyarrow_table()
    wanted = np.array([3, 499, 500, 777], dtype=np.int64)
    field = pc.field("sub_id")
    got = lakehouse.read_arrow(
        "routing.placements",
        columns=["sub_id", "matcher_id", "routing_version"],
        where=(field >= 3) & (field <= 777) & field.isin(pa.array(wanted)),
        partitions={"routing_version": 2},
    )
    assert got.column_names == ["sub_id", "matcher_id", "routing_version"]
    expected = whole.filter(
        pc.and_(pc.is_in(whole["sub_id"], pa.array(wanted)), pc.equal(whole["routing_version"], 2))
    )
    key = "sub_id"
    assert got.sort_by(key).to_pylist() == (
        expected.select(got.column_names).cast(got.schema).sort_by(key).to_pylist()
    )
    assert lakehouse.read_arrow("routing.placements", columns=["sub_id"]).num_rows == 1_800


def test_concurrent_appends_both_land(spark, lakehouse):
    seeded = lakehouse.write(_stats(spark, [(D1, "seed", 1, 0)]), "gold.word_stats")
    frames = [_stats(spark, [(D1, f"t{i}-{j}", 1, 0) for j in range(50)]) for i in range(2)]
    errors: list[BaseException] = []

    def append(frame):
        try:
            lakehouse.write(frame, "gold.word_stats")
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=append, args=(f,)) for f in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert lakehouse.read("gold.word_stats").count() == 101
    assert len(_rs_rows(lakehouse, "gold.word_stats")) == 101
    assert lakehouse.version("gold.word_stats") == seeded.version + 2


def test_empty_writes_create_the_table(spark, lakehouse):
    empty = spark.createDataFrame([], table("gold.word_stats").spark_schema())
    lakehouse.write(empty, "gold.word_stats")
    assert lakehouse.exists("gold.word_stats")
    assert lakehouse.read("gold.word_stats").count() == 0


def test_bad_arguments_and_missing_tables(spark, lakehouse):
    frame = _stats(spark, [(D1, "a", 1, 0)])
    with pytest.raises(InvalidArgumentError, match="mode"):
        lakehouse.write(frame, "gold.word_stats", mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="go together"):
        lakehouse.write(frame, "gold.word_stats", app_id="x")
    with pytest.raises(InvalidArgumentError, match="do not partition"):
        lakehouse.write(frame, "gold.word_stats", mode="overwrite", replace_where={"word": ["a"]})
    with pytest.raises(InvalidArgumentError, match="lacks columns"):
        lakehouse.write(frame.drop("word"), "gold.word_stats")
    with pytest.raises(InputDataError, match="does not exist"):
        lakehouse.read("silver.posts")
    with pytest.raises(KeyError, match="unknown table"):
        lakehouse.read("gold.nope")
    assert lakehouse.version("silver.posts") is None


def test_a_table_written_before_its_spec_grew_gains_the_new_columns(lakehouse):
    """A lakehouse from before the shedding columns: the next write adds them (nullable)
    in place; old rows read as null, through delta-rs and this module alike."""
    spec = table("deliveries")
    old_schema, old_row = deliveries_before_shedding()
    old = pa.Table.from_pylist([old_row], schema=old_schema)
    write_deltalake(str(lakehouse.path("deliveries")), old)
    new = pa.Table.from_pylist(
        [{**old.to_pylist()[0], "post_id": "p2", "batch_id": 1, "shedding_level": 3}],
        schema=spec.schema,
    )
    lakehouse.write_arrow(new, "deliveries")
    fields = {f.name for f in DeltaTable(str(lakehouse.path("deliveries"))).schema().fields}
    assert set(GROWN) <= fields
    rows = {
        r["post_id"]: r["shedding_level"] for r in lakehouse.read_arrow("deliveries").to_pylist()
    }
    assert rows == {"p1": None, "p2": 3}
    assert {r["post_id"]: r["shedding_level"] for r in _rs_rows(lakehouse, "deliveries")} == rows
    assert lakehouse.evolve("deliveries") == []  # nothing left to add
