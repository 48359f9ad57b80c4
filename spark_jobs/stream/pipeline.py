"""The stream's Spark side: the source of raw posts and one micro-batch's job.

Two shapes of that job:

- ``staged``: route (one task per input split) -> ``repartition(M)``: matcher m is match
  task m mod M -> match -> ``repartition(P)`` by post -> dispatch (dedupe, deliveries,
  Parquet files). A match task holds only its matchers' subscriptions: what a cluster
  needs when N matchers' subscriptions do not fit in every worker, and what lets a
  cluster give each matcher a core of its own.
- ``fused``: route, match and dispatch in the task that read the lines, nothing shuffled.
  Every worker must hold every matcher it meets: on a local master it does anyway (each
  Python worker serves every matcher), so there the two shuffles and two Python stages
  are pure cost (``auto``: fused on a local master, staged on a cluster).

The tasks' bodies are ``spark_jobs.stream.tasks``; this module only wires them.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.corpus.records import MAX_TEXT_CHARS
from core.errors import InputDataError, InvalidArgumentError
from core.shedding.plan import NO_SHEDDING, ShedPlan
from core.stream.snapshot import MatcherSnapshot
from spark_jobs import failpoints
from spark_jobs.common import kafka_client_options, kafka_jar_missing, kafka_start_options
from spark_jobs.lake import storage
from spark_jobs.lake.session import is_local_master
from spark_jobs.stream import tasks as stream_tasks
from spark_jobs.stream.config import JOB_SHAPES

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.stream.config import StreamConfig

STREAM_CONF = {
    # Bigger Arrow batches: fewer Python round trips per micro-batch.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    # Split a landed file into one task per core or more (the default cost of opening a
    # file, 4 MB, leaves a 10 MB file in 3 uneven tasks).
    "spark.sql.files.openCostInBytes": str(512 * 1024),
    # One job per batch with a fixed plan: N matcher tasks, P dispatch tasks (adaptive
    # execution would coalesce them and re-plan every batch).
    "spark.sql.adaptive.enabled": "false",
}


# the description of each batch's route -> match -> dispatch job (Spark UI, event log)
DISPATCH_JOB = "s3tm stream: route, match, dispatch"
LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\d+)?\])?")


def task_slots(spark: SparkSession) -> int:
    """Tasks the application runs at once now: the threads of a local master, else the task
    slots of the executors registered at this moment (their cores over ``spark.task.cpus``),
    so an executor that joins or leaves changes the next batch's plan. Before any executor
    has registered, Spark's default parallelism."""
    master = str(spark.sparkContext.master)
    local = LOCAL_MASTER.fullmatch(master)
    if local:
        threads = local.group(1)
        if threads is None:
            return 1
        return (os.cpu_count() or 1) if threads == "*" else max(1, int(threads))
    context = spark.sparkContext._jsc.sc()
    profile = context.resourceProfileManager().defaultResourceProfile()
    live = int(context.maxNumConcurrentTasks(profile))
    return live if live > 0 else max(1, int(spark.sparkContext.defaultParallelism))


def match_tasks(master: str, n_matchers: int, slots: int) -> int:
    """How many tasks a batch's match stage runs.

    On a cluster, one per matcher: Spark's scheduler spreads them over the executors there
    are at this batch (one that joined takes its share at the next), and a task holds only
    its matcher's work. On a local master every matcher shares one machine's Python workers,
    so no more tasks than slots (matcher m goes to task m mod slots): a Python task costs
    0.05-0.1 s of set-up, more than a small matcher's work in a batch."""
    if is_local_master(master):
        return max(1, min(n_matchers, slots))
    return n_matchers


def held_matchers(master: str, n_matchers: int, slots: int) -> int | None:
    """How many matchers' subscriptions a Python worker keeps between batches: on a cluster
    its share (N over the task slots, rounded up), so the executors together hold each
    matcher about once whichever tasks they ran; on a local master all of them (every
    worker serves every matcher)."""
    if is_local_master(master):
        return None
    return -(-n_matchers // max(1, slots))


def partition_keys(spark: SparkSession, n_matchers: int) -> np.ndarray:
    """For each matcher m an int key that ``repartition(N, key)`` sends to partition m.

    Spark hash-partitions by pmod(murmur3(key), N); the keys are found by asking Spark
    itself, so they follow its hash function exactly.
    """
    from pyspark.sql import functions as F

    rows = (
        spark.range(0, 64 * n_matchers + 64)
        .select(F.col("id").cast("int").alias("key"))
        .select("key", F.expr(f"pmod(hash(key), {n_matchers})").alias("part"))
        .groupBy("part")
        .agg(F.min("key").alias("key"))
        .collect()
    )
    keys = np.full(n_matchers, -1, dtype=np.int32)
    for row in rows:
        keys[row["part"]] = row["key"]
    if (keys < 0).any():
        raise InvalidArgumentError(f"no partition key found for some of {n_matchers} matchers")
    return keys


def job_shape(shape: str, master: str) -> str:
    """The shape a batch's job takes: ``auto`` is fused on a local master, else staged."""
    if shape not in JOB_SHAPES:
        raise InvalidArgumentError(f"job shape must be one of {', '.join(JOB_SHAPES)}")
    if shape == "auto":
        return "fused" if is_local_master(master) else "staged"
    return shape


class MatchPipeline:
    """One micro-batch's Spark job, with the partition keys it needs cached per width."""

    def __init__(self, spark: SparkSession, shape: str = "auto") -> None:
        self.spark = spark
        self.shape = job_shape(shape, str(spark.sparkContext.master))
        self._keys: dict[int, np.ndarray] = {}

    def keys(self, n_partitions: int) -> np.ndarray:
        if n_partitions not in self._keys:
            self._keys[n_partitions] = partition_keys(self.spark, n_partitions)
        return self._keys[n_partitions]

    def dispatched(
        self,
        posts: DataFrame,
        snapshot: MatcherSnapshot,
        broadcast: Broadcast[MatcherSnapshot],
        batch_id: int,
        now: dt.datetime,
        staging: dict[str, str],
        shed_plan: ShedPlan = NO_SHEDDING,
    ) -> DataFrame:
        """Pure transform: raw posts -> task notes, with ``matches`` / ``deliveries`` files
        written to ``staging`` as a side effect of the dispatch tasks."""
        crash = failpoints.task_point(batch_id)  # None unless a crash test armed one
        if self.shape == "fused":
            fused = functools.partial(
                stream_tasks.fused_posts,
                broadcast, snapshot.key, MAX_TEXT_CHARS, shed_plan, batch_id, now, staging,
                crash=crash,
            )  # fmt: skip
            return with_arrival(posts).mapInArrow(fused, stream_tasks.DISPATCHED_SCHEMA)
        # one dispatch task per task slot; the match tasks: see match_tasks
        slots = task_slots(self.spark)
        n_match = match_tasks(str(self.spark.sparkContext.master), snapshot.n_matchers, slots)
        match_keys = self.keys(n_match)
        pkeys = match_keys[np.arange(snapshot.n_matchers) % n_match]
        n_dispatch = slots
        dkeys = self.keys(n_dispatch)
        # raw lines go to the route tasks as bytes: each is judged there by the ingest's
        # rules (core.corpus.json_lines), so no line is dropped or coerced on the way
        raw = with_arrival(posts)
        # each task body a partial of a module-level function: pickled by reference, so a
        # worker's own module state (its worker_cache) is used, not a copy shipped with
        # each task
        route = functools.partial(
            stream_tasks.route_posts,
            broadcast, snapshot.key, pkeys, MAX_TEXT_CHARS, n_dispatch, shed_plan, crash=crash,
        )  # fmt: skip
        routed = raw.mapInArrow(route, stream_tasks.ROUTED_SCHEMA)
        hold = held_matchers(str(self.spark.sparkContext.master), snapshot.n_matchers, slots)
        match = functools.partial(
            stream_tasks.match_posts,
            broadcast, snapshot.key, dkeys, shed_plan.learns_yield, hold=hold, crash=crash,
        )  # fmt: skip
        matched = routed.repartition(n_match, "pkey").mapInArrow(match, stream_tasks.MATCHED_SCHEMA)
        dispatch = functools.partial(
            stream_tasks.dispatch_matches, broadcast, snapshot.key, batch_id, now, staging,
            crash=crash,
        )  # fmt: skip
        return matched.repartition(n_dispatch, "dkey").mapInArrow(
            dispatch, stream_tasks.DISPATCHED_SCHEMA
        )


def with_arrival(posts: DataFrame) -> DataFrame:
    """The route tasks' input: ``line``, ``source_file`` and ``arrived_at`` (null where the
    posts have no arrival time: the warm-up's sample lines)."""
    from pyspark.sql import functions as F

    arrived = (
        F.col("arrived_at")
        if "arrived_at" in posts.columns
        else F.lit(None).cast("timestamp").alias("arrived_at")
    )
    return posts.select("line", "source_file", arrived)


KAFKA_OFFSET_RETRIES = 60


def source(spark: SparkSession, config: StreamConfig) -> DataFrame:
    """The streaming DataFrame of raw input: ``line`` (a record's bytes), ``source_file``
    and ``arrived_at`` (the Kafka record's timestamp, or the landed file's modification
    time: what a delivery's latency is counted from).

    Lines, not parsed JSON: Spark's JSON reader drops blank lines and turns a numeric or
    nested ``id`` into a string, so a bad record could vanish or pass unseen; the route
    tasks judge every line instead, as the batch ingest does.
    """
    return _kafka_source(spark, config) if config.source == "kafka" else _file_source(spark, config)


def _kafka_source(spark: SparkSession, config: StreamConfig) -> DataFrame:
    """The posts topic's records; a record's place (topic:partition:offset) names it."""
    # spark-sql-kafka-0-10 comes with the jars `make setup` resolves (the image: baked in)
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    try:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.kafka_bootstrap)
            .option("subscribe", config.kafka_topic)
            .options(**kafka_start_options(config.starting_offsets))
            # records deleted by retention before they were read: say so, do not stop
            .option("failOnDataLoss", "false")
            # a broker restarting (seconds) must not fail the query: offsets are asked
            # again for up to a minute
            .option("fetchOffset.numRetries", KAFKA_OFFSET_RETRIES)
            .option("fetchOffset.retryIntervalMs", 1000)
            .options(**config.kafka_security.spark_options())
            # the deployment's own client settings (S3TM_KAFKA_OPTIONS) last: a team's
            # value wins
            .options(**kafka_client_options())
        )
        if config.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", config.max_offsets_per_trigger)
        raw = reader.load()
    except PySparkException as err:
        missing = kafka_jar_missing(err, ", or read landing files with --source files")
        if missing is None:
            raise
        raise missing from err
    # a record's place names it in the quarantine: topic:partition:offset
    return raw.select(
        F.col("value").alias("line"),
        F.concat_ws(":", "topic", "partition", "offset").alias("source_file"),
        # the record's timestamp (the producer's, or the broker's append time)
        F.col("timestamp").alias("arrived_at"),
    )


def _file_source(spark: SparkSession, config: StreamConfig) -> DataFrame:
    """The lines of the files landing in ``config.landing``."""
    from pyspark.sql import functions as F

    landing = config.landing
    if not storage.is_remote(landing) and not Path(landing).is_dir():
        raise InputDataError(f"landing directory not found: {landing}")
    # the text source splits lines at LF, CRLF and a lone CR, like the ingest, and keeps
    # blank ones; a cast to binary keeps bytes that are not UTF-8 as they were
    reader = spark.readStream.format("text")
    if config.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", config.max_files_per_trigger)
    lines = reader.load(storage.spark_uri(landing))
    return lines.select(
        F.col("value").cast("binary").alias("line"),
        F.col("_metadata.file_path").alias("source_file"),
        # a landed file's posts arrived when it was written (its modification time)
        F.col("_metadata.file_modification_time").alias("arrived_at"),
    )
