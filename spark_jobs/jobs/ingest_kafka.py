"""ingest from Kafka: the posts topic, between the offsets the last batch read up to and the
topic's end now, into ``bronze.posts`` (sampled by post id); bad records go to the
quarantine named ``topic:partition:offset``.

Exactly once. A batch first records its plan, each partition's ``[start_offset,
end_offset)``, in ``bronze.kafka_offsets`` (one commit), then reads exactly that range with
Spark's batch Kafka reader and commits the quarantine and bronze rows under its batch id
(Delta application transactions). A batch whose plan is recorded but whose bronze commit
is missing (killed, failed) is finished by the next run, on the same range under the same
batch id, before a new range is planned. So every offset belongs to one batch and every
batch's rows are committed once, however often a run is retried.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from core.errors import InputDataError
from spark_jobs import failpoints
from spark_jobs.common import kafka_client_options, kafka_jar_missing
from spark_jobs.jobs.records import PARSED_ARROW, PARSED_SCHEMA, judge_record
from spark_jobs.jobs.sampling import hash_fraction_filter
from spark_jobs.kafka_security import KafkaSecurity

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.lake.delta_io import Lakehouse

OFFSETS_TABLE = "bronze.kafka_offsets"
PLAN_APP_ID = "s3tm.ingest.kafka-plan"  # the plan's commit in bronze.kafka_offsets
APP_ID = "s3tm.ingest.kafka"  # the batch's commits in the quarantine and bronze
SAMPLE_SEED = 0  # normalise's default seed: at the same rate it keeps every sampled post
BROKER_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition, read by batch ``batch_id``."""

    topic: str
    partition: int
    start: int
    end: int
    batch_id: int

    @property
    def records(self) -> int:
        return self.end - self.start


def topic_offsets(
    bootstrap: str, topic: str, security: KafkaSecurity | None = None
) -> tuple[dict[int, int], dict[int, int]]:
    """Each partition's first and end offsets, asked of the broker now.

    Raises:
        InputDataError: no broker answers, or the topic does not exist.
    """
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    logging.getLogger("kafka").setLevel(logging.WARNING)  # its connection chatter
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            request_timeout_ms=BROKER_TIMEOUT_MS,
            **(security or KafkaSecurity()).client_options(),
        )
    except KafkaError as err:
        raise InputDataError(f"no Kafka broker answers at {bootstrap}: {err}") from err
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise InputDataError(f"Kafka topic {topic!r} does not exist at {bootstrap}")
        wanted = [TopicPartition(topic, p) for p in sorted(partitions)]
        first = consumer.beginning_offsets(wanted)
        end = consumer.end_offsets(wanted)
    except KafkaError as err:
        raise InputDataError(f"Kafka at {bootstrap} did not give offsets: {err}") from err
    finally:
        consumer.close()
    return (
        {tp.partition: int(o) for tp, o in first.items()},
        {tp.partition: int(o) for tp, o in end.items()},
    )


def plan_ranges(
    recorded: Sequence[OffsetRange],
    first: Mapping[int, int],
    end: Mapping[int, int],
    *,
    topic: str,
    batch_id: int,
) -> list[OffsetRange]:
    """The next batch's range of every partition: from where the batches recorded for
    ``topic`` ended (a new partition: its first offset) to its end now.

    Records retention deleted before any batch read them are skipped with a warning (they
    cannot be read any more); an end below the recorded one (the topic was recreated)
    raises, since offsets then name other records.
    """
    done: dict[int, int] = {}
    for earlier in recorded:
        if earlier.topic == topic:
            done[earlier.partition] = max(done.get(earlier.partition, 0), earlier.end)
    ranges = []
    for partition in sorted(end):
        start = done.get(partition, first.get(partition, 0))
        if start < first.get(partition, 0):
            log.warning(
                "kafka %s-%d: offsets %d..%d were deleted by retention before ingest read them",
                topic,
                partition,
                start,
                first[partition] - 1,
            )
            start = first[partition]
        if end[partition] < start:
            raise InputDataError(
                f"Kafka {topic}-{partition} ends at offset {end[partition]}, below the "
                f"{start} ingest already read: was the topic recreated? Ingest it into a new "
                f"lakehouse, or drop its rows of {OFFSETS_TABLE}"
            )
        ranges.append(OffsetRange(topic, partition, start, end[partition], batch_id))
    return ranges


def recorded_ranges(lakehouse: Lakehouse) -> list[OffsetRange]:
    """Every range recorded in ``bronze.kafka_offsets`` (none before the first batch)."""
    if not lakehouse.exists(OFFSETS_TABLE):
        return []
    rows = lakehouse.read_arrow(OFFSETS_TABLE).to_pylist()
    return [
        OffsetRange(
            r["topic"], r["partition"], r["start_offset"], r["end_offset"], int(r["ingest_batch"])
        )
        for r in rows
    ]


def unfinished_batch(lakehouse: Lakehouse, recorded: Sequence[OffsetRange]) -> int | None:
    """The batch whose plan is recorded but whose bronze commit is not (at most one)."""
    done = lakehouse.last_batch("bronze.posts", APP_ID)
    pending = {r.batch_id for r in recorded if done is None or r.batch_id > done}
    return max(pending) if pending else None


def record_plan(lakehouse: Lakehouse, ranges: Sequence[OffsetRange], now: dt.datetime) -> None:
    rows = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "start_offset": r.start,
            "end_offset": r.end,
            "ingest_batch": str(r.batch_id),
            "planned_at": now,
        }
        for r in ranges
    ]
    frame = lakehouse.spark.createDataFrame(rows, _OFFSET_ROWS)
    lakehouse.write(frame, OFFSETS_TABLE, app_id=PLAN_APP_ID, batch_id=ranges[0].batch_id)


_OFFSET_ROWS = (
    "topic string, partition int, start_offset long, end_offset long, "
    "ingest_batch string, planned_at timestamp"
)


def parse_kafka(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: Kafka records -> parsed rows named ``topic:partition:offset``."""
    for batch in batches:
        columns = batch.to_pydict()
        out = [
            judge_record(bytes(value or b""), f"{topic}:{partition}:{offset}", int(offset))
            for topic, partition, offset, value in zip(
                columns["topic"],
                columns["partition"],
                columns["offset"],
                columns["value"],
                strict=True,
            )
        ]
        yield pa.RecordBatch.from_pylist(out, schema=PARSED_ARROW)


def sampled(parsed: DataFrame, rate: float) -> DataFrame:
    """Pure transform: keeps ``rate`` of the good records (by post id, as normalise does)
    and every bad one (they go to the quarantine whatever the rate)."""
    from pyspark.sql import functions as F

    if rate >= 1.0:
        return parsed
    return parsed.where(~F.col("ok") | hash_fraction_filter(rate, SAMPLE_SEED))


def read_ranges(
    spark: SparkSession,
    bootstrap: str,
    ranges: Sequence[OffsetRange],
    security: KafkaSecurity | None = None,
) -> DataFrame:
    """The records of ``ranges`` (Spark's batch Kafka reader), parsed (``PARSED_SCHEMA``)."""
    wanted = [r for r in ranges if r.records > 0]
    if not wanted:
        return spark.createDataFrame([], PARSED_SCHEMA)
    topic = wanted[0].topic
    starting = {topic: {str(r.partition): r.start for r in wanted}}
    ending = {topic: {str(r.partition): r.end for r in wanted}}
    from pyspark.errors import PySparkException

    try:
        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("assign", json.dumps({topic: [r.partition for r in wanted]}))
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
            # records retention deleted meanwhile: read what is left, do not fail the batch
            .option("failOnDataLoss", "false")
            .options(**(security or KafkaSecurity()).spark_options())
            .options(**kafka_client_options())  # the deployment's own (S3TM_KAFKA_OPTIONS)
            .load()
        )
    except PySparkException as err:
        missing = kafka_jar_missing(err)
        if missing is None:
            raise
        raise missing from err
    return raw.select("topic", "partition", "offset", "value").mapInArrow(
        parse_kafka, PARSED_SCHEMA
    )


def batches_to_run(
    lakehouse: Lakehouse,
    *,
    bootstrap: str,
    topic: str,
    batch_id: int,
    now: dt.datetime,
    security: KafkaSecurity | None = None,
) -> Iterator[list[OffsetRange]]:
    """The ranges of each batch this run commits: an unfinished batch first, then (when
    ``batch_id`` is above every recorded one) a new batch up to the topic's end now, its
    plan recorded before it is read."""
    recorded = recorded_ranges(lakehouse)
    unfinished = unfinished_batch(lakehouse, recorded)
    if unfinished is not None:
        log.info("kafka ingest: finishing batch %d, planned but not committed", unfinished)
        yield [r for r in recorded if r.batch_id == unfinished]
    newest = max((r.batch_id for r in recorded), default=None)
    if newest is not None and batch_id <= newest:
        log.info(
            "kafka ingest: batch %d is not above recorded batch %d: nothing new", batch_id, newest
        )
        return
    first, end = topic_offsets(bootstrap, topic, security)
    ranges = plan_ranges(recorded, first, end, topic=topic, batch_id=batch_id)
    record_plan(lakehouse, ranges, now)
    failpoints.crash("ingest:after-plan")
    log.info(
        "kafka ingest batch %d: %d records of %s planned (%s)",
        batch_id,
        sum(r.records for r in ranges),
        topic,
        ", ".join(f"p{r.partition} {r.start}..{r.end}" for r in ranges),
    )
    yield ranges
