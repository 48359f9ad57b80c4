"""ingest: landing JSON-lines files -> ``bronze.posts``; bad records -> quarantine.

Every line is judged by ``core.corpus.records.parse_json_record`` (the same rules as the file
reader): malformed JSON, non-UTF-8, missing/empty/oversized text, ids that are not strings
or integers, and blank lines are quarantined with the reason, as are unparseable
``created_at`` values, posts dated after the batch's cut-off (the time it reads plus
``CLOCK_SKEW``: a post from the future would move every learning window) and duplicate ids
(within the batch, or in bronze on the batch's days, ``--dedupe-days`` either side: the
scan stays a few partitions as bronze grows). Line ends are LF, CRLF or a lone CR, so every
line of a file is one bronze or one quarantine row.
Files already ingested are skipped, so a re-run adds nothing; the commits carry the batch
id (Delta transaction), so a retried batch is not written twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pyarrow as pa

from core.errors import InputDataError
from spark_jobs import failpoints
from spark_jobs.common import exit_process, job_entry
from spark_jobs.jobs.configs import IngestConfig as IngestConfig
from spark_jobs.jobs.records import PARSED_ARROW, PARSED_SCHEMA, judge_record

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from spark_jobs.lake.delta_io import Lakehouse


APP_ID = "s3tm.ingest"
# how far a source's clock may run ahead of this one before its posts count as future-dated
CLOCK_SKEW = dt.timedelta(minutes=5)
FUTURE_REASON = "created_at in the future (after the batch's cut-off)"


def _gunzip_if_needed(content: bytes) -> bytes:
    import gzip

    return gzip.decompress(content) if content[:2] == b"\x1f\x8b" else content


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def split_lines(data: bytes) -> list[bytes]:
    """The lines of a landing file: ends are LF, CRLF or a lone CR (as Spark's text source
    reads them); a last line break does not start a line."""
    lines = _LINE_BREAK.split(data)
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def parse_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (path, content) of landing files -> one row per non-blank line."""
    for batch in batches:
        columns = batch.to_pydict()
        out = [
            judge_record(raw, path, number)
            for path, content in zip(columns["path"], columns["content"], strict=True)
            for number, raw in enumerate(split_lines(_gunzip_if_needed(bytes(content))), 1)
        ]
        yield pa.RecordBatch.from_pylist(out, schema=PARSED_ARROW)


def parse_landing(files: DataFrame) -> DataFrame:
    """Landing files (``path``, binary ``content``: Spark's binaryFile source) -> parsed
    rows (``PARSED_SCHEMA``), one per line."""
    return files.select("path", "content").mapInArrow(parse_files, PARSED_SCHEMA)


def created_timestamp() -> Column:
    """A record's ``created_at`` as a timestamp: ISO 8601, or Twitter's "Wed Oct 10
    20:19:24 +0000 2018" (Spark cannot parse weekday names, so the first four characters
    are cut off); null when neither parses."""
    from pyspark.sql import functions as F

    return F.coalesce(
        F.try_to_timestamp(F.col("created_at")),
        F.try_to_timestamp(F.substring("created_at", 5, 64), F.lit("MMM dd HH:mm:ss Z yyyy")),
    )


def known_ids(
    bronze: DataFrame, parsed: DataFrame, *, default_day: dt.date, dedupe_days: int
) -> DataFrame:
    """The ``post_id`` of bronze a batch's records are checked against: those on the days
    the batch's posts fall on, ``dedupe_days`` either side (every day: -1). A post sent
    again keeps its ``created_at``, so it falls on its first copy's day; the bound keeps the
    scan to a few partitions however long bronze grows."""
    from pyspark.sql import functions as F

    if dedupe_days < 0:
        return bronze.select("post_id")
    day = F.coalesce(F.to_date(created_timestamp()), F.lit(default_day))
    span = parsed.where("ok").agg(F.min(day).alias("first"), F.max(day).alias("last")).first()
    if span is None or span.first is None:
        return bronze.select("post_id").limit(0)
    margin = dt.timedelta(days=dedupe_days)
    days = F.col("event_day").between(F.lit(span.first - margin), F.lit(span.last + margin))
    return bronze.where(days).select("post_id")


def split_records(
    parsed: DataFrame,
    known_ids: DataFrame,
    *,
    batch: str,
    default_day: dt.date,
    now: dt.datetime,
    dated_until: dt.datetime,
) -> tuple[DataFrame, DataFrame]:
    """Pure transform: parsed records -> (bronze rows, quarantine rows).

    Args:
        parsed: rows of ``PARSED_SCHEMA`` (``parse_landing``, ``ingest_kafka.parse_kafka``).
        known_ids: DataFrame of ``post_id`` already in bronze.
        batch: the ingest batch label written on every row.
        default_day: event day of posts without ``created_at``.
        now: ingestion timestamp (UTC).
        dated_until: the cut-off (UTC): posts created after it are quarantined.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    good = parsed.where("ok").withColumn("created_ts", created_timestamp())
    bad_time = F.col("created_at").isNotNull() & F.col("created_ts").isNull()
    first = Window.partitionBy("post_id").orderBy("source_file", "line_number")
    ranked = good.withColumn("rank", F.row_number().over(first))
    known = known_ids.select("post_id").distinct().withColumn("known", F.lit(True))
    judged = ranked.join(known, "post_id", "left").withColumn(
        "reason",
        F.when(bad_time, F.lit("unparseable created_at"))
        .when(F.col("created_ts") > F.lit(dated_until).cast("timestamp"), F.lit(FUTURE_REASON))
        .when(F.col("known"), F.lit("duplicate id (already ingested)"))
        .when(F.col("rank") > 1, F.lit("duplicate id (within batch)")),
    )
    stamp = F.lit(now).cast("timestamp")
    bronze = judged.where(F.col("reason").isNull()).select(
        "post_id",
        "text",
        "source",
        F.col("created_ts").alias("created_at"),
        F.coalesce(F.to_date("created_ts"), F.lit(default_day)).alias("event_day"),
        F.lit(batch).alias("ingest_batch"),
        "source_file",
        "line_number",
        stamp.alias("ingested_at"),
    )
    rejected = (
        parsed.where(~F.col("ok"))
        .select("reason", "post_id", "source_file", "line_number", "raw")
        .unionByName(
            judged.where(F.col("reason").isNotNull()).select(
                "reason", "post_id", "source_file", "line_number", "raw"
            )
        )
    )
    quarantine = rejected.select(
        F.lit("ingest").alias("stage"),
        "reason",
        "post_id",
        "source_file",
        "line_number",
        "raw",
        F.lit(batch).alias("ingest_batch"),
        stamp.alias("quarantined_at"),
    )
    return bronze, quarantine


def canonical_path(uri: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` name one file: compare files by this form."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


def landing_files(landing: str | Path, pattern: str) -> list[str]:
    """The landing files to consider, sorted by name: absolute ``file:`` URIs, or for an
    object-store landing (``s3://bucket/landing``) the ``s3a://`` URIs Spark reads."""
    import fnmatch

    import pyarrow.fs as pafs

    from spark_jobs.lake import storage

    if storage.is_remote(str(landing)):
        location = storage.normalise_root(str(landing))
        store, prefix = storage.filesystem(location)
        infos = store.get_file_info(pafs.FileSelector(prefix, allow_not_found=True))
        if not infos:
            raise InputDataError(f"landing location is empty or missing: {location}")
        return sorted(
            storage.spark_uri(f"s3://{info.path}")
            for info in infos
            if info.type == pafs.FileType.File and fnmatch.fnmatch(info.base_name, pattern)
        )
    landing = Path(landing)
    if not landing.is_dir():
        raise InputDataError(f"landing directory not found: {landing}")
    return sorted(p.resolve().as_uri() for p in landing.glob(pattern) if p.is_file())


class IngestBatchSummary(TypedDict, total=False):
    """One committed ingest batch (printed as JSON): rows into bronze, rows quarantined
    (None where delta-spark did not count them) and why, and whether the batch had been
    committed before (``skipped``: a rerun wrote nothing)."""

    batch: str
    bronze_rows: int | None
    quarantined: int | None
    bronze_version: int | None
    skipped: bool
    quarantine_reasons: dict[str, int]


def commit_records(
    lakehouse: Lakehouse,
    parsed: DataFrame,
    *,
    app_id: str,
    batch_id: int,
    default_day: dt.date | None,
    now: dt.datetime,
    dated_until: dt.datetime | None = None,
    dedupe_days: int = 2,
) -> IngestBatchSummary:
    """Judges parsed records and commits the quarantine, then bronze, under ``batch_id``
    (a batch already committed by ``app_id`` writes nothing). Returns the batch's figures."""
    spark = lakehouse.spark
    batch = str(batch_id)
    day = default_day or now.date()
    parsed = parsed.cache()  # read for its days, then judged
    known = (
        known_ids(lakehouse.read("bronze.posts"), parsed, default_day=day, dedupe_days=dedupe_days)
        if lakehouse.exists("bronze.posts")
        else spark.createDataFrame([], "post_id string")
    )
    if dated_until is None:
        dated_until = now + CLOCK_SKEW
    elif dated_until.tzinfo is not None:  # the lakehouse's times are UTC's, without a zone
        dated_until = dated_until.astimezone(dt.UTC).replace(tzinfo=None)
    bronze, quarantine = split_records(
        parsed,
        known,
        batch=batch,
        default_day=day,
        now=now,
        dated_until=dated_until,
    )
    bronze = bronze.cache()
    quarantine = quarantine.cache()
    q = lakehouse.write(quarantine, "silver.posts_quarantine", app_id=app_id, batch_id=batch_id)
    failpoints.crash("ingest:after-quarantine")
    b = lakehouse.write(bronze, "bronze.posts", app_id=app_id, batch_id=batch_id)
    summary: IngestBatchSummary = {
        "batch": batch,
        "bronze_rows": b.rows,
        "quarantined": q.rows,
        "bronze_version": b.version,
        "skipped": b.skipped and q.skipped,
    }
    if q.rows != 0:  # some, or not counted (delta-spark)
        reasons = quarantine.groupBy("reason").count().collect()
        summary["quarantine_reasons"] = {r.reason: r["count"] for r in reasons}
    bronze.unpersist()
    quarantine.unpersist()
    parsed.unpersist()
    return summary


def run(config: IngestConfig, lakehouse: Lakehouse) -> int:
    batch_id = config.batch_id if config.batch_id is not None else int(time.time())
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    if config.source == "kafka":
        return _run_kafka(config, lakehouse, batch_id, now)
    return _run_files(config, lakehouse, batch_id, now)


def _run_files(config: IngestConfig, lakehouse: Lakehouse, batch_id: int, now: dt.datetime) -> int:
    from pyspark.sql import functions as F

    assert config.landing is not None  # IngestConfig checks it
    batch = str(batch_id)
    files = landing_files(config.landing, config.pattern)
    seen: set[str] = set()
    for name in ("bronze.posts", "silver.posts_quarantine"):
        if lakehouse.exists(name):
            rows = (
                lakehouse.read(name)
                .where(F.col("ingest_batch") != batch)
                .select("source_file")
                .distinct()
                .collect()
            )
            seen.update(canonical_path(r.source_file) for r in rows if r.source_file)
    new_files = [f for f in files if canonical_path(f) not in seen]
    log.info("ingest batch %s: %d landing files, %d new", batch, len(files), len(new_files))
    if not new_files:
        print(json.dumps({"batch": batch, "files": 0, "bronze_rows": 0, "quarantined": 0}))
        return 0
    raw = lakehouse.spark.read.format("binaryFile").load(new_files)
    summary = commit_records(
        lakehouse,
        parse_landing(raw),
        app_id=APP_ID,
        batch_id=batch_id,
        default_day=config.default_day,
        now=now,
        dated_until=config.dated_until,
        dedupe_days=config.dedupe_days,
    )
    print(json.dumps({"files": len(new_files), **summary}))
    return 0


def _run_kafka(config: IngestConfig, lakehouse: Lakehouse, batch_id: int, now: dt.datetime) -> int:
    from spark_jobs.jobs import ingest_kafka

    committed = 0
    for ranges in ingest_kafka.batches_to_run(
        lakehouse,
        bootstrap=config.kafka_bootstrap,
        topic=config.kafka_topic,
        batch_id=batch_id,
        now=now,
        security=config.kafka_security,
    ):
        parsed = ingest_kafka.read_ranges(
            lakehouse.spark, config.kafka_bootstrap, ranges, config.kafka_security
        )
        summary = commit_records(
            lakehouse,
            ingest_kafka.sampled(parsed, config.sample_rate),
            app_id=ingest_kafka.APP_ID,
            batch_id=ranges[0].batch_id,
            default_day=config.default_day,
            now=now,
            dated_until=config.dated_until,
            dedupe_days=config.dedupe_days,
        )
        committed += 1
        print(
            json.dumps(
                {
                    "topic": config.kafka_topic,
                    "records": sum(r.records for r in ranges),
                    "offsets": {str(r.partition): [r.start, r.end] for r in ranges},
                    "sample_rate": config.sample_rate,
                    **summary,
                }
            )
        )
    if committed == 0:
        print(json.dumps({"topic": config.kafka_topic, "records": 0, "skipped": True}))
    return 0


main = job_entry("ingest", __doc__, IngestConfig, run)


if __name__ == "__main__":
    exit_process(main())
