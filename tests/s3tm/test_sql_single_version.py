"""``s3tm sql --example words-moved`` on a lakehouse with one published version: nothing
moved (it listed every word before). No JVM: the tables are written by delta-rs."""

from __future__ import annotations

from s3tm.sql.engine import LakehouseSQL
from s3tm.sql.examples import example
from spark_jobs.lake.delta_io import Lakehouse
from tests.s3tm.small_lakehouse import publish_version


def test_words_moved_is_empty_with_one_published_version_and_not_with_two(tmp_path) -> None:
    lake = Lakehouse(None, tmp_path / "lakehouse", engine="rs")
    publish_version(lake, 1, 4)
    sql = example("words-moved").sql
    assert LakehouseSQL(lake, {}).query(sql).num_rows == 0
    publish_version(lake, 2, 3)  # another N: words land on other matchers
    assert LakehouseSQL(lake, {}).query(sql).num_rows > 0
