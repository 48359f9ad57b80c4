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
    # the words whose matchers differ, from the mappings read in Python
    matchers: dict[int, dict[str, set[int]]] = {1: {}, 2: {}}
    for row in lake.read_arrow("routing.mappings").to_pylist():
        matchers[row["routing_version"]].setdefault(row["word"], set()).add(row["matcher_id"])
    moved = {w for w in matchers[1].keys() | matchers[2].keys()
             if matchers[1].get(w) != matchers[2].get(w)}  # fmt: skip
    assert moved  # N = 4 -> 3 moves a word or more
    got = LakehouseSQL(lake, {}).query(sql).to_pylist()
    assert [r["word"] for r in got] == sorted(moved)
