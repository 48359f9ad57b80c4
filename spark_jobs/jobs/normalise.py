"""normalise: ``bronze.posts`` -> ``silver.posts`` (distinct normalised words, sampled).

The words come from ``core.text.normalize_arrow`` (``normalize`` over a whole Arrow batch,
word for word the same: tests/core/test_word_encoder.py), run inside ``mapInArrow``.
Sampling is deterministic per post (xxhash64 of the post id and the seed, below the rate),
so a re-run keeps the same posts. Only bronze posts not yet in silver (or quarantined by
this stage) are processed; posts with no word left after normalisation are quarantined with
the reason.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from core.errors import InvalidArgumentError
from spark_jobs.common import exit_process, job_entry
from spark_jobs.jobs.configs import NormaliseConfig as NormaliseConfig
from spark_jobs.jobs.sampling import hash_fraction_filter

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from spark_jobs.lake.delta_io import Lakehouse

APP_ID = "s3tm.normalise"
_WORDS_SCHEMA = "post_id string, words array<string>"
_WORDS_ARROW = pa.schema([("post_id", pa.string()), ("words", pa.list_(pa.string()))])


def normalise_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (post_id, text) -> (post_id, sorted distinct words)."""
    from core.text import normalize_arrow
    from spark_jobs.runtime import code_point_cache

    code_point_cache.install()

    for batch in batches:
        yield pa.RecordBatch.from_arrays(
            [batch.column("post_id"), normalize_arrow(batch.column("text"))],
            schema=_WORDS_ARROW,
        )


def sample_filter(rate: float, seed: int) -> Column:
    """Column predicate keeping a deterministic ``rate`` fraction of posts."""
    if not 0.0 < rate <= 1.0:
        raise InvalidArgumentError(f"sample rate must be in (0, 1], got {rate}")
    return hash_fraction_filter(rate, seed)


def normalise(
    bronze: DataFrame, done_ids: DataFrame, *, rate: float, seed: int, batch: str, now: dt.datetime
) -> tuple[DataFrame, DataFrame]:
    """Pure transform: bronze rows -> (silver rows, quarantine rows).

    Args:
        bronze: rows of ``bronze.posts``.
        done_ids: ``post_id`` of posts already in silver or quarantined by this stage.
        rate, seed: the sampling rate and its seed.
        batch: label written on quarantine rows; now: their timestamp.
    """
    from pyspark.sql import functions as F

    todo = bronze.where(sample_filter(rate, seed)).join(
        done_ids.select("post_id").distinct(), "post_id", "left_anti"
    )
    words = todo.select("post_id", "text").mapInArrow(normalise_batches, _WORDS_SCHEMA)
    joined = todo.join(words, "post_id")
    silver = joined.where(F.size("words") > 0).select(
        "post_id",
        "words",
        F.size("words").cast("int").alias("n_words"),
        "event_day",
        "created_at",
        F.lit(rate).alias("sample_rate"),
    )
    empty = joined.where(F.size("words") == 0).select(
        F.lit("normalise").alias("stage"),
        F.lit("no words after normalisation").alias("reason"),
        "post_id",
        "source_file",
        "line_number",
        F.col("text").alias("raw"),
        F.lit(batch).alias("ingest_batch"),
        F.lit(now).cast("timestamp").alias("quarantined_at"),
    )
    return silver, empty


def run(config: NormaliseConfig, lakehouse: Lakehouse) -> int:
    from pyspark.sql import functions as F

    bronze_version = lakehouse.version("bronze.posts")
    if bronze_version is None:
        raise InvalidArgumentError("bronze.posts does not exist: run ingest first")
    last = lakehouse.last_batch("silver.posts", APP_ID)
    if last is not None and last >= bronze_version:
        print(json.dumps({"bronze_version": bronze_version, "silver_rows": 0, "skipped": True}))
        return 0
    spark = lakehouse.spark
    done = spark.createDataFrame([], "post_id string")
    if lakehouse.exists("silver.posts"):
        done = done.unionByName(lakehouse.read("silver.posts").select("post_id"))
    if lakehouse.exists("silver.posts_quarantine"):
        done = done.unionByName(
            lakehouse.read("silver.posts_quarantine")
            .where(F.col("stage") == "normalise")
            .select("post_id")
        )
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    silver, empty = normalise(
        lakehouse.read("bronze.posts", bronze_version),
        done,
        rate=config.sample_rate,
        seed=config.seed,
        batch=f"normalise-{bronze_version}",
        now=now,
    )
    silver = silver.cache()
    empty = empty.cache()
    q = lakehouse.write(empty, "silver.posts_quarantine", app_id=APP_ID, batch_id=bronze_version)
    s = lakehouse.write(silver, "silver.posts", app_id=APP_ID, batch_id=bronze_version)
    log.info(
        "normalised bronze v%d: %s silver rows, %s quarantined", bronze_version, s.rows, q.rows
    )
    print(
        json.dumps(
            {
                "bronze_version": bronze_version,
                "silver_rows": s.rows,
                "quarantined": q.rows,
                "silver_version": s.version,
            }
        )
    )
    return 0


main = job_entry("normalise", __doc__, NormaliseConfig, run)


if __name__ == "__main__":
    exit_process(main())
