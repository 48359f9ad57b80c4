"""delta-spark and delta-rs on the same tables: what one engine commits, the other reads
row for row, both ways, at every version (time travel), across a checkpoint written by
either, and after the table's schema grew; and the tables keep a protocol both read (no
deletion vectors, no column mapping)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import Row

from schemas import table
from spark_jobs.lake.delta_io import Lakehouse
from tests.support.grown_tables import deliveries_before_shedding

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
WORD_STATS = "gold.word_stats"


def _stats(spark, rows):
    return spark.createDataFrame(
        [Row(day=d, word=w, post_frequency=f, cofrequency_sum=c) for d, w, f, c in rows]
    )


def _key(rows):
    return sorted(rows, key=lambda r: (r["day"], r["word"]))


def _spark_rows(spark, path, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(path).select(table(WORD_STATS).columns)
    return _key([r.asDict() for r in frame.collect()])


def _rs_rows(path, version=None):
    data = DeltaTable(path, version=version).to_pyarrow_table()
    return _key(data.select(table(WORD_STATS).columns).to_pylist())


@pytest.fixture
def lakes(spark, tmp_path):
    """The same lakehouse root through each engine."""
    root = tmp_path / "lakehouse"
    return Lakehouse(spark, root, engine="spark"), Lakehouse(spark, root, engine="rs")


def _protocol_both_read(path: str) -> None:
    protocol = DeltaTable(path).protocol()
    features = set(protocol.reader_features or []) | set(protocol.writer_features or [])
    assert not features & {"deletionVectors", "columnMapping", "v2Checkpoint"}, features
    assert protocol.min_reader_version <= 3


@pytest.mark.parametrize("writer", ["spark", "rs"])
def test_what_one_engine_commits_the_other_reads_at_every_version(spark, lakes, writer):
    by_spark, by_rs = lakes
    lake = by_spark if writer == "spark" else by_rs
    written = []
    for k in range(4):  # appends, then a partition overwrite
        frame = _stats(spark, [(D1 if k % 2 else D2, f"w{k}-{j}", k, j) for j in range(3)])
        written.append(lake.write(frame, WORD_STATS, app_id="engines", batch_id=k))
    lake.write(
        _stats(spark, [(D1, "replaced", 9, 9)]),
        WORD_STATS,
        mode="overwrite",
        replace_where={"day": [D1]},
    )
    path = lake.path(WORD_STATS)
    for version in [w.version for w in written] + [None]:
        expected = _spark_rows(spark, path, version)
        assert expected == _rs_rows(path, version), version
        # and through the lakehouse's reads of the other engine
        assert _key([r.asDict() for r in by_rs.read(WORD_STATS, version).collect()]) == expected
        assert _key([r.asDict() for r in by_spark.read(WORD_STATS, version).collect()]) == expected
    # the application transaction is seen by both engines (idempotency across engines)
    other = by_rs if writer == "spark" else by_spark
    assert other.last_batch(WORD_STATS, "engines") == 3
    assert other.write(_stats(spark, [(D2, "late", 1, 1)]), WORD_STATS, app_id="engines",
                       batch_id=3).skipped  # fmt: skip
    _protocol_both_read(path)


def test_checkpoints_written_by_either_engine_are_read_by_the_other(spark, lakes):
    by_spark, by_rs = lakes
    for k in range(12):  # delta-spark checkpoints every 10 commits
        by_spark.write(_stats(spark, [(D1, f"s{k}", k, 0)]), WORD_STATS)
    path = by_spark.path(WORD_STATS)
    log = [p.name for p in (Path(by_spark.path(WORD_STATS)) / "_delta_log").iterdir()]
    assert any(name.endswith(".checkpoint.parquet") for name in log), log
    assert _rs_rows(path) == _spark_rows(spark, path) and len(_rs_rows(path)) == 12
    # delta-rs writes one on a later version; delta-spark starts from it
    for k in range(3):
        by_rs.write(_stats(spark, [(D2, f"r{k}", k, 0)]), WORD_STATS)
    dtable = DeltaTable(path)
    dtable.create_checkpoint()
    assert (Path(by_spark.path(WORD_STATS)) / "_delta_log" / "_last_checkpoint").exists()
    spark.catalog.clearCache()
    assert _spark_rows(spark, path) == _rs_rows(path) and len(_rs_rows(path)) == 15
    _protocol_both_read(path)


def test_a_grown_schema_reads_alike_in_both_engines(spark, lakes):
    """A stream table from before a column was added: delta-rs adds it in place (nullable),
    delta-spark appends rows that carry it, both engines read old rows as null."""
    by_spark, by_rs = lakes
    spec = table("deliveries")
    old_schema, old_row = deliveries_before_shedding()
    write_deltalake(by_rs.path("deliveries"), pa.Table.from_pylist([old_row], schema=old_schema))
    row = {**dict.fromkeys(spec.columns), **old_row, "post_id": "p2", "batch_id": 1}
    row["shedding_level"] = 3
    new = spark.createDataFrame([tuple(row[c] for c in spec.columns)], spec.spark_schema())
    by_spark.write(new, "deliveries")  # evolves the table first, then delta-spark appends
    through_spark = {
        r.post_id: r.shedding_level
        for r in spark.read.format("delta").load(by_spark.path("deliveries")).collect()
    }
    through_rs = {
        r["post_id"]: r["shedding_level"]
        for r in DeltaTable(by_rs.path("deliveries")).to_pyarrow_table().to_pylist()
    }
    assert through_spark == through_rs == {"p1": None, "p2": 3}
    _protocol_both_read(by_rs.path("deliveries"))
