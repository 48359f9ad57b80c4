"""Shared fixtures: a small local SparkSession, word-list corpora, the real-data path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from s3tm.bench.realdata import real_corpus_path


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local[2] SparkSession from the jobs' builder: UI off, few shuffle partitions."""
    from spark_jobs.lake.session import build_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_session(
        "s3tm-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.driver.memory": "1g",
        },
    )
    yield session
    session.stop()


@pytest.fixture()
def lakehouse(spark: object, tmp_path: Path):
    """An empty lakehouse under a tmp dir, with the engine the session supports."""
    from spark_jobs.lake.delta_io import Lakehouse

    return Lakehouse(spark, tmp_path / "lakehouse")


@pytest.fixture(scope="session")
def real_corpus() -> Path:
    """The real tweets of ../shared/data; skips with a message when absent."""
    path = real_corpus_path()
    if path is None:
        pytest.skip(
            "real corpus ../shared/data/tweets-tweeteval.jsonl.gz is absent "
            "(set S3TM_SHARED_DATA to its folder to run this test)"
        )
    return path
