"""The streaming matcher's ``foreachBatch`` handler, and the query that drives it.

For each micro-batch:

1. plans it: the published routing version and the ``subscriptions.registry`` snapshot it
   will use, written to ``stream.batches`` first (a replayed batch reuses its plan, so a
   restart after a crash repeats exactly what the first attempt did; ``batch_log``);
2. brings the driver's placement up to date and broadcasts it (``placement_sync``);
3. runs ONE Spark job: route, match on each matcher's index, dispatch (``pipeline``),
   ``matches`` and ``deliveries`` written as Parquet files by the dispatch tasks;
4. commits each output table's files in one Delta transaction carrying the batch id, so a
   replayed batch is never written twice; bad records go to ``silver.posts_quarantine``
   with the reason;
5. records the batch's figures in ``stream.batches`` and its routing health in
   ``stream.health`` (``s3tm_monitor`` reads it).

A batch routes and matches with exactly one routing version; a newly published version is
picked up at the next batch boundary, warmed up between batches (``warm_up``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from core.errors import InputDataError
from core.stream.latency import merge
from core.stream.notes import MatchNote, QuarantineNote, RouteNote, TaskNote
from core.stream.shedding_policy import Backlog, StreamShedding
from core.stream.snapshot import MatcherSnapshot
from schemas import table
from spark_jobs import failpoints
from spark_jobs.lake.routing_store import now_utc, routing_in_force
from spark_jobs.stream.backlog import file_backlog, kafka_backlog
from spark_jobs.stream.batch_log import (
    BatchClock,
    BatchFigures,
    BatchLog,
    BatchNotes,
    BatchPlan,
    CommittedBatch,
    SubscriptionMemory,
)
from spark_jobs.stream.config import StreamConfig
from spark_jobs.stream.health import StreamHealth
from spark_jobs.stream.pipeline import (
    DISPATCH_JOB,
    STREAM_CONF,
    MatchPipeline,
    source,
    task_slots,
)
from spark_jobs.stream.placement_sync import DriverState, PlacementSync
from spark_jobs.stream.registry_follower import RegistryFollower
from spark_jobs.stream.shedding_weights import CheckpointWeights
from spark_jobs.stream.warm_up import WarmUp, WarmUpFigures

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from core.shedding.plan import ShedPlan
    from spark_jobs.lake.delta_io import Lakehouse
    from spark_jobs.lake.table_files import WriteResult

NOTHING_TO_ROUTE_BY = (
    "no routing version in force: run the remap DAG (it publishes a version, or the stream "
    "routes by hash when its candidate does not beat hash) or `s3tm routing publish`"
)


class StreamMatcher:
    """The ``foreachBatch`` handler: keeps the placement state and writes each batch.

    Args:
        lakehouse: where the routing tables, the registry and the outputs live.
        config: the query's options; its ``checkpoint`` must be set (its id names the
            query's writes).
    """

    def __init__(self, lakehouse: Lakehouse, config: StreamConfig) -> None:
        if config.checkpoint is None:
            raise InputDataError("the stream's checkpoint location is not set")
        self.lakehouse = lakehouse
        self.checkpoint = config.checkpoint
        # build a version's indexes and token table ahead of its first batch (prime,
        # prefetch); False: lazily, in the first batch's tasks
        self.warm = config.warm_up
        # False: deliveries only (they carry each match's sub id and matcher; the
        # ``matches`` rows derive from them, core.stream.dispatch.matches_of_deliveries)
        self.outputs = ("matches", "deliveries") if config.matches_table else ("deliveries",)
        self.shedding = StreamShedding(config.shedding_options())
        self.shedding_weights = CheckpointWeights(config.checkpoint)
        self.health = StreamHealth(config.health_options())
        self.landing = config.landing if config.source == "files" else None
        # what a batch must fit in to keep up (None: available-now, or no trigger)
        self.trigger_seconds = (
            float(config.trigger_seconds)
            if config.trigger_seconds > 0 and not config.available_now
            else None
        )
        self.query: StreamingQuery | None = None  # set once started: Kafka's backlog
        self.log = BatchLog(lakehouse, self.checkpoint)
        self.pipeline = MatchPipeline(lakehouse.spark, config.job_shape)
        # names this matcher's snapshots in the workers' caches (see MatcherSnapshot.owner)
        self.sync_state = PlacementSync(
            lakehouse,
            self.health,
            seed=config.seed,
            owner=uuid.uuid4().hex,
            checkpoint=self.checkpoint,
        )
        self.warm_up = WarmUp(lakehouse, self.pipeline, self.outputs, self.checkpoint, self.landing)
        # held for a whole batch: the registry follower syncs only while it is free
        self.batch_lock = threading.Lock()
        self.follower: RegistryFollower | None = None
        # the latest batches' figures (bounded: the query may run for months)
        self.figures: deque[CommittedBatch] = deque(maxlen=10_000)

    @property
    def state(self) -> DriverState:
        return self.sync_state.state

    @property
    def warmups(self) -> list[WarmUpFigures]:
        return self.warm_up.done

    @property
    def app_id(self) -> str:
        return self.log.app_id

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, batch_id: int) -> BatchPlan:
        """The batch's routing version and registry snapshot (a replay reuses its plan)."""
        replayed = self.log.planned(batch_id)
        if replayed is not None:
            return replayed
        lake = self.lakehouse
        version = routing_in_force(lake)
        if version is None:
            raise InputDataError(NOTHING_TO_ROUTE_BY)
        choice = self.shedding.choose(self._backlog(batch_id), time.monotonic())
        plan = BatchPlan(
            batch_id,
            version,
            lake.version("subscriptions.registry"),
            False,
            shedding=self.shedding.options.mode,
            shedding_level=choice.level,
            max_spread=choice.max_spread,
            backlog_posts=choice.backlog_posts,
            trigger_seconds=self.trigger_seconds,
        )
        self.log.record(plan, "planned", self.state.epoch)
        return plan

    def _backlog(self, batch_id: int) -> Backlog | None:
        """Posts landed and not yet processed (this batch's included), as the source says."""
        try:
            if self.landing is not None:
                return file_backlog(self.checkpoint, self.landing, batch_id)
            return kafka_backlog(self.query)
        except (OSError, ValueError, KeyError) as error:  # a measurement, never a failure
            log.warning("stream: backlog not measured for batch %d: %s", batch_id, error)
            return None

    # -- placement state ---------------------------------------------------------------------
    def sync(self, plan: BatchPlan) -> MatcherSnapshot:
        """Bring the placement to the plan's version and registry snapshot; broadcast it.
        A version the workers have not met yet is warmed first."""
        return self._bring_to(plan.routing_version, plan.registry_version)

    def _bring_to(self, routing_version: int, registry_version: int | None) -> MatcherSnapshot:
        snapshot, switched = self.sync_state.bring_to(routing_version, registry_version)
        if switched and self.warm:
            self.warm_up.warm(self.state)
        return snapshot

    def prime(self) -> None:
        """Before the query starts: load the published version and warm the workers with it,
        so the first batch finds its indexes built and its token table filled."""
        lake = self.lakehouse
        version = routing_in_force(lake)
        if version is not None:
            self._bring_to(version, lake.version("subscriptions.registry"))

    def prefetch(self) -> None:
        """Between batches: a newer published version is loaded, broadcast and warmed now,
        so the batch that switches to it starts warm. A failure here only costs the warm
        start: the next batch loads the version itself (and says why it could not)."""
        lake = self.lakehouse
        try:
            version = routing_in_force(lake)
            if version is not None and version != self.state.routing_version:
                log.info("stream: routing version %d in force; warming it up", version)
                self._bring_to(version, lake.version("subscriptions.registry"))
        except Exception as error:
            log.warning("stream: prefetching the published version failed: %s", error)
            self.sync_state.reset()  # the next batch starts from a clean load

    # -- one micro-batch ---------------------------------------------------------------------
    def follow_registry(self, active: Callable[[], bool]) -> None:
        """Start the driver thread that syncs registry changes between batches."""
        self.follower = RegistryFollower(self.lakehouse, self.sync_state, self.batch_lock, active)
        self.follower.start()

    def __call__(self, posts: DataFrame, batch_id: int) -> None:
        """foreachBatch: route, match and dispatch one micro-batch."""
        with self.batch_lock:
            self._batch(posts, batch_id)

    def _batch(self, posts: DataFrame, batch_id: int) -> None:
        """plan -> sync -> shed -> match (one Spark job) -> commit -> record."""
        started = time.perf_counter()
        failpoints.crash_driver("before-plan", batch_id)
        plan = self.plan(batch_id)
        failpoints.crash_driver("after-plan", batch_id)
        snapshot = self.sync(plan)
        failpoints.crash_driver("after-sync", batch_id)
        shed_plan = self.shedding.plan(
            plan.shedding_level,
            plan.max_spread,
            snapshot,
            self.shedding_weights,
            batch_id,
            replayed=plan.replayed,
        )
        synced = time.perf_counter()
        now, stamped = now_utc(), time.perf_counter()
        staging = {name: self.lakehouse.staging_dir(name) for name in self.outputs}
        notes = self._match(posts, snapshot, shed_plan, batch_id, now, staging)
        computed = time.perf_counter()
        failpoints.crash_driver("after-dispatch", batch_id)
        written = self._commit(staging, batch_id)
        if notes.quarantine:
            self._quarantine(notes.quarantine, batch_id, now)
        failpoints.crash_driver("after-quarantine", batch_id)
        clock = BatchClock(started, synced, computed, time.perf_counter(), stamped)
        self._record(plan, snapshot, notes, clock, written)
        if self.warm and not plan.replayed:
            self.prefetch()

    def _match(
        self,
        posts: DataFrame,
        snapshot: MatcherSnapshot,
        shed_plan: ShedPlan,
        batch_id: int,
        now: dt.datetime,
        staging: dict[str, str],
    ) -> BatchNotes:
        """The batch's one Spark job (route, match, dispatch); its task notes by kind."""
        assert self.state.broadcast is not None
        # named in the Spark UI and the event log (the streaming batch's own name is put back)
        context = posts.sparkSession.sparkContext
        streaming_description = context.getLocalProperty("spark.job.description")
        context.setJobDescription(
            f"{DISPATCH_JOB}: batch {batch_id}, routing version {snapshot.routing_version}"
        )
        try:
            job = self.pipeline.dispatched(
                posts, snapshot, self.state.broadcast, batch_id, now, staging, shed_plan
            )
            notes: list[TaskNote] = [json.loads(row["note"]) for row in job.collect()]
        finally:
            context.setJobDescription(streaming_description)  # type: ignore[arg-type]
        log.debug("stream: batch %d task notes %s", batch_id, notes)
        return BatchNotes.of(snapshot.n_matchers, notes)

    def _commit(self, staging: dict[str, str], batch_id: int) -> dict[str, WriteResult]:
        """Each output table in one Delta commit carrying the batch id (``matches`` first):
        a replayed batch finds it committed and drops its files instead."""
        lake, app = self.lakehouse, self.app_id
        written = {
            name: lake.commit_staged(name, staging[name], app_id=app, batch_id=batch_id)
            for name in self.outputs
            if name != "deliveries"
        }
        failpoints.crash_driver("after-matches", batch_id)
        written["deliveries"] = lake.commit_staged(
            "deliveries", staging["deliveries"], app_id=app, batch_id=batch_id
        )
        failpoints.crash_driver("after-deliveries", batch_id)
        return written

    def _record(
        self,
        plan: BatchPlan,
        snapshot: MatcherSnapshot,
        notes: BatchNotes,
        clock: BatchClock,
        written: dict[str, WriteResult],
    ) -> None:
        """The batch's figures to ``stream.batches``, its health to ``stream.health``, what
        shedding learns from it, and the handler's memory of it."""
        figures = BatchFigures.of(
            notes,
            clock,
            subscriptions=len(self.state.placement or ()),
            shedding=bool(plan.shedding_level),
        )
        self.log.record(plan, "committed", self.state.epoch, figures)
        failpoints.crash_driver("after-record", plan.batch_id)
        self._record_health(plan, snapshot, notes.route, notes.match)
        self.shedding.learn(
            snapshot,
            plan.shedding_level,
            notes.route,
            notes.match,
            clock.committed - clock.started,
            dispatch_seconds=figures.seconds_dispatch,
        )
        self.figures.append(
            CommittedBatch(
                batch_id=plan.batch_id,
                routing_version=plan.routing_version,
                replayed=plan.replayed,
                skipped_commits=[n for n, w in written.items() if w.skipped],
                figures=figures,
                memory=self._memory(snapshot, notes.route, notes.match),
                latency_ages=merge([n.get("latency_ages", {}) for n in notes.dispatch]),
                latency_after_stamp=clock.after_stamp,
            )
        )
        _log_batch(plan, figures, notes.route, self.figures[-1].memory)

    def _memory(
        self, snapshot: MatcherSnapshot, route: list[RouteNote], match: list[MatchNote]
    ) -> SubscriptionMemory:
        """What the match tasks' Python workers held of the subscriptions (each its own
        matchers' bases, not every matcher's), beside the base and the broadcast; and the
        tasks' seconds taking the changes since the base."""
        held: dict[int, tuple[int, int]] = {}
        for note in match:
            if "pid" in note:
                held[note["pid"]] = (
                    note.get("worker_held_matchers", 0),
                    note.get("worker_held_bytes", 0),
                )
        return SubscriptionMemory(
            n_matchers=snapshot.n_matchers,
            base_bytes=self.sync_state.maker.base_nbytes,
            changes_bytes=snapshot.changes_nbytes,
            broadcast_bytes=self.sync_state.broadcast_bytes,
            workers=len(held),
            worker_matchers_max=max((m for m, _ in held.values()), default=0),
            worker_bytes_max=max((b for _, b in held.values()), default=0),
            change_seconds=round(sum(n.get("change_seconds", 0.0) for n in [*route, *match]), 4),
        )

    def _record_health(
        self,
        plan: BatchPlan,
        snapshot: MatcherSnapshot,
        route_notes: list[RouteNote],
        match_notes: list[MatchNote],
    ) -> None:
        health = self.health.row(
            plan.batch_id, snapshot.n_matchers, snapshot.words, route_notes, match_notes
        )
        self.log.record_health(plan, health.columns)
        if health.hot_words:
            log.info(
                "stream: batch %d hot words over the split threshold (%.4f): %s",
                plan.batch_id,
                health.split_threshold,
                ", ".join(f"{h.word} ({h.share:.3f}, v={h.versions})" for h in health.hot_words),
            )

    def _quarantine(self, notes: list[QuarantineNote], batch_id: int, now: dt.datetime) -> None:
        spec = table("silver.posts_quarantine")
        data = pa.Table.from_pylist(
            [
                {
                    "stage": "stream",
                    "reason": n["reason"],
                    "post_id": n["post_id"],
                    "source_file": n["source_file"],
                    "line_number": None,
                    "raw": n["raw"],
                    "ingest_batch": f"{self.app_id}:{batch_id}",
                    "quarantined_at": now,
                }
                for n in notes
            ],
            schema=spec.schema,
        )
        self.lakehouse.write_arrow(
            data, "silver.posts_quarantine", app_id=self.app_id, batch_id=batch_id
        )


def start(
    spark: SparkSession, lakehouse: Lakehouse, config: StreamConfig
) -> tuple[StreamingQuery, StreamMatcher]:
    """Start the query; returns it with its handler (whose ``figures`` grow per batch)."""
    if config.checkpoint is None:
        raise InputDataError("the stream's checkpoint location is not set")
    if routing_in_force(lakehouse) is None:
        raise InputDataError(NOTHING_TO_ROUTE_BY)
    for key, value in STREAM_CONF.items():
        spark.conf.set(key, value)
    # as many route tasks per landed file as task slots, not more (see task_slots)
    spark.conf.set("spark.sql.files.minPartitionNum", str(task_slots(spark)))
    handler = StreamMatcher(lakehouse, config)
    if handler.warm:
        handler.prime()
    writer = (
        source(spark, config)
        .writeStream.queryName(config.query_name)
        .option("checkpointLocation", config.checkpoint)
        .foreachBatch(handler)
    )
    if config.available_now:
        writer = writer.trigger(availableNow=True)
    elif config.trigger_seconds > 0:
        writer = writer.trigger(processingTime=f"{config.trigger_seconds} seconds")
    query = writer.start()
    handler.query = query
    handler.follow_registry(lambda: query.isActive)
    return query, handler


def _log_batch(
    plan: BatchPlan,
    figures: BatchFigures,
    route: list[RouteNote],
    memory: SubscriptionMemory | None,
) -> None:
    log.info(
        "stream: batch %d v%d%s: %d posts -> %d pairs%s -> %d matches, %d deliveries, "
        "%d quarantined in %.2fs",
        plan.batch_id,
        plan.routing_version,
        " (replayed plan)" if plan.replayed else "",
        figures.posts,
        figures.routed_pairs,
        (
            f" (level {plan.shedding_level}, m={plan.max_spread:g}: "
            f"{figures.capped_posts} posts capped, {figures.dropped_posts} dropped"
            f"{_value_share(route)}, {figures.shed_pairs} pairs shed)"
            if plan.max_spread is not None
            else ""
        ),
        figures.matches,
        figures.deliveries,
        figures.quarantined,
        figures.seconds_total,
    )
    if memory is not None and memory.workers:
        log.info(
            "stream: batch %d: a match worker holds at most %d of %d matchers (%d of the "
            "base's %d subscription bytes) over %d workers; the broadcast: %d bytes, of "
            "which changes %d; the tasks took the changes in %.3f s",
            plan.batch_id,
            memory.worker_matchers_max,
            memory.n_matchers,
            memory.worker_bytes_max,
            memory.base_bytes,
            memory.workers,
            memory.broadcast_bytes,
            memory.changes_bytes,
            memory.change_seconds,
        )


def _value_share(route: list[RouteNote]) -> str:
    """The dropped posts' share of the estimated matches, when a value drop ran."""
    dropped = sum(n.get("dropped_value", 0.0) for n in route)
    kept = sum(n.get("kept_value", 0.0) for n in route)
    if dropped + kept <= 0:
        return ""
    return f" (est. {dropped / (dropped + kept):.0%} of their block's matches)"
