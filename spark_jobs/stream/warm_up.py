"""Warm-up: the work of a routing version's first batch, done before it.

Every Python worker readies itself (``warm_tasks.warm_workers``, one task per task slot:
the token table, the kernels, and on a local master every matcher's index; on a cluster a
match task reads its own matcher's base when it first meets it), then recent posts go
through the batch's own three stages into staging folders that are dropped, never
committed: the JVM compiles the plan's code and every stage's Python path (parsing,
dispatch, Parquet) runs once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.lake.routing_store import now_utc
from spark_jobs.lake.session import is_local_master
from spark_jobs.lake.storage import join
from spark_jobs.stream import warm_tasks
from spark_jobs.stream.config import WARM_TEXTS
from spark_jobs.stream.pipeline import MatchPipeline, task_slots
from spark_jobs.stream.placement_sync import DriverState

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark import Broadcast

    from spark_jobs.lake.delta_io import Lakehouse

# posts the warm-up sends through the pipeline (the sample repeated): about a batch
WARM_PIPELINE_POSTS = 100_000


@dataclass(frozen=True)
class WarmUpFigures:
    """One warm-up: the version, its wall time, and either what it did or why it failed."""

    routing_version: int
    seconds: float
    workers: int = 0
    index_seconds: float = 0.0
    pipeline_seconds: float = 0.0
    texts: int = 0
    failed: str | None = None


class WarmUp:
    """Warms the workers for the driver's current snapshot.

    Args:
        lakehouse: where the recent posts (``bronze.posts``) come from.
        pipeline: the batch's own Spark job.
        outputs: the tables a batch writes (staged here, then dropped).
        checkpoint: the query's checkpoint (a scratch folder goes under it).
        landing: the files source's folder (None: Kafka): the sample then goes through
            the files source's own reader too.
    """

    def __init__(
        self,
        lakehouse: Lakehouse,
        pipeline: MatchPipeline,
        outputs: Sequence[str],
        checkpoint: str,
        landing: str | None,
    ) -> None:
        self.lakehouse = lakehouse
        self.pipeline = pipeline
        self.outputs = tuple(outputs)
        self.checkpoint = checkpoint
        self.landing = landing
        self.done: list[WarmUpFigures] = []
        self._texts: list[str] | None = None

    def texts(self) -> list[str]:
        if self._texts is None:
            try:
                recent = self.lakehouse.recent_rows("bronze.posts", ["text"], WARM_TEXTS)
                self._texts = recent.column("text").to_pylist()
            except Exception as error:
                log.warning("stream: no recent posts to warm the token table: %s", error)
                self._texts = []
        return self._texts

    def warm(self, state: DriverState) -> WarmUpFigures:
        """Warm the workers for ``state``'s snapshot. A warm-up that fails is reported and
        skipped, never fatal: the first batch then builds lazily."""
        assert state.snapshot is not None
        started = time.perf_counter()
        try:
            figures = self._warm(state)
        except Exception as error:
            figures = WarmUpFigures(
                routing_version=state.snapshot.routing_version,
                seconds=round(time.perf_counter() - started, 3),
                failed=f"{type(error).__name__}: {error}",
            )
            log.warning(
                "stream: warming version %d failed (%s); its first batch builds lazily",
                figures.routing_version,
                figures.failed,
            )
        self.done.append(figures)
        return figures

    def _warm(self, state: DriverState) -> WarmUpFigures:

        lake = self.lakehouse
        spark = lake.spark
        assert state.snapshot is not None and state.broadcast is not None
        started = time.perf_counter()
        slots = task_slots(spark)
        texts = self.texts()
        # the sample travels once per worker, not in every task
        sample = spark.sparkContext.broadcast(texts)
        try:
            notes = [
                json.loads(row["note"])
                for row in spark.range(slots, numPartitions=slots)
                .mapInArrow(
                    warm_tasks.warm_workers(
                        state.broadcast,
                        state.snapshot.key,
                        sample,
                        every_matcher=is_local_master(str(spark.sparkContext.master)),
                    ),
                    warm_tasks.WARMED_SCHEMA,
                )
                .collect()
            ]
            piped = time.perf_counter()
            if texts:
                self._through_the_pipeline(state, sample, max(len(texts), WARM_PIPELINE_POSTS))
        finally:
            sample.unpersist()
        figures = WarmUpFigures(
            routing_version=state.snapshot.routing_version,
            seconds=round(time.perf_counter() - started, 3),
            workers=len({n["pid"] for n in notes}),
            index_seconds=round(max((n["index_seconds"] for n in notes), default=0.0), 3),
            pipeline_seconds=round(time.perf_counter() - piped, 3),
            texts=len(texts),
        )
        log.info(
            "stream: version %d warmed in %.2fs on %d Python workers (indexes %.2fs; "
            "%d recent posts through the pipeline in %.2fs, nothing written)",
            figures.routing_version,
            figures.seconds,
            figures.workers,
            figures.index_seconds,
            figures.texts,
            figures.pipeline_seconds,
        )
        return figures

    def _through_the_pipeline(
        self, state: DriverState, sample: Broadcast[list[str]], n_posts: int
    ) -> None:
        """``n_posts`` lines of the sample through the batch's Spark job, nothing committed."""
        from pyspark.sql import functions as F

        assert state.snapshot is not None and state.broadcast is not None
        lake = self.lakehouse
        spark = lake.spark
        slots = task_slots(spark)
        # the sample repeated up to about a batch: the first batch's buffers are
        # then not the first the workers' allocators meet (page faults, pools)
        posts = spark.range(n_posts, numPartitions=slots).mapInArrow(
            warm_tasks.sample_lines(sample), warm_tasks.LINES_SCHEMA
        )
        if self.landing is not None:
            # through the files source's own reader too (text files, binary cast)
            scratch = join(self.checkpoint, "warm-up")
            posts.select(F.col("line").cast("string")).write.mode("overwrite").text(scratch)
            posts = (
                spark.read.format("text")
                .load(scratch)
                .select(
                    F.col("value").cast("binary").alias("line"),
                    F.col("_metadata.file_path").alias("source_file"),
                )
            )
        staging = {name: lake.staging_dir(name) for name in self.outputs}
        try:
            self.pipeline.dispatched(
                posts, state.snapshot, state.broadcast, -1, now_utc(), staging
            ).collect()
        finally:
            for folder in staging.values():
                lake.discard_staged(folder)
