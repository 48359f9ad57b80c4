"""Shared fixtures: a small local SparkSession, word-list corpora, the real-data path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.bench.realdata import real_corpus_path


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A local[2] SparkSession for tests: UI off, few shuffle partitions, tmp warehouse."""
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("s3tm-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    yield session
    session.stop()


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
